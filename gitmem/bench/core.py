"""``gitmem bench``: what gitmem's operations cost, against baselines measured in the same run.

Every scenario adds rows to one table: an operation timed many times (median and
p95), a single figure (a size, a throughput), or the ratio of two rows, with the
target an issue set for it and whether it is met. Absolute numbers drift between
machines and runs; the baselines run beside gitmem, so the ratios hold.

    gitmem bench [--quick] [--only PATTERN] [--json FILE]     # or: python -m gitmem.bench

A scenario is a function ``scenario(bench)`` that adds rows through
:meth:`Bench.measure`, :meth:`Bench.compare` and :meth:`Bench.add`. This module holds
the table (:class:`Row`, :class:`Bench`), the runner and the printing; the scenarios
live in one module a family (:data:`SCENARIO_MODULES`), the baselines in
``gitmem.bench.baselines`` and what the scenarios share in ``gitmem.bench.workloads``.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib
import json
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from gitmem import __version__
from gitmem.errors import one_line
from gitmem.bench.baselines import pygit2_versions


@dataclasses.dataclass
class Row:
    """One line of the table: samples of an operation (ms), a single figure, or a ratio of two rows."""

    scenario: str
    repo: str  # the setting: repository size, session length, ...
    what: str
    samples: list[float] = dataclasses.field(default_factory=list)  # milliseconds
    value: float | None = None  # a single figure, in ``unit``
    unit: str = "ms"
    ratio: float | None = None
    target: float | None = None  # the ratio, else the figure or the median, is at most this
    load: float | None = None  # the machine's load average (1 minute) when the row ran
    floor_ms: float | None = None  # :func:`interpreter_floor` when the row ran
    error: str | None = None  # the scenario failed: its error, in one line

    @property
    def median(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    @property
    def p95(self) -> float | None:
        if not self.samples:
            return None
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]

    @property
    def figure(self) -> float | None:
        """What the row stands for: its ratio, else its single figure, else its median."""
        for found in (self.ratio, self.value, self.median):
            if found is not None:
                return found
        return None

    @property
    def measured(self) -> float:
        """:attr:`figure` of a row that has one; ValueError for a row with nothing in it."""
        found = self.figure
        if found is None:
            raise ValueError(f"{self.scenario}, {self.what}: nothing measured")
        return found

    @property
    def met(self) -> bool | None:
        figure = self.figure
        return None if self.target is None or figure is None else figure <= self.target

    def as_dict(self, best_floor_ms: float | None = None) -> dict[str, Any]:
        """The row as JSON; ``floor_slowdown`` is its :attr:`floor_ms` against
        ``best_floor_ms``, the fastest the floor ran in the run (1.0: the machine was as
        quick as it got)."""
        slowdown = (self.floor_ms / best_floor_ms) if self.floor_ms and best_floor_ms else None
        return {"scenario": self.scenario, "repo": self.repo, "what": self.what, "unit": self.unit,
                "n": len(self.samples), "median_ms": self.median, "p95_ms": self.p95,
                "value": self.value, "ratio": self.ratio, "target": self.target, "met": self.met,
                "load": self.load, "floor_ms": self.floor_ms, "floor_slowdown": slowdown,
                "error": self.error}

    def stamp(self, floors: list[float]) -> None:
        """Note how busy the machine was: the load average now, and the median of the
        interpreter floors taken while the row ran (one now when none was)."""
        self.load = round(os.getloadavg()[0], 2)
        self.floor_ms = statistics.median(floors or [interpreter_floor()])


FLOOR_WORK = 10_000  # loop turns of interpreter_floor: about a millisecond on an idle core


def interpreter_floor() -> float:
    """Milliseconds a fixed piece of pure-Python work takes now (the least of three runs):
    what the interpreter's own speed is at this moment, so that a row measured while
    other processes held the cores can be told from a row that got slower."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        found: dict[int, str] = {}
        for i in range(FLOOR_WORK):
            found[i & 255] = str(i)
        best = min(best, time.perf_counter() - started)
    return best * 1000


class _Table(list):
    """The bench's rows: a row added without a note of how busy the machine was (a
    scenario's own extend) gets one as it is added, and is printed then (``show``)."""

    def __init__(self, show: Callable[[Row], None] | None = None):
        super().__init__()
        self.show = show

    def append(self, row: Row) -> None:
        if row.load is None:
            row.stamp([])
        super().append(row)
        if self.show is not None:
            self.show(row)

    def extend(self, rows) -> None:
        for row in rows:
            self.append(row)

    # as typeshed's own list.__iadd__: mypy wants += to take what + takes (a list), not any iterable
    def __iadd__(self, rows: Iterable[Any]) -> _Table:  # type: ignore[misc]
        self.extend(rows)
        return self


