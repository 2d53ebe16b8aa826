"""A line that plain git let in and that is not JSON (issue 35, item 6): every answer stays
valid JSON, the line is left out of reads with a warning naming its file and line, gitmem
never deletes it (writes keep it in its place), and `status` and `fsck` name it.

Fixtures as the world makes them: the line is appended to the file on disk and committed
with plain `git commit`; the wire is the real `gitmem serve` read as nui reads it.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.errors import BrokenFile
from nui_client import NuiHost

CHUNK = "sessions/claude-code/s1/messages/000000.jsonl"
META = "sessions/claude-code/s1/meta.json"
EVENTS = "threads/t1/events/000000.jsonl"
MESSAGES = [{"id": f"m{i}", "role": "user", "content": f"question {i}"} for i in range(2)]
SESSION = {"handlerId": "h", "agentType": "claude-code", "sessionId": "s1", "workingDir": "/w"}
GUARD = 20.0  # seconds: a guard against a hang, never a measurement


def commit_by_hand(repo: Path, path: str, text: str, *, append: bool = True) -> None:
    """``text`` added to (or put in) the file at ``path``, committed with plain git."""
    with open(repo / path, "a" if append else "w", encoding="utf-8") as file:
        file.write(text)
    git = Git(repo)
    git("add", path)
    git("commit", "-q", "-m", f"edit {path} by hand")


def serve(repo: Path) -> NuiHost:
    return NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)],
                   cwd=repo.parent, env=SUBPROCESS_ENV)


@pytest.fixture
def broken_session(mem, repo_path) -> Path:
    """Session claude-code/s1 of two messages, then `{broken` as its chunk's third line."""
    mem.sessions.write("claude-code", "s1", MESSAGES, "resume-1", "/w")
    commit_by_hand(repo_path, CHUNK, "{broken\n")
    return repo_path


def test_the_wire_answers_without_the_line_and_the_next_write_keeps_it(broken_session, git):
    new = {"id": "m2", "role": "assistant", "content": "answer"}
    with serve(broken_session) as host:
        read = host.call("storage.session.read", SESSION, timeout=GUARD)  # a line nui can read
        assert read == {"messages": MESSAGES, "agentSessionId": "resume-1"}
        # nui's next snapshot: what it read and its new turn
        assert host.call("storage.session.write", {**SESSION, "agentSessionId": "resume-1",
                                                   "messages": MESSAGES + [new]},
                         timeout=GUARD) == {"ok": True}
        assert host.call("storage.session.read", SESSION, timeout=GUARD)["messages"] == MESSAGES + [new]
        host.call("storage.shutdown", timeout=GUARD)
        assert host.wait(GUARD) == 0
    stored = git.show(f"HEAD:{CHUNK}").splitlines()
    assert stored[2] == "{broken" and [json.loads(line) for line in stored[:2] + stored[3:]] == \
        MESSAGES + [new]
    log = (broken_session / ".git" / "gitmem" / "serve.log").read_text()
    assert f"{CHUNK} line 3 is not JSON" in log


def test_a_write_that_changes_the_chunk_keeps_the_line_in_its_place(broken_session, mem, git):
    edited = [{**MESSAGES[0], "content": "edited"}, MESSAGES[1]]
    mem.sessions.write("claude-code", "s1", edited, "resume-1", "/w")
    stored = git.show(f"HEAD:{CHUNK}").splitlines()
    assert stored[2] == "{broken" and [json.loads(line) for line in stored[:2]] == edited
    mem.sessions.write("claude-code", "s1", [], "resume-1", "/w")  # a write of nothing
    assert git.show(f"HEAD:{CHUNK}") == "{broken\n"


def test_the_python_api_reads_without_the_line_and_says_where_it_is(broken_session, mem, caplog):
    with caplog.at_level(logging.WARNING):
        assert mem.sessions.read("claude-code", "s1") == (MESSAGES, "resume-1")
        assert json.loads(mem.sessions.read_json("claude-code", "s1")[0]) == MESSAGES
    assert f"{CHUNK} line 3 is not JSON" in caplog.text


