"""The watcher: edits saved on disk are committed once they settle, with nothing reading.

Short debounce settings keep these tests fast; one test runs the defaults.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SUBPROCESS_ENV
from gitmem.edits.watch import DEBOUNCE, MAX_DELAY, Watcher
from gitmem.git.engine import GitEngine
from test_handedits import PERSON, SAVES, hand_commits, person, temp_then_rename  # noqa: F401

FAST = {"debounce": 0.2, "max_delay": 2.0}


def wait_for(predicate, timeout: float = 10.0, step: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out waiting")


MARKER = "memory/marker.md"


def mark_and_wait(mem, git) -> None:
    """Save :data:`MARKER` by hand and wait until the watcher has committed it. The watcher
    takes file events in the order they came (a layout folder that came or went: every
    folder looked over), so by then it has handled every event before the marker's: what
    they were to commit is committed, and what is not did not wait for a late watcher."""
    path = mem.engine.worktree.path(MARKER)
    path.parent.mkdir(exist_ok=True)
    path.write_text("marker\n")
    wait_for(lambda: git("ls-tree", "--name-only", "HEAD", "--", MARKER).strip() == MARKER, step=0.05)


@pytest.fixture
def head_of(repo_path):
    """Reads HEAD through an engine of its own, without the hand-edit layer (no commits)."""
    engine = GitEngine.open(repo_path, create=False)
    yield engine.head
    engine.close()


@pytest.fixture
def watching(mem, person):
    watcher = Watcher(mem, **FAST).start()
    yield watcher
    watcher.stop()


@pytest.mark.parametrize("save", SAVES.values(), ids=SAVES.keys())
def test_an_editor_save_is_committed_once_with_nothing_reading(mem, watching, head_of, git, save):
    mem.memory.write("likes tea", "reviewer")
    before, head = git.count(), head_of()
    save(mem.engine.worktree.path("memory/agents/reviewer.md"), "likes coffee\n")

    wait_for(lambda: head_of() != head)
    mark_and_wait(mem, git)
    assert git.count() == before + 2  # the save's one commit, and the marker's
    _marker, edit = hand_commits(mem)
    assert (edit.author, edit.email) == PERSON
    assert (git.changed("HEAD~1"), git.changed()) == (["memory/agents/reviewer.md"], [MARKER])
    assert git.show("HEAD:memory/agents/reviewer.md") == "likes coffee\n"


def test_edits_are_committed_once_they_settle_with_the_default_debounce(mem, person, head_of, git):
    mem.memory.write("old")
    watcher = Watcher(mem).start()
    assert (watcher.debounce, watcher.max_delay) == (DEBOUNCE, MAX_DELAY) == (1.0, 10.0)
    try:
        head = head_of()
        path = mem.engine.worktree.path("memory/user.md")
        for i in range(4):  # 0.6 s of saving: under the debounce, so no commit meanwhile
            temp_then_rename(path, f"draft {i}\n")
            time.sleep(0.2)
        wait_for(lambda: head_of() != head)
        mark_and_wait(mem, git)
    finally:
        watcher.stop()
    _marker, edit = hand_commits(mem)  # the drafts: one commit, once they settled
    assert git.show(f"{edit.id}:memory/user.md") == "draft 3\n"


def test_edits_that_go_on_are_committed_by_the_max_delay(mem, person):
    mem.memory.write("old")
    watcher = Watcher(mem, debounce=0.5, max_delay=0.8).start()
    try:
        path = mem.engine.worktree.path("memory/user.md")
        for i in range(20):  # a save every 0.1 s for 2 s: never quiet for 0.5 s
            temp_then_rename(path, f"draft {i}\n")
            time.sleep(0.1)
        during = len(hand_commits(mem))
    finally:
        watcher.stop()
    assert during >= 2
    assert mem.engine.snapshot().read("memory/user.md") == b"draft 19\n"  # stop() commits the rest


def test_a_deleted_agent_memory_is_committed_as_a_deletion(mem, watching, head_of, git):
    mem.memory.write("remember the build steps", "reviewer")
    head = head_of()
    mem.engine.worktree.path("memory/agents/reviewer.md").unlink()
    wait_for(lambda: head_of() != head)
    assert git("show", "--name-status", "--format=", "HEAD").split() == ["D", "memory/agents/reviewer.md"]
    assert mem.memory.read("reviewer") == ""


def test_a_moved_session_folder_is_committed(mem, watching, head_of, git):
    mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}])
    before, head = git.count(), head_of()
    os.rename(mem.engine.worktree.path("sessions/claude-code/s1"),
              mem.engine.worktree.path("sessions/claude-code/s2"))
    wait_for(lambda: head_of() != head)
    mark_and_wait(mem, git)
    assert git.count() == before + 2  # the move in one commit, and the marker's
    assert sorted(git.changed("HEAD~1")) == ["sessions/claude-code/s1/messages/000000.jsonl",
                                             "sessions/claude-code/s1/meta.json",
                                             "sessions/claude-code/s2/messages/000000.jsonl",
                                             "sessions/claude-code/s2/meta.json"]


def test_no_echo_100_api_writes_make_100_commits(mem, watching, git):
    before = git.count()
    for i in range(100):
        if i % 2:
            mem.memory.write(f"note {i}", "reviewer", mode="append")
        else:
            mem.sessions.write("claude-code", "s1", [{"role": "user", "content": str(n)} for n in range(i)])
    mark_and_wait(mem, git)  # every event the writes caused has been handled
    assert git.count() == before + 101
    assert len(hand_commits(mem)) == 1 and git.changed() == [MARKER]


def test_edits_made_while_nothing_ran_are_committed_at_start(mem, person, git):
    mem.memory.write("old")
    mem.engine.worktree.path("memory/user.md").write_text("edited offline\n")
    mem.engine.worktree.path("threads/t1").mkdir(parents=True)
    mem.engine.worktree.path("threads/t1/notes.jsonl").write_text("{broken\n")
    watcher = Watcher(mem, **FAST).start()  # returns once the first scan is done
    watcher.stop()
    (edit,) = hand_commits(mem)
    assert edit.summary == "hand edit: memory/user.md"


def test_a_broken_edit_waits_until_it_is_fixed(mem, watching, head_of, git):
    mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}])
    chunk = mem.engine.worktree.path("sessions/claude-code/s1/messages/000000.jsonl")
    before, head = git.count(), head_of()
    chunk.write_text('{"role": "user", "content": "hi"\n')
    mark_and_wait(mem, git)
    assert (git.count(), git.changed()) == (before + 1, [MARKER])  # the broken edit waits
    head = head_of()
    chunk.write_text('{"role": "user", "content": "hi there"}\n')
    wait_for(lambda: head_of() != head)
    assert mem.sessions.read("claude-code", "s1")[0] == [{"role": "user", "content": "hi there"}]


# -- the commands -------------------------------------------------------------------


def gitmem_process(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "gitmem", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=SUBPROCESS_ENV)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_gitmem_watch_commits_and_exits_cleanly(mem, person, repo_path, head_of, stop_signal):
    mem.memory.write("old")
    mem.close()
    watch = gitmem_process("watch", "--repo", str(repo_path), "--debounce", "0.2")
    try:
        assert b"watching" in watch.stderr.readline()
        head = head_of()
        temp_then_rename(repo_path / "memory/user.md", "edited\n")
        wait_for(lambda: head_of() != head)
        watch.send_signal(stop_signal)
        assert watch.wait(timeout=10) == 0
    finally:
        watch.kill()
    assert b"committed hand edit of memory/user.md" in watch.stderr.read()


def test_gitmem_watch_stopped_at_once_after_it_is_ready_exits_cleanly(mem, repo_path):
    """Ctrl-C as soon as `gitmem watch` says it watches (it used to land in Python code
    still setting up, and exit 130 with a traceback's KeyboardInterrupt)."""
    mem.close()
    for _ in range(3):
        watch = gitmem_process("watch", "--repo", str(repo_path))
        try:
            assert b"watching" in watch.stderr.readline()
            watch.send_signal(signal.SIGINT)
            assert watch.wait(timeout=30) == 0
        finally:
            watch.kill()
            watch.wait()
            for stream in (watch.stdin, watch.stdout, watch.stderr):
                stream.close()


def test_a_read_through_gitmem_serve_returns_the_saved_edit(mem, person, repo_path):
    mem.close()
    serve = gitmem_process("serve", "--repo", str(repo_path))
    ids = iter(range(1, 1000))

    def call(method: str, **params):
        serve.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method,
                                      "params": {"handlerId": "h", **params}}).encode() + b"\n")
        serve.stdin.flush()
        return json.loads(serve.stdout.readline())["result"]

    try:
        call("storage.userMemory.write", content="likes tea", writeMode="replace")
        for name, save in SAVES.items():
            save(repo_path / "memory/user.md", f"saved by {name}\n")
            assert call("storage.userMemory.read") == {"content": f"saved by {name}\n"}
        call("storage.userMemory.write", content="from nui", writeMode="append")
        assert call("storage.userMemory.read") == {"content": "saved by vim_style\n\nfrom nui\n"}
    finally:
        serve.stdin.close()
        assert serve.wait(timeout=10) == 0
    with GitEngine.open(repo_path, create=False) as engine:
        ops = [commit.trailers["Gitmem-Op"] for commit in engine.log.history()]
    assert ops[:6] == ["memory.append"] + ["hand-edit"] * 4 + ["memory.replace"]


