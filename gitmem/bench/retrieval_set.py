"""The retrieval bench's set (:mod:`gitmem.bench.retrieval`): generated multi-session
conversations with planted facts, and questions asking for them in other words, each
with the turns that answer it.

Two people talk over several dated sessions; most turns are small talk that shares the
facts' topics (other pets, other trips, other food), and some turns plant a fact:
a preference, an event on a date, a change of mind, a fact told over two turns. Each
fact gets questions of one or more types:

- ``single``: one turn answers it, asked with some of its words;
- ``two_turn``: the fact is told over two turns: one asks, naming the topic, and the reply
  holds the answer (the turn to find) in words of its own;
- ``when``: when an event happened (the answer is the turn's date);
- ``paraphrase``: asked in other words (few or none of the turn's own words);
- ``changed``: what holds now, after a change of mind (the later turn answers).

    for conversation in conversations(seed=36):
        for question in conversation.questions: ...
"""

from __future__ import annotations

import random
from typing import NamedTuple

NAMES = ["Caroline", "Melanie", "Jolene", "Deborah", "Andrew", "Audrey", "Evan", "Sam", "Nate",
         "Joanna", "Tim", "John", "Maria", "Gina", "Jon", "Priya", "Kenji", "Lucia", "Omar", "Hana"]
DAY = 86_400


class Turn(NamedTuple):
    id: str
    speaker: str
    text: str
    created_at: int  # seconds since the epoch


class Question(NamedTuple):
    text: str
    kind: str
    evidence: tuple[str, ...]  # turn ids


class Conversation(NamedTuple):
    name: str
    sessions: list[list[Turn]]
    questions: list[Question]


