"""Hand edits: files saved on disk the way editors save them, committed as the person.

No watcher here (see test_watch.py): these edits are found by the read or write of
the record, and by ``gitmem status``.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from pathlib import Path

import pytest

from conftest import python_script
from gitmem.edits.handedits import HandEdits, check, is_watched
from gitmem.git import worktree as engine_module
from gitmem.repository import Gitmem
from gitmem.stores.memory import join_blocks

PERSON = ("Pat Person", "pat@example.org")


@pytest.fixture
def person(git):
    """The user's git identity, as ``git config user.name/user.email`` in the repository."""
    git("config", "user.name", PERSON[0])
    git("config", "user.email", PERSON[1])
    return PERSON


# -- how editors save -------------------------------------------------------------


def write_in_place(path: Path, text: str) -> None:
    """Overwrite the bytes of the file itself, then cut it to length (no truncation first)."""
    with open(path, "r+b" if path.exists() else "wb") as file:
        file.write(text.encode())
        file.truncate()


def truncate_then_write(path: Path, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def temp_then_rename(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{random.randrange(10**6)}")
    tmp.write_text(text)
    os.replace(tmp, path)


def vim_style(path: Path, text: str) -> None:
    """vim with backupcopy=no: a write test file, the original renamed to a backup, a new file."""
    probe = path.with_name("4913")
    probe.write_text("")
    probe.unlink()
    swap = path.with_name(f".{path.name}.swp")
    swap.write_text("swap")
    backup = path.with_name(path.name + "~")
    if path.exists():
        os.rename(path, backup)
    path.write_text(text)
    if backup.exists():
        backup.unlink()
    swap.unlink()  # when vim quits


SAVES = {"write_in_place": write_in_place, "truncate_then_write": truncate_then_write,
         "temp_then_rename": temp_then_rename, "vim_style": vim_style}


def hand_commits(mem: Gitmem):
    return [c for c in mem.engine.log.history() if c.trailers.get("Gitmem-Op") == "hand-edit"]


def content_at(mem: Gitmem, commit: str, path: str) -> str | None:
    data = mem.engine.snapshot(commit).read(path)
    return None if data is None else data.decode()


# -- read your own edits ----------------------------------------------------------


@pytest.mark.parametrize("save", SAVES.values(), ids=SAVES.keys())
def test_an_editor_save_is_committed_once_as_the_person_and_read_back(mem, person, git, save):
    mem.memory.write("likes tea")
    before = git.count()
    save(mem.engine.worktree.path("memory/user.md"), "likes coffee now\n")

    assert mem.memory.read() == "likes coffee now\n"
    assert mem.memory.read() == "likes coffee now\n"
    assert git.count() == before + 1
    (edit,) = hand_commits(mem)
    assert (edit.author, edit.email) == person
    assert edit.summary == "hand edit: memory/user.md"
    assert "edited: memory/user.md" in edit.message
    assert git.changed() == ["memory/user.md"]  # no swap, backup or temp file came along
    mem.engine.index.refresh()
    assert git.status() == ""


def test_a_new_agent_file_made_by_hand_is_that_agents_memory(mem, person):
    path = mem.engine.worktree.path("memory/agents/helper.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# helper\nbe brief\n")
    assert mem.memory.read("helper") == "# helper\nbe brief\n"
    assert "helper" in mem.memory.agents()
    assert "new: memory/agents/helper.md" in hand_commits(mem)[0].message


def test_deleting_an_agents_memory_by_hand_is_a_deletion_commit(mem, person, git):
    mem.memory.write("remember the build steps", "reviewer")
    mem.engine.worktree.path("memory/agents/reviewer.md").unlink()
    assert mem.memory.read("reviewer") == ""
    (edit,) = hand_commits(mem)
    assert "deleted: memory/agents/reviewer.md" in edit.message
    assert git("show", "--name-status", "--format=", edit.id).split() == ["D", "memory/agents/reviewer.md"]
    assert "reviewer" not in mem.memory.agents()


def test_a_session_edited_by_hand_reads_back(mem, person):
    mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}], "resume-1")
    chunk = mem.engine.worktree.path("sessions/claude-code/s1/messages/000000.jsonl")
    chunk.write_text('{"role":"user","content":"hello"}\n')
    assert mem.sessions.read("claude-code", "s1") == ([{"role": "user", "content": "hello"}], "resume-1")
    assert len(hand_commits(mem)) == 1


