"""`gitmem search` answered without opening the repository (issue 26's warm search).

After a search that found nothing waiting in the work tree, the next one is answered from
the index alone while a stamp of that look still holds (`gitmem/git/stamp.py`). Every way
the world changes a repository must break the stamp, so that the answer is the one the
full search gives: an editor's save, `>>`, a new file, `rm`, `mv`, a file's mtime set
back, plain `git commit`, `git checkout`, a write through gitmem, a killed writer's
in-flight commit. The tests run the real command and say whether it loaded pygit2 (the
full search does).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import Git, gitmem_opening, run_gitmem
from gitmem.repository import Gitmem
from gitmem.search.query import quick_search

def search(repo: Path, query: str, *options: str) -> tuple[list[tuple[str, str, str]], bool]:
    """(hits as (record, unit, snippet), whether it opened the repository) of ``gitmem
    search --json OPTIONS -- QUERY``."""
    limit = () if "--limit" in options else ("--limit", "100")
    out, opened = gitmem_opening("search", "--json", *limit, *options, "--", query, repo=repo)
    return [(h["record"], h["unit"], h["snippet"]) for h in json.loads(out)], opened


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=repo,
               input="Checks types first, a marmoset habit.")
    run_gitmem("memory", "write", "--user", repo=repo, input="Prefers short answers.")
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": [{"role": "user", "content": "the marmoset deploy is on friday"}]}))
    return repo


def settled(repo: Path) -> None:
    """Searches until one is answered without opening the repository (the first full one
    takes the stamp; files a write touched a moment before it are vouched for by the next)."""
    for _ in range(20):
        if not search(repo, "marmoset")[1]:
            return
    raise AssertionError("no search was answered from the index alone")


def test_a_second_search_is_answered_without_opening_and_gives_the_same_hits(repo):
    first, opened = search(repo, "marmoset")
    assert opened
    settled(repo)
    again, opened = search(repo, "marmoset")
    assert not opened and again == first
    assert {record for record, _, _ in again} == {"agent:reviewer", "session:claude-code/s1"}
    with Gitmem.open(repo) as mem:  # the Python API's answer, the same
        full = [(h.record, h.unit, h.snippet) for h in mem.search("marmoset", limit=100)]
    assert again == full
    quick = quick_search(repo, "marmoset", limit=100)
    assert quick is not None and [(h.record, h.unit, h.snippet) for h in quick] == full


def test_history_hits_and_options_match_the_full_search(repo):
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input="Replaced: no animals now.")
    settled(repo)
    for options in ((), ("--history",), ("--kind", "session"), ("--record", "agent:reviewer", "--history")):
        quick, opened = search(repo, "marmoset", *options)
        assert not opened
        with Gitmem.open(repo) as mem:
            full = mem.search("marmoset", history="--history" in options, limit=100,
                              kind="session" if "session" in options else None,
                              record="agent:reviewer" if "agent:reviewer" in options else None)
        assert quick == [(h.record, h.unit, h.snippet) for h in full], options
    assert search(repo, "marmoset", "--history")[0][0][0] == "agent:reviewer"


def _editor_save(repo: Path) -> None:
    path = repo / "memory" / "agents" / "reviewer.md"
    path.write_text(path.read_text() + "\n\nA capybara note saved in an editor.\n")


def _shell_append(repo: Path) -> None:
    subprocess.run(f"printf '\\n\\nappended capybara\\n' >> {repo / 'memory' / 'user.md'}", shell=True, check=True)


def _new_file(repo: Path) -> None:
    (repo / "memory" / "agents" / "newcomer.md").write_text("The capybara arrived by hand.\n")


def _old_mtime(repo: Path) -> None:
    _editor_save(repo)
    os.utime(repo / "memory" / "agents" / "reviewer.md", (946684800, 946684800))  # 2000-01-01


def _git_commit(repo: Path) -> None:
    (repo / "memory" / "user.md").write_text("Prefers capybara answers.\n")
    Git(repo)("commit", "-q", "-am", "by hand")


def _write_through_gitmem(repo: Path) -> None:
    run_gitmem("memory", "write", "--agent", "other", repo=repo, input="a capybara, written by gitmem")


@pytest.mark.parametrize("change", [_editor_save, _shell_append, _new_file, _old_mtime, _git_commit,
                                    _write_through_gitmem])
def test_a_change_made_after_the_last_search_is_found(repo, change):
    settled(repo)
    change(repo)
    hits, opened = search(repo, "capybara")
    assert opened and hits, change.__name__


def test_a_file_removed_or_moved_by_hand_is_not_found_where_it_was(repo):
    settled(repo)
    (repo / "memory" / "agents" / "reviewer.md").unlink()
    hits, opened = search(repo, "marmoset")
    assert opened and [r for r, _, _ in hits] == ["session:claude-code/s1"]
    settled(repo)
    session = repo / "sessions" / "claude-code" / "s1"
    session.rename(session.with_name("s2"))
    hits, opened = search(repo, "marmoset")
    assert opened and [r for r, _, _ in hits] == ["session:claude-code/s2"]


def test_a_checkout_elsewhere_or_a_killed_writers_commit_is_not_vouched_for(repo):
    settled(repo)
    git = Git(repo)
    noted = repo / ".git" / "gitmem" / "in-flight"  # a writer noted a commit, then was killed
    noted.write_text(git("commit-tree", "-p", "HEAD", "-m", "never landed", "HEAD^{tree}").strip().ljust(64) + "\n")
    assert quick_search(repo, "marmoset") is None
    assert search(repo, "marmoset")[1]
    settled(repo)
    _git_commit(repo)  # main moves past gitmem's last noted commit: still vouched for after a look
    settled(repo)
    git("checkout", "-q", "--detach")
    assert quick_search(repo, "marmoset") is None
    git("checkout", "-q", "main")
    settled(repo)
    git("pack-refs", "--all")  # main now in packed-refs only: still read
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert quick_search(repo, "marmoset") is not None


def test_a_deleted_or_damaged_index_is_rebuilt_by_the_full_search(repo):
    settled(repo)
    index = repo / ".git" / "gitmem" / "search.sqlite"
    index.write_bytes(b"not a database" * 100)
    hits, opened = search(repo, "marmoset")
    assert opened and len(hits) == 2
    for name in ("search.sqlite", "search.sqlite-wal", "search.sqlite-shm"):
        (repo / ".git" / "gitmem" / name).unlink(missing_ok=True)
    assert quick_search(repo, "marmoset") is None
    assert len(search(repo, "marmoset")[0]) == 2


def test_a_limit_beyond_sqlites_integers_gives_every_hit(repo):
    """`--limit` of 10**30 printed SQLite's overflow error; it means no limit."""
    for _ in range(2):
        hits, _ = search(repo, "marmoset", "--limit", str(10**30))
        assert {record for record, _, _ in hits} == {"agent:reviewer", "session:claude-code/s1"}


def test_a_hits_snippet_is_found_when_its_words_are_written_otherwise(repo):
    # Lines appended with >>: the accented word escaped as JSON writes it, and a line before
    # it that holds the word as written but only in an id, which is not searched.
    chunk = repo / "sessions" / "claude-code" / "s1" / "messages" / "000000.jsonl"
    with chunk.open("ab") as file:
        file.write(b'{"role": "user", "content": "unrelated words", "id": "creme-1"}\n'
                   b'{"role": "assistant", "content": "cr\\u00e8me for dessert"}\n')
    first, opened = search(repo, "creme")
    assert opened
    settled(repo)
    again, opened = search(repo, "creme")
    assert not opened
    assert first == again == [("session:claude-code/s1", "message", "**crème** for dessert")]