@dataclasses.dataclass
class Bench:
    """What scenarios share: a scratch folder, how many samples to take, and the table."""

    workdir: Path
    quick: bool
    samples: int
    turn: int = 5  # operations take turns of this many samples, so drift hits them alike
    warmup: int = 3  # untimed runs of each operation before its samples
    rows: list[Row] = dataclasses.field(default_factory=lambda: _Table())

    def measure(self, scenario: str, repo: str, operations: Mapping[Any, Callable[[int], Any]], *,
                samples: int | None = None) -> dict[Any, Row]:
        """Time each ``operation(i)`` (i distinct across calls) and add one row per operation.

        A key of ``operations`` is what is measured, or a pair (setting, what) for rows of
        different settings that take turns (so that the machine's drift hits them alike).

        Each operation runs :attr:`warmup` times untimed first, then ``samples`` times
        (default :attr:`samples`) in short turns, in a rotating order. One with a ``prepare(i)``
        method has it called, untimed, before each run (e.g. to reopen the repository
        for a cold read); one with a ``settle()`` method has it called, untimed, after
        each of its turns (e.g. to let background work finish before another's turn).
        """
        rows = {key: Row(scenario, *(key if isinstance(key, tuple) else (repo, key))) for key in operations}
        floors: list[float] = []  # the interpreter's floor after each turn
        counter = 0

        def run(operation: Callable[[int], Any]) -> float:
            nonlocal counter
            if hasattr(operation, "prepare"):
                operation.prepare(counter)
            started = time.perf_counter()
            operation(counter)
            elapsed = (time.perf_counter() - started) * 1000
            counter += 1
            return elapsed

        # What earlier scenarios and this set-up left behind stays out of the samples: their
        # files are written out, and their objects are not scanned again by the collector.
        os.sync()
        gc.collect()
        gc.freeze()
        for operation in operations.values():  # warm caches and first-time setup, untimed
            for _ in range(self.warmup):
                run(operation)
        order = list(operations.items())
        for turn in range(max(1, (samples or self.samples) // self.turn)):
            for what, operation in order[turn % len(order):] + order[:turn % len(order)]:
                rows[what].samples.extend(run(operation) for _ in range(self.turn))
                if hasattr(operation, "settle"):
                    operation.settle()
            floors.append(interpreter_floor())
        for row in rows.values():
            row.stamp(floors)
        self.rows.extend(rows.values())
        return rows

    def compare(self, numerator: Row, denominator: Row, target: float | None = None, *,
                what: str | None = None) -> Row:
        """Add the row ``numerator / denominator`` (of their figures), with the target it
        must meet; a failed row when either has no figure."""
        what = what or f"{numerator.what} / {denominator.what}"
        top, bottom = numerator.figure, denominator.figure
        if top is None or not bottom:
            empty = numerator if top is None else denominator
            return self.add(Row(numerator.scenario, numerator.repo, what, target=target,
                                error=f"no figure to divide: {empty.what}"))
        return self.add(Row(numerator.scenario, numerator.repo, what, ratio=top / bottom, target=target))

    def add(self, row: Row) -> Row:
        """Add a row made by the scenario itself (a single figure, samples taken its own way)."""
        self.rows.append(row)
        return row

    def pick(self, quick: Any, full: Any) -> Any:
        """``quick`` in a ``--quick`` run, else ``full``: sizes and counts of a scenario."""
        return quick if self.quick else full


# -- the scenarios ------------------------------------------------------------------

# The scenario modules of gitmem.bench, in the order of the table; each lists its
# scenarios, in order, in ``SCENARIOS``. Registering a new module is adding its name here.
SCENARIO_MODULES = ("memory", "sessions", "reads", "threads", "serve", "watch", "sync", "history",
                    "record_index", "cold", "startup", "catch_up", "search", "retrieval", "mcp", "kaboo",
                    "web")


def scenarios() -> list[Callable[[Bench], None]]:
    """Every scenario, in the order of the table."""
    return [scenario for name in SCENARIO_MODULES
            for scenario in importlib.import_module(f"gitmem.bench.{name}").SCENARIOS]


# -- running and printing ----------------------------------------------------------


def run(quick: bool = False, json_path: str | None = None, only: str | None = None) -> list[Row]:
    """Run every scenario (or those whose name matches the regular expression ``only``),
    print each row as it comes, and write the machine and the rows to ``json_path`` as JSON."""
    chosen = [s for s in scenarios() if only is None or re.search(only, s.__name__)]
    if not chosen:
        raise ValueError(f"no scenario matches {only!r}; the scenarios are "
                         f"{', '.join(s.__name__ for s in scenarios())}")
    return run_scenarios(chosen, quick, json_path, only)


def run_scenarios(chosen: list[Callable[[Bench], None]], quick: bool, json_path: str | None = None,
                  only: str | None = None) -> list[Row]:
    """Run ``chosen`` as :func:`run` does. A scenario that raises adds one failed row
    (its error in one line) and the others still run."""
    load_at_start = os.getloadavg()[0]
    started = time.perf_counter()
    seconds: dict[str, float] = {}  # per scenario
    info = {**machine(), "load_at_start": load_at_start}
    print(format_head(quick, info), flush=True)
    print(format_line(COLUMNS), flush=True)
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-") as scratch:
        bench = Bench(Path(scratch), quick=quick, samples=5 if quick else 100, warmup=1 if quick else 3,
                      rows=_Table(lambda row: print(format_line(_cells(row)), flush=True)))
        for scenario in chosen:
            scenario_started = time.perf_counter()
            try:
                scenario(bench)
            except Exception as exc:  # noqa: BLE001 - one scenario's fault is its row, not the run's end
                bench.add(Row(scenario.__name__, "", "the scenario", error=f"{type(exc).__name__}: {one_line(exc)}"))
            seconds[scenario.__name__] = round(time.perf_counter() - scenario_started, 2)
    info.update(load_at_end=os.getloadavg()[0], seconds=time.perf_counter() - started)
    failed = sum(row.error is not None for row in bench.rows)
    print(f"{len(bench.rows)} rows, {failed} failed; load average {info['load_at_end']:.2f} at end; "
          f"{info['seconds']:.0f} s", flush=True)
    best_floor = min((row.floor_ms for row in bench.rows if row.floor_ms), default=None)
    if json_path:
        Path(json_path).write_text(json.dumps(
            {"quick": quick, "only": only, "machine": info, "scenario_seconds": seconds,
             "rows": [row.as_dict(best_floor) for row in bench.rows]}, indent=2) + "\n")
    return bench.rows


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]
    return {"gitmem": __version__, "python": platform.python_version(), **pygit2_versions(),
            "git": git,
            "sqlite": sqlite3.sqlite_version, "cores": os.cpu_count(), "cpu": cpu_model(),
            "platform": platform.platform(), "durability": os.environ.get("GITMEM_DURABILITY") or "fast"}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


COLUMNS = ("scenario", "setting", "measured", "n", "median", "p95", "ratio", "target", "met")
WIDTHS = (22, 28, 58, 4, 11, 11, 8, 12, 6)  # a longer cell pushes the rest of its line along
_TEXT_COLUMNS = 3  # the figures after them are aligned right


def format_head(quick: bool, info: dict[str, Any]) -> str:
    """The machine on one line."""
    return (f"gitmem bench{' --quick' if quick else ''}: {info['cores']} cores ({info['cpu']}), "
            f"Python {info['python']}, pygit2 {info['pygit2']} / libgit2 {info['libgit2']}, "
            f"git {info['git']}, SQLite {info['sqlite']} (WAL, synchronous=FULL), "
            f"durability {info['durability']}; load average {info['load_at_start']:.2f} at start")


def format_line(cells: tuple[str, ...]) -> str:
    """One line of the table: the header's, or a row's (:func:`_cells`)."""
    return "  ".join(cell.ljust(width) if i < _TEXT_COLUMNS else cell.rjust(width)
                     for i, (cell, width) in enumerate(zip(cells, WIDTHS, strict=True))).rstrip()


def _cells(row: Row) -> tuple[str, ...]:
    if row.error is not None:
        return (row.scenario, row.repo, row.what, "", "", "", "", "", f"failed: {row.error}")
    if row.figure is None:
        return (row.scenario, row.repo, row.what, "", "", "", "", "", "no figure")
    if row.ratio is not None:
        median = p95 = n = ""
        ratio, target = f"{row.ratio:.2f}x", f"<= {row.target:g}x" if row.target is not None else ""
    else:
        n = str(len(row.samples)) if row.samples else ""
        median = _figure(row.measured, row.unit)
        p95 = _figure(row.p95, row.unit) if row.p95 is not None else ""  # None: no samples
        ratio, target = "", f"<= {row.target:,g} {row.unit}" if row.target is not None else ""
    met = "" if row.met is None else "met" if row.met else "missed"
    return (row.scenario, row.repo, row.what, n, median, p95, ratio, target, met)


def _figure(value: float, unit: str) -> str:
    if isinstance(value, int):  # a count
        return f"{value:,} {unit}"
    decimals = 3 if abs(value) < 1 else 2 if abs(value) < 100 else 1 if abs(value) < 1000 else 0
    return f"{value:,.{decimals}f} {unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitmem.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--only", metavar="PATTERN",
                        help="run only the scenarios whose name matches this regular expression")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    rows = run(args.quick, args.json, args.only)
    return 1 if any(row.error is not None for row in rows) else 0