def test_editor_by_products_and_symlinks_are_never_committed(mem, person, git, tmp_path):
    mem.memory.write("x")
    folder = mem.engine.worktree.path("memory")
    for name in (".user.md.swp", ".user.md.swx", "user.md~", "4913", "draft.tmp", ".#user.md",
                 "#user.md#", "user.md___jb_tmp___", ".DS_Store"):
        (folder / name).write_text("by-product")
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the repository")
    (folder / "agents").mkdir()
    (folder / "agents" / "evil.md").symlink_to(secret)
    before = git.count()

    assert mem.memory.read() == "x\n" and mem.memory.read("evil") == ""
    assert HandEdits.of(mem.engine).commit_pending() is None
    assert git.count() == before
    assert HandEdits.of(mem.engine).scan().pending == []


def test_files_outside_the_layout_folders_are_not_watched():
    assert is_watched("memory/user.md") and is_watched("sessions/a/b/meta.json")
    assert is_watched("threads/t1/events/000000.jsonl") and is_watched("memory")
    for path in ("README.md", ".gitattributes", "notes/x.md", ".git/index", "memory/.x.md",
                 "memory/agents/a.md~", "sessions/a/.b/meta.json"):
        assert not is_watched(path), path


# -- never clobber ----------------------------------------------------------------


def test_an_api_append_goes_after_the_edited_text(mem, person, git):
    mem.memory.write("one")
    temp_then_rename(mem.engine.worktree.path("memory/user.md"), "one, edited\n")
    mem.memory.write("two", mode="append")
    assert mem.memory.read() == "one, edited\n\ntwo\n"
    ops = [c.trailers["Gitmem-Op"] for c in mem.engine.log.history("memory/user.md")]
    assert ops[:2] == ["memory.append", "hand-edit"]


@pytest.mark.parametrize("save", SAVES.values(), ids=SAVES.keys())
def test_a_person_who_takes_an_agents_addition_out_again_keeps_the_older_text(mem, person, save):
    """A save equal to an older version, where the file held a newer one, is a person's
    edit (a revert), not gitmem's stale file: it was taken for one and written over."""
    mem.memory.write("one")
    mem.memory.write("two", mode="append")
    save(mem.engine.worktree.path("memory/user.md"), "one\n")
    assert mem.memory.read() == "one\n"
    (edit,) = hand_commits(mem)
    assert content_at(mem, edit.id, "memory/user.md") == "one\n"


def test_an_api_replace_keeps_an_edit_it_never_saw_and_replaces_one_it_read(mem, person):
    """The writer's base is what it has seen (issue 43): its own "one", not the person's edit."""
    mem.memory.write("one")
    truncate_then_write(mem.engine.worktree.path("memory/user.md"), "edited\n")
    mem.memory.write("replaced")
    assert mem.memory.read() == "edited\n\nreplaced\n"
    (edit,) = hand_commits(mem)
    assert content_at(mem, edit.id, "memory/user.md") == "edited\n"
    mem.memory.write("replaced again")  # it read the edit: a replace
    assert mem.memory.read() == "replaced again\n"


def test_a_same_size_save_right_after_a_write_is_seen(mem, person):
    """gitmem dates the files it writes seconds back, so their stat data vouches for them
    without a read: a save changes the mtime, even one in place, of the same size, made
    right after the write (within a coarse clock's tick, where stat data alone could not
    tell the two apart)."""
    path = mem.engine.worktree.path("memory/user.md")
    for i in range(20):
        mem.memory.write(f"gitmem {i:03d}")
        write_in_place(path, f"person {i:03d}\n")  # as long as what gitmem wrote
        assert mem.memory.read() == f"person {i:03d}\n"
    assert len(hand_commits(mem)) == 20


