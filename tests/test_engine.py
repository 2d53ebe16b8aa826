"""The git engine on real repositories: commits, reads, history, work tree, index, locks, recovery."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import time

import pytest

from conftest import Git, python_script
from gitmem.git.base import EngineError, Identity, UnsafePath
from gitmem.git.engine import GitEngine
from gitmem.git.lock import LockTimeout


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


MAX_ENGINE_METHODS = 35  # issue 44: the engine shows its parts instead of forwarding to them


def test_the_engine_shows_its_parts_instead_of_forwarding_to_them(tmp_path):
    with GitEngine.open(tmp_path / "repo") as engine:
        parts = {name: type(getattr(engine, name)).__name__
                 for name in ("log", "worktree", "index", "remotes", "pack", "refs", "journal")}
    assert parts == {"log": "History", "worktree": "WorkTree", "index": "Index", "remotes": "Remotes",
                     "pack": "Packer", "refs": "Refs", "journal": "Journal"}
    methods = [name for name, value in vars(GitEngine).items()
               if callable(value) or isinstance(value, (property, classmethod, staticmethod))]
    assert len(methods) <= MAX_ENGINE_METHODS, sorted(methods)


# -- opening -------------------------------------------------------------------------


def test_open_creates_a_non_bare_repository_on_main(tmp_path):
    path = tmp_path / "new"
    with GitEngine.open(path) as engine:
        assert engine.head() is None
        assert engine.snapshot().read("anything") is None
        assert engine.log.history() == []
    git = Git(path)
    assert git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git("rev-parse", "--is-bare-repository").strip() == "false"
    assert mode(path) == 0o700


def test_open_without_create_refuses_a_missing_repository(tmp_path):
    with pytest.raises(EngineError, match="gitmem init"):
        GitEngine.open(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()


def test_open_refuses_a_bare_repository(tmp_path):
    Git(tmp_path)("init", "--bare", "-q", str(tmp_path / "bare"))
    with pytest.raises(EngineError, match="bare"):
        GitEngine.open(tmp_path / "bare")


# -- commits -------------------------------------------------------------------------


def test_commit_makes_one_commit_with_trailers(engine, git):
    before = git.count()
    commit = engine.commit({"notes/a.md": b"alpha\n", "notes/deep/b.md": b"beta\n"},
                           "test: two files", {"Gitmem-Op": "test.write", "Gitmem-Id": "x\ny"})
    assert commit == engine.head() == git("rev-parse", "HEAD").strip()
    assert git.count() == before + 1
    assert sorted(git.changed()) == ["notes/a.md", "notes/deep/b.md"]
    message = git("log", "-1", "--format=%B")
    assert message.startswith("test: two files\n\n")
    assert git("log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "test.write"
    assert "Gitmem-Id: x\\ny" in message  # a value stays on one line
    info = engine.log.commit_info("HEAD")
    assert info.summary == "test: two files"
    assert info.trailers == {"Gitmem-Op": "test.write", "Gitmem-Id": "x\\ny"}
    assert (engine.workdir / "notes/deep/b.md").read_bytes() == b"beta\n"


def test_a_message_with_nul_or_lone_surrogate_keeps_its_trailers(engine, git):
    engine.commit({"f": b"1"}, "id \0 and \ud800", {"Gitmem-Op": "test", "Gitmem-Id": "\0\ud800"})
    assert git.log(fmt="%s")[0] == "id \\0 and \\ud800"
    assert engine.log.commit_info("HEAD").trailers == {"Gitmem-Op": "test", "Gitmem-Id": "\\0\\ud800"}


def test_snapshot_reads_lists_and_ids(engine, git):
    engine.commit({"d/a.md": b"A", "d/sub/b.md": b"B"}, "two")
    snap = engine.snapshot()
    assert snap.id == engine.head()
    assert snap.read("d/a.md") == b"A"
    assert snap.read("d") is None and snap.read("d/missing") is None
    assert snap.exists("d") and snap.exists("d/sub/b.md") and not snap.exists("nope")
    assert snap.list("d") == ["a.md", "sub"]
    assert snap.list("d/a.md") == [] and snap.list("nope") == []
    assert sorted(snap.files("d")) == ["d/a.md", "d/sub/b.md"]
    assert snap.blob_id("d/a.md") == git("rev-parse", "HEAD:d/a.md").strip()
    assert snap.blob_id("d") is None
    assert snap.tree_id("d") == git("rev-parse", "HEAD:d").strip()
    assert snap.tree_id("") == git("rev-parse", "HEAD^{tree}").strip()
    assert snap.tree_id("d/a.md") is None


def test_snapshot_at_a_revision_and_commit_at(engine):
    first = engine.commit({"f": b"1"}, "one")
    second = engine.commit({"f": b"2"}, "two")
    assert engine.snapshot(first).read("f") == b"1"
    assert engine.snapshot("HEAD~1").read("f") == b"1"
    assert engine.snapshot().read("f") == b"2"
    assert str(engine.resolve("HEAD")) == second
    assert engine.log.commit_at(time.time() + 60) == second
    assert engine.log.commit_at(0) is None
    with pytest.raises(EngineError, match="unknown revision"):
        engine.snapshot("no-such-branch")


def test_read_parsed_is_cached_by_blob_id(engine):
    engine.commit({"a": b"same", "b": b"same"}, "two files, one blob")
    calls = []

    def parse(data: bytes) -> str:
        calls.append(data)
        return data.decode().upper()

    snap = engine.snapshot()
    assert snap.read_parsed("a", parse) == "SAME"
    assert snap.read_parsed("b", parse) == "SAME"
    assert engine.snapshot().read_parsed("a", parse) == "SAME"
    assert calls == [b"same"]
    assert snap.read_parsed("missing", parse) is None


def test_identical_write_and_missing_delete_make_no_commit(engine, git):
    engine.commit({"f": b"x"}, "one")
    count = git.count()
    assert engine.commit({"f": b"x"}, "again") is None
    assert engine.commit({"gone": None}, "delete nothing") is None
    assert engine.commit({}, "no changes") is None
    assert engine.update(lambda snapshot: None, "nothing") is None
    assert git.count() == count


def test_delete_removes_file_and_empty_folders(engine, git):
    engine.commit({"a/b/c.md": b"c", "a/keep.md": b"k"}, "add")
    engine.commit({"a/b/c.md": None}, "delete")
    assert git.changed() == ["a/b/c.md"]
    assert not (engine.workdir / "a/b").exists()
    assert (engine.workdir / "a/keep.md").exists()
    engine.commit({"a/keep.md": None}, "delete the last one")
    assert not (engine.workdir / "a").exists()
    assert git("ls-tree", "-r", "--name-only", "HEAD", "a").strip() == ""


def test_changed_files_to_no_commit_are_every_file_gone(engine, git):
    commit = engine.commit({"a.md": b"a", "notes/b.md": b"b"}, "add")
    added = engine.log.changed_files(None, commit)
    assert added["notes/b.md"] == (None, git("rev-parse", "HEAD:notes/b.md").strip())
    assert engine.log.changed_files(commit, None) == {path: (new, old) for path, (old, new) in added.items()}


def test_deleting_every_file_leaves_an_empty_tree(tmp_path):
    with GitEngine.open(tmp_path / "r") as engine:
        engine.commit({"only": b"1"}, "add")
        assert engine.commit({"only": None}, "remove") is not None
        assert engine.snapshot().list() == []
    assert Git(tmp_path / "r")("ls-tree", "HEAD").strip() == ""


def test_update_sees_the_tip_under_the_lock(engine):
    engine.commit({"n": b"0"}, "start")
    for _ in range(5):
        engine.update(lambda snap: {"n": str(int(snap.read("n")) + 1).encode()}, "increment")
    assert engine.snapshot().read("n") == b"5"


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/abs", ".git/config", ".GIT/hooks/x",
                                  "a//b", "a/./b", "a\\b", "nul\0byte", "", "a/"])
def test_unsafe_paths_are_refused_without_a_commit(engine, git, path):
    count = git.count()
    with pytest.raises(UnsafePath):
        engine.commit({path: b"x"}, "bad")
    assert git.count() == count
    assert not (engine.workdir.parent / "x").exists()


def test_a_path_that_is_file_and_folder_at_once_is_refused(engine):
    with pytest.raises(UnsafePath):
        engine.commit({"a": b"file", "a/b": b"below"}, "both")


# -- identity ------------------------------------------------------------------------


def test_default_identity_names_the_machine(engine, git):
    engine.commit({"f": b"1"}, "one")
    host = socket.gethostname()
    assert git.log(fmt="%an|%ae|%cn|%ce")[0] == f"gitmem ({host})|gitmem@{host}|gitmem ({host})|gitmem@{host}"


def test_configured_identity_and_explicit_author(repo_path, mem, git):
    git("config", "gitmem.name", "Memory Bot")
    git("config", "gitmem.email", "bot@example.org")
    with GitEngine.open(repo_path) as engine:
        engine.commit({"f": b"1"}, "as configured")
        engine.commit({"f": b"2"}, "by a person", author=Identity("Ada", "ada@example.org"))
    assert git.log(fmt="%an|%ae|%cn|%ce")[:2] == [
        "Ada|ada@example.org|Memory Bot|bot@example.org",
        "Memory Bot|bot@example.org|Memory Bot|bot@example.org",
    ]


def test_user_identity_and_config_come_from_git_config(engine, git):
    git("config", "user.name", "Ada Lovelace")
    git("config", "user.email", "ada@example.org")
    git("config", "gitmem.custom", "value")
    assert engine.user_identity() == Identity("Ada Lovelace", "ada@example.org")
    assert engine.config_get("gitmem.custom") == "value"
    assert engine.config_get("gitmem.missing") is None


def test_worktree_id_matches_git(engine, git):
    (engine.workdir / "loose.md").write_bytes(b"not committed\n")
    assert engine.worktree.file_id("loose.md") == git("hash-object", "loose.md").strip()
    assert engine.worktree.file_id("missing.md") is None


# -- history -------------------------------------------------------------------------


def test_history_of_a_path_newest_first(engine, git):
    ids = [engine.commit({"a": f"{i}".encode()}, f"a {i}") for i in range(3)]
    other = engine.commit({"b": b"b"}, "b")
    ids.append(engine.commit({"a": None}, "a deleted"))
    history = engine.log.history("a")
    assert [c.id for c in history] == ids[::-1]
    assert [c.summary for c in history][:2] == ["a deleted", "a 2"]
    assert [c.id for c in engine.log.history("b")] == [other]
    assert [c.id for c in engine.log.history()] == git.log()
    assert [c.id for c in engine.log.history("a", limit=2)] == ids[::-1][:2]
    assert engine.log.history("never") == []


def test_history_of_a_folder(engine):
    first = engine.commit({"s/x/1.jsonl": b"1"}, "one")
    engine.commit({"elsewhere": b"e"}, "other")
    second = engine.commit({"s/x/meta.json": b"{}"}, "two")
    assert [c.id for c in engine.log.history("s/x")] == [second, first]


# -- the work tree -------------------------------------------------------------------


def test_files_are_private(engine):
    engine.commit({"memory/agents/a.md": b"a", "sessions/t/s/meta.json": b"{}"}, "add")
    root = engine.workdir
    for folder in ("memory", "memory/agents", "sessions", "sessions/t", "sessions/t/s"):
        assert mode(root / folder) == 0o700, folder
    for file in ("memory/agents/a.md", "sessions/t/s/meta.json"):
        assert mode(root / file) == 0o600, file
    engine.commit({"memory/agents/a.md": b"again"}, "replace")
    assert mode(root / "memory/agents/a.md") == 0o600


def test_a_symlinked_folder_is_never_written_through(engine, git, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (engine.workdir / "memory").symlink_to(outside, target_is_directory=True)
    commit = engine.commit({"memory/agents/a.md": b"secret"}, "write below a symlink")
    assert commit is not None  # the commit holds the write ...
    assert engine.snapshot().read("memory/agents/a.md") == b"secret"
    assert list(outside.iterdir()) == []  # ... and nothing went through the link
    engine.commit({"memory/agents/a.md": None}, "delete below a symlink")
    engine.close()
    with GitEngine.open(engine.workdir) as reopened:  # recovery does not write through it either
        assert reopened.head() == engine.head()
    assert list(outside.iterdir()) == []


def test_a_symlinked_file_is_replaced_not_followed(engine, tmp_path):
    target = tmp_path / "target.md"
    target.write_text("outside\n")
    link = engine.workdir / "user.md"
    link.symlink_to(target)
    engine.commit({"user.md": b"inside\n"}, "replace")
    assert target.read_text() == "outside\n"
    assert not link.is_symlink() and link.read_text() == "inside\n"


def test_a_write_leaves_no_temporary_files(engine, git):
    for i in range(5):
        engine.commit({"f": str(i).encode()}, "w")
    engine.close()
    assert list((engine.private_dir / "tmp").iterdir()) == []
    assert git.status() == ""


# -- the index -----------------------------------------------------------------------


def test_status_is_clean_after_close(repo_path, git):
    with GitEngine.open(repo_path) as engine:
        for i in range(20):
            engine.commit({f"d{i % 3}/f{i}.md": b"x" * i, "d0/f0.md": str(i).encode()}, f"w{i}")
        engine.commit({"d1/f1.md": None}, "delete")
    assert git.status() == ""
    assert git("diff", "--cached", "--name-only") == ""


def test_status_is_clean_within_two_seconds_without_close(repo_path, git):
    engine = GitEngine.open(repo_path)
    try:
        engine.commit({"a.md": b"1", "b/c.md": b"2"}, "first")
        engine.commit({"a.md": b"changed", "b/c.md": None}, "second")
        written = time.monotonic()
        while git.status(optional_locks=False) != "" and time.monotonic() - written < 2.0:
            time.sleep(0.05)
        assert git.status(optional_locks=False) == ""
        assert engine.index.in_step()
    finally:
        engine.close()


def test_refresh_index_keeps_a_hand_edit_visible(engine, git):
    engine.commit({"f.md": b"committed\n"}, "one")
    engine.close()
    (engine.workdir / "f.md").write_text("hand edit\n")
    engine.index.refresh()
    assert git.status() == " M f.md\n"
    assert engine.index.in_step()


# -- locks ---------------------------------------------------------------------------

HOLD_LOCK = """
import sys, time
from gitmem.git.engine import GitEngine
engine = GitEngine.open(sys.argv[1])
engine.commit({"held": b"by a process about to die"}, "before the kill")
with engine.lock:
    print("locked", flush=True)
    time.sleep(60)
