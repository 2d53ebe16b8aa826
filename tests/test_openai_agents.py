"""OpenAI Agents SDK sessions in git (``gitmem.openai_agents.Session``), driven by the real
``agents`` package: its ``Runner`` keeps a conversation in the session, and the items
read back, after a restart too, are the ones the SDK's own ``SQLiteSession`` holds for the
same run, item for item.

The model's replies (tests/recorded/openai_responses.json) are Responses API responses; a
local HTTP server plays them to the real OpenAI client, so nothing goes over the network.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from test_memory_tool import MessagesApi

agents = pytest.importorskip("agents")  # the test extra holds it; `pip install 'gitmem[openai-agents]'`
from agents import Agent, OpenAIResponsesModel, Runner, SQLiteSession, set_tracing_disabled  # noqa: E402
from agents.memory import Session as SessionProtocol  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from gitmem.openai_agents import Session  # noqa: E402

RECORDED = Path(__file__).resolve().parent / "recorded" / "openai_responses.json"
TURNS = ["Hi, I am Ada.", "What is my name?"]


async def converse(session, url: str) -> list[str]:
    """The two turns of the recorded conversation run with ``session``; the replies."""
    set_tracing_disabled(True)
    client = AsyncOpenAI(api_key="recorded", base_url=f"{url}/v1", max_retries=0)
    agent = Agent(name="Assistant", model=OpenAIResponsesModel("gpt-4.1", client))
    return [(await Runner.run(agent, turn, session=session)).final_output for turn in TURNS]


def read_in_a_new_process(repo: Path, session_id: str) -> list:
    """``get_items()`` of the session as a fresh Python process reads it."""
    source = ("import asyncio, json, sys\nfrom gitmem.openai_agents import Session\n"
              "s = Session(sys.argv[2], repo=sys.argv[1])\n"
              "print(json.dumps(asyncio.run(s.get_items())))\n")
    done = subprocess.run([sys.executable, "-c", source, str(repo), session_id], capture_output=True,
                          text=True, env=SUBPROCESS_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_conversation_reads_back_item_for_item_after_a_restart(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    replies = json.loads(RECORDED.read_text())
    session = Session("conv-1", repo=repo)
    assert isinstance(session, SessionProtocol)  # the agents package's own check
    with MessagesApi(replies) as api:
        assert asyncio.run(converse(session, api.url)) == [
            r["output"][0]["content"][0]["text"] for r in replies]
        session.close()
        second_input = api.requests[1]["input"]
    reference = SQLiteSession("conv-1")  # the SDK's own session, in memory, for the same run
    with MessagesApi(replies) as api:
        asyncio.run(converse(reference, api.url))
    expected = asyncio.run(reference.get_items())
    assert len(expected) == 4 and second_input == expected[:3]  # the history went back to the model
    assert read_in_a_new_process(repo, "conv-1") == expected
    # each add_items was one commit, the items one JSONL line each, verbatim
    ops = git.log("sessions/openai-agents/conv-1", fmt="%(trailers:key=Gitmem-Op,valueonly)")
    assert [op.strip() for op in ops if op.strip()] == ["session.append"] * 4
    lines = (repo / "sessions/openai-agents/conv-1/messages/000000.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == expected
    assert git.status() == ""


def test_limit_pop_and_clear_match_the_sdk_session(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    items = [{"role": "user", "content": "one"}, {"type": "function_call", "call_id": "c1", "name": "f",
                                                 "arguments": "{\"x\": 1}", "zeta": [1, {"b": 2, "a": 1}]},
             {"role": "assistant", "content": "three"}]

    async def both(call):
        ours, theirs = Session("s", repo=repo), SQLiteSession("s")
        return await call(ours), await call(theirs)

    async def scenario(session):
        await session.add_items(items[:2])
        await session.add_items([])
        await session.add_items(items[2:])
        found = [await session.get_items(limit=n) for n in (None, 2, 0, -1)]
        found.append(await session.pop_item())
        found.append(await session.get_items())
        await session.clear_session()
        found += [await session.get_items(), await session.pop_item()]
        return found

    ours, theirs = asyncio.run(both(scenario))
    assert ours == theirs and ours[0] == items  # key order kept: the dicts compare equal, and...
    assert [list(item) for item in ours[0]] == [list(item) for item in items]
    ops = [op.strip() for op in git.log(fmt="%(trailers:key=Gitmem-Op,valueonly)") if op.strip()]
    assert ops[:4] == ["session.delete", "session.pop", "session.append", "session.append"]


def test_session_settings_as_the_sdk_sqlite_session_takes_them(tmp_path):
    """The SDK's SessionSettings tests, for gitmem's Session beside its SQLiteSession: the
    default settings, an object or a dict in the constructor, unknown fields refused, the
    settings' limit the default of get_items and an explicit limit over it."""
    from agents.memory import SessionSettings
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    items = [{"role": "user", "content": f"Message {i}"} for i in range(5)]

    async def scenario(make):
        plain = make("a", None)
        assert isinstance(plain.session_settings, SessionSettings) and plain.session_settings.limit is None
        with pytest.raises(TypeError):
            make("b", {"limit": 2, "nonsense": 1})
        found = []
        for name, settings in (("c", SessionSettings(limit=3)), ("d", {"limit": 3})):
            session = make(name, settings)
            assert session.session_settings == SessionSettings(limit=3)
            await session.add_items(items)
            found += [await session.get_items(), await session.get_items(limit=2),
                      await session.get_items(limit=0), await session.get_items(limit=-1)]
        return found

    ours = asyncio.run(scenario(lambda name, s: Session(name, repo=repo, session_settings=s)))
    theirs = asyncio.run(scenario(lambda name, s: SQLiteSession(name, session_settings=s)))
    assert ours == theirs and ours[0] == items[2:] and ours[1] == items[3:] and ours[3] == items


@pytest.mark.parametrize("owned", [True, False])
def test_a_closed_session_raises_runtime_error_and_writes_nothing(tmp_path, owned):
    """As the SDK's SQLiteSession: every call on a closed session raises RuntimeError, an
    empty add_items too; close again is harmless."""
    import gitmem
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    mem = None if owned else gitmem.open(repo)
    session = Session("s", repo=repo, mem=mem)
    asyncio.run(session.add_items([{"role": "user", "content": "kept"}]))
    session.close()
    session.close()
    calls = [lambda: session.add_items([{"role": "user", "content": "lost"}]),
             lambda: session.add_items([]), session.get_items, session.pop_item, session.clear_session]
    for call in calls:
        with pytest.raises(RuntimeError, match="closed"):
            asyncio.run(call())
    if mem is not None:
        mem.close()
    assert read_in_a_new_process(repo, "s") == [{"role": "user", "content": "kept"}]


def test_a_closed_repository_refuses_a_write(tmp_path):
    """A general defect the SDK's closed-session tests showed: a closed Gitmem still committed."""
    import gitmem
    from gitmem.git.base import Closed
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    mem = gitmem.open(repo)
    mem.close()
    with pytest.raises(Closed, match="closed"):
        mem.sessions.append("a", "s", [{"x": 1}])
    assert Git(repo).log(fmt="%s") == ["init: gitmem repository"]