def save_keeping_stat_data(path: Path, text: str) -> None:
    """A save that leaves size and mtime as they were (an editor restoring the mtime, a
    `touch -r`): only the ctime, which no program can set, tells it apart."""
    before = os.lstat(path)
    write_in_place(path, text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


BIG = "x" * 40_000  # the stat data of files this big is kept for the next process


def test_stat_data_is_kept_for_the_next_process_and_a_later_save_still_seen(mem, repo_path, person):
    """What stat data vouches for is saved in .git/gitmem/ at close (for files big enough
    to be worth it), so the next process hashes nothing it already knows; a save made in
    between changes the ctime, however like the old file it is, and is committed before a
    read."""
    mem.memory.write(BIG + "1")
    mem.memory.write(BIG + "2", "a")
    mem.memory.write("small", "b")
    mem.close()
    saved = (repo_path / ".git" / "gitmem" / "stat-cache").read_text()
    assert " memory/user.md\n" in saved and " memory/agents/a.md\n" in saved
    assert "memory/agents/b.md" not in saved
    save_keeping_stat_data(repo_path / "memory" / "user.md", BIG + "3\n")
    with Gitmem.open(repo_path) as mem:
        assert mem.memory.read() == BIG + "3\n"
        assert mem.memory.read("a") == BIG + "2\n"
        (edit,) = hand_commits(mem)
        assert content_at(mem, edit.id, "memory/user.md") == BIG + "3\n"


def test_a_read_takes_the_work_tree_file_only_while_its_stat_data_vouches_for_it(repo_path):
    """Reading HEAD takes a file from the work tree instead of inflating it when the stat
    cache vouches that it holds HEAD's version, checked again after the read: a file
    changed since is never mistaken for HEAD's."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write(BIG + "committed")
    assert " memory/user.md\n" in (repo_path / ".git" / "gitmem" / "stat-cache").read_text()
    save_keeping_stat_data(repo_path / "memory" / "user.md", BIG + "edited!!!\n")
    with Gitmem.open(repo_path) as mem:  # no scope: the edit is not committed first
        assert mem.engine.snapshot().read("memory/user.md") == (BIG + "committed\n").encode()


def test_a_damaged_stat_cache_costs_a_hash_and_nothing_else(mem, repo_path, person):
    mem.memory.write(BIG + "committed")
    mem.close()
    cache = repo_path / ".git" / "gitmem" / "stat-cache"
    cache.write_text("not an entry\n" + cache.read_text()[:30] + "\n\0\xff junk\n")
    write_in_place(repo_path / "memory" / "user.md", BIG + "edited!!!\n")
    with Gitmem.open(repo_path) as mem:
        assert mem.memory.read() == BIG + "edited!!!\n"
    assert " memory/user.md\n" in cache.read_text()  # written afresh at close


@pytest.fixture(params=["renameat2", "plain rename"])
def swapping(request, monkeypatch):
    """Both ways the engine guards a file: an atomic swap, and check-then-rename where
    the system has no renameat2 (macOS, some file systems)."""
    if request.param == "plain rename":
        monkeypatch.setattr(engine_module, "_libc_renameat2", None)
    return request.param


@pytest.mark.parametrize("save", [write_in_place, temp_then_rename, os.unlink],
                         ids=["in_place", "rename", "delete"])
def test_a_save_landing_during_a_write_is_never_overwritten(mem, person, save, swapping):
    """The save comes after the write checked for edits and before it wrote the file."""
    mem.memory.write("before")
    path = mem.engine.worktree.path("memory/user.md")

    def changes(snapshot):
        save(path) if save is os.unlink else save(path, "saved meanwhile\n")
        return {"memory/user.md": b"from the api\n"}

    mem.engine.update(changes, "memory: replace", scope="memory/user.md")
    assert content_at(mem, "HEAD", "memory/user.md") == "from the api\n"
    saved = "" if save is os.unlink else "saved meanwhile\n"
    assert (path.read_text() if path.exists() else "") == saved
    # The save was made from "before": merged onto the write it never saw, keeping both.
    if save is os.unlink:  # deleting what the person had keeps what they never saw
        assert mem.memory.read() == "from the api\n"
        assert path.read_text() == "from the api\n"
    else:
        assert mem.memory.read() == "from the api\n\nsaved meanwhile\n"
        assert path.read_text() == "from the api\n\nsaved meanwhile\n"
        assert hand_commits(mem)[0].id == mem.engine.head()


def test_a_deletion_never_removes_a_file_saved_meanwhile(mem, person, swapping):
    mem.memory.write("doomed", "a")
    path = mem.engine.worktree.path("memory/agents/a.md")

    def changes(snapshot):
        temp_then_rename(path, "rescued\n")
        return {"memory/agents/a.md": None}

    mem.engine.update(changes, "memory: delete", scope="memory/agents/a.md")
    assert path.read_text() == "rescued\n"
    assert mem.memory.read("a") == "rescued\n"


def test_clearing_every_thread_commits_their_hand_edits_first(mem, person):
    mem.threads.append_events("t1", "agent", [{"type": "RUN_STARTED"}])
    events = '{"type":"RUN_STARTED"}\n{"type":"RUN_FINISHED"}\n'
    mem.engine.worktree.path("threads/t1/events/000000.jsonl").write_text(events)
    mem.threads.clear()
    assert mem.threads.read_events("t1") == []
    cleared, edit = mem.engine.log.history()[:2]
    assert cleared.trailers["Gitmem-Op"] == "threads.clear"
    assert content_at(mem, edit.id, "threads/t1/events/000000.jsonl") == events


EDITOR = r"""
import os, random, sys, time
path, rng = sys.argv[1], random.Random(int(sys.argv[2]))
for line in sys.stdin:
    trial = int(line)
    time.sleep(rng.random() * 0.006)
    text = f"hand {trial}\n"
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


def test_100_hand_edits_racing_api_writes_lose_nothing(mem, person):
    """Each trial: a person saves (another process, rename or truncate-and-write) while
    an API append goes to the same file. Both must be in history, in some order, and
    each commit's content must follow from the one before it."""
    seed = 5
    rng = random.Random(seed)
    path = "memory/user.md"
    mem.memory.write("start")
    editor = python_script(EDITOR, str(mem.engine.worktree.path(path)), str(seed))
    try:
        for trial in range(100):
            editor.stdin.write(f"{trial}\n")
            editor.stdin.flush()
            time.sleep(rng.random() * 0.006)  # as the editor does: either may come first
            mem.memory.write(f"api {trial}", mode="append")
            assert editor.stdout.readline() == "saved\n"
            mem.memory.read()  # commits the save if the write did not see it
    finally:
        editor.stdin.close()
        editor.wait()

    commits = list(reversed(mem.engine.log.history(path)))[1:]  # oldest first, after "start"
    assert len(commits) == 200
    previous = "start\n"
    orders = set()
    for trial in range(100):
        pair = commits[2 * trial:2 * trial + 2]
        ops = [c.trailers["Gitmem-Op"] for c in pair]
        assert sorted(ops) == ["hand-edit", "memory.append"], (trial, ops)
        orders.add(tuple(ops))
        for commit in pair:
            content = content_at(mem, commit.id, path)
            if commit.trailers["Gitmem-Op"] == "hand-edit":
                # The save replaces what the work tree held; an append it never saw (it
                # landed while the save was being written) is kept after it.
                assert content in (f"hand {trial}\n", f"hand {trial}\n\napi {trial}\n"), trial
                assert content == f"hand {trial}\n" or ops[0] == "memory.append", trial
            else:
                assert content == join_blocks(previous, f"api {trial}") + "\n", trial
            previous = content
    assert mem.memory.read() == previous
    assert mem.engine.worktree.path(path).read_text() == previous
    assert len(orders) == 2, "the race never went both ways; the test proves nothing"


# -- broken edits stay out --------------------------------------------------------


def test_a_broken_jsonl_edit_is_refused_then_committed_once_fixed(mem, person, git, cli, caplog):
    messages = [{"id": "m1", "role": "user", "content": "hi"},
                {"id": "m2", "role": "assistant", "content": "hello"}]
    mem.sessions.write("claude-code", "s1", messages)
    chunk_path = "sessions/claude-code/s1/messages/000000.jsonl"
    chunk = mem.engine.worktree.path(chunk_path)
    before = git.count()
    lines = chunk.read_text().splitlines()
    chunk.write_text(lines[0] + "\n" + '{"id": "m2", "role": "assistant", "content": \n')

    with caplog.at_level(logging.WARNING, logger="gitmem.edits.handedits"):
        assert mem.sessions.read("claude-code", "s1") == (messages, "")
        assert mem.sessions.read("claude-code", "s1") == (messages, "")
    assert git.count() == before
    warnings = [r.getMessage() for r in caplog.records if r.name == "gitmem.edits.handedits"]
    assert len(warnings) == 1 and f"{chunk_path} line 2" in warnings[0]

    report = json.loads(cli("status", "--json").stdout)
    assert report["refused"] == [{"path": chunk_path, "line": 2,
                                  "reason": "Expecting value (column 46)"}]
    assert report["pending"] == []
    assert f"refused     {chunk_path} line 2: Expecting value" in cli("status").stdout

    chunk.write_text(lines[0] + "\n" + '{"id": "m2", "role": "assistant", "content": "hey"}\n')
    assert mem.sessions.read("claude-code", "s1")[0][1]["content"] == "hey"
    assert git.count() == before + 1
    assert json.loads(cli("status", "--json").stdout)["refused"] == []


def test_a_broken_metadata_file_is_refused_and_the_valid_files_go_in(mem, person, git):
    mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}], "resume-1")
    folder = "sessions/claude-code/s1"
    mem.engine.worktree.path(f"{folder}/meta.json").write_text('{"agentSessionId": "x",\n\n')
    mem.engine.worktree.path(f"{folder}/messages/000000.jsonl").write_text('{"role":"user","content":"yo"}\n')
    assert mem.sessions.read("claude-code", "s1") == ([{"role": "user", "content": "yo"}], "resume-1")
    assert git.changed() == [f"{folder}/messages/000000.jsonl"]
    (refused,) = HandEdits.of(mem.engine).scan().refused
    assert (refused.path, refused.line) == (f"{folder}/meta.json", 3)


