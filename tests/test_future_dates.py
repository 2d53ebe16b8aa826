"""A commit dated in the future (issue 24, item 1): history follows main's topology, not
commit dates. The newest version is the one at main, ``@~N`` counts the record's changes
back from there, and dates are shown as they are.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.repository import Gitmem

FUTURE = "2031-05-01T12:00:00+00:00"
RECORD = "agent:x"
PATH = "memory/agents/x.md"


def future_commit(repo: Path, text: str) -> str:
    """A plain ``git commit`` of ``text`` appended to agent x's memory, made with a clock
    five years ahead; returns its id."""
    file = repo / PATH
    file.write_text(file.read_text() + f"\n{text}\n")
    env = {**SUBPROCESS_ENV, "GIT_COMMITTER_DATE": FUTURE, "GIT_AUTHOR_DATE": FUTURE}
    for args in (["add", PATH], ["commit", "-q", "-m", "a commit from a wrong clock"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    return Git(repo)("rev-parse", "HEAD").strip()


def assert_follows_main(repo: Path, future: str) -> None:
    """After ``future`` (a future-dated commit adding "block from the future", the record's
    newest version at main) and one gitmem append of "newest block", every history command
    sees the append as newest and the future-dated commit as the version before it."""
    def cli(*args, **kwargs):
        return run_gitmem(*args, repo=repo, **kwargs)

    cli("memory", "write", "--append", "--agent", "x", input="newest block")
    git = Git(repo)
    head = git("rev-parse", "main").strip()
    assert git("merge-base", "--is-ancestor", future, head, check=False) == ""
    now = cli("memory", "read", "--agent", "x").stdout
    assert now.endswith("block from the future\n\nnewest block\n")

    assert cli("show", RECORD, "--at", "@").stdout == now
    before = cli("show", RECORD, "--at", "@~1").stdout
    assert "block from the future" in before and "newest block" not in before
    blamed = json.loads(cli("blame", RECORD, "--json").stdout)
    assert [b["value"] for b in blamed][-2:] == ["block from the future", "newest block"]
    assert [b["commit"] for b in blamed][-2:] == [future, head]
    patch = cli("diff", RECORD, "--since", "@~1", "--until", "@").stdout
    assert "+newest block\n" in patch and "-" + "newest" not in patch
    entries = json.loads(cli("log", RECORD, "--json").stdout)
    assert [e["id"] for e in entries][:2] == [head, future]
    assert entries[1]["date"] == "2031-05-01T12:00:00+00:00"  # shown as it is
    done = json.loads(cli("restore", RECORD, "--at", "@", "--json").stdout)
    assert done == {"record": RECORD, "from": head, "commit": None}  # nothing to change
    assert git("rev-parse", "main").strip() == head
    assert cli("memory", "read", "--agent", "x").stdout == now
    with Gitmem.open(repo, create=False) as mem:  # the same from Python, a fresh index
        assert mem.show(RECORD, "@").value["content"] == now
        assert [c.id for c in mem.log(RECORD)][:2] == [head, future]


def test_a_future_dated_commit_made_by_hand(repo_path):
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("first block", agent_id="x")
        mem.memory.write("second block", agent_id="x", mode="append")
        mem.log(RECORD)  # the index is built before the odd commit comes
    future = future_commit(repo_path, "block from the future")
    assert_follows_main(repo_path, future)


@pytest.mark.parametrize("diverged", [False, True], ids=["fast-forward", "merged"])
def test_a_future_dated_commit_synced_from_a_clone(tmp_path, diverged):
    remote, here, there = tmp_path / "remote.git", tmp_path / "here", tmp_path / "there"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    with Gitmem.open(here) as mem:
        mem.engine.remotes.add("origin", str(remote))
        mem.memory.write("first block", agent_id="x")
        mem.log(RECORD)
    run_gitmem("sync", repo=here)
    subprocess.run(["git", "clone", "-q", str(remote), str(there)], check=True, env=SUBPROCESS_ENV)
    future = future_commit(there, "block from the future")
    subprocess.run(["git", "-C", str(there), "push", "-q", "origin", "main"], check=True,
                   env=SUBPROCESS_ENV)
    if diverged:  # a write here meanwhile: the sync merges
        run_gitmem("memory", "write", "--append", "--user", repo=here, input="a user fact")
    run_gitmem("sync", repo=here)
    parents = Git(here)("rev-list", "--parents", "-n", "1", "main").split()[1:]
    assert len(parents) == (2 if diverged else 1)  # the merge changed x only against ours
    assert_follows_main(here, future)
