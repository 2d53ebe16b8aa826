"""``blame`` of a memory of many versions follows the lines git says each version changed
(issue 25: a big memory's blame costs what its changes cost), with the same answer as
reading every version whole, the path taken without git."""

from __future__ import annotations

import difflib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.bench.catch_up import BIG_PATH, BIG_RECORD, RECORD, build_big_memory, build_imported
from gitmem.history.blame import _by_versions, _Lines, _memory_by_hunks
from gitmem.records import layout
from gitmem.records.units import blocks
from gitmem.repository import Gitmem

NO_GIT = {"PATH": str(Path(sys.executable).parent)}  # gitmem finds no `git` to run


def commit_file(git: Git, path: Path, data: bytes, message: str) -> None:
    path.write_bytes(data)
    git("commit", "-q", "-am", message)


def hand_edits(path: Path) -> None:
    """What people do to a memory with an editor and plain git: blank lines of spaces
    between and after blocks, CRLF line ends, no newline at the end, an executable bit,
    an amended commit."""
    git, memory = Git(path), path / BIG_PATH
    text = memory.read_bytes()
    middle = text.index(b"\n\n", len(text) // 2)
    commit_file(git, memory, text[:middle] + b"\n  \t\n\nput between by hand\n \n" + text[middle:], "by hand")
    commit_file(git, memory, memory.read_bytes().replace(b"put between by hand\n", b"put between\r\nby hand\r\n"),
                "crlf")
    commit_file(git, memory, memory.read_bytes().rstrip(b"\n") + b"\n\nno newline at the end  ", "no eol")
    commit_file(git, memory, memory.read_bytes() + b"\n\nnow one", "eol again")
    os.chmod(memory, 0o755)
    git("commit", "-q", "-am", "executable")
    commit_file(git, memory, memory.read_bytes() + b"\n\nthe last word\n", "before the amend")
    commit_file(git, memory, memory.read_bytes() + b"\n\nthe amended word\n", "amended")
    git("commit", "-q", "--amend", "-m", "amended")


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    path = build_big_memory(tmp_path_factory.mktemp("blame") / "big", 300_000, 240)
    hand_edits(path)
    return path


def both_paths(path: Path) -> tuple[tuple[dict, dict] | None, tuple[dict, dict]]:
    with Gitmem.open(path, create=False) as mem:
        record = layout.parse_record(BIG_RECORD)
        versions = [v.id for v in reversed(mem.record_index.versions(record.path))]
        return _memory_by_hunks(mem, record.path, versions), _by_versions(mem, record, versions)


def test_a_big_memory_blames_through_its_changed_lines_as_through_its_versions(big):
    through_lines, through_versions = both_paths(big)
    assert through_lines is not None  # git's hunks were followed, not the versions read
    assert through_lines == through_versions
    values, owners = through_lines
    assert values["block"] == blocks((big / BIG_PATH).read_bytes().decode())
    subjects = dict(line.split(" ", 1) for line in Git(big)("log", "--format=%H %s").splitlines())
    kinds = {subjects[owner].split(":")[0] for owner in owners["block"]}
    assert {"memory", "crlf", "no eol", "eol again", "amended"} <= kinds  # "by hand"'s block: crlf's now
    assert len(set(owners["block"])) > 100


def test_the_cli_answers_the_same_with_git_and_without(big, tmp_path):
    with_git = run_gitmem("blame", BIG_RECORD, "--json", repo=big)
    without = run_gitmem("blame", BIG_RECORD, "--json", repo=big, env=NO_GIT)
    assert with_git.stdout == without.stdout
    found = json.loads(with_git.stdout)
    edited = [b for b in found if b["value"].endswith("(edited)")]
    assert edited and all(b["op"] == "memory.replace" for b in edited)
    assert run_gitmem("blame", BIG_RECORD, repo=big).stdout == run_gitmem("blame", BIG_RECORD, repo=big,
                                                                          env=NO_GIT).stdout


def clone(big: Path, path: Path) -> tuple[Git, Path, bytes]:
    subprocess.run(["git", "clone", "-q", str(big), str(path)], check=True, env=SUBPROCESS_ENV)
    return Git(path), path / BIG_PATH, (path / BIG_PATH).read_bytes()


def test_a_memory_emptied_deleted_and_made_again(big, tmp_path):
    path = tmp_path / "again"
    git, memory, text = clone(big, path)
    commit_file(git, memory, b"", "emptied")
    commit_file(git, memory, text, "filled again")
    git("rm", "-q", BIG_PATH)
    git("commit", "-q", "-m", "deleted")
    memory.parent.mkdir(parents=True)
    memory.write_bytes(text[:len(text) // 3] + b"\n\nmade again\n")
    git("add", "-A")
    git("commit", "-q", "-m", "made again")
    through_lines, through_versions = both_paths(path)
    assert through_lines is not None and through_lines == through_versions
    subjects = dict(line.split(" ", 1) for line in git("log", "--format=%H %s").splitlines())
    assert {subjects[owner] for owner in through_lines[1]["block"]} == {"made again"}


def test_a_memory_that_was_a_symlink_is_read_whole(big, tmp_path):
    path = tmp_path / "linked"
    git, memory, text = clone(big, path)
    memory.unlink()
    (path / "memory/agents/elsewhere.txt").write_text("pointed at\n")
    memory.symlink_to("elsewhere.txt")
    git("add", "-A")
    git("commit", "-q", "-m", "a symlink")
    memory.unlink()
    memory.write_bytes(text + b"\nback\n")
    git("add", "-A")
    git("commit", "-q", "-m", "a file again")
    through_lines, through_versions = both_paths(path)
    assert through_lines is None  # not a regular file's patch: the versions were read whole
    assert run_gitmem("blame", BIG_RECORD, "--json", repo=path).stdout == run_gitmem(
        "blame", BIG_RECORD, "--json", repo=path, env=NO_GIT).stdout


def lines_of(text: str) -> list[bytes]:
    data = text.encode()
    return data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n") if data else []


PIECES = ["a", "b", " ", "\t", "\x0c", "\u00e9", "\n", "\n", "\n\n", "\n \n", "  \n", "\t\n\n"]


@pytest.mark.parametrize("seed", range(4))
def test_blocks_kept_from_changed_lines_are_the_blocks_of_the_whole_version(seed):
    """Whatever blank lines, spaces and separators each change adds or takes away (at the
    start, the end, in between), the blocks :class:`_Lines` keeps up to date from a line
    diff are those of the whole text."""
    rng = random.Random(seed)
    for _ in range(2_000):
        kept, text, before = _Lines(), "", []
        for _ in range(rng.randint(1, 10)):
            piece = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 10)))
            start = rng.randint(0, len(text))
            end = rng.randint(start, len(text))
            text = rng.choice([text + piece, piece + text, piece, text[:start] + piece + text[end:]])
            after = lines_of(text)
            changes = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
            for tag, old_start, old_end, new_start, new_end in reversed(changes):
                if tag != "equal":
                    kept.change(old_start, old_end - old_start, after[new_start:new_end])
            assert kept.lines == after
            assert kept.blocks() == blocks(text), (text, changes)
            before = after


