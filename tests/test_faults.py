"""Faults as a user's machine really has them: gitmem never hangs on them, never dies of
them silently, and says what is wrong in one line.

Real repositories, the real CLI and the real ``gitmem serve`` as subprocesses. A
subprocess timeout here is a guard against a hang only, never a measurement.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git
from gitmem.repository import Gitmem
from gitmem.sync.exchange import sync
from gitmem.upkeep.maintenance import LOOSE_THRESHOLD
from nui_client import NuiHost

HANG_GUARD = 20.0  # seconds; the operations under test answer at once
AGENT = {"handlerId": "gitmem-agent-memory", "agentId": "a1"}
USER = {"handlerId": "gitmem-user-memory"}


def gitmem(repo: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """``python -m gitmem ARGS --repo REPO``, which must finish within HANG_GUARD."""
    return subprocess.run([sys.executable, "-m", "gitmem", *args, "--repo", str(repo)],
                          capture_output=True, text=True, input=input, env=SUBPROCESS_ENV,
                          timeout=HANG_GUARD)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The error gitmem printed: a failure, one ``gitmem:`` line at the end, no traceback."""
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("gitmem: "), done.stderr
    return lines[-1]


def serve(repo: Path, tmp_path: Path, *extra: str) -> NuiHost:
    return NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo), *extra],
                   cwd=tmp_path, env=SUBPROCESS_ENV)


# -- a truncated loose object ------------------------------------------------------------


def truncate_object(git: Git, rev: str) -> str:
    """Cut the loose object file of ``rev`` to half its size, as a crash may leave it."""
    oid = git("rev-parse", rev).strip()
    path = git.path / ".git" / "objects" / oid[:2] / oid[2:]
    data = path.read_bytes()
    path.chmod(0o600)
    path.write_bytes(data[:len(data) // 2])
    return oid


@pytest.fixture
def memories(repo_path: Path) -> Git:
    """User memory, and agent memory written twice (its first version is HEAD~1's)."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("likes tea")
        mem.memory.write("use tabs", "a1")
        mem.memory.write("use spaces", "a1")
    return Git(repo_path)


# HEAD's commit, a folder at HEAD, and a blob that only history holds (the work tree has
# HEAD's version of every file, and a read takes a file from there when it is the same).
DAMAGED = {"commit": "HEAD", "tree": "HEAD:memory/agents", "blob": "HEAD~1:memory/agents/a1.md"}


@pytest.mark.parametrize("kind", DAMAGED)
def test_a_truncated_object_is_named_by_every_command_and_nothing_hangs(kind, memories, repo_path):
    oid = truncate_object(memories, DAMAGED[kind])

    fsck = gitmem(repo_path, "fsck")
    assert fsck.returncode == 1, fsck
    assert f"problem: object {oid}" in fsck.stdout
    assert "Traceback" not in fsck.stderr
    if kind == "tree":
        assert "(folder memory/agents at HEAD)" in fsck.stdout

    assert oid in one_line_error(gitmem(repo_path, "log"))
    shown = gitmem(repo_path, "show", "agent:a1", "--at", "HEAD~1")
    if kind == "tree":  # HEAD~1 has a folder of its own, sound
        assert shown.stdout == "use tabs\n"
    else:  # HEAD~1 is found through the damaged commit, or is the damaged blob
        assert oid in one_line_error(shown)
    read = gitmem(repo_path, "memory", "read", "--agent", "a1")
    if kind == "blob":
        assert read.stdout == "use spaces\n"
    else:
        assert oid in one_line_error(read)


def test_fsck_names_the_record_of_a_damaged_file_at_head(memories, repo_path):
    oid = truncate_object(memories, "HEAD:memory/agents/a1.md")
    fsck = gitmem(repo_path, "fsck")
    assert f"problem: object {oid} (memory/agents/a1.md at HEAD)" in fsck.stdout
    assert "(it belongs to record agent:a1)" in fsck.stdout


def test_serve_goes_on_serving_what_a_damaged_old_blob_does_not_touch(memories, repo_path, tmp_path):
    truncate_object(memories, DAMAGED["blob"])
    with serve(repo_path, tmp_path) as host:
        assert host.call("storage.agentMemory.read", AGENT, timeout=HANG_GUARD) == {
            "content": "use spaces\n"}
        assert host.call("storage.userMemory.write", {**USER, "content": "short answers",
                                                      "writeMode": "append"},
                         timeout=HANG_GUARD) == {"ok": True}
        host.close_stdin()
        assert host.wait(HANG_GUARD) == 0


def test_a_sound_repository_keeps_its_checked_root_for_the_next_process(mem, repo_path, cli):
    mem.memory.write("likes tea")
    assert cli("memory", "read", "--user").stdout == "likes tea\n"
    recorded = (repo_path / ".git" / "gitmem" / "sound-tree").read_text().strip()
    assert recorded == Git(repo_path)("rev-parse", "HEAD^{tree}").strip()


# -- a remote that never answers -----------------------------------------------------------


@pytest.fixture
def silent_listener():
    """A TCP port on 127.0.0.1 that accepts every connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.1)  # closing the socket does not end an accept() under way
    held: list[socket.socket] = []
    stopping = threading.Event()

    def accept() -> None:
        while not stopping.is_set():
            try:
                connection, _ = server.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stopping.set()
    server.close()
    for connection in held:
        connection.close()
    thread.join(HANG_GUARD)


def marked_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], str]:
    """An environment whose every descendant process can be found by a mark in its environ."""
    mark = f"gitmem-test-{uuid.uuid4().hex}"
    return {**SUBPROCESS_ENV, "GITMEM_TEST_MARK": mark, **extra}, mark


