"""Measurements of ``gitmem sync``, for ``gitmem bench`` (issue 6).

Two machines (clones of one bare remote) each make ``commits`` divergent commits
(memory appends, session writes, thread appends); then they sync: A pushes, B
fetches, merges and pushes, A fast-forwards. The baseline is plain git on copies of
the same repositories: ``git push``, ``git pull --no-rebase`` + ``git push``,
``git pull`` (``gitmem.bench.baselines.plain_git_sync``). Two workloads:

- ``disjoint``: each machine writes its own records, so plain git can do it too;
- ``shared``: both write the same user memory, session and thread; plain git stops
  at conflicts (their number is reported), gitmem merges.

Each is timed once (a sync of that size cannot be repeated on the same repositories).
``merge_large_markdown`` times the merge of one large diverged markdown file alone.

    gitmem bench --only sync
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

from gitmem.bench.baselines import plain_git_sync
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import git
from gitmem.merge import merge_text
from gitmem.repository import Gitmem
from gitmem.sync import sync


def diverged_machines(root: Path, commits: int, shared: bool) -> Path:
    """``root/{remote.git,a,b}``: two clones of one remote, ``commits`` commits apart each."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", "remote.git")
    with Gitmem.open(root / "a") as a:
        a.engine.add_remote("origin", str(root / "remote.git"))
        sync(a)
    git(root, "clone", "--quiet", "remote.git", "b")
    for name in ("a", "b"):
        with Gitmem.open(root / name, create=False) as mem:
            _write(mem, name, commits, shared)
    return root


def _write(mem: Gitmem, who: str, commits: int, shared: bool) -> None:
    """``commits`` writes: a third memory appends, a third session writes, a third thread appends."""
    record = "shared" if shared else who
    messages: list[dict[str, Any]] = []
    for i in range(commits):
        kind = i % 3
        if kind == 0:
            mem.memory.write(f"{who} noted item {i}", agent_id=None if shared else f"agent-{who}",
                             mode="append")
        elif kind == 1:
            messages.append({"id": f"{who}-{i}", "role": "user", "content": f"message {i} from {who}"})
            mem.sessions.write("claude-code", f"session-{record}", messages)
        else:
            mem.threads.append_events(f"thread-{record}", "planner",
                                      [{"type": "CUSTOM", "name": who, "value": i}])


def time_gitmem_sync(root: Path) -> float:
    """Seconds for A sync (push), B sync (fetch, merge, push), A sync (fast-forward)."""
    start = time.perf_counter()
    for name in ("a", "b", "a"):
        with Gitmem.open(root / name, create=False) as mem:
            sync(mem)
    return time.perf_counter() - start


def sync_diverged(bench: Bench) -> None:
    """Both workloads, gitmem against plain git on copies of the same repositories."""
    commits = bench.pick(10, 1_000)
    for workload in ("disjoint", "shared"):
        built = diverged_machines(bench.workdir / f"sync-{workload}-gitmem", commits, workload == "shared")
        copy = shutil.copytree(built, bench.workdir / f"sync-{workload}-git", symlinks=True)
        for name in ("a", "b"):
            git(copy / name, "remote", "set-url", "origin", str(copy / "remote.git"))
        setting = f"{commits:,} divergent commits each, {workload} records"
        gitmem = bench.add(Row("sync", setting, "gitmem sync: A, B, A", value=time_gitmem_sync(built),
                               unit="s"))
        git_seconds, conflicts = plain_git_sync(copy)
        plain = bench.add(Row("sync", setting, "git push; git pull --no-rebase + git push; git pull"
                              + (f" (stopped at {conflicts} conflicting files)" if conflicts else ""),
                              value=git_seconds, unit="s"))
        if not conflicts:
            bench.compare(gitmem, plain, what="gitmem / git")


def merge_large_markdown(bench: Bench) -> None:
    """The merge of one large diverged markdown memory: 4,000 base blocks, 2,000 new blocks
    inserted at random places on each side (issue 16: 10.7 s with a quadratic diff)."""
    rng = random.Random(16)
    base = [f"## base note {i}\nSome text about item {i}.\n" for i in range(bench.pick(400, 4000))]

    def side(tag: str) -> bytes:
        blocks = list(base)
        for i in range(len(base) // 2):
            blocks.insert(rng.randrange(len(blocks) + 1), f"## {tag} note {i}\nNew text {i}.\n")
        return "\n".join(blocks).encode()

    ours, theirs, start = side("ours"), side("theirs"), "\n".join(base).encode()
    what = "merge_text, markdown"
    rows = bench.measure("sync merge", f"{len(base):,} blocks + {len(base) // 2:,} new on each side",
                         {what: lambda _i: merge_text("memory/user.md", start, ours, theirs)},
                         samples=bench.pick(5, 20))
    rows[what].target = 1000.0  # ms: well under a second


SCENARIOS = [sync_diverged, merge_large_markdown]