def test_gitmem_serve_commits_a_save_with_nothing_reading(mem, person, repo_path, head_of):
    help_text = subprocess.run([sys.executable, "-m", "gitmem", "serve", "--help"],
                               capture_output=True, text=True, env=SUBPROCESS_ENV).stdout
    if "--no-watch" not in help_text:
        pytest.skip("gitmem serve does not run the watcher yet")
    mem.memory.write("old")
    mem.close()
    serve = gitmem_process("serve", "--repo", str(repo_path))
    try:
        serve.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"storage.info","params":{}}\n')
        serve.stdin.flush()
        assert json.loads(serve.stdout.readline())["id"] == 1  # serving, so watching
        head = head_of()
        temp_then_rename(repo_path / "memory/user.md", "saved with serve running\n")
        wait_for(lambda: head_of() != head)
    finally:
        serve.stdin.close()
        assert serve.wait(timeout=10) == 0
    with GitEngine.open(repo_path, create=False) as engine:
        (edit,) = [c for c in engine.log.history() if c.trailers.get("Gitmem-Op") == "hand-edit"]
        assert engine.snapshot(edit.id).read("memory/user.md") == b"saved with serve running\n"


def test_only_the_layout_folders_are_watched_and_they_may_come_and_go(mem, watching, head_of, git):
    """The watcher watches memory/, sessions/ and threads/, not .git/; one that appears later
    (here by hand, as the first file in it) is watched from then on, and removing it whole
    commits the deletions."""
    folder = mem.engine.workdir / "memory"
    assert not folder.exists()  # a fresh repository: no layout folder yet
    head = head_of()
    folder.mkdir()
    (folder / "user.md").write_text("made by hand\n")
    wait_for(lambda: head_of() != head)
    assert mem.memory.read() == "made by hand\n"

    time.sleep(3 * FAST["debounce"])  # the new folder's own watch is running now
    head = head_of()
    (folder / "user.md").write_text("edited by hand\n")
    wait_for(lambda: head_of() != head)
    assert git("show", "HEAD:memory/user.md") == "edited by hand\n"

    head = head_of()
    (folder / "user.md").unlink()
    folder.rmdir()
    wait_for(lambda: head_of() != head)
    assert git("ls-tree", "-r", "--name-only", "HEAD").split() == [".gitattributes", "README.md"]