def marked_processes(mark: str) -> list[str]:
    """``pid: command line`` of every live process carrying ``mark`` in its environment."""
    found = []
    needle = f"GITMEM_TEST_MARK={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if command:  # a zombie has none: it is gone, only not yet reaped
                    found.append(f"{entry.name}: {command}")
        except OSError:  # exited meanwhile
            continue
    return found


def wait_for(condition, what: str):
    """Poll ``condition()`` until it returns something true (bounded by HANG_GUARD)."""
    deadline = time.monotonic() + HANG_GUARD
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def no_processes_left(mark: str) -> None:
    """Killed process groups disappear as soon as their processes are reaped."""
    left = []

    def gone() -> bool:
        left[:] = marked_processes(mark)
        return not left

    try:
        wait_for(gone, "the marked processes ended")
    except AssertionError:
        raise AssertionError(f"processes left behind: {left}") from None


def fake_ssh(tmp_path: Path, body: str) -> str:
    script = tmp_path / f"fake-ssh-{uuid.uuid4().hex[:8]}"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o700)
    return str(script)


@pytest.mark.parametrize("scheme", ["http", "git", "ssh"])
def test_cli_sync_against_a_remote_that_never_answers_gives_up_and_leaves_nothing(
        scheme, silent_listener, mem, repo_path, tmp_path):
    url = {"http": f"http://127.0.0.1:{silent_listener}/memory.git",
           "git": f"git://127.0.0.1:{silent_listener}/memory.git",
           "ssh": "ssh://memory.example/memory.git"}[scheme]
    mem.engine.remotes.add("origin", url)
    extra = {"GIT_SSH_COMMAND": fake_ssh(tmp_path, "exec sleep 600")} if scheme == "ssh" else {}
    env, mark = marked_env(tmp_path, **extra)
    done = subprocess.run([sys.executable, "-m", "gitmem", "sync", "--timeout", "2", "--repo",
                           str(repo_path)], capture_output=True, text=True, env=env,
                          timeout=HANG_GUARD)
    error = one_line_error(done)
    assert "git fetch origin failed: no answer within 2 s" in error
    no_processes_left(mark)


def test_the_sync_bound_comes_from_git_config(silent_listener, mem, repo_path, tmp_path):
    mem.engine.remotes.add("origin", f"git://127.0.0.1:{silent_listener}/memory.git")
    Git(repo_path)("config", "gitmem.syncTimeout", "1.5")
    env, mark = marked_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "gitmem", "sync", "--repo", str(repo_path)],
                          capture_output=True, text=True, env=env, timeout=HANG_GUARD)
    assert "no answer within 1.5 s" in one_line_error(done)
    no_processes_left(mark)


@pytest.mark.parametrize("said, shown", [
    ("Host key verification failed.", "Host key verification failed."),
    ("git@memory.example: Permission denied (publickey).", "Permission denied (publickey)"),
    ("ssh: Could not resolve hostname memory.example: Name or service not known",
     "Could not resolve hostname memory.example"),
])
def test_ssh_says_why_in_one_line(said, shown, mem, repo_path, tmp_path):
    mem.engine.remotes.add("origin", "ssh://user:hunter2@memory.example/memory.git")
    ssh = fake_ssh(tmp_path, f"echo '{said}' >&2; exit 255")
    done = subprocess.run([sys.executable, "-m", "gitmem", "sync", "--repo", str(repo_path)],
                          capture_output=True, text=True, timeout=HANG_GUARD,
                          env={**SUBPROCESS_ENV, "GIT_SSH_COMMAND": ssh})
    error = one_line_error(done)
    assert shown in error
    assert "hunter2" not in done.stderr