def test_a_block_put_among_repeated_ones_is_the_only_new_one(mem):
    """The blocks a replace leaves in place at either end keep their commits, repeated
    ones too: matching the whole versions as a sequence gave the first rule the replace."""
    first = mem.memory.write("---\n\n---\n\n---", agent_id="a")
    second = mem.memory.write("---\n\nnew between\n\n---\n\n---", agent_id="a")
    assert [(b.value, b.commit.id) for b in mem.blame("agent:a")] == [
        ("---", first), ("new between", second), ("---", first), ("---", first)]


def test_a_memory_first_made_by_a_merge(repo_path, git):
    """A merge that brings a memory neither side had is its first version: diffed from
    nothing, not from the merge's parents (git diff-tree shows a lone merge no diff)."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("on main", agent_id="other")
    git("switch", "-q", "-c", "side", "HEAD~1")
    (repo_path / "side.txt").write_text("side\n")
    git("add", "side.txt")
    git("commit", "-q", "-m", "side")
    git("switch", "-q", "main")
    git("merge", "-q", "--no-commit", "side")
    (repo_path / "memory/agents/merged.md").write_text("made by the merge\n\nsecond block\n")
    git("add", "-A")
    git("commit", "-q", "-m", "merge with a new memory")
    merge = git("rev-parse", "HEAD").strip()
    with Gitmem.open(repo_path) as mem:
        for i in range(20):
            mem.memory.write(f"fact {i}", agent_id="merged", mode="append")
        record = layout.parse_record("agent:merged")
        versions = [v.id for v in reversed(mem.record_index.versions(record.path))]
        assert versions[0] == merge
        through_lines = _memory_by_hunks(mem, record.path, versions)
        assert through_lines == _by_versions(mem, record, versions)
        assert through_lines[1]["block"][:2] == [merge, merge]


def test_a_damaged_folder_elsewhere_in_an_old_commit_leaves_a_memorys_blame_alone(tmp_path):
    """Blame by hunks checks, in each version, only the folders on the way to the memory,
    as reading one old version does: a damaged tree of an old commit's sessions neither
    stops it nor is walked (walking every version's whole tree made the blame of a memory
    with 2,000 versions among 4,000 sessions take 8 s against git blame's 0.5 s)."""
    path = build_imported(tmp_path / "imported", 400, 40)
    clean = run_gitmem("blame", RECORD, "--json", repo=path).stdout
    git = Git(path)
    (pack,) = (path / ".git" / "objects" / "pack").glob("*.pack")
    moved = tmp_path / "the.pack"
    pack.rename(moved)
    pack.with_suffix(".idx").unlink()
    subprocess.run(["git", "-C", str(path), "unpack-objects", "-q"], input=moved.read_bytes(), check=True,
                   env=SUBPROCESS_ENV)  # loose objects, as a repository never packed
    tree = git("rev-parse", "HEAD~200:sessions/cc").strip()
    assert tree != git("rev-parse", "HEAD:sessions/cc").strip()
    loose = path / ".git" / "objects" / tree[:2] / tree[2:]
    loose.chmod(0o600)
    loose.write_bytes(loose.read_bytes()[:10])  # truncated
    assert run_gitmem("blame", RECORD, "--json", repo=path).stdout == clean
