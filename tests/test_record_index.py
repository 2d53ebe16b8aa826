"""The record index (issue 19): the same answers as a full walk of the history, whoever
made the commits; rebuilt when deleted or damaged; a fetched history indexed from where
it left off; record-relative versions (``--at @~2``) and ``blame``, from Python and the CLI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from conftest import SUBPROCESS_ENV, Git, python_script, run_gitmem
from gitmem.bench.record_index import RECORD as BENCH_RECORD
from gitmem.bench.record_index import RECORD_PATH as BENCH_RECORD_PATH
from gitmem.bench.record_index import START as BENCH_START
from gitmem.bench.record_index import build_history
from gitmem.history.record_index import FILE, PARTS_FILE, RecordIndex, checked
from gitmem.records import layout
from gitmem.repository import Gitmem
from gitmem.sync.exchange import sync

RECORDS = ["user", "agent:a", "agent:ext:corp/b", "session:cc/s1", "session:cc/s2", "thread:t1"]
AGENTS = ["a", "ext:corp/b"]


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch):
    """The git subprocesses gitmem starts (sync) see no user or system configuration."""
    for key in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, SUBPROCESS_ENV[key])


# -- the full walk the index must agree with ------------------------------------------


def generations(git: Git) -> dict[str, int]:
    """Each commit's generation, from plain git (1 + the largest of its parents')."""
    found: dict[str, int] = {}
    for line in reversed(git("rev-list", "--topo-order", "--parents", "main").splitlines()):
        commit, *parents = line.split()
        found[commit] = 1 + max((found[p] for p in parents), default=0)
    return found


def full_walk(mem: Gitmem, record: str, git: Git) -> list[str]:
    """The commits that changed ``record``, by the engine's walk of the whole history,
    newest first in the index's order (main's topology: generation, then time, then id)."""
    gens = generations(git)
    commits = mem.engine.log.history(layout.parse_record(record).path)
    ordered = sorted(commits, key=lambda c: (gens[c.id], c.time, c.id), reverse=True)
    return [c.id for c in ordered]


def indexed(mem: Gitmem, record: str) -> list[str]:
    return [c.id for c in mem.log(record)]


def assert_agrees(mem: Gitmem, path: Path) -> None:
    git = Git(path)
    for record in RECORDS:
        assert indexed(mem, record) == full_walk(mem, record, git), record
    fresh = RecordIndex(mem.engine)  # another process: from the file alone
    for record in RECORDS:
        versions = [v.id for v in fresh.versions(layout.parse_record(record).path)]
        assert versions == full_walk(mem, record, git), record
    assert fresh.diffed == 0  # what the file holds was not diffed again


# -- random histories ------------------------------------------------------------------

WRITE, HAND_EDIT, PLAIN_COMMIT, SYNC, CHECK = "write", "hand edit", "git commit", "sync", "check"
operations = st.lists(st.tuples(
    st.sampled_from([WRITE, WRITE, WRITE, HAND_EDIT, PLAIN_COMMIT, SYNC, CHECK]),
    st.sampled_from([0, 1]),  # which machine
    st.integers(0, 5)), min_size=4, max_size=14)  # which record (or file)


def write(mem: Gitmem, record: int, n: int) -> None:
    if record < 2:
        mem.memory.write(f"fact {n}", agent_id=AGENTS[record], mode="append" if n % 2 else "replace")
    elif record == 2:
        mem.memory.write(f"user fact {n}", mode="append")
    elif record in (3, 4):
        mem.sessions.append("cc", f"s{record - 2}", [{"id": f"m{n}", "role": "user", "content": f"hi {n}"}])
    else:
        mem.threads.append_events("t1", "planner", [{"type": "TEXT", "delta": f"token {n}"}])


def edit_on_disk(mem: Gitmem, record: int, n: int, *, plain_git: bool) -> None:
    """A person's edit of a memory (committed by gitmem's hand edits, or with plain git)."""
    agent = AGENTS[record % 2] if record < 4 else None
    path = mem.memory.path(agent)
    file = mem.engine.workdir / path
    file.parent.mkdir(parents=True, exist_ok=True)
    old = file.read_text() if file.exists() else ""
    file.write_text(f"edited by hand {n}\n\n{old}")
    if plain_git:
        git = Git(mem.engine.workdir)
        git("add", path)
        git("commit", "-q", "-m", f"a plain commit {n}")
    else:
        mem.memory.read(agent)  # commits the hand edit first


@seed(19)
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(operations)
def test_the_index_answers_as_the_full_walk_on_random_histories(steps):
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        root = Path(scratch)
        remote = root / "remote.git"
        subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                       check=True, env=SUBPROCESS_ENV)
        a = stack.enter_context(Gitmem.open(root / "a"))
        a.engine.remotes.add("origin", str(remote))
        sync(a)
        subprocess.run(["git", "clone", "-q", str(remote), str(root / "b")], check=True,
                       env=SUBPROCESS_ENV)
        b = stack.enter_context(Gitmem.open(root / "b", create=False))
        machines = [(a, root / "a"), (b, root / "b")]
        for n, (kind, machine, record) in enumerate(steps):
            mem, path = machines[machine]
            if kind == WRITE:
                write(mem, record, n)
            elif kind in (HAND_EDIT, PLAIN_COMMIT):
                edit_on_disk(mem, record, n, plain_git=kind == PLAIN_COMMIT)
            elif kind == SYNC:
                sync(mem)
            else:
                assert_agrees(mem, path)  # the index catches up from here next time
        for mem, _ in machines + machines[:1]:
            sync(mem)
        for mem, path in machines:
            assert_agrees(mem, path)


# -- damage ----------------------------------------------------------------------------


def some_history(mem: Gitmem) -> None:
    for n in range(4):
        write(mem, n % 6, n)
        write(mem, 3, n)


DAMAGE = {
    "deleted": lambda data: None,
    "garbage in the middle": lambda data: data[:60] + b"\x00garbage\x00" + data[70:],
    "not an index": lambda data: b"hello\n" + data,
    "a line changed": lambda data: data.replace(b"sessions/cc/s1", b"sessions/cc/s9", 1),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_deleted_or_damaged_index_is_rebuilt(damage, mem, repo_path, git, cli):
    some_history(mem)
    expected = {record: indexed(mem, record) for record in RECORDS}
    index_file = mem.engine.private_dir / FILE
    damaged = DAMAGE[damage](index_file.read_bytes())
    if damaged is None:
        index_file.unlink()
    else:
        index_file.write_bytes(damaged)
    with Gitmem.open(repo_path) as again:
        assert {record: indexed(again, record) for record in RECORDS} == expected
        assert again.record_index.rebuilds == 1
    assert json.loads(cli("log", "session:cc/s1", "--json").stdout)[0]["id"] == expected["session:cc/s1"][0]
    assert (index_file.stat().st_mode & 0o777) == 0o600


def test_a_cut_index_or_one_with_a_half_written_tail_catches_up(mem, repo_path, git):
    for _ in range(3):  # three batches of lines, each with its check line
        before = git.count()
        some_history(mem)
        expected = {record: indexed(mem, record) for record in RECORDS}
    last_batch = git.count() - before
    index_file = mem.engine.private_dir / FILE
    whole = index_file.read_bytes()
    for cut in (len(whole) - 3, len(whole) - 60):  # in the last check line, in the last batch
        index_file.write_bytes(whole[:cut])
        with Gitmem.open(repo_path) as again:
            assert {record: indexed(again, record) for record in RECORDS} == expected
            assert again.record_index.rebuilds == 0
            assert again.record_index.diffed == last_batch  # from the check line before
        assert index_file.read_bytes() == whole  # written again as it was
    index_file.write_bytes(whole + b"0123456789abcdef half a line")  # a writer killed mid-line
    with Gitmem.open(repo_path) as again:
        again.memory.write("one more", agent_id="a", mode="append")
        assert indexed(again, "agent:a")[1:] == expected["agent:a"]
        assert again.record_index.diffed == 1 and again.record_index.rebuilds == 0
    assert index_file.read_bytes().startswith(whole) and b"half a line" not in index_file.read_bytes()


@pytest.mark.parametrize("rewrite", ["commit --amend", "reset"])
def test_commits_amended_or_reset_away_leave_the_answers(rewrite, mem, repo_path, git):
    some_history(mem)
    mem.memory.write("soon gone", agent_id="a", mode="append")
    gone = mem.engine.head()
    assert indexed(mem, "agent:a")[0] == gone
    if rewrite == "reset":
        git("reset", "-q", "--hard", "HEAD~1")
    else:
        (repo_path / mem.memory.path("a")).write_text("amended by hand\n")
        git("commit", "-q", "-a", "--amend", "-m", "amended")
    with Gitmem.open(repo_path) as again:
        answers = indexed(again, "agent:a")
        assert gone not in answers
        assert answers == full_walk(again, "agent:a", git)
        assert again.record_index.rebuilds == 1


WRITE_AND_LOOK = """
import sys
from gitmem.repository import Gitmem
with Gitmem.open(sys.argv[1], create=False) as mem:
    for n in range(15):
        mem.memory.write(f"fact {sys.argv[2]}.{n}", agent_id=sys.argv[2], mode="append")
        mem.log(f"agent:{sys.argv[2]}")
        mem.log("agent:a")
