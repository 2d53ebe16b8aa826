"""History of a record: log with summaries, show --at, diff, restore (API and CLI)."""

from __future__ import annotations

import base64
import json
import time
from datetime import datetime

import pytest

from gitmem.history import versions as history
from gitmem.errors import HistoryError
from gitmem.records.dates import parse_time

AGENT = "claude-code"
SESSION = "s1"
FOLDER = f"sessions/{AGENT}/{SESSION}"


def message(i: int) -> dict:
    return {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"}


def wait_for_next_second() -> None:
    """Commit times have whole seconds: let the next write land in a later one."""
    time.sleep(1.05 - time.time() % 1)


def test_show_at_a_date_between_two_writes_returns_the_earlier_content(mem, cli):
    mem.memory.write("likes tea")
    first = mem.engine.log.commit_info("HEAD")
    wait_for_next_second()
    mem.memory.write("likes coffee")
    between = datetime.fromtimestamp(first.time).isoformat()  # local time, no zone: as people type it
    shown = mem.show("user", between)
    assert shown.commit == first.id and shown.value == {"content": "likes tea\n"} and shown.exists
    assert cli("show", "user", "--at", between).stdout == "likes tea\n"
    assert cli("show", "user", "--at", "HEAD").stdout == "likes coffee\n"
    assert cli("show", "user", "--at", "HEAD~1").stdout == "likes tea\n"
    assert cli("show", "user", "--at", "now").stdout == "likes coffee\n"
    before = cli("show", "user", "--at", "2001-01-01", "--json", check=False)
    assert before.returncode == 1  # it did not exist then (issue 24)
    assert json.loads(before.stdout) == {"record": "user", "commit": None, "exists": False,
                                         "content": ""}


def test_show_a_session_and_a_thread_at_a_revision(mem, cli):
    mem.sessions.write(AGENT, SESSION, [message(0)], "resume-1", "/w")
    mem.sessions.write(AGENT, SESSION, [message(0), message(1)], "resume-2", "/w")
    mem.threads.append_events("t1", "planner", [{"type": "RUN_STARTED"}])
    mem.threads.append_events("t1", "planner", [{"type": "RUN_FINISHED"}])
    shown = json.loads(cli("show", f"session:{AGENT}/{SESSION}", "--at", "HEAD~3", "--json").stdout)
    assert shown["messages"] == [message(0)] and shown["agentSessionId"] == "resume-1"
    assert shown["meta"]["workingDir"] == "/w" and shown["exists"]
    assert json.loads(cli("show", f"session:{AGENT}/{SESSION}", "--at", "HEAD").stdout)["messages"] == [
        message(0), message(1)]
    thread = mem.show("thread:t1", "HEAD~1").value
    assert thread["events"] == [{"type": "RUN_STARTED"}] and thread["messages"] == []


def test_restore_makes_a_new_commit_whose_content_equals_the_old_one(mem, cli, git):
    mem.sessions.write(AGENT, SESSION, [message(0)], "resume-1", "/w")
    old = mem.engine.head()
    for n in range(2, 5):
        mem.sessions.write(AGENT, SESSION, [message(i) for i in range(n)], "resume-2", "/w")
    mem.memory.write("unrelated")
    count = git.count()
    out = cli("restore", f"session:{AGENT}/{SESSION}", "--at", old).stdout
    assert git.count() == count + 1  # a new commit: nothing reset
    assert f"as it was at {old[:10]}" in out
    assert git("rev-parse", f"HEAD:{FOLDER}/messages") == git("rev-parse", f"{old}:{FOLDER}/messages")
    restored, then = (json.loads(git("show", f"{at}:{FOLDER}/meta.json")) for at in ("HEAD", old))
    assert restored == {**then, "updatedAt": restored["updatedAt"]}  # updated: now
    assert git("log", "-1", "--format=%(trailers:key=Gitmem-Restored-From,valueonly)").strip() == old
    assert mem.sessions.read(AGENT, SESSION) == ([message(0)], "resume-1")
    assert mem.memory.read() == "unrelated\n"  # other records untouched
    # restoring what is already there commits nothing
    assert json.loads(cli("restore", f"session:{AGENT}/{SESSION}", "--at", old, "--json").stdout) == {
        "record": f"session:{AGENT}/{SESSION}", "from": old, "commit": None}
    assert git.count() == count + 1
    # a time the record did not exist at is refused: restore never deletes (issue 24)
    with pytest.raises(HistoryError, match="did not exist"):
        mem.restore(f"session:{AGENT}/{SESSION}", "2001-01-01")
    assert git.count() == count + 1
    assert mem.sessions.read(AGENT, SESSION) == ([message(0)], "resume-1")


def test_a_restore_is_a_new_write_its_updated_at_the_time_of_the_restore(mem, cli, git):
    """A restored session or thread is updated now (nui's and kaboo's lists sort by it, sync's
    merge takes the fields of the later side); createdAt and the rest are the old version's."""
    cli("session", "write", AGENT, SESSION, input=json.dumps({"messages": [message(0)], "workingDir": "/a"}))
    cli("session", "write", AGENT, SESSION, input=json.dumps({"messages": [message(1)], "workingDir": "/b"}))
    mem.threads.append_events("t1", "planner", [{"type": "RUN_STARTED"}])
    mem.threads.append_events("t1", "planner", [{"type": "RUN_FINISHED"}])
    mem.threads.append_events("t2", "planner", [{"type": "RUN_STARTED"}])  # the newest thread
    first = {"session": json.loads(git("show", f"HEAD~4:{FOLDER}/meta.json")),
             "thread": json.loads(git("show", "HEAD~2:threads/t1/meta.json"))}
    newest = {"session": json.loads(git("show", f"HEAD:{FOLDER}/meta.json")),
              "thread": json.loads(git("show", "HEAD:threads/t2/meta.json"))}
    before = datetime.now().astimezone()
    cli("restore", f"session:{AGENT}/{SESSION}", "--at", "@~1")
    cli("restore", "thread:t1", "--at", "@~1")
    session = json.loads((mem.engine.workdir / FOLDER / "meta.json").read_text())
    assert session == {**first["session"], "updatedAt": session["updatedAt"]}  # workingDir /a again
    restored_at = datetime.fromisoformat(session["updatedAt"].replace("Z", "+00:00"))
    assert restored_at >= before.replace(microsecond=before.microsecond // 1000 * 1000)
    assert session["updatedAt"] > newest["session"]["updatedAt"]
    thread = mem.threads.meta("t1")
    assert thread == {**first["thread"], "updatedAt": thread["updatedAt"]}
    assert thread["updatedAt"] > newest["thread"]["updatedAt"]
    assert [t["id"] for t in mem.threads.list_threads()] == ["t1", "t2"]  # the restored one first
    assert mem.sessions.read(AGENT, SESSION) == ([message(0)], "")
    # restoring what is already there still commits nothing, though updatedAt would differ
    count = git.count()
    assert json.loads(cli("restore", "thread:t1", "--at", "@", "--json").stdout)["commit"] is None
    assert json.loads(cli("restore", f"session:{AGENT}/{SESSION}", "--at", "@", "--json").stdout)["commit"] is None
    assert git.count() == count


def test_log_of_a_record_lists_exactly_the_commits_that_touched_it(mem, cli, git):
    for i in range(6):
        mem.sessions.write(AGENT, SESSION, [message(n) for n in range(i + 1)], "", "/w")
        if i % 2:
            mem.memory.write(f"note {i}", agent_id="ext:corp/reviewer", mode="append")
        if i % 3 == 0:
            mem.sessions.write(AGENT, "other", [message(i)])
    mem.sessions.write(AGENT, SESSION, [message(0), {**message(1), "content": "edited"}], "", "/w")
    mem.sessions.delete(AGENT, SESSION)
    for record, path in ((f"session:{AGENT}/{SESSION}", FOLDER),
                         ("agent:ext:corp/reviewer", "memory/agents/ext%3acorp%2freviewer.md"),
                         (f"session:{AGENT}/other", f"sessions/{AGENT}/other")):
        entries = json.loads(cli("log", record, "--json").stdout)
        assert [e["id"] for e in entries] == git.log(path)
    entries = mem.changes(f"session:{AGENT}/{SESSION}")
    summaries = [e.summary for e in entries]
    assert summaries[0] == "deleted"
    assert summaries[1] == "-4 messages, 1 message changed, metadata"
    assert summaries[2] == "+1 message, metadata"
    assert summaries[-1] == "created: +1 message, metadata"
    assert entries[2].changes == {"messages": {"added": 1, "removed": 0},
                                  "metadata": {"added": 1, "removed": 0}}
    memory_log = cli("log", "agent:ext:corp/reviewer").stdout.splitlines()
    assert memory_log[0].endswith("[+2 -0 lines]  memory: append to agent ext:corp/reviewer")
    assert "[created: +1 -0 lines]" in memory_log[-1]
    assert len(cli("log").stdout.splitlines()) == git.count()


def test_log_counts_images_and_events(mem):
    image = {"id": "i", "mediaType": "image/png", "data": base64.b64encode(b"\x89PNG" * 500).decode()}
    mem.sessions.write(AGENT, SESSION, [{**message(0), "images": [image]}])
    assert mem.changes(f"session:{AGENT}/{SESSION}")[0].summary == \
        "created: +1 message, +1 image, metadata"
    mem.threads.append_events("t1", "planner", [{"type": "A"}, {"type": "B"}])
    mem.threads.append_events("t1", "planner", [{"type": "C"}])
    assert [e.summary for e in mem.changes("thread:t1")] == [
        "+1 event, metadata", "created: +2 events, metadata"]


def test_diff_since_and_until(mem, cli):
    mem.memory.write("one")
    mem.memory.write("two")
    mem.memory.write("three")
    patch = cli("diff", "user", "--since", "HEAD~2", "--until", "HEAD~1").stdout
    assert "--- a/memory/user.md\n+++ b/memory/user.md\n" in patch
    assert "-one\n+two\n" in patch and "three" not in patch
    whole = cli("diff", "user").stdout
    assert "--- /dev/null" in whole and "+three" in whole and "one" not in whole
    data = json.loads(cli("diff", "user", "--since", "HEAD~2", "--json").stdout)
    assert data["files"] == [{"path": "memory/user.md", "status": "modified", "added": 1,
                              "removed": 1, "binary": False}]
    assert data["to"] == mem.engine.head() and "+three" in data["patch"]
    mem.sessions.write(AGENT, SESSION, [message(0)])
    mem.sessions.write(AGENT, SESSION, [message(0), message(1)])
    changes = mem.diff(f"session:{AGENT}/{SESSION}", "HEAD~1")
    assert [(f.path, f.added, f.removed) for f in changes.files] == [
        (f"{FOLDER}/messages/000000.jsonl", 1, 0), (f"{FOLDER}/meta.json", 1, 1)]
    assert f"+++ b/{FOLDER}/messages/000000.jsonl" in changes.patch


@pytest.mark.parametrize("text, expected", [
    ("2026-11-01", datetime(2026, 11, 2).timestamp() - 1),  # the end of that day (issue 24)
    ("today", 1_000_000.0),
    ("2026-11-01T14:00", datetime(2026, 11, 1, 14).timestamp()),
    ("2026-11-01 14:00:30", datetime(2026, 11, 1, 14, 0, 30).timestamp()),
    ("2026-11-01T14:00:00Z", 1793541600.0),
    ("2026-11-01T15:00:00+01:00", 1793541600.0),
    ("3 days ago", 1_000_000.0 - 3 * 86400),
    ("1 hour ago", 1_000_000.0 - 3600),
    ("2 weeks ago", 1_000_000.0 - 14 * 86400),
    ("yesterday", 1_000_000.0 - 86400),
    ("now", 1_000_000.0),
    ("@1793541600", 1793541600.0),
    ("HEAD~3", None),
    ("deadbeef", None),
    ("20261101", None),  # could be an abbreviated hash: a revision, not a date
])
def test_parse_time(text, expected):
    assert parse_time(text, now=1_000_000.0) == expected


def test_bad_times_and_records_are_one_line_errors(mem, cli):
    with pytest.raises(HistoryError, match="not a valid date"):
        parse_time("2026-13-01")
    with pytest.raises(HistoryError, match="neither a revision nor a date"):
        history.resolve_when(mem.engine, "next tuesday")
    done = cli("show", "user", "--at", "next tuesday", check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "neither a revision nor a date" in done.stderr
    done = cli("restore", "nonsense", "--at", "HEAD", check=False)
    assert done.returncode == 1 and "not a record name" in done.stderr
    assert cli("restore", "user", check=False).returncode == 2  # --at is required (show: @)