@pytest.mark.parametrize("data, line, reason", [
    (b'{"a":1}\n\n[1,\n', 3, "Expecting value (column 4)"),
    (b'{"a":1}\n1,2\n', 2, "Extra data (column 2)"),
    (b'{"a":1}\n"\xff"\n', 2, "not UTF-8"),
])
def test_jsonl_problems_name_the_line_an_editor_shows(data, line, reason):
    assert check("threads/t/events/000000.jsonl", data) == (line, reason)


def test_markdown_is_always_valid():
    assert check("memory/user.md", b"{not json\n\xff\n") is None


# -- status -----------------------------------------------------------------------


def test_status_lists_pending_edits_unpushed_commits_sync_and_index(mem, person, git, cli, tmp_path):
    assert "unpushed    no remote" in cli("status").stdout
    remote = tmp_path / "remote.git"
    Git = type(git)
    Git(tmp_path)("init", "--bare", "--initial-branch=main", str(remote))
    git("remote", "add", "origin", str(remote))
    git("push", "origin", "main")
    mem.memory.write("a")
    mem.memory.write("b", mode="append")
    mem.engine.worktree.path("memory/user.md").write_text("edited\n")
    (mem.engine.private_dir / "sync-state.json").write_text(json.dumps(
        {"remote": "origin", "last_sync": "2026-01-02T03:04:05Z", "last_error": "no network"}))
    mem.engine.index.refresh()

    report = json.loads(cli("status", "--json").stdout)
    assert report["pending"] == [{"path": "memory/user.md", "change": "edited"}]
    assert report["unpushed"] == {"remote": "origin", "fetched": True, "ahead": 2, "behind": 0}
    assert report["sync"]["last_sync"] == "2026-01-02T03:04:05Z"
    assert report["sync"]["last_error"] == "no network"
    assert report["index_in_step"] is True
    text = cli("status").stdout
    assert "edited: memory/user.md" in text and "2 commits not on origin/main" in text
    assert "last sync   2026-01-02T03:04:05Z with origin" in text and "no network" in text
    assert git.count() == 3  # status commits nothing


def test_opening_without_hand_edits_reads_head(repo_path):
    with Gitmem.open(repo_path, hand_edits=False) as mem:
        mem.memory.write("committed")
        mem.engine.worktree.path("memory/user.md").write_text("edited\n")
        assert mem.memory.read() == "committed\n"