# Facts: what is said (one or two turns), and the questions. {p} is the speaker, {o} the
# other person, {v} the fact's value, {w} a second value (the change of mind, the detail).
# "ask" shares some of the turn's words; "para" asks in other words.
_FACTS = [
    dict(slot="pet", values=["golden retriever", "tabby cat", "parrot", "corgi", "rabbit", "husky"],
         names=["Biscuit", "Pepper", "Mochi", "Luna", "Ziggy", "Clover"],
         say=["We finally adopted a {v} from the shelter last week, we named it {n}."],
         ask="What is the name of the {v} {p} adopted?",
         para="What did {p} call the animal that joined the family?",
         when="When did {p} adopt a pet?"),
    dict(slot="music", values=["jazz", "flamenco", "synthwave", "bluegrass", "k-pop", "opera"],
         say=["Honestly {v} is my favourite music, I listen to it every morning on the train."],
         ask="What is {p}'s favourite music?",
         para="Which genre does {p} enjoy hearing on the commute?",
         change=["I've gone off {v} lately, these days it's {w} all the way for me."],
         now="What music does {p} like these days?"),
    dict(slot="food", values=["lasagna", "ramen", "paella", "pho", "tacos", "dumplings"],
         say=["Nothing beats a big bowl of {v}, it's the dish I could eat every single day."],
         ask="Which dish could {p} eat every day?",
         para="What is {p}'s go-to meal that never gets old?",
         change=["I used to love {v} but I'm so over it, now I crave {w} instead."],
         now="What dish does {p} crave now?"),
    dict(slot="trip", values=["Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Vancouver", "Oaxaca"],
         say=["I just got back from {v}! The trip was amazing, we hiked every day."],
         ask="Where did {p} go on the trip with all the hiking?",
         para="Which city did {p} visit recently on vacation?",
         when="When did {p} get back from the hiking trip?"),
    dict(slot="job", values=["a bakery", "a hospital", "a design studio", "a bank", "a school",
                             "a startup"],
         say=["Big news: I started a new job at {v} on Monday, I'm nervous but excited."],
         ask="Where did {p} start the new job?",
         para="Who is {p}'s new employer?",
         when="When did {p} start the new job?"),
    dict(slot="instrument", values=["cello", "ukulele", "piano", "violin", "drums", "saxophone"],
         say=["I signed up for {v} lessons, my teacher says I have a good ear."],
         ask="What instrument is {p} taking lessons for?",
         para="What is {p} learning to play?",
         when="When did {p} sign up for the {v} lessons?"),
    dict(slot="sport", values=["rock climbing", "swimming", "tennis", "yoga", "boxing", "rowing"],
         say=["I've been doing {v} three times a week, it keeps me sane."],
         ask="What does {p} do three times a week?",
         para="How does {p} stay fit?",
         change=["I quit {v}, my shoulder couldn't take it; I switched to {w}."],
         now="What exercise does {p} do now?"),
    dict(slot="book", values=["Dune", "Middlemarch", "The Hobbit", "Beloved", "Rebecca", "Emma"],
         say=["I'm reading {v} for my book club, I can't put it down."],
         ask="What book is {p} reading for the book club?",
         para="Which novel has {p} been hooked on?"),
    dict(slot="move", values=["Denver", "Boston", "Austin", "Seattle", "Chicago", "Portland"],
         say=["We're moving to {v} next month, the boxes are everywhere."],
         ask="Where is {p} moving to?",
         para="Which city will {p} relocate to?",
         when="When did {p} say they were moving?"),
    dict(slot="sibling", values=["sister", "brother", "cousin", "nephew", "niece", "aunt"],
         names=["Rosa", "Theo", "Iris", "Felix", "Nora", "Leo"],
         say=["My {v} {n} is getting married in June, I'm giving the speech."],
         ask="Who is getting married in June?",
         para="Which relative of {p} has a wedding coming up?",
         when="When did {p} mention the wedding?"),
    dict(slot="car", values=["a red hatchback", "an electric van", "a vintage convertible",
                             "a pickup truck", "a hybrid sedan", "a scooter"],
         say=["I finally bought {v}, it was a bargain from a neighbour."],
         ask="What vehicle did {p} buy from a neighbour?",
         para="What does {p} drive around in now?",
         when="When did {p} buy a car from the neighbour?"),
    dict(slot="allergy", values=["peanuts", "shellfish", "gluten", "dairy", "eggs", "sesame"],
         say=["The doctor told me I'm allergic to {v}, so I have to check every label now."],
         ask="What is {p} allergic to?",
         para="Which food must {p} avoid for health reasons?"),
    dict(slot="hobby", values=["pottery", "knitting", "woodworking", "birdwatching",
                               "baking sourdough", "painting watercolors"],
         say=["My new hobby is {v}, I spend every Sunday afternoon on it."],
         ask="What is {p}'s new hobby?",
         para="How does {p} spend Sunday afternoons?",
         change=["I gave up {v}, it got boring; my new thing is {w}."],
         now="What does {p} do for fun now?"),
    dict(slot="volunteer", values=["an animal shelter", "a food bank", "a library",
                                   "a community garden", "a youth center", "a hospice"],
         say=["I volunteered at {v} on Saturday, we helped over fifty people."],
         ask="Where did {p} volunteer on Saturday?",
         para="Which charity did {p} give time to?",
         when="When did {p} go volunteering?"),
    dict(slot="coffee", values=["oat milk latte", "double espresso", "cold brew", "flat white",
                                "chai", "matcha"],
         say=["My order is always an {v}, the barista knows me by now."],
         ask="What does {p} always order from the barista?",
         para="What's {p}'s usual drink at the cafe?",
         change=["No more {v} for me, I switched my usual order to {w}."],
         now="What does {p} order now?"),
    dict(slot="award", values=["employee of the month", "a poetry prize", "a marathon medal",
                               "a science fair ribbon", "a photography award", "a chess trophy"],
         say=["I won {v}! I still can't believe it."],
         ask="What did {p} win?",
         para="What honour did {p} receive?",
         when="When did {p} win something?"),
]

