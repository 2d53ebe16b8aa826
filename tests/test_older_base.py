"""Writers that worked from an older base: nothing gitmem answered "ok" to is ever lost.

Each test replays what a user or the machine does to a memory repository (a full disk,
a read-only or symlinked folder, a checkout of an old commit, ``git add``, an editor
saving while API appends land, a refused then fixed edit, a SIGKILL then ``git commit
-am``), with real ``gitmem serve`` processes, real files and real ``git``. The oracle is
always the same: every answered write is readable through gitmem and in ``git show
main:PATH``, every line the person saved is there too, and ``git fsck`` is clean.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import Git, python_script, run_gitmem
from gitmem.repository import Gitmem
from nui_client import NuiHost, install_as_nui

USER = {"handlerId": "gitmem-user-memory"}
AGENTS = "gitmem-agent-memory"
SESSIONS = "gitmem-sessions"


@pytest.fixture
def person(repo_path, git):
    """A repository with the person's git identity set."""
    Gitmem.open(repo_path).close()
    git("config", "user.name", "Pat Person")
    git("config", "user.email", "pat@example.org")


@pytest.fixture
def serve(tmp_path: Path, repo_path: Path):
    """``serve()`` starts ``gitmem serve`` on the test's repository as nui does; all stopped after."""
    extension = install_as_nui(tmp_path, repo_path)
    started: list[NuiHost] = []

    def start() -> NuiHost:
        host = NuiHost.spawn(extension)
        started.append(host)
        host.call("storage.info")
        return host

    yield start
    for host in started:
        host.close()
    assert [problem for host in started for problem in host.problems] == []


def hand_edits(git: Git) -> list[str]:
    return [line for line in git.log(fmt="%H %(trailers:key=Gitmem-Op,valueonly)") if "hand-edit" in line]


@contextlib.contextmanager
def mounted(target: Path, *command: str):
    """Run ``mount COMMAND`` (which mounts on ``target``) for the block; skips the test
    where mounting is not allowed."""
    done = subprocess.run(["mount", *command], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=True)


@contextlib.contextmanager
def read_only(folder: Path):
    """``folder`` made read-only for every user, root included (a read-only bind mount)."""
    with mounted(folder, "--bind", str(folder), str(folder)):
        done = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {done.stderr.strip()}")
        yield


def ok(host: NuiHost, method: str, params: dict) -> bool:
    answer = host.request(method, params)
    return answer.get("result") == {"ok": True}


# -- gitmem's own failed work-tree writes ------------------------------------------------