def test_sigterm_of_serve_during_a_stuck_background_fetch_leaves_no_process(
        silent_listener, mem, repo_path, tmp_path):
    mem.engine.remotes.add("origin", f"http://127.0.0.1:{silent_listener}/memory.git")
    env, mark = marked_env(tmp_path)
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path),
                    "--sync-interval", "60"], cwd=tmp_path, env=env)
    with host:
        assert host.call("storage.info", timeout=HANG_GUARD)["name"] == "gitmem"
        wait_for(lambda: [p for p in marked_processes(mark) if "remote-http" in p],
                 "the background fetch is under way")
        host.terminate()
        assert host.wait(HANG_GUARD) == 0
    no_processes_left(mark)


def test_sigterm_of_serve_during_a_background_repack_leaves_no_process(mem, repo_path, tmp_path):
    # git itself, with its repack held up long enough to be caught in the act
    real_git = shutil.which("git")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(
        f'#!/bin/sh\ncase " $* " in *" repack "*) sleep 600;; esac\nexec {real_git} "$@"\n')
    (bin_dir / "git").chmod(0o700)
    loose = "\n".join(f"loose object {n}" for n in range(LOOSE_THRESHOLD))
    for n, line in enumerate(loose.splitlines()):
        (tmp_path / "blobs").mkdir(exist_ok=True)
        (tmp_path / "blobs" / str(n)).write_text(line)
    Git(repo_path)("hash-object", "-w", "--stdin-paths",
                   input="\n".join(str(p) for p in (tmp_path / "blobs").iterdir()) + "\n")
    env, mark = marked_env(tmp_path, PATH=f"{bin_dir}:{SUBPROCESS_ENV['PATH']}")
    with serve_env(repo_path, tmp_path, env) as host:
        assert host.call("storage.userMemory.write", {**USER, "content": "x", "writeMode": "replace"},
                         timeout=HANG_GUARD) == {"ok": True}
        wait_for(lambda: [p for p in marked_processes(mark) if "repack" in p],
                 "the background repack is under way")
        host.terminate()
        assert host.wait(HANG_GUARD) == 0
    no_processes_left(mark)
    # the repack the shutdown ended is no failure: said at INFO, without a traceback
    log = (repo_path / ".git" / "gitmem" / "serve.log").read_text()
    assert " ERROR " not in log and "Traceback" not in log
    assert "background packing ended by the shutdown" in log


def serve_env(repo: Path, tmp_path: Path, env: dict[str, str]) -> NuiHost:
    return NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)], cwd=tmp_path,
                   env=env)


# -- a sync merge and the writers -----------------------------------------------------------


def markdown_blocks(tag: str, count: int) -> list[str]:
    return [f"## {tag} note {i}\nSome text about item {i} from {tag}.\n" for i in range(count)]


def with_inserted(base: list[str], tag: str, count: int, seed: int) -> str:
    rng = random.Random(seed)
    blocks = list(base)
    for block in markdown_blocks(tag, count):
        blocks.insert(rng.randrange(len(blocks) + 1), block)
    return "\n".join(blocks)


def test_writers_never_wait_for_a_large_sync_merge(tmp_path, monkeypatch):
    for key in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, SUBPROCESS_ENV[key])
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    base = markdown_blocks("base", 4000)
    with Gitmem.open(tmp_path / "a") as a:
        a.engine.remotes.add("origin", str(remote))
        a.memory.write("\n".join(base))
        sync(a)
        subprocess.run(["git", "clone", "--quiet", str(remote), str(tmp_path / "b")], check=True,
                       env=SUBPROCESS_ENV)
        a.memory.write(with_inserted(base, "ours", 2000, seed=1))
        sync(a)
    written: list[str] = []
    failures: list[BaseException] = []
    merging = threading.Event()
    done = threading.Event()

    def writer() -> None:
        # Its own process-like view of the repository, with a lock wait far shorter
        # than a quadratic merge of this size took under the lock (11 s).
        with Gitmem.open(tmp_path / "b", create=False, lock_timeout=2.0) as mine:
            merging.wait(HANG_GUARD)
            n = 0
            while not done.is_set() or n < 5:
                try:
                    mine.memory.write(f"write {n}", f"writer-{n}")
                    written.append(f"writer-{n}")
                except BaseException as exc:  # noqa: BLE001 - reported by the test below
                    failures.append(exc)
                    return
                n += 1

    with Gitmem.open(tmp_path / "b", create=False) as b:
        b.memory.write(with_inserted(base, "theirs", 2000, seed=2))
        thread = threading.Thread(target=writer)
        thread.start()
        merging.set()
        try:
            result = sync(b)
        finally:
            done.set()
            thread.join(HANG_GUARD * 3)
        assert failures == []
        assert result.how == "merge"
        merged = b.memory.read()
        for block in markdown_blocks("ours", 2000) + markdown_blocks("theirs", 2000) + base:
            assert block in merged
        for n, agent in enumerate(written):
            assert b.memory.read(agent) == f"write {n}\n"