# Two-turn facts: the other person asks, the speaker answers without naming the topic.
_TWO_TURN = [
    dict(values=["a wooden chess set", "a blue scarf", "a ceramic vase", "an old camera",
                 "a signed vinyl record", "a handmade quilt"],
         where=["the flea market", "the antique fair", "the street market", "a garage sale"],
         ask_turn="{p}, what did you pick up at {m} this morning?",
         answer="Oh, I found {v}, it only cost ten dollars.",
         ask="What did {p} find at {m}?"),
    dict(values=["the lake house", "the mountains", "the coast", "the countryside",
                 "the island", "the desert"],
         where=["the long weekend", "the holidays", "spring break", "the summer"],
         ask_turn="Where are you spending {m}, {p}?",
         answer="We're heading to {v}, just the two of us.",
         ask="Where is {p} going for {m}?"),
    dict(values=["a sci-fi movie", "a documentary about whales", "a romantic comedy",
                 "a horror film", "a musical", "a Korean drama"],
         where=["date night", "the film festival", "movie night", "the cinema club"],
         ask_turn="What did you end up watching for {m}, {p}?",
         answer="We saw {v}, I cried at the end.",
         ask="What did {p} watch for {m}?"),
    dict(values=["a cooking class", "a pottery workshop", "a salsa lesson", "a coding bootcamp",
                 "a first-aid course", "a photography walk"],
         where=["your birthday", "the anniversary", "Mother's Day", "the retirement party"],
         ask_turn="So what gift did you get for {m}, {p}?",
         answer="Tickets for {v}! Best present ever.",
         ask="What gift did {p} get for {m}?"),
    dict(values=["a broken wrist", "the flu", "a sprained ankle", "a migraine", "food poisoning",
                 "a bad back"],
         where=["the wedding", "the conference", "the concert", "the marathon"],
         ask_turn="Why did you miss {m}, {p}? We were worried.",
         answer="Ugh, {v}, I spent two days in bed.",
         ask="Why did {p} miss {m}?"),
    dict(values=["Chinese", "sign language", "Italian", "Arabic", "Portuguese", "Swahili"],
         where=["the evening course", "the night school", "the online class", "the summer school"],
         ask_turn="Which language are you learning at {m}, {p}?",
         answer="{v}, and honestly it's harder than I expected.",
         ask="What language is {p} learning at {m}?"),
]

# Small talk: shares the facts' topics, so that they are not alone in using their words.
_FILLER = [
    "How was your week? Mine was busy with work and errands.",
    "The weather has been so strange lately, sunny one day and rain the next.",
    "My neighbour's {pet} keeps barking at night, it's driving me crazy.",
    "Did you see the new cafe that opened near the station?",
    "I should really exercise more, maybe I'll try {sport} someday.",
    "My friend went to {city} last year and loved the food.",
    "We had {food} for dinner yesterday, it was okay.",
    "Work has been stressful, my boss wants the report by Friday.",
    "I love how you always find time for your family.",
    "That sounds wonderful, I'm so happy for you!",
    "Have you watched anything good recently?",
    "I'm thinking about taking a class, maybe something creative.",
    "My cousin plays the {instrument} in a band, they're pretty good.",
    "The book club picked a boring novel this month, I couldn't finish it.",
    "We went to the farmers market on Sunday and bought way too many vegetables.",
    "I'm so tired, the kids were up all night.",
    "Do you have any plans for the weekend?",
    "Traffic was terrible this morning, I was late for a meeting.",
    "I tried a new recipe for {food}, it didn't turn out great.",
    "My sister wants to adopt a {pet} but her apartment is too small.",
    "Music always helps me relax after a long day, especially {music}.",
    "I've been meaning to call my parents more often.",
    "Let's grab coffee sometime next week!",
    "Congrats again on everything, you deserve it.",
    "I'm trying to drink less coffee but it's hard.",
    "The garden is finally blooming, the tomatoes look great.",
    "A colleague of mine just moved to {city} for a new job.",
    "I saw a documentary about {city} and now I want to visit.",
    "I read that volunteering is good for your health.",
    "My car broke down again, I really need a new one.",
]
_TOPICS = dict(pet=["dog", "cat", "parrot", "puppy", "kitten", "rabbit"],
               sport=["yoga", "tennis", "swimming", "climbing", "running", "boxing"],
               city=["Lisbon", "Kyoto", "Denver", "Boston", "Paris", "Seattle", "Chicago"],
               food=["lasagna", "ramen", "tacos", "curry", "pizza", "paella"],
               instrument=["piano", "drums", "violin", "guitar", "cello"],
               music=["jazz", "opera", "rock", "folk", "synthwave"])


