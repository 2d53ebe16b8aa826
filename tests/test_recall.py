"""Asking in your own words (issue 36): a question in plain words finds the message that
holds the fact, through the CLI, MCP (the SDK's client) and Python; a hit's unit_id reads
the message back; ``--at`` searches the memory as it was.

The repository is written through the real CLI (sessions, memories) and by hand with
plain ``git commit`` at chosen dates.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.repository import Gitmem

MESSAGES = [
    {"id": "m1", "role": "user", "content": "How was the weekend?", "createdAt": "2026-05-01T09:00:00Z"},
    {"id": "m2", "role": "assistant", "content": "Busy! We finally adopted a corgi from the "
                                                   "shelter, her name is Seraphim.",
     "createdAt": "2026-05-01T09:01:00Z"},
    {"id": "m3", "role": "user", "content": "Lovely. My sister's cat Susie says hi.",
     "createdAt": "2026-05-01T09:02:00Z"},
    {"id": "m4", "role": "assistant", "content": "Ha! I'm off to the film \"The Godfather\" tonight.",
     "createdAt": "2026-05-01T09:03:00Z"},
    {"id": "m5", "role": "user", "content": "日本語の勉強は順調です。Café crème after?",
     "createdAt": "2026-05-01T09:04:00Z"},
]
SESSION = "session:claude-code/s1"
# Questions as people and models type them, and the message that answers each
QUESTIONS = [
    ("Which pet did they adopt first - Susie or Seraphim?", "m2"),
    ("what's the corgi's name?", "m2"),
    ('Which film is "The Godfather?', "m4"),  # one quote mark
    ('Who will see "The Godfather" tonight?', "m4"),  # a question: its quotes are no operator
    ("adopting dogs from shelters", "m2"),  # stemmed
    ("日本", "m5"),  # unspaced writing
    ("creme", "m5"),  # accents ignored
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recall") / "repo"
    run_gitmem("init", str(path))
    run_gitmem("session", "write", "claude-code", "s1", repo=path,
               input=json.dumps({"messages": MESSAGES}))
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=path,
               input="Deploys on friday after the code review.")
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=path,
               input="Pairing on migrations.")
    return path


def search(repo: Path, *args: str) -> list[dict]:
    done = run_gitmem("--repo", str(repo), "search", "--json", *args)  # --repo before any --
    return json.loads(done.stdout)


@pytest.mark.parametrize("question, message", QUESTIONS)
def test_a_question_in_plain_words_finds_the_message_through_the_cli_and_python(repo, question, message):
    hits = search(repo, "--", question)
    assert (hits[0]["record"], hits[0]["unit_id"]) == (SESSION, message)
    assert hits[0]["date"] == next(m["createdAt"] for m in MESSAGES if m["id"] == message)
    with Gitmem.open(repo) as mem:
        found = mem.search(question)
        assert [hit.as_json() for hit in found] == hits
        assert (found[0].record, found[0].unit_id) == (SESSION, message)


def test_the_docs_example_finds_deploys_on_friday(repo):
    hits = search(repo, "deploy", "friday")
    assert [(h["record"], h["unit"], h["unit_id"]) for h in hits] == [("agent:reviewer", "block", 0)]
    assert hits[0]["snippet"] == "**Deploys** on **friday** after the code review."
    assert hits[0]["date"] == hits[0]["added_date"]  # a block's date: its commit's
    shown = run_gitmem("search", "deploy", "friday", repo=repo).stdout
    assert "agent:reviewer  block 0" in shown and "**Deploys** on **friday**" in shown


def test_no_hits_are_said_on_stderr(repo):
    done = run_gitmem("--repo", str(repo), "search", "zeppelin", "--", "-")
    assert done.stdout == "" and done.stderr == "gitmem: no hits for 'zeppelin -'\n"


def test_a_hits_unit_id_reads_the_message_back_with_its_neighbours(repo):
    hit = search(repo, "--context", "1", "corgi shelter")[0]
    assert [(n["offset"], n["unit_id"]) for n in hit["context"]] == [(-1, "m1"), (1, "m3")]
    assert hit["context"][0]["text"] == "How was the weekend?"
    read = json.loads(run_gitmem("unit", SESSION, hit["unit_id"], "--context", "1", "--json",
                                 repo=repo).stdout)
    assert [(u["unit_id"], u["asked"]) for u in read] == [("m1", False), ("m2", True), ("m3", False)]
    assert read[1]["value"] == MESSAGES[1] and read[1]["date"] == MESSAGES[1]["createdAt"]
    block = search(repo, "migrations")[0]
    with Gitmem.open(repo) as mem:
        [unit] = mem.read_unit(block["record"], block["unit_id"])
        assert unit.text == "Pairing on migrations." and unit.unit == "block"
        assert [u.unit_id for u in mem.read_unit(SESSION, "m5", context=3)] == ["m2", "m3", "m4", "m5"]
    shown = run_gitmem("unit", "agent:reviewer", "1", repo=repo).stdout
    assert shown == "> block 1\n    Pairing on migrations.\n"
    done = run_gitmem("unit", SESSION, "m9", repo=repo, check=False)
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "holds no unit 'm9'" in done.stderr


def test_a_units_position_and_neighbours_are_those_of_main_now(tmp_path):
    """Not those of the version that brought the unit in: a block before it removed since,
    a message appended after it."""
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--agent", "a", repo=repo,
               input="alpha first\n\nbeta second\n\ngamma third")
    run_gitmem("memory", "write", "--agent", "a", repo=repo, input="beta second\n\ngamma third")
    for message in ({"id": "m0", "content": "one"}, {"id": "m1", "content": "two quokka"},
                    {"id": "m2", "content": "three"}):
        run_gitmem("session", "append", "cc", "s", repo=repo, input=json.dumps({"messages": [message]}))
    with Gitmem.open(repo) as mem:  # the full path, and below the quick one (the command)
        [block] = mem.search("gamma")
        [message] = mem.search("quokka", context=1)
        assert block.unit_id == 1 and mem.read_unit("agent:a", block.unit_id)[0].text == "gamma third"
        assert message.unit_id == "m1" and [n["unit_id"] for n in message.context] == ["m0", "m2"]
    assert search(repo, "gamma")[0]["unit_id"] == 1
    assert [n["unit_id"] for n in search(repo, "--context", "1", "quokka")[0]["context"]] == ["m0", "m2"]


def test_a_thread_events_unit_id_is_its_position_across_chunks(tmp_path):
    """A thread's events go into chunks of 64 KB: an event's position counts those before."""
    repo = tmp_path / "repo"
    events = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}", "delta": f"step {i} " + "x" * 900}
              for i in range(150)]
    events[120]["delta"] = "ordering quokkas " + "y" * 900
    with Gitmem.open(repo) as mem:
        for start in range(0, len(events), 30):
            mem.threads.append_events("t1", "planner", events[start:start + 30])
    assert len(list((repo / "threads" / "t1" / "events").iterdir())) > 1
    [hit] = search(repo, "quokkas", "--context", "1")
    assert (hit["record"], hit["unit"], hit["unit_id"]) == ("thread:t1", "event", 120)
    assert [n["unit_id"] for n in hit["context"]] in ([119, 121], [119], [121])  # within its chunk
    read = json.loads(run_gitmem("unit", "thread:t1", "120", "--json", repo=repo).stdout)
    assert read[0]["value"] == events[120]


def test_a_reply_is_found_by_the_words_of_the_question_before_it(tmp_path):
    """The asking turn names the topic; the reply holds the answer in words of its own. A
    question ranks the reply by a share of the asking turn's score; a single word, the
    operators, another session, and a memory's blocks get no share."""
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    talk = [{"id": "a1", "role": "user", "content": "Where are you spending the long weekend, Sam?"},
            {"id": "a2", "role": "assistant", "content": "Heading to the lake house, just us two."},
            {"id": "a3", "role": "user", "content": "Nice, the weather looks good."}]
    run_gitmem("session", "write", "cc", "s1", repo=repo, input=json.dumps({"messages": talk}))
    run_gitmem("session", "write", "cc", "s2", repo=repo, input=json.dumps(
        {"messages": [{"id": "b1", "role": "user", "content": "Groceries are in the fridge."}]}))
    run_gitmem("memory", "write", "--agent", "a", repo=repo,
               input="The long weekend starts on Friday.\n\nBring the tent.")
    question = "Where is Sam going for the long weekend?"
    hits = search(repo, "--", question)
    assert [(h["record"], h["unit_id"]) for h in hits] == [
        ("session:cc/s1", "a1"), ("agent:a", 0), ("session:cc/s1", "a2")]
    assert hits[2]["snippet"] == "Heading to the lake house, just us two."  # none of its words asked
    with Gitmem.open(repo) as mem:
        assert [h.as_json() for h in mem.search(question)] == hits
        assert [h.unit_id for h in mem.search(question, kind="session")] == ["a1", "a2"]
    assert {h["unit_id"] for h in search(repo, "weekend")} == {"a1", 0}  # one word: where it is
    assert {h["unit_id"] for h in search(repo, '"long weekend"')} == {"a1", 0}  # operators: the same
    assert {h["unit_id"] for h in search(repo, "weather fridge")} == {"a3", "b1"}  # nothing after either