"""


def test_a_killed_lock_holder_does_not_block_the_next_writer(repo_path, mem, git):
    waiting = GitEngine.open(repo_path, lock_timeout=0.2)
    holder = python_script(HOLD_LOCK, str(repo_path))
    try:
        assert holder.stdout.readline() == "locked\n"
        started = time.monotonic()
        with pytest.raises(LockTimeout, match="another gitmem writer"):
            waiting.commit({"f": b"blocked"}, "must wait")
        assert time.monotonic() - started < 2  # bounded: an error, never a hang
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with waiting:
        assert waiting.commit({"f": b"after the kill"}, "same writer, next try") is not None
    with GitEngine.open(repo_path, lock_timeout=0.2) as engine:
        assert engine.commit({"f": b"a new process"}, "next writer") is not None
    assert git.count("held") == 1
    git.fsck()
    assert git.status() == ""


def test_a_stale_git_ref_lock_is_removed_on_open(repo_path, mem, git):
    mem.memory.write("one")
    mem.close()
    stale = repo_path / ".git/refs/heads/main.lock"
    stale.write_text("left by a killed process\n")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    with GitEngine.open(repo_path) as engine:
        assert engine.commit({"f": b"works"}, "after a stale lock") is not None
    assert not stale.exists()


# -- recovery ------------------------------------------------------------------------


def test_recovery_finishes_an_interrupted_write_and_keeps_hand_edits(repo_path, git):
    """A writer killed after moving the ref but before the work tree: rebuild that state."""
    with GitEngine.open(repo_path) as engine:
        engine.commit({"user.md": b"one\n", "gone.md": b"bye\n", "edited.md": b"v1\n"}, "before")
    index = repo_path / ".git/index"
    saved_index = index.read_bytes()
    with GitEngine.open(repo_path) as engine:
        engine.commit({"user.md": b"two\n", "new.md": b"new\n", "gone.md": None,
                       "edited.md": b"v2\n"}, "the write that was cut short")
    # Undo the work-tree step and the index refresh, as a SIGKILL after the ref moved leaves them.
    (repo_path / "user.md").write_bytes(b"one\n")
    (repo_path / "new.md").unlink()
    (repo_path / "gone.md").write_bytes(b"bye\n")
    (repo_path / "edited.md").write_bytes(b"a hand edit\n")  # neither the old nor the new version
    index.write_bytes(saved_index)
    assert git.status() != ""

    with GitEngine.open(repo_path):
        pass
    assert (repo_path / "user.md").read_bytes() == b"two\n"
    assert (repo_path / "new.md").read_bytes() == b"new\n"
    assert not (repo_path / "gone.md").exists()
    assert (repo_path / "edited.md").read_bytes() == b"a hand edit\n"
    assert git.status() == " M edited.md\n"
    git.fsck()


def test_leftover_temporary_files_of_dead_processes_are_removed(repo_path):
    with GitEngine.open(repo_path) as engine:
        engine.commit({"f": b"1"}, "one")
    tmp = repo_path / ".git/gitmem/tmp"
    dead = python_script("import os; print(os.getpid())")
    dead_pid = dead.communicate()[0].strip()
    (tmp / f"{dead_pid}-1-1").write_bytes(b"half a file")
    (tmp / f"{os.getpid()}-1-1").write_bytes(b"a live writer's file")
    with GitEngine.open(repo_path):
        pass
    assert sorted(p.name for p in tmp.iterdir()) == [f"{os.getpid()}-1-1"]
    (tmp / f"{os.getpid()}-1-1").unlink()


def test_recovery_after_the_repository_was_moved(tmp_path):
    with GitEngine.open(tmp_path / "a") as engine:
        engine.commit({"f.md": b"x"}, "one")
    shutil.move(tmp_path / "a", tmp_path / "b")
    with GitEngine.open(tmp_path / "b") as engine:
        assert engine.snapshot().read("f.md") == b"x"
    assert Git(tmp_path / "b").status() == ""
