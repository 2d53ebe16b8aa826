"""``gitmem bench`` scenarios for cold starts: a fresh process from its spawn to its answer.

- :func:`cold_start` (issue 17): ``gitmem --version`` (target <= 1.3x), ``gitmem memory
  read --user`` on a repository with a small user memory (<= 2x), and ``gitmem serve``
  from its spawn to the answer to one ``storage.info`` (<= 2x), against ``python -c
  "import pygit2"`` from spawn to exit;
- :func:`serve_cold_start`: ``gitmem serve`` from its spawn to the ``storage.info``
  answer (<= 250 ms), beside what it is spent on: the bare interpreter, the imports, the
  import time by package (``python -X importtime``), and the same start without bytecode.

Every sample is a new process, and the commands take turns, so drift in load hits all
alike. gitmem runs as ``python -m gitmem`` with this interpreter, so the rows measure
this checkout, with its bytecode cached as after ``pip install`` (under the scratch
folder, through PYTHONPYCACHEPREFIX; an untimed first run of each command writes it).

    gitmem bench --only cold
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, GITMEM, ServeProcess, build_repository
from gitmem.repository import Gitmem

COLD_START_BUDGET_MS = 250.0  # gitmem serve, spawn to the first answer
VERSION_TARGET = 1.3  # gitmem --version against python -c "import pygit2"
COMMAND_TARGET = 2.0  # gitmem memory read --user, and serve's first answer, against the same
USER_MEMORY = "Prefers short answers.\n\nWorks in Go and Python.\n"


def cold_start(bench: Bench) -> None:
    """``gitmem --version``, ``gitmem memory read --user`` and ``gitmem serve``'s first
    answer against ``python -c "import pygit2"``, each spawned afresh for every sample."""
    repo = build_repository(bench.workdir / "cold-start", 10)
    with Gitmem.open(repo, create=False) as mem:
        mem.memory.write(USER_MEMORY)
    env = bytecode_env(bench)
    baseline = 'python -c "import pygit2" (start and exit)'
    rows = spawn_rows(bench, "cold start", "import pygit2 as the baseline", {
        baseline: exited([sys.executable, "-c", "import pygit2"], env),
        "gitmem --version (start and exit)": exited([*GITMEM, "--version"], env, b"gitmem "),
        "gitmem memory read --user (start and exit)":
            exited([*GITMEM, "--repo", str(repo), "memory", "read", "--user"], env,
                   USER_MEMORY.encode()),
        "gitmem serve: spawn to the storage.info answer": answered(repo, env),
    }, runs=bench.pick(5, 21))
    pygit2_row = rows.pop(baseline)
    for row, target in zip(rows.values(), (VERSION_TARGET, COMMAND_TARGET, COMMAND_TARGET), strict=True):
        bench.compare(row, pygit2_row, target, what=f"{row.what.split(' (')[0]} / import pygit2")


def serve_cold_start(bench: Bench) -> None:
    """Spawn to the ``storage.info`` answer, beside the bare interpreter and the imports alone,
    and once more without any bytecode (PYTHONDONTWRITEBYTECODE=1 on a source checkout:
    every module compiled at each start)."""
    repo = build_repository(bench.workdir / "serve-cold", 10)
    cached = bytecode_env(bench)
    uncached = {**GIT_ENV, "PYTHONDONTWRITEBYTECODE": "1"}
    uncached.pop("PYTHONPYCACHEPREFIX", None)

    def imports() -> float:  # timed inside the child: no interpreter start or exit
        done = subprocess.run([sys.executable, "-c", _TIMED_IMPORTS], env=cached, check=True,
                              capture_output=True, text=True, timeout=120)
        return float(done.stdout)

    spawn, start, imported, _ = spawn_rows(bench, "cold start", "10 files", {
        "serve: spawn to storage.info answer": answered(repo, cached),
        "python -c pass (start and exit)": exited([sys.executable, "-c", "pass"], cached),
        "imports: gitmem.cli, gitmem.faces.serve": imports,
        "serve: spawn to answer, no bytecode cache": answered(repo, uncached),
    }, runs=bench.pick(2, 20)).values()
    spawn.target = COLD_START_BUDGET_MS
    bench.add(Row(spawn.scenario, spawn.repo, "  the rest: open repository, log, answer (medians)",
                  value=spawn.measured - start.measured - imported.measured))
    for group, ms in import_time(repo, cached, runs=bench.pick(1, 3))[:8]:
        bench.add(Row(spawn.scenario, spawn.repo, f"  import time of {group}", value=ms))


SCENARIOS = [cold_start, serve_cold_start]


# -- spawning and timing ------------------------------------------------------------------


def bytecode_env(bench: Bench) -> dict[str, str]:
    """The bench's environment with bytecode written and read under the scratch folder."""
    env = {k: v for k, v in GIT_ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(bench.workdir / "pycache")
    return env


def exited(command: Sequence[str], env: dict[str, str], expect: bytes = b"") -> Callable[[], float]:
    """Seconds from spawning ``command`` to its exit; it must succeed and print ``expect``."""
    def spawn() -> float:
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True, timeout=120)
        elapsed = time.perf_counter() - started
        if done.returncode != 0 or expect not in done.stdout:
            raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}, "
                               f"{done.stderr.decode(errors='replace').strip()[-300:]}")
        return elapsed
    return spawn


def answered(repo: Path, env: dict[str, str], method: str = "storage.info") -> Callable[[], float]:
    """Seconds from spawning ``gitmem serve`` to its answer to ``method``; then, untimed,
    its input is closed and it is waited for."""
    def spawn() -> float:
        started = time.perf_counter()
        server = ServeProcess(repo, env)
        try:
            server.call(method)
            return time.perf_counter() - started
        finally:
            server.close()
    return spawn


def spawn_rows(bench: Bench, scenario: str, setting: str, measured: dict[Any, Callable[[], float]],
               runs: int) -> dict[Any, Row]:
    """A row a ``measure()`` (seconds, one new process each): one untimed run each, then
    ``runs`` samples each, taking turns in a rotating order. A key of ``measured`` is what
    is measured, or a pair (setting, what) for rows of different settings taking turns."""
    for measure in measured.values():
        measure()  # writes the bytecode cache
    rows = {key: Row(scenario, *(key if isinstance(key, tuple) else (setting, key))) for key in measured}
    order = list(measured.items())
    for run in range(runs):
        for what, measure in order[run % len(order):] + order[:run % len(order)]:
            rows[what].samples.append(measure() * 1000)
    bench.rows.extend(rows.values())
    return rows


_TIMED_IMPORTS = """
import time
started = time.perf_counter()
import gitmem.cli, gitmem.faces.serve
print(time.perf_counter() - started)
"""
_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \| *(\S+)")


def import_time(repo: Path, env: dict[str, str], runs: int = 3) -> list[tuple[str, float]]:
    """Where ``gitmem serve`` spends its import time: ms of self time per package, biggest first.

    gitmem's own modules are counted one by one, others by top-level package; the median
    of ``runs`` runs of ``python -X importtime`` (which adds a little overhead of its own).
    """
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0] * runs)
    for run in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", *GITMEM[1:], "serve", "--repo",
                               str(repo)], input=b"", capture_output=True, env=env, check=True,
                              timeout=120)
        for match in map(_IMPORT_LINE.match, done.stderr.decode().splitlines()):
            if match:
                name = match[2]
                group = name if name.startswith("gitmem") else name.split(".")[0]
                spent[group][run] += int(match[1]) / 1000
    medians = {group: statistics.median(times) for group, times in spent.items()}
    return sorted(medians.items(), key=lambda item: -item[1])
