"""Catching up on a history gitmem did not write (issue 25): a fast-imported repository
and a ``git clone`` of one get their record index from ``git log --raw``, with the same
answers as the walk gitmem does itself when git is not there (the slow path), for
``log``, ``show --at``, ``blame`` and ``diff``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from nui_client import NuiHost
from gitmem.bench.catch_up import RECORD, RECORD_PATH, build_imported
from gitmem.history.blame import _Blocks
from gitmem.history.record_index import FILE
from gitmem.records.units import blocks
from gitmem.repository import Gitmem

RECORDS = [RECORD, "session:cc/s3", "session:cc/s10", "agent:odd", "user"]
NO_GIT = {"PATH": str(Path(sys.executable).parent)}  # gitmem finds no `git` to run


def odd_history(path: Path) -> None:
    """What plain git adds to an imported history: a merge whose sides both change the
    record, a change of a file's mode alone, a file in a folder no record owns, a
    commit dated in the future and a name git would quote."""
    git = Git(path)
    git("switch", "-q", "-c", "side", "main~5")
    (path / RECORD_PATH).write_text((path / RECORD_PATH).read_text() + "\nfrom the side\n")
    (path / "memory/agents").mkdir(parents=True, exist_ok=True)
    (path / "memory/agents/odd.md").write_text("an odd agent\n")
    git("add", "-A")
    git("commit", "-q", "-m", "side work")
    git("switch", "-q", "main")
    (path / RECORD_PATH).write_text("on main first\n\n" + (path / RECORD_PATH).read_text())
    git("commit", "-q", "-am", "main work")
    git("merge", "-q", "--no-edit", "side", check=False)
    if git("status", "--porcelain"):  # a conflict: keep both sides
        (path / RECORD_PATH).write_text("on main first\n\nmerged by hand\n")
        git("add", "-A")
        git("commit", "-q", "--no-edit")
    os.chmod(path / "sessions/cc/s3/meta.json", 0o755)
    git("commit", "-q", "-am", "a mode change alone")
    (path / "memory/notes").mkdir()
    (path / "memory/notes/caf\u00e9 \"x\".txt").write_text("not a record\n")
    (path / "memory/user.md").write_text("the user\n")
    git("add", "-A")
    env = {**SUBPROCESS_ENV, "GIT_COMMITTER_DATE": "2031-01-01T00:00:00+00:00"}
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", "future"], check=True, env=env)
    (path / "memory/user.md").write_text("the user\n\nlikes tea\n")
    git("commit", "-q", "-am", "after the future")


def answers(repo: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """What history commands print for each record, each command a process of its own."""
    found = {}

    def cli(*args):  # a time before the record existed exits 1 (issue 24): the same on both paths
        done = run_gitmem(*args, repo=repo, env=env, check=False)
        assert done.returncode in (0, 1), done.stderr
        return f"{done.returncode} {done.stdout}{done.stderr}"

    found["log"] = cli("log", "--json")  # the whole repository first: no index needed
    for record in RECORDS:
        found[f"log {record}"] = cli("log", record, "--json")
        count = len(json.loads(found[f"log {record}"].partition(" ")[2]))
        for at in {"@", f"@~{count // 2}", f"@~{count - 1}", "@1700000600", "HEAD~3"}:
            found[f"show {record} {at}"] = cli("show", record, "--at", at, "--json")
        found[f"blame {record}"] = cli("blame", record, "--json")
        if count > 1:
            found[f"diff {record}"] = cli("diff", record, "--since", f"@~{count - 1}", "--until", "@~1")
    found["log -n 1"] = cli("log", RECORD, "-n", "1", "--json")
    return found


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    path = build_imported(tmp_path_factory.mktemp("catch-up") / "imported", 400, 40, own_every=7)
    odd_history(path)
    return path


def assert_same_as_the_slow_path(source: Path, tmp_path: Path) -> None:
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    shutil.copytree(source, fast, symlinks=True)
    shutil.copytree(source, slow, symlinks=True)
    assert not (fast / ".git/gitmem" / FILE).exists()
    quick = answers(fast)
    walked = answers(slow, env=NO_GIT)
    assert quick.keys() == walked.keys()
    for key in quick:
        assert quick[key] == walked[key], key
    lines = [sorted(line for line in (repo / ".git/gitmem" / FILE).read_text().splitlines()
                    if not line.startswith("#")) for repo in (fast, slow)]
    assert lines[0] == lines[1]  # the same lines (both parents first, a fork's sides in any order)
    with Gitmem.open(fast, create=False) as mem:  # git's listing was the one kept
        versions = [v.id for v in mem.record_index.versions(RECORD_PATH)]
        assert mem.record_index.diffed == 0
    touched = Git(source)("log", "--format=%H", "--", RECORD_PATH).split()
    assert sorted(versions) == sorted(touched)


def test_a_fast_imported_history_answers_as_the_walk(imported, tmp_path):
    assert_same_as_the_slow_path(imported, tmp_path)


def test_a_clone_answers_as_the_walk(imported, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(imported), str(clone)], check=True, env=SUBPROCESS_ENV)
    assert_same_as_the_slow_path(clone, tmp_path)


def test_catching_up_on_new_commits_from_git(imported, tmp_path):
    """Commits made with plain git after the index was built: only they are read again."""
    path = tmp_path / "repo"
    shutil.copytree(imported, path, symlinks=True)
    with Gitmem.open(path, create=False) as mem:
        before = len(mem.record_index.versions(RECORD_PATH))
        built = mem.record_index.diffed
    git = Git(path)
    for n in range(3):
        (path / RECORD_PATH).write_text((path / RECORD_PATH).read_text() + f"\nplain {n}\n")
        git("commit", "-q", "-am", f"plain {n}")
    with Gitmem.open(path, create=False) as mem:
        assert len(mem.record_index.versions(RECORD_PATH)) == before + 3
        assert mem.record_index.diffed == 3 and built > 400
        assert mem.show(RECORD, "@").value["content"].endswith("plain 2\n")


# -- brought up to date before the first history command -------------------------------


def test_gitmem_clone_builds_the_index(imported, tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(imported), str(remote)], check=True,
                   env=SUBPROCESS_ENV)
    clone = tmp_path / "clone"
    done = run_gitmem("clone", str(remote), str(clone))
    assert done.stderr == ""  # a pipe gets no progress bar
    assert (clone / ".git/gitmem" / FILE).exists()
    with Gitmem.open(clone, create=False) as mem:
        assert len(mem.record_index.versions(RECORD_PATH)) > 50
        assert mem.record_index.diffed == 0  # the clone had read it all


def test_gitmem_serve_builds_the_index_after_its_first_answer(imported, tmp_path):
    """An existing repository without the index (an upgrade, an import): serve catches up."""
    path = tmp_path / "repo"
    shutil.copytree(imported, path, symlinks=True)
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(path)], cwd=tmp_path,
                   env=SUBPROCESS_ENV)
    try:
        assert host.call("storage.info")["name"] == "gitmem"
        index = path / ".git/gitmem" / FILE
        deadline = time.monotonic() + 60
        while not index.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert index.exists()
    finally:
        host.close_stdin()
        assert host.wait() == 0
    with Gitmem.open(path, create=False) as mem:
        assert mem.record_index.versions(RECORD_PATH)
        assert mem.record_index.diffed == 0


def test_a_progress_bar_on_a_terminal_only(tmp_path):
    path = build_imported(tmp_path / "long", 2500, 50)
    leader, follower = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "gitmem", "log", RECORD, "-n", "1",
                               "--repo", str(path)], stdout=subprocess.PIPE, stderr=follower,
                              env=SUBPROCESS_ENV, timeout=120)
        os.close(follower)
        drawn = b""
        while select.select([leader], [], [], 0.5)[0]:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert done.returncode == 0 and done.stdout.count(b"\n") == 1
    assert b"reading the history [" in drawn and b"2500/2500" in drawn
    (path / ".git/gitmem" / FILE).unlink()
    piped = run_gitmem("log", RECORD, "-n", "1", repo=path)
    assert piped.stderr == ""


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.booleans(), st.text(alphabet="ab \t\n", max_size=12)), max_size=12))
def test_blame_splits_appended_versions_as_it_splits_each_whole(steps):
    """A memory's blocks, split from the last block on when a version only adds text,
    are the blocks of the whole version, whatever blanks and separators the text holds."""
    splitter, content = _Blocks(), ""
    for append, text in steps:
        content = content + text if append else text + content
        assert splitter.of(content) == blocks(content)