def commit_by_hand(repo: Path, text: str, date: str) -> str:
    (repo / "memory").mkdir(exist_ok=True)
    (repo / "memory" / "user.md").write_text(text)
    git = Git(repo)
    env = {**SUBPROCESS_ENV, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date}
    git("add", "memory/user.md")
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "by hand"], check=True, env=env)
    return git("rev-parse", "HEAD").strip()


def test_at_finds_what_was_there_then_and_not_what_came_later(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    first = commit_by_hand(repo, "The office is in Lisbon.\n", "2026-01-10T10:00:00Z")
    commit_by_hand(repo, "The office moved to Porto.\n", "2026-03-10T10:00:00Z")
    question = "where is the office?"
    assert [h["snippet"] for h in search(repo, question)] == ["The **office** moved to Porto."]
    then = search(repo, "--at", "2026-02-01", question)
    assert [h["snippet"] for h in then] == ["The **office** is in Lisbon."]
    assert then[0]["removed"] is not None  # it went later, and --at says when
    assert [h["snippet"] for h in search(repo, "--at", first, question)] == ["The **office** is in Lisbon."]
    assert search(repo, "--at", "2026-04-01", "lisbon") == []
    assert search(repo, "--at", "2025-12-01", question) == []  # before anything was written
    with Gitmem.open(repo) as mem:
        assert [h.snippet for h in mem.search("porto", at="2026-02-01")] == []
        assert [h.snippet for h in mem.search("porto", at="2026-03-11")] == ["The office moved to **Porto**."]
        with pytest.raises(ValueError, match="at and history"):
            mem.search("porto", at="2026-03-11", history=True)
    done = run_gitmem("search", "--at", "not a time", "porto", repo=repo, check=False)
    assert done.returncode != 0 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_deleting_the_caches_gives_the_same_answers(repo, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(repo, copy, symlinks=True)
    asked = [("--", q) for q, _ in QUESTIONS] + [("--context", "2", "deploy friday"),
                                                  ("--history", "corgi")]
    before = [search(copy, *args) for args in asked]
    shutil.rmtree(copy / ".git" / "gitmem")
    after = [search(copy, *args) for args in asked]
    assert after == before and all(before)


# -- MCP ---------------------------------------------------------------------------------------

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402


async def _tools(repo: Path, calls: list[tuple[str, dict]]) -> tuple[dict, list]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp", "--repo", str(repo)],
                                   env=SUBPROCESS_ENV)
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as opened:
                await opened.initialize()
                tools = {tool.name: tool for tool in (await opened.list_tools()).tools}
                return tools, [await opened.call_tool(name, args) for name, args in calls]


def test_mcp_search_gives_structured_hits_and_read_unit_reads_one_back(repo):
    question, message = QUESTIONS[0]
    tools, results = anyio.run(_tools, repo, [
        ("search", {"query": question, "context": 1}),
        ("read_unit", {"record": SESSION, "unit_id": message, "context": 1}),
        ("read_unit", {"record": "agent:reviewer", "unit_id": 0}),
        ("search", {"query": "deploy friday", "at": "1999-01-01"}),
        ("read_unit", {"record": SESSION, "unit_id": "nope"}),
        ("search", {"query": "corgi", "history": True, "at": "2026-01-01"}),
    ])
    assert "plain words" in tools["search"].description
    assert tools["search"].output_schema["properties"]["hits"]["type"] == "array"
    assert set(tools["read_unit"].input_schema["required"]) == {"record", "unit_id"}
    found, unit, block, before, missing, both = results
    hits = found.structured_content["hits"]
    assert not found.is_error and json.loads(found.content[0].text) == found.structured_content
    assert (hits[0]["record"], hits[0]["unit_id"]) == (SESSION, message)
    assert [n["unit_id"] for n in hits[0]["context"]] == ["m1", "m3"]
    assert [u["unit_id"] for u in json.loads(unit.content[0].text)] == ["m1", "m2", "m3"]
    assert json.loads(block.content[0].text)[0]["text"] == "Deploys on friday after the code review."
    assert before.structured_content == {"hits": []}
    assert missing.is_error and "holds no unit 'nope'" in missing.content[0].text
    assert both.is_error and "at and history" in both.content[0].text
