"""The quick answers (`gitmem search`, `gitmem session read` without opening the repository)
against what the world does to a repository with real tools: each quick answer must be
the one the full path gives at that moment (`gitmem/git/stamp.py`, `gitmem/search/query.py`,
`gitmem/edits/quick_reads.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, gitmem_opening, run_gitmem
from gitmem.repository import Gitmem
from gitmem.search.query import quick_search


def search(repo: Path, query: str, *options: str) -> tuple[list[dict], bool]:
    """(the hits of ``gitmem search --json``, whether it opened the repository)."""
    out, opened = gitmem_opening("search", "--json", "--limit", "100", *options, "--", query, repo=repo)
    return json.loads(out), opened


def full_search(repo: Path, query: str, **options) -> list[dict]:
    with Gitmem.open(repo) as mem:
        return [hit.as_json() for hit in mem.search(query, limit=100, **options)]


def settled(repo: Path) -> None:
    """Searches until one is answered without opening the repository."""
    for _ in range(20):
        if not search(repo, "marmoset")[1]:
            return
    raise AssertionError("no search was answered from the index alone")


def memory(repo: Path, agent: str, text: str, *, append: bool = True) -> None:
    run_gitmem("memory", "write", "--agent", agent, *(["--append"] if append else []), repo=repo, input=text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    memory(repo, "reviewer", "Checks types first, a marmoset habit.")
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": [{"role": "user", "content": "the marmoset deploy is on friday"}],
                                 "agentSessionId": "resume-1"}))
    return repo


def test_a_replaced_blob_is_read_as_pygit2_reads_it(repo):
    """`git replace` swaps what `git cat-file` shows for an object; pygit2 reads the object
    itself. The snippet of text no longer there comes from that blob on both paths."""
    memory(repo, "reviewer", "Replaced: no animals now.", append=False)
    git = Git(repo)
    old = git("rev-parse", "HEAD~1:memory/agents/reviewer.md").strip()
    git("replace", old, git("hash-object", "-w", "--stdin", input="something else entirely\n").strip())
    settled(repo)
    quick, opened = search(repo, "marmoset", "--history")
    assert not opened
    assert quick == full_search(repo, "marmoset", history=True)
    assert "Checks types first, a **marmoset** habit." in [hit["snippet"] for hit in quick]


def test_a_stamp_copied_from_a_clone_at_the_same_commit_vouches_for_nothing(repo, tmp_path):
    """A stamp speaks of one work tree: the same paths in a clone at the same commit, one of
    them edited by hand, are not vouched for by a stamp (and in-flight note) copied from
    the first."""
    settled(repo)
    clone = tmp_path / "clone"
    Git(tmp_path)("clone", "-q", str(repo), str(clone))
    for folder in ("memory/agents", "sessions", "threads"):  # what git does not keep: empty folders
        (clone / folder).mkdir(parents=True, exist_ok=True)
    search(clone, "marmoset")  # opened there once, as gitmem does
    with open(clone / "memory" / "agents" / "reviewer.md", "a") as file:
        file.write("\n\nA capybara note, by hand in the clone.\n")
    os.chmod(repo / "memory" / "agents" / "reviewer.md", 0o644)  # a change: the next look stamps anew
    settled(repo)
    private = repo / ".git" / "gitmem"
    shutil.copytree(private / "stamps", clone / ".git" / "gitmem" / "stamps", dirs_exist_ok=True)
    shutil.copy(private / "in-flight", clone / ".git" / "gitmem" / "in-flight")
    assert Git(clone)("rev-parse", "HEAD") == Git(repo)("rev-parse", "HEAD")
    quick = quick_search(clone, "capybara", limit=100)
    shutil.rmtree(clone / ".git" / "gitmem" / "stamps")  # the full path, looking at the work tree
    full = full_search(clone, "capybara")
    assert full
    assert quick is None or [hit.as_json() for hit in quick] == full


def _gitmem_within(repo: Path, *args: str, seconds: float = 30) -> subprocess.CompletedProcess:
    """``gitmem --repo REPO ARGS``, which must end within ``seconds`` (a hang fails the test)."""
    return subprocess.run([sys.executable, "-m", "gitmem", "--repo", str(repo), *args],
                          capture_output=True, env=SUBPROCESS_ENV, timeout=seconds)


@pytest.mark.parametrize("fifo", ["memory/user.md", "sessions/claude-code/s1/meta.json",
                                  "sessions/claude-code/s1/messages/000000.jsonl"])
def test_a_named_pipe_in_place_of_a_record_file_hangs_no_quick_answer(repo, fifo):
    """A look leaves what is not a regular file alone (never committed, never deleted); a
    quick answer must not open it then wait forever for a writer."""
    run_gitmem("memory", "write", "--user", repo=repo, input="Prefers marmoset answers.")
    settled(repo)
    for _ in range(20):
        if not gitmem_opening("session", "read", "claude-code", "s1", repo=repo)[1]:
            break
    (repo / fifo).unlink()
    os.mkfifo(repo / fifo)
    for _ in range(3):  # the first looks again; the next ones would be quick
        assert _gitmem_within(repo, "search", "marmoset").returncode == 0
        _gitmem_within(repo, "session", "read", "claude-code", "s1")


def session_read(repo: Path, warning: str = "") -> tuple[bytes, bool]:
    return gitmem_opening("session", "read", "claude-code", "s1", repo=repo, warning=warning)


def test_a_damaged_stamp_of_a_session_is_no_error(repo):
    """A stamp file that is JSON of another shape (damaged, or of another version) vouches
    for nothing: the read is the full one, not a failure."""
    for _ in range(20):
        if not session_read(repo)[1]:
            break
    expected = session_read(repo)[0]
    damaged = 0
    for file in (repo / ".git" / "gitmem" / "stamps").iterdir():
        kept = json.loads(file.read_bytes())
        if kept.get("files"):
            file.write_text(json.dumps({**kept, "files": [1, None, *kept["files"]]}))
            damaged += 1
    assert damaged == 1
    assert session_read(repo)[0] == expected


def test_a_named_pipe_in_place_of_a_stamp_file_hangs_nothing(repo):
    """What is not a regular file in the stamps folder is no stamp: it is never opened and
    waited on (nor read from without end, as a link to /dev/zero would be)."""
    settled(repo)
    for _ in range(20):
        if not session_read(repo)[1]:
            break
    stamps = list((repo / ".git" / "gitmem" / "stamps").iterdir())
    assert len(stamps) == 2
    for file in stamps:
        file.unlink()
        os.mkfifo(file)
    assert _gitmem_within(repo, "session", "read", "claude-code", "s1").returncode == 0
    assert _gitmem_within(repo, "search", "marmoset").returncode == 0


@pytest.mark.parametrize("command", [("search", "marmoset"), ("session", "read", "claude-code", "s1")])
def test_a_removed_current_folder_is_said_as_the_full_path_says_it(repo, tmp_path, command):
    """`--repo` relative to a current folder that was removed: the quick path has no
    answer of its own; the one line on stderr is the full path's (memory read's)."""
    gone = tmp_path / "gone"

    def run(*args: str) -> subprocess.CompletedProcess:
        gone.mkdir()
        script = f'cd "{gone}" && rmdir "{gone}" && exec "{sys.executable}" -m gitmem --repo ../repo "$@"'
        return subprocess.run(["sh", "-c", script, "sh", *args], capture_output=True, text=True,
                              env=SUBPROCESS_ENV, timeout=60)

    settled(repo)
    expected = run("memory", "read", "--user")
    assert expected.returncode != 0 and "Traceback" not in expected.stderr
    done = run(*command)
    assert (done.returncode, done.stderr) == (expected.returncode, expected.stderr)


@pytest.mark.parametrize("command", [("search", "marmoset"), ("session", "read", "claude-code", "s1")])
def test_a_repository_name_too_long_is_said_as_the_full_path_says_it(tmp_path, command):
    repo = str(tmp_path / ("z" * 300))
    expected = run_gitmem("memory", "read", "--user", repo=Path(repo), check=False)
    assert expected.returncode != 0 and "Traceback" not in expected.stderr
    done = run_gitmem(*command, repo=Path(repo), check=False)
    assert (done.returncode, done.stderr) == (expected.returncode, expected.stderr)


def test_main_moved_by_hand_during_a_reads_look_is_not_vouched_for(repo):
    """`git update-ref` moves main while a full `session read` looks at the work tree (slow
    here: many files gitmem does not watch). The look compared the files with the old
    main; a stamp of the new main over them would give the old bytes, quick, where the
    full read gives the new ones (and brings the work tree to them)."""
    git = Git(repo)
    chunk = repo / "sessions" / "claude-code" / "s1" / "messages" / "000000.jsonl"
    old = git("rev-parse", "HEAD").strip()
    with open(chunk, "a") as file:
        file.write('{"role": "user", "content": "moved by update-ref"}\n')
    git("commit", "-qam", "the next version, by plain git")
    new = git("rev-parse", "HEAD").strip()
    git("reset", "-q", "--hard", old)
    folder = chunk.parent.parent
    for n in range(60_000):
        (folder / f".junk{n}").touch()
    started = time.monotonic()
    run_gitmem("session", "read", "claude-code", "s1", repo=repo)
    took = time.monotonic() - started
    differing = []
    for step in range(1, 8):
        git("update-ref", "refs/heads/main", old)
        git("checkout", "-q", "-f", "main")
        shutil.rmtree(repo / ".git" / "gitmem" / "stamps", ignore_errors=True)
        time.sleep(0.1)
        reading = subprocess.Popen([sys.executable, "-m", "gitmem", "--repo", str(repo), "session", "read",
                                    "claude-code", "s1"], stdout=subprocess.DEVNULL, env=SUBPROCESS_ENV)
        time.sleep(took * step / 8)  # main moves at some moment of that read
        git("update-ref", "refs/heads/main", new)
        reading.wait(timeout=120)
        quick, opened = session_read(repo, warning="after an interrupted write")
        if not opened:
            shutil.rmtree(repo / ".git" / "gitmem" / "stamps")
            if quick != session_read(repo, warning="after an interrupted write")[0]:
                differing.append(step)
    assert differing == []