def test_a_full_disk_never_turns_a_stale_file_into_a_hand_edit(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    repo_path = disk / "repo"
    with contextlib.ExitStack() as stack:
        stack.enter_context(mounted(disk, "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)))
        run_gitmem("init", str(repo_path))
        extension = install_as_nui(tmp_path, repo_path)
        host = stack.enter_context(NuiHost.spawn(extension))
        assert ok(host, "storage.userMemory.write", {**USER, "content": "before the disk filled"})
        filler = disk / "filler"
        with open(filler, "wb") as file:  # leave about 150 KB
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            file.write(b"\0" * max(0, free - 150_000))
        answered = []
        for i in range(6):  # compresses to a few hundred bytes in git; 300 KB in the work tree
            content = f"version {i}\n" + "the same line again\n" * 15_000
            if ok(host, "storage.userMemory.write", {**USER, "content": content}):
                answered.append(content)
            host.call("storage.userMemory.read", USER)  # an access: the stale file is not an edit
        assert answered, "no write was answered: the disk was too full to test anything"
        git = Git(repo_path)
        assert git.show("main:memory/user.md") == answered[-1]
        assert host.call("storage.userMemory.read", USER)["content"] == answered[-1]
        status = json.loads(run_gitmem("status", "--json", repo=repo_path).stdout)
        assert [o["path"] for o in status["out_of_step"]] == ["memory/user.md"]  # the reason too,
        # "No space left on device", when the disk had room for the note that says so
        filler.unlink()
        assert host.call("storage.userMemory.read", USER)["content"] == answered[-1]
        assert (repo_path / "memory/user.md").read_text() == answered[-1]  # repaired once there was room
        assert json.loads(run_gitmem("status", "--json", repo=repo_path).stdout)["out_of_step"] == []
        assert hand_edits(git) == []
        host.call("storage.shutdown")
        git.fsck()


def test_a_read_only_folder_keeps_every_answered_append_and_new_memory(repo_path, serve, git, cli):
    cli("init")
    host = serve()
    assert ok(host, "storage.agentMemory.write", {"handlerId": AGENTS, "agentId": "codex",
                                                   "content": "first", "writeMode": "append"})
    folder = repo_path / "memory/agents"
    with read_only(folder):
        for i in range(3):
            assert ok(host, "storage.agentMemory.write", {"handlerId": AGENTS, "agentId": "codex",
                                                           "content": f"block {i}", "writeMode": "append"})
            assert ok(host, "storage.agentMemory.write", {"handlerId": AGENTS, "agentId": "claude-code",
                                                           "content": f"new {i}", "writeMode": "append"})
        expected = "first\n\nblock 0\n\nblock 1\n\nblock 2\n"
        assert host.call("storage.agentMemory.read", {"handlerId": AGENTS, "agentId": "codex"}) \
            == {"content": expected}
        assert cli("memory", "read", "--agent", "claude-code").stdout == "new 0\n\nnew 1\n\nnew 2\n"
        assert "out of step memory/agents/codex.md" in cli("status").stdout
    assert git.show("main:memory/agents/codex.md") == expected
    assert git.show("main:memory/agents/claude-code.md") == "new 0\n\nnew 1\n\nnew 2\n"
    host.call("storage.agentMemory.read", {"handlerId": AGENTS, "agentId": "codex"})
    host.call("storage.agentMemory.read", {"handlerId": AGENTS, "agentId": "claude-code"})
    assert (folder / "codex.md").read_text() == expected  # repaired once it could be written
    assert (folder / "claude-code.md").read_text() == "new 0\n\nnew 1\n\nnew 2\n"
    assert hand_edits(git) == []
    git.fsck()


@pytest.mark.parametrize("moved", ["sessions", "memory"])
def test_a_folder_moved_away_and_symlinked_back_loses_nothing(tmp_path, repo_path, serve, git, cli, moved):
    cli("init")
    cli("memory", "write", "--user", input="kept")
    session = {"handlerId": SESSIONS, "agentType": "codex", "workingDir": "/w"}
    messages = [{"id": "m1", "role": "user", "content": "hi"}]
    host = serve()
    assert ok(host, "storage.session.write", {**session, "sessionId": "s-old", "messages": messages})
    other = tmp_path / "other-disk"
    other.mkdir()
    shutil.move(repo_path / moved, other / moved)
    (repo_path / moved).symlink_to(other / moved, target_is_directory=True)
    more = messages + [{"id": "m2", "role": "assistant", "content": "hello"}]
    assert ok(host, "storage.session.write", {**session, "sessionId": "s-old", "messages": more})
    assert ok(host, "storage.session.write", {**session, "sessionId": "s-new", "messages": messages})
    assert ok(host, "storage.userMemory.write", {**USER, "content": "more", "writeMode": "append"})
    assert ok(host, "storage.agentMemory.write", {"handlerId": AGENTS, "agentId": "codex", "content": "new"})
    for _ in range(2):  # accesses, and a second process
        assert host.call("storage.session.read", {**session, "sessionId": "s-old"})["messages"] == more
        assert host.call("storage.session.read", {**session, "sessionId": "s-new"})["messages"] == messages
        assert host.call("storage.userMemory.read", USER) == {"content": "kept\n\nmore\n"}
        assert json.loads(cli("session", "read", "codex", "s-new").stdout)["messages"] == messages
        assert cli("memory", "read", "--agent", "codex").stdout == "new\n"
    assert json.loads(git.show("main:sessions/codex/s-old/messages/000000.jsonl").splitlines()[1])["id"] == "m2"
    assert git.show("main:sessions/codex/s-new/meta.json")
    assert git.show("main:memory/user.md") == "kept\n\nmore\n"
    assert git.show("main:memory/agents/codex.md") == "new\n"
    assert hand_edits(git) == []
    assert "out of step" in cli("status").stdout
    git.fsck()


# -- plain git on the same repository --------------------------------------------------


def checkouts(git: Git) -> dict:
    return {"detached": lambda: git("checkout", "-q", "--detach", "HEAD~6"),
            "branch": lambda: git("checkout", "-q", "-b", "looking", "HEAD~6")}


@pytest.mark.parametrize("how", ["detached", "branch"])
@pytest.mark.parametrize("with_serve", [False, True], ids=["cli", "serve"])
def test_checking_out_an_old_commit_is_not_an_edit(repo_path, serve, git, cli, how, with_serve):
    cli("init")
    for i in range(8):
        cli("memory", "write", "--user", "--append", input=f"block {i}")
    old = git.show("HEAD~6:memory/user.md")
    checkouts(git)[how]()
    assert (repo_path / "memory/user.md").read_text() == old
    expected = "".join(f"block {i}\n\n" for i in range(8)) + "while looking\n"
    if with_serve:
        host = serve()
        assert host.call("storage.userMemory.read", USER)["content"] == expected[:-len("\nwhile looking\n")]
        assert ok(host, "storage.userMemory.write", {**USER, "content": "while looking", "writeMode": "append"})
        assert host.call("storage.userMemory.read", USER)["content"] == expected
    else:
        assert cli("memory", "read", "--user").stdout == expected[:-len("\nwhile looking\n")]
        cli("memory", "write", "--user", "--append", input="while looking")
        assert cli("memory", "read", "--user").stdout == expected
    assert (repo_path / "memory/user.md").read_text() == old  # the person's checkout untouched
    assert git.status() == ""  # nor its index
    assert git.show("main:memory/user.md") == expected
    status = cli("status").stdout
    assert "not main" in status
    git("checkout", "-q", "main")
    assert (repo_path / "memory/user.md").read_text() == expected
    cli("memory", "read", "--user")
    assert git.status() == ""
    assert hand_edits(git) == []
    git.fsck()


def test_a_git_added_hand_edit_is_committed_not_reset(repo_path, git, cli, person):
    cli("init")
    cli("memory", "write", "--user", input="from the api")
    (repo_path / "memory/user.md").write_text("from the api\n\nmy own line\n")
    git("add", "memory/user.md")
    assert cli("memory", "read", "--user").stdout == "from the api\n\nmy own line\n"
    assert git.show("main:memory/user.md") == "from the api\n\nmy own line\n"
    assert (repo_path / "memory/user.md").read_text() == "from the api\n\nmy own line\n"
    assert len(hand_edits(git)) == 1
    cli("memory", "read", "--user")
    assert git.status() == ""


def test_a_person_s_git_commit_running_keeps_its_index_lock(repo_path, git, cli):
    """``git commit`` holds index.lock while the person types the message: gitmem leaves it."""
    cli("init")
    lock = repo_path / ".git/index.lock"
    lock.write_text("held by git commit")
    old = time.time() - 3600
    os.utime(lock, (old, old))
    cli("memory", "write", "--user", input="written meanwhile")
    assert lock.read_text() == "held by git commit"
    lock.unlink()
    assert git.show("main:memory/user.md") == "written meanwhile\n"


def test_sigkill_right_after_writes_then_git_commit_a_keeps_every_record(repo_path, serve, git, cli, person):
    cli("memory", "write", "--user", input="before")
    host = serve()
    for i in range(5):
        host.call("threads.appendEvents", {"threadId": f"t{i}", "agentId": "a",
                                           "events": [{"type": "RUN_STARTED", "n": i}]})
    host.process.send_signal(signal.SIGKILL)
    host.wait()
    (repo_path / "memory/user.md").write_text("my own note\n")
    git("commit", "-qam", "my own commit")
    for i in range(5):
        assert json.loads(git.show(f"main:threads/t{i}/events/000000.jsonl"))["n"] == i
    assert git.show("main:memory/user.md") == "my own note\n"
    git.fsck()


# -- a person's save made from an older version ----------------------------------------------


EDITOR = r"""
import os, random, sys, time
path, rng = sys.argv[1], random.Random(int(sys.argv[2]))
for line in sys.stdin:
    trial = int(line)
    time.sleep(rng.random() * 0.01)
    with open(path) as file:
        text = file.read()
    time.sleep(rng.random() * 0.01)  # the editor's buffer ages while API appends land
    text = text.rstrip("\n") + f"\n\nsaved {trial}\n"
    if trial % 2:
        tmp = f"{path}.{trial}.tmp"
        with open(tmp, "w") as file:
            file.write(text)
        os.replace(tmp, path)
    else:
        with open(path, "w") as file:
            file.write(text)
    print("saved", flush=True)
"""


def test_an_editor_saving_while_api_appends_land_loses_neither(repo_path, serve, git, cli, person):
    cli("init")
    cli("memory", "write", "--agent", "codex", input="start")
    hosts = [serve() for _ in range(3)]
    path = repo_path / "memory/agents/codex.md"
    editor = python_script(EDITOR, str(path), "14")
    rng = random.Random(14)
    answered: list[str] = []
    try:
        for trial in range(20):
            editor.stdin.write(f"{trial}\n")
            editor.stdin.flush()

            def append(host: NuiHost, block: str) -> None:
                time.sleep(rng.random() * 0.01)
                if ok(host, "storage.agentMemory.write", {"handlerId": AGENTS, "agentId": "codex",
                                                          "content": block, "writeMode": "append"}):
                    answered.append(block)

            threads = [threading.Thread(target=append, args=(host, f"api {trial}.{n}"))
                       for n, host in enumerate(hosts)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert editor.stdout.readline() == "saved\n"
            hosts[0].call("storage.agentMemory.read", {"handlerId": AGENTS, "agentId": "codex"})
    finally:
        editor.stdin.close()
        editor.wait()
    final = cli("memory", "read", "--agent", "codex").stdout
    assert git.show("main:memory/agents/codex.md") == final
    assert len(answered) == 60
    missing = [block for block in answered + [f"saved {t}" for t in range(20)] if block not in final]
    assert missing == []
    assert path.read_text() == final
    git.fsck()


def test_a_refused_edit_fixed_later_keeps_what_was_appended_meanwhile(repo_path, git, person):
    with Gitmem.open(repo_path) as mem:
        mem.threads.append_events("t1", "agent", [{"type": "RUN_STARTED", "n": 1}])
        chunk = mem.engine.worktree.path("threads/t1/events/000000.jsonl")
        original = chunk.read_text()
        chunk.write_text(original + '<<<<<<< mine\n{"type":"CUSTOM","n":"mine"}\n=======\n>>>>>>>\n')
        for n in (2, 3):  # refused, and left alone by the writes
            mem.threads.append_events("t1", "agent", [{"type": "RUN_STARTED", "n": n}])
        assert [e["n"] for e in mem.threads.read_events("t1")] == [1, 2, 3]
        chunk.write_text(original + '{"type":"CUSTOM","n":"mine"}\n')  # the person fixes their save
        assert [e["n"] for e in mem.threads.read_events("t1")] == [1, 2, 3, "mine"]
    assert [json.loads(line)["n"] for line in git.show("main:threads/t1/events/000000.jsonl").splitlines()] \
        == [1, 2, 3, "mine"]
    git.fsck()



def test_a_metadata_field_edited_from_an_older_version_is_kept(repo_path, git, person):
    with Gitmem.open(repo_path) as mem:
        mem.sessions.write("codex", "s1", [{"id": "m1"}], "resume-1", "/old/dir")
        meta = mem.engine.worktree.path("sessions/codex/s1/meta.json")
        buffer = json.loads(meta.read_text())  # the person opens it in an editor
        mem.sessions.write("codex", "s1", [{"id": "m1"}, {"id": "m2"}], "resume-2", "/old/dir")
        buffer["workingDir"] = "/new/dir"
        meta.write_text(json.dumps(buffer, indent=2) + "\n")  # and saves their (older) buffer
        stored = mem.sessions.meta("codex", "s1") if mem.sessions.read("codex", "s1") else None
    assert stored["workingDir"] == "/new/dir"  # their change
    assert stored["agentSessionId"] == "resume-2"  # and the write they never saw
    assert json.loads(git.show("main:sessions/codex/s1/meta.json"))["updatedAt"] == stored["updatedAt"]


# -- every writer at once, in random order ----------------------------------------------------

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from conftest import SUBPROCESS_ENV  # noqa: E402
from gitmem.sync.exchange import sync  # noqa: E402

STEPS = st.lists(st.one_of(st.just(("api",)), st.tuples(st.just("save"), st.integers(0, 5)),
                           st.just(("sync",)), st.just(("read",))), min_size=1, max_size=12)


@seed(14)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_random_interleavings_of_api_writes_saves_and_syncs_lose_nothing(tmp_path_factory, monkeypatch, steps):
    """API appends, a person saving from any version the file held before (their editor's
    buffer that old), and syncs with a second machine appending to the same memory."""
    for key in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, SUBPROCESS_ENV[key])
    root = tmp_path_factory.mktemp("interleavings")
    remote = root / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)], check=True)
    with Gitmem.open(root / "a") as a:
        a.engine.remotes.add("origin", str(remote))
        a.memory.write("start", "codex")
        sync(a)
        subprocess.run(["git", "clone", "-q", str(remote), str(root / "b")], check=True)
        with Gitmem.open(root / "b", create=False) as b:
            path = a.engine.worktree.path("memory/agents/codex.md")
            held = [path.read_text()]  # what the work-tree file held, oldest first
            wanted = []
            for number, step in enumerate(steps):
                if step[0] == "api":
                    a.memory.write(f"api {number}", "codex", mode="append")
                    wanted.append(f"api {number}")
                elif step[0] == "save":
                    base = held[max(0, len(held) - 1 - step[1])]
                    path.write_text(base.rstrip("\n") + f"\n\nsaved {number}\n")
                    wanted.append(f"saved {number}")
                    if steps[number + 1:number + 2] != [("api",)]:
                        a.memory.read("codex")  # the watcher commits it (else the next write does)
                elif step[0] == "sync":
                    b.memory.write(f"remote {number}", "codex", mode="append")
                    wanted.append(f"remote {number}")
                    sync(b)
                    sync(a)
                else:
                    a.memory.read("codex")
                if path.read_text() != held[-1]:
                    held.append(path.read_text())
            final = a.memory.read("codex")
            sync(a)
            sync(b)
            assert [line for line in wanted if line not in final] == []
            assert b.memory.read("codex") == a.memory.read("codex")
            assert path.read_text() == a.memory.read("codex")
            Git(root / "a").fsck()