def _filler(rng: random.Random) -> str:
    text = rng.choice(_FILLER)
    for slot, values in _TOPICS.items():
        text = text.replace("{%s}" % slot, rng.choice(values))
    return text


def conversations(seed: int = 36, count: int = 8, sessions: int = 12, turns: int = 30,
                  facts: int = 14) -> list[Conversation]:
    """``count`` conversations of ``sessions`` sessions of about ``turns`` turns, each
    with ``facts`` planted facts and two-turn facts, and their questions."""
    rng = random.Random(seed)
    found = []
    start = 1_672_531_200  # 2023-01-01
    for c in range(count):
        people = rng.sample(NAMES, 2)
        chosen = rng.sample(_FACTS, min(facts, len(_FACTS)))
        plan: dict[int, list] = {}  # session: facts told in it
        for fact in chosen:
            plan.setdefault(rng.randrange(sessions - 3), []).append(("fact", fact))
        for fact in _TWO_TURN:
            plan.setdefault(rng.randrange(sessions), []).append(("two", fact))
        when = start + c * 400 * DAY
        told: list[list[Turn]] = []
        questions: list[Question] = []
        later: list[tuple[int, tuple]] = []  # (session, change of mind) to tell later
        number = 0

        def turn(speaker: str, text: str, at: int) -> Turn:  # called in this conversation's turn only
            nonlocal number
            number += 1
            return Turn(f"c{c}-t{number}", speaker, text, at)  # noqa: B023

        for s in range(sessions):
            when += rng.randint(3, 20) * DAY
            at = when + rng.randint(9, 20) * 3600
            plants = plan.get(s, []) + [item for due, item in later if due == s]
            slots = sorted(rng.sample(range(2, turns - 2), len(plants)))
            session: list[Turn] = []
            speaker = rng.randrange(2)
            for i in range(turns):
                at += rng.randint(20, 300)
                p, o = people[speaker], people[1 - speaker]
                if slots and i == slots[0]:
                    slots.pop(0)
                    kind, fact, *rest = plants.pop(0)
                    if kind == "two":
                        value, place = rng.choice(fact["values"]), rng.choice(fact["where"])
                        first = turn(o, fact["ask_turn"].format(p=p, m=place), at)
                        at += rng.randint(20, 120)
                        second = turn(p, fact["answer"].format(v=value), at)
                        session += [first, second]
                        questions.append(Question(fact["ask"].format(p=p, m=place), "two_turn",
                                                  (second.id,)))
                    elif kind == "change":
                        old, new, first_id = rest
                        said = turn(p, fact["change"][0].format(v=old, w=new), at)
                        session.append(said)
                        questions.append(Question(fact["now"].format(p=p), "changed", (said.id,)))
                    else:
                        value = rng.choice(fact["values"])
                        name = rng.choice(fact.get("names", [""]))
                        said = turn(p, rng.choice(fact["say"]).format(v=value, n=name), at)
                        session.append(said)
                        fields = dict(p=p, v=value, n=name)
                        questions.append(Question(fact["ask"].format(**fields), "single", (said.id,)))
                        questions.append(Question(fact["para"].format(**fields), "paraphrase",
                                                  (said.id,)))
                        if "when" in fact:
                            questions.append(Question(fact["when"].format(**fields), "when",
                                                      (said.id,)))
                        if "change" in fact:
                            new = rng.choice([v for v in fact["values"] if v != value])
                            later.append((rng.randint(s + 1, sessions - 1),
                                          ("change", fact, value, new, said.id)))
                else:
                    session.append(turn(p, _filler(rng), at))
                speaker = 1 - speaker
            told.append(session)
        found.append(Conversation(f"conv-{c}", told, questions))
    return found