def test_thread_events_answer_without_the_line_and_appends_keep_it(mem, repo_path, git):
    mem.threads.append_events("t1", "agent", [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}])
    commit_by_hand(repo_path, EVENTS, '{"type":"STATE_SNAPSHOT", broken\n')
    with serve(repo_path) as host:
        assert host.call("threads.readEvents", {"threadId": "t1"}, timeout=GUARD) == {
            "events": [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}]}
        assert host.call("threads.readState", {"threadId": "t1"}, timeout=GUARD) == {"state": {"n": 1}}
        assert host.call("threads.appendEvents", {"threadId": "t1", "agentId": "agent",
                                                  "events": [{"type": "RUN_FINISHED"}]},
                         timeout=GUARD) == {"ok": True}
        assert host.call("threads.readEvents", {"threadId": "t1"}, timeout=GUARD)["events"][-1] == {
            "type": "RUN_FINISHED"}
        host.call("storage.shutdown", timeout=GUARD)
    assert git.show(f"HEAD:{EVENTS}").splitlines()[1] == '{"type":"STATE_SNAPSHOT", broken'


def test_blame_export_status_and_fsck_name_the_file_and_line(broken_session, tmp_path):
    where = f"{CHUNK} line 3"
    blame = run_gitmem("blame", "session:claude-code/s1", repo=broken_session)
    assert where in blame.stderr and '"question 1"' in blame.stdout
    export = run_gitmem("export", "nui", str(tmp_path / "out"), repo=broken_session)
    assert where in export.stderr
    data = json.loads((tmp_path / "out" / "data.json").read_text())
    assert data["sessionMessages"]["s1"] == MESSAGES
    status = run_gitmem("status", repo=broken_session).stdout
    assert f"unreadable  {where}: Expecting property name" in status
    assert {"path": CHUNK, "line": 3} .items() <= json.loads(run_gitmem(
        "status", "--json", repo=broken_session).stdout)["unreadable"][0].items()
    fsck = run_gitmem("fsck", repo=broken_session, check=False)
    assert fsck.returncode == 1 and f"{CHUNK} (HEAD): line 3" in fsck.stdout


def test_a_broken_meta_json_is_read_around_and_never_written_over(mem, repo_path, git):
    mem.sessions.write("claude-code", "s1", MESSAGES, "resume-1", "/w")
    commit_by_hand(repo_path, META, '{"agentSessionId": "resume-1",\n  oops\n}\n', append=False)
    head = git("rev-parse", "HEAD")
    read = run_gitmem("session", "read", "claude-code", "s1", repo=repo_path)
    assert json.loads(read.stdout) == {"messages": MESSAGES, "agentSessionId": ""}
    assert f"{META} line 2" in read.stderr
    written = run_gitmem("session", "append", "claude-code", "s1", repo=repo_path, check=False,
                         input='{"messages": [{"id": "m2"}]}')
    assert written.returncode == 1 and f"{META} line 2" in written.stderr
    assert "Traceback" not in written.stderr and git("rev-parse", "HEAD") == head
    with pytest.raises(BrokenFile, match=f"{META} line 2"):
        mem.sessions.write("claude-code", "s1", MESSAGES + [{"id": "m2"}])
    assert git("rev-parse", "HEAD") == head
    with serve(repo_path) as host:
        error = host.error("storage.session.write", {**SESSION, "messages": MESSAGES}, timeout=GUARD)
        assert f"{META} line 2" in error["message"]
        assert host.call("storage.session.read", SESSION, timeout=GUARD)["messages"] == MESSAGES
        host.call("storage.shutdown", timeout=GUARD)
    assert git("rev-parse", "HEAD") == head
    assert f"unreadable  {META} line 2" in run_gitmem("status", repo=repo_path).stdout
