"""Measurements of ``gitmem sync``, for ``gitmem bench`` (issue 6).

Two machines (clones of one bare remote) each make ``commits`` divergent commits
(memory appends, session writes, thread appends); then they sync: A pushes, B
fetches, merges and pushes, A fast-forwards. The baseline is plain git on copies of
the same repositories: ``git push``, ``git pull --no-rebase`` + ``git push``,
``git pull``. Two workloads:

- ``disjoint``: each machine writes its own records, so plain git can do it too;
- ``shared``: both write the same user memory, session and thread; plain git stops
  at conflicts (their number is reported), gitmem merges.

    for result in suite(Path("/tmp/bench-sync"), quick=True):
        print(result["name"], result["samples"], result.get("baseline_samples"))
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitmem.repository import Gitmem
from gitmem.sync import sync

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def diverged_machines(root: Path, commits: int, shared: bool) -> Path:
    """``root/{remote.git,a,b}``: two clones of one remote, ``commits`` commits apart each."""
    root.mkdir(parents=True)
    _git(root, "init", "--quiet", "--bare", "--initial-branch=main", "remote.git")
    with Gitmem.open(root / "a") as a:
        a.engine.add_remote("origin", str(root / "remote.git"))
        sync(a)
    _git(root, "clone", "--quiet", "remote.git", "b")
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


def time_plain_git(root: Path) -> tuple[float, int]:
    """Seconds for the same with plain git, and the number of files it left in conflict."""
    start = time.perf_counter()
    _git(root / "a", "push", "--quiet", "origin", "main")
    pulled = _git(root / "b", "pull", "--quiet", "--no-rebase", "origin", "main", check=False)
    if pulled.returncode != 0:
        conflicts = _git(root / "b", "diff", "--name-only", "--diff-filter=U").stdout.split()
        return time.perf_counter() - start, len(conflicts)
    _git(root / "b", "push", "--quiet", "origin", "main")
    _git(root / "a", "pull", "--quiet", "--no-rebase", "origin", "main")
    return time.perf_counter() - start, 0


def suite(root: Path, *, quick: bool = False) -> list[dict[str, Any]]:
    """Both workloads: ``{name, samples, baseline, baseline_samples, conflicts}`` in seconds."""
    commits = 100 if quick else 1_000
    results = []
    for shared in (False, True):
        workload = "shared" if shared else "disjoint"
        built = diverged_machines(root / f"{workload}-gitmem", commits, shared)
        copy = shutil.copytree(built, root / f"{workload}-git", symlinks=True)
        for name in ("a", "b"):
            _git(copy / name, "remote", "set-url", "origin", str(copy / "remote.git"))
        seconds = time_gitmem_sync(built)
        git_seconds, conflicts = time_plain_git(copy)
        baseline = "git push, git pull --no-rebase + git push, git pull"
        if conflicts:
            baseline += f" (stopped at {conflicts} conflicting files)"
        results.append({
            "name": f"sync: two machines, {commits:,} divergent commits each, {workload} records",
            "samples": [seconds], "baseline": baseline, "baseline_samples": [git_seconds],
            "conflicts": conflicts})
    return results


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=GIT_ENV)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-sync-") as scratch:
        for result in suite(Path(scratch), quick=quick):
            seconds = statistics.median(result["samples"])
            base = statistics.median(result["baseline_samples"])
            print(f"{result['name']}: {seconds:.2f} s  ({seconds / base:.2f}x {result['baseline']}: "
                  f"{base:.2f} s)")


if __name__ == "__main__":
    main()