# -- a repository that cannot be served --------------------------------------------------


def truncate_pack(git: Git) -> None:
    git("gc", "--quiet")
    (pack,) = (git.path / ".git" / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes()
    pack.chmod(0o600)
    pack.write_bytes(data[:len(data) // 2])


@pytest.mark.parametrize("damage", ["truncated HEAD commit", "truncated folder", "truncated pack"])
def test_serve_stays_up_and_says_why_it_cannot_serve(damage, memories, repo_path, tmp_path):
    if damage == "truncated pack":
        truncate_pack(memories)
        named = memories("rev-parse", "HEAD").strip()
    else:
        named = truncate_object(memories, DAMAGED["commit" if "commit" in damage else "tree"])
    with serve(repo_path, tmp_path) as host:
        error = host.error("storage.info", timeout=HANG_GUARD)
        assert error["code"] == -32603
        assert f"gitmem cannot serve {repo_path}" in error["message"]
        assert named in error["message"] and "gitmem fsck" in error["message"]
        again = host.error("storage.userMemory.read", USER, timeout=HANG_GUARD)
        assert again["message"] == error["message"]
        assert host.call("storage.shutdown", timeout=HANG_GUARD) == {"ok": True}
        assert host.wait(HANG_GUARD) == 1
    log = (repo_path / ".git" / "gitmem" / "serve.log").read_text()
    assert f"not serving: {error['message']}" in log


# -- one broken file ---------------------------------------------------------------------


@pytest.fixture
def broken_meta(repo_path: Path) -> tuple[Git, list[str]]:
    """Two sessions and two threads, one of each with a ``meta.json`` broken by a plain
    git commit; returns the broken files."""
    with Gitmem.open(repo_path) as mem:
        for session_id in ("good", "bad"):
            mem.sessions.write("claude-code", session_id, [{"role": "user", "content": "hi"}])
        for thread_id in ("good", "bad"):
            mem.threads.append_events(thread_id, "planner", [{"type": "RUN_STARTED"}])
    git = Git(repo_path)
    broken = ["sessions/claude-code/bad/meta.json", "threads/bad/meta.json"]
    for path in broken:
        (repo_path / path).write_text('{"agentType": "claude-code", "sessi')
    git("commit", "-q", "-am", "a bad edit, committed by hand")
    return git, broken


def test_a_broken_meta_json_hides_no_other_record(broken_meta, repo_path, tmp_path):
    _, broken = broken_meta
    listed = gitmem(repo_path, "session", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == "claude-code\tgood\n"
    warnings = listed.stderr.splitlines()
    assert len(warnings) == 1 and broken[0] in warnings[0], listed.stderr

    status = gitmem(repo_path, "status")
    assert status.returncode == 0, status.stderr
    for path in broken:
        assert f"unreadable  {path} line 1: " in status.stdout

    fsck = gitmem(repo_path, "fsck")
    assert fsck.returncode == 1
    for path in broken:
        assert f"problem: {path} (HEAD): not JSON" in fsck.stdout

    with serve(repo_path, tmp_path) as host:
        threads = host.call("threads.list", {}, timeout=HANG_GUARD)["threads"]
        assert [t["id"] for t in threads] == ["good"]
        host.close_stdin()
        assert host.wait(HANG_GUARD) == 0
    log = (repo_path / ".git" / "gitmem" / "serve.log").read_text()
    assert f"skipping {broken[1]}: " in log


# -- a read-only repository --------------------------------------------------------------


@pytest.fixture
def read_only_view(repo_path: Path, tmp_path: Path):
    """The repository seen through a read-only bind mount (as another user's memory is)."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("likes tea")
    view = tmp_path / "read-only"
    view.mkdir()
    for command in (["mount", "--bind", str(repo_path), str(view)],
                    ["mount", "-o", "remount,ro,bind", str(view)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(view)], capture_output=True)
            pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")
    try:
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def test_a_read_only_repository_is_read_and_refuses_writes_in_one_line(read_only_view, tmp_path):
    before = sorted(p.name for p in (read_only_view / ".git" / "gitmem").iterdir())
    assert gitmem(read_only_view, "memory", "read", "--user").stdout == "likes tea\n"
    for command in (("log",), ("session", "list"), ("status",)):
        done = gitmem(read_only_view, *command)
        assert done.returncode == 0 and done.stderr == "", (command, done.stderr)
    refused = one_line_error(gitmem(read_only_view, "memory", "write", "--user", input="tabs"))
    assert "cannot write here: Read-only file system" in refused
    assert len(gitmem(read_only_view, "memory", "write", "--user", input="x").stderr.splitlines()) == 1

    with serve(read_only_view, tmp_path) as host:
        assert host.call("storage.userMemory.read", USER, timeout=HANG_GUARD) == {"content": "likes tea\n"}
        error = host.error("storage.userMemory.write", {**USER, "content": "tabs"}, timeout=HANG_GUARD)
        assert error["code"] == -32603 and "cannot write here" in error["message"]
        host.close_stdin()
        assert host.wait(HANG_GUARD) == 0
    assert sorted(p.name for p in (read_only_view / ".git" / "gitmem").iterdir()) == before


# -- a full disk, a folder where a file belongs ----------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MB tmpfs (skipped where the test may not mount one)."""
    disk = tmp_path / "small-disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_full_disk_is_one_line_and_loses_nothing(small_disk):
    repo = small_disk / "repo"
    with Gitmem.open(repo) as mem:
        mem.memory.write("likes tea")
        mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}])
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as out:  # every byte the disk has left
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    attempts = [("memory", "write", "--user"), ("memory", "write", "--agent", "big"),
                ("session", "write", "claude-code", "s2")]
    inputs = ["short answers", "x" * 300_000, '{"messages": [{"role": "user", "content": "hello"}]}']
    for args, text in zip(attempts, inputs, strict=True):
        error = one_line_error(gitmem(repo, *args, input=text))
        assert "is full" in error and "nothing was committed" in error, error
    assert gitmem(repo, "memory", "read", "--user").stdout == "likes tea\n"
    filler.unlink()
    Git(repo).fsck()
    assert gitmem(repo, "memory", "write", "--user", input="short answers").returncode == 0
    assert gitmem(repo, "memory", "read", "--user").stdout == "short answers\n"
    assert gitmem(repo, "session", "list").stdout == "claude-code\ts1\n"


def test_a_folder_where_a_memory_file_belongs_is_no_traceback(mem, repo_path):
    mem.memory.write("use tabs", "x")
    file = repo_path / "memory" / "agents" / "x.md"
    file.unlink()
    file.mkdir()
    (file / "notes").write_text("a person's file")
    for command in (("memory", "read", "--agent", "x"), ("status",), ("log",)):
        done = gitmem(repo_path, *command)
        assert "Traceback" not in done.stderr and "is a directory" not in done.stderr.lower(), done.stderr
        assert done.returncode == 0, (command, done.stderr)
    assert gitmem(repo_path, "memory", "read", "--agent", "x").stdout == "use tabs\n"
    assert gitmem(repo_path, "memory", "write", "--agent", "x", input="use spaces").returncode == 0
    assert gitmem(repo_path, "memory", "read", "--agent", "x").stdout == "use spaces\n"
    assert (file / "notes").read_text() == "a person's file"


def test_a_warning_with_an_exception_is_one_line_on_the_cli(mem, repo_path):
    # The stat cache cannot be saved over a folder: gitmem warns, with the exception.
    cache = repo_path / ".git" / "gitmem" / "stat-cache"
    cache.unlink(missing_ok=True)
    cache.mkdir()
    done = gitmem(repo_path, "memory", "write", "--user", input="x" * 10_000)
    assert done.returncode == 0
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("gitmem: could not save the stat cache") and line.endswith(": is a directory")


def test_memory_list_lists_every_memory_when_one_file_is_damaged(memories, repo_path):
    oid = truncate_object(memories, "HEAD:memory/agents/a1.md")
    done = gitmem(repo_path, "memory", "list")
    assert done.returncode == 0 and "Traceback" not in done.stderr
    rows = {line.split("\t")[0]: line.split("\t")[1] for line in done.stdout.splitlines()}
    assert rows == {"user": "10", "agent:a1": "?"}  # its size cannot be read
    assert oid in done.stderr and "memory/agents/a1.md" in done.stderr
