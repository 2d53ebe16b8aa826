"""The quick answers (`gitmem search`, `gitmem session read` without opening the repository)
against what the world does to a repository with real tools: each quick answer must be
the one the full path gives at that moment (`gitmem/git/stamp.py`, `gitmem/search_query.py`,
`gitmem/quick_reads.py`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import Git, gitmem_opening, run_gitmem
from gitmem.repository import Gitmem
from gitmem.search_query import quick_search


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