"""


def test_processes_writing_and_updating_the_index_at_once_leave_it_sound(mem, repo_path, git):
    mem.memory.write("first", agent_id="a")
    indexed(mem, "agent:a")
    writers = [python_script(WRITE_AND_LOOK, str(repo_path), who) for who in ("a", "x", "y")]
    for writer in writers:
        writer.communicate(timeout=120)
        assert writer.returncode == 0
    data = (mem.engine.private_dir / FILE).read_bytes()
    assert checked(data) == data  # every line checked: none cut, none written twice
    ids = [line[:40] for line in data.splitlines()[1:] if not line.startswith(b"#")]
    assert len(ids) == len(set(ids)) == git.count()
    with Gitmem.open(repo_path) as again:
        for record in ("agent:a", "agent:x", "agent:y"):
            assert indexed(again, record) == full_walk(again, record, git)
        assert again.record_index.diffed == 0


# -- a history from another machine ----------------------------------------------------


def test_a_fetched_history_is_indexed_from_where_it_left_off(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    with Gitmem.open(tmp_path / "a") as a:
        a.engine.remotes.add("origin", str(remote))
        for n in range(10):
            write(a, n % 6, n)
        sync(a)
        subprocess.run(["git", "clone", "-q", str(remote), str(tmp_path / "b")], check=True,
                       env=SUBPROCESS_ENV)
        assert_agrees(a, tmp_path / "a")
        indexed_at, diffed = a.engine.head(), a.record_index.diffed
        with Gitmem.open(tmp_path / "b", create=False) as b:
            for n in range(5):
                write(b, n % 6, 100 + n)
            sync(b)
        write(a, 3, 200)  # diverged: the sync merges
        sync(a)
        git = Git(tmp_path / "a")
        new = int(git("rev-list", "--count", f"{indexed_at}..main").strip())
        assert new == 1 + 5 + 1  # a's write, machine b's commits and the merge
        assert_agrees(a, tmp_path / "a")
        assert a.record_index.diffed - diffed == new  # only the new commits were diffed
        assert a.record_index.rebuilds == 1  # the first use, long before


# -- record-relative versions ----------------------------------------------------------


def test_at_counts_changes_of_the_record_not_commits(mem, cli):
    for n in range(3):
        mem.memory.write(f"version {n}", agent_id="a")
        mem.memory.write(f"other {n}")  # commits elsewhere in between
    assert mem.show("agent:a", "@").value["content"] == "version 2\n"
    assert mem.show("agent:a", "@~2").value["content"] == "version 0\n"
    assert cli("show", "agent:a", "--at", "@~1").stdout == "version 1\n"
    assert cli("show", "agent:a", "--at", "HEAD~1").stdout == "version 2\n"  # a revision stays one
    patch = cli("diff", "agent:a", "--since", "@~2", "--until", "@~1").stdout
    assert "-version 0\n+version 1\n" in patch
    done = json.loads(cli("restore", "agent:a", "--at", "@~2", "--json").stdout)
    assert done["from"] == mem.log("agent:a")[3].id  # v0's commit: the restore is the newest now
    assert mem.memory.read("a") == "version 0\n"
    assert mem.show("agent:a", "@~1").value["content"] == "version 2\n"  # the restore is @ now
    wrong = cli("show", "agent:a", "--at", "@~9", check=False)
    assert wrong.returncode == 1 and wrong.stdout == ""
    assert wrong.stderr.count("\n") == 1 and "agent:a has 4 versions (@ to @~3)" in wrong.stderr
    assert "@~2" in cli("show", "--help").stdout


def test_at_on_sessions_and_threads(mem, cli):
    for n in range(3):
        mem.sessions.append("cc", "s1", [{"id": f"m{n}", "role": "user", "content": str(n)}])
        mem.threads.append_events("t1", "planner", [{"type": "E", "n": n}])
    assert [m["id"] for m in mem.show("session:cc/s1", "@~1").value["messages"]] == ["m0", "m1"]
    shown = json.loads(cli("show", "session:cc/s1", "--at", "@~2", "--json").stdout)
    assert [m["id"] for m in shown["messages"]] == ["m0"] and shown["commit"] == mem.log("session:cc/s1")[2].id
    assert json.loads(cli("show", "thread:t1", "--at", "@", "--json").stdout)["events"][-1] == {"type": "E", "n": 2}
    assert mem.show("thread:t1", "@~2").value["events"] == [{"type": "E", "n": 0}]
    changes = mem.diff("thread:t1", "@~1", "@")
    assert [f.added for f in changes.files if f.path.endswith(".jsonl")] == [1]


# -- blame -----------------------------------------------------------------------------


def test_blame_names_the_write_that_put_each_block_into_memory(mem, repo_path, cli, git):
    first = mem.memory.write("Prefers short answers.", agent_id="a")
    second = mem.memory.write("Checks types first.", agent_id="a", mode="append",
                              trailers={"Gitmem-Handler": "notes"})
    third = mem.memory.write("Runs the tests.", agent_id="a", mode="append")
    path = repo_path / mem.memory.path("a")
    path.write_text(path.read_text().replace("Checks types first.", "Checks types last.")
                    + "\nAdded by hand.\n")
    mem.memory.read("a")  # commits the hand edit
    by_hand = mem.engine.head()
    path.write_text(path.read_text() + "\nCommitted with git.\n")
    git("commit", "-q", "-a", "-m", "plain")
    plain = mem.engine.head()
    blamed = mem.blame("agent:a")
    assert [(b.value, b.commit.id) for b in blamed] == [
        ("Prefers short answers.", first), ("Checks types last.", by_hand),
        ("Runs the tests.", third), ("Added by hand.", by_hand), ("Committed with git.", plain)]
    assert [b.op for b in blamed] == ["memory.replace", "hand-edit", "memory.append", "hand-edit", None]
    assert blamed[4].commit.author == "Test Person"
    assert second not in {b.commit.id for b in blamed}  # its block was edited away
    mem.memory.write("Later.", agent_id="a", mode="append", trailers={"Gitmem-Handler": "notes"})
    found = json.loads(cli("blame", "agent:a", "--json").stdout)
    assert found[:5] == [b.to_json() for b in blamed]
    assert found[5]["value"] == "Later." and found[5]["handler"] == "notes"
    assert found[5]["op"] == "memory.append" and found[5]["date"]
    text = cli("blame", "agent:a").stdout
    assert f"{first[:10]}  " in text and "    Prefers short answers.\n" in text
    assert "memory.append (notes)" in text
    assert mem.blame("agent:nobody") == []


def test_blame_of_a_session_and_a_thread(mem, cli):
    m = [{"id": f"m{n}", "role": "user", "content": f"message {n}"} for n in range(4)]
    first = mem.sessions.write("cc", "s1", m[:2])
    second = mem.sessions.append("cc", "s1", m[2:3])
    third = mem.sessions.write("cc", "s1", [m[0], {**m[1], "content": "edited"}, m[2], m[3]])
    assert [(b.kind, b.value["id"], b.commit.id) for b in mem.blame("session:cc/s1")] == [
        ("message", "m0", first), ("message", "m1", third), ("message", "m2", second),
        ("message", "m3", third)]
    text = cli("blame", "session:cc/s1").stdout.splitlines()
    assert text[1].startswith(third[:10]) and '  message 1: {"id": "m1"' in text[1]
    started = mem.threads.append_events("t1", "planner", [{"type": "RUN_STARTED"}])
    finished = mem.threads.append_events("t1", "planner", [{"type": "RUN_FINISHED"}])
    saved = mem.threads.save_messages("t1", [{"id": "x", "role": "assistant", "content": "done"}])
    found = json.loads(cli("blame", "thread:t1", "--json").stdout)
    assert [(b["kind"], b["index"], b["commit"], b["op"]) for b in found] == [
        ("event", 0, started, "threads.append"), ("event", 1, finished, "threads.append"),
        ("message", 0, saved, "threads.messages")]
    assert "event 1: {\"type\": \"RUN_FINISHED\"}" in cli("blame", "thread:t1").stdout
    bad = run_gitmem("blame", "nonsense", repo=mem.engine.workdir, check=False)
    assert bad.returncode == 1 and "not a record name" in bad.stderr and "Traceback" not in bad.stderr


# -- a record's part of the index ------------------------------------------------------


@pytest.fixture(scope="module")
def histories(tmp_path_factory) -> dict[int, Path]:
    """Fast-imported histories of 1,000 and 4,000 commits: one record changed 12 times
    early on, 40 others changed in turn after."""
    root = tmp_path_factory.mktemp("parts")
    found = {commits: build_history(root / f"history-{commits}", commits) for commits in (1_000, 4_000)}
    for path in found.values():
        with Gitmem.open(path, create=False) as mem:
            mem.log(BENCH_RECORD)  # the index is built, and its parts made
    return found


def index_size(path: Path) -> int:
    return sum((path / ".git/gitmem" / name).stat().st_size for name in (FILE, PARTS_FILE))


def test_a_log_of_a_record_reads_only_its_part_of_the_index(histories):
    read = {}
    for commits, path in histories.items():
        with Gitmem.open(path, create=False) as mem:  # another process: from the files alone
            versions = [c.id for c in mem.log(BENCH_RECORD)]
            assert versions == Git(path)("log", "--format=%H", "--", BENCH_RECORD_PATH).split()
            assert len(versions) == 12 and mem.record_index.diffed == 0
            read[commits] = mem.record_index.reads.bytes
            moment = BENCH_START + 20 * 60  # show --at DATE: the newest commit by then
            assert mem.record_index.commit_at(moment) == Git(path)(
                "rev-list", "-1", f"--before=@{moment}", "main").strip()
            read[f"{commits} and a date"] = mem.record_index.reads.bytes
        assert read[f"{commits} and a date"] < index_size(path) / 50
    assert index_size(histories[4_000]) > 3 * index_size(histories[1_000])
    # the same reads: only the numbers in a head line grow, and a search by halves takes
    # two steps more among four times the commits
    assert abs(read[4_000] - read[1_000]) < 20
    assert abs(read["4000 and a date"] - read["1000 and a date"]) < 200


def test_the_parts_and_the_log_past_them_answer_as_git(histories, tmp_path):
    path = tmp_path / "repo"
    shutil.copytree(histories[1_000], path, symlinks=True)
    git = Git(path)
    parts = path / ".git/gitmem" / PARTS_FILE

    def agrees(record: str, path_in_repo: str) -> None:
        with Gitmem.open(path, create=False) as mem:
            assert [c.id for c in mem.log(record)] == git("log", "--format=%H", "--", path_in_repo).split()

    with Gitmem.open(path, create=False) as mem:
        for n in range(4):  # lines in the log past the parts
            mem.memory.write(f"- new {n}", agent_id="target", mode="append")
            mem.memory.write(f"- other {n}", agent_id="other-3", mode="append")
        mem.log(BENCH_RECORD)
    made = parts.read_bytes()
    agrees(BENCH_RECORD, BENCH_RECORD_PATH)
    agrees("agent:other-3", "memory/agents/other-3.md")
    with Gitmem.open(path, create=False) as mem:  # a date among the parts, or in the tail
        for moment in (BENCH_START - 1, BENCH_START + 300, BENCH_START + 60 * 999, time.time() + 60):
            newest = git("rev-list", "-1", f"--before=@{int(moment)}", "main").strip() or None
            assert mem.record_index.commit_at(moment) == newest, moment
    assert parts.read_bytes() == made  # a short tail: the parts stay
    damaged = bytearray(made)
    at = made.index(b"memory/agents/other-9.md\n") + 30
    damaged[at:at + 10] = b"0123456789"  # in other-9's part: its check fails, the log answers
    parts.write_bytes(bytes(damaged))
    agrees("agent:other-9", "memory/agents/other-9.md")
    assert parts.read_bytes() != bytes(damaged)  # made again
    git("reset", "-q", "--hard", "HEAD~3")  # the log is made again; the parts no longer match it
    with Gitmem.open(path, create=False) as mem:
        mem.log(BENCH_RECORD)
        assert mem.record_index.rebuilds == 1
    agrees(BENCH_RECORD, BENCH_RECORD_PATH)
    agrees("agent:other-3", "memory/agents/other-3.md")
