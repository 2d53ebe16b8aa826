"""``gitmem bench``: what a write costs, against baselines measured in the same run.

Every scenario adds rows to one table: an operation timed many times (median and
p95 in milliseconds), or a ratio between two such rows with the target it must stay
under. Absolute numbers drift between machines and runs; the targets are ratios.

    gitmem bench --quick --json bench.json     # or: python -m gitmem.bench

A new scenario is a function ``scenario(bench)`` that calls :meth:`Bench.measure`
and :meth:`Bench.compare`, listed in :data:`SCENARIOS`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The raw floor is a pygit2 commit with nothing around it, so this is the one module
# besides gitmem/engine.py that imports pygit2: as a baseline, never to store data.
import pygit2

from gitmem import __version__
from gitmem.repository import Gitmem

AGENT = "bench"
MEMORY_PATH = f"memory/agents/{AGENT}.md"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_CONFIG_NOSYSTEM": "1"}


@dataclasses.dataclass
class Row:
    """One line of the table: samples of an operation in ms, or a ratio of two rows' medians."""

    scenario: str
    repo: str
    what: str
    samples: list[float] = dataclasses.field(default_factory=list)
    ratio: float | None = None
    target: float | None = None  # the ratio must be at most this

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
    def ok(self) -> bool | None:
        return None if self.target is None else self.ratio <= self.target

    def as_dict(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "repo": self.repo, "what": self.what,
                "n": len(self.samples), "median_ms": self.median, "p95_ms": self.p95,
                "ratio": self.ratio, "target": self.target, "ok": self.ok}


@dataclasses.dataclass
class Bench:
    """What scenarios share: a scratch folder, how many samples to take, and the table."""

    workdir: Path
    quick: bool
    samples: int
    turn: int = 5  # operations take turns of this many samples, so drift hits them alike
    rows: list[Row] = dataclasses.field(default_factory=list)

    def measure(self, scenario: str, repo: str,
                operations: dict[str, Callable[[int], None]]) -> dict[str, Row]:
        """Time each ``operation(i)`` (i distinct across calls) and add one row per operation.

        The operations take short turns, in a rotating order. One with a ``settle()``
        method has it called, untimed, after each of its turns (e.g. to let background
        work finish before another operation's turn).
        """
        rows = {what: Row(scenario, repo, what) for what in operations}
        counter = 0
        for operation in operations.values():  # warm caches and first-time setup, untimed
            for _ in range(3):
                operation(counter)
                counter += 1
        order = list(operations.items())
        for turn in range(max(1, self.samples // self.turn)):
            for what, operation in order[turn % len(order):] + order[:turn % len(order)]:
                for _ in range(self.turn):
                    started = time.perf_counter()
                    operation(counter)
                    rows[what].samples.append((time.perf_counter() - started) * 1000)
                    counter += 1
                if hasattr(operation, "settle"):
                    operation.settle()
        self.rows.extend(rows.values())
        return rows

    def compare(self, numerator: Row, denominator: Row, target: float) -> Row:
        """Add the row ``numerator / denominator`` (of medians) with the target it must meet."""
        row = Row(numerator.scenario, numerator.repo, f"{numerator.what} / {denominator.what}",
                  ratio=numerator.median / denominator.median, target=target)
        self.rows.append(row)
        return row


# -- repositories ------------------------------------------------------------------


def build_repository(path: Path, files: int) -> Path:
    """A gitmem repository holding ``files`` files (the bench's memory among them), checked out."""
    contents = {f"notes/{i // 100:03d}/{i:05d}.md": f"note {i}\n".encode() * 8
                for i in range(files - 1)}
    contents[MEMORY_PATH] = memory_content(-1)
    with Gitmem.open(path) as mem:  # init adds README.md and .gitattributes
        mem.engine.commit(contents, f"bench: {files} files")
    return path


def copy_repository(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose index matches its files again (copying changes inodes)."""
    shutil.copytree(source, target, symlinks=True)
    subprocess.run(["git", "-C", str(target), "update-index", "-q", "--refresh"],
                   env=GIT_ENV, check=False, capture_output=True)
    return target


def memory_content(i: int) -> bytes:
    """A memory document of about 2 KB, different for every ``i`` (as MemoryStore stores it)."""
    lines = [f"- note {n}: the reviewer prefers small, focused changes ({i})" for n in range(32)]
    return ("# bench\n\n" + "\n".join(lines) + f"\n\nrevision {i}\n").encode()


# -- the three ways to make a memory write -----------------------------------------


class StoreWrite:
    """``MemoryStore.write`` (replace), the path every gitmem write takes."""

    def __init__(self, path: Path):
        self.path = path
        self.mem = Gitmem.open(path, create=False)

    def __call__(self, i: int) -> None:
        self.mem.memory.write(memory_content(i).decode(), AGENT)

    def settle(self) -> None:
        """Close (the index catches up) and reopen, so no background work spills into others' turns."""
        self.mem.close()
        self.mem = Gitmem.open(self.path, create=False)

    def close(self) -> None:
        self.mem.close()


class FloorWrite:
    """The raw floor: blob, trees and commit built in memory by pygit2, ref moved; nothing else."""

    def __init__(self, path: Path):
        self.repo = pygit2.Repository(str(path))
        self.signature = pygit2.Signature("bench", "bench@localhost")

    def __call__(self, i: int) -> None:
        parent = self.repo.head.peel(pygit2.Commit)
        blob = self.repo.create_blob(memory_content(i))
        tree = self._tree_with(parent.tree, MEMORY_PATH.split("/"), blob)
        self.repo.create_commit("refs/heads/main", self.signature, self.signature,
                                "memory: replace agent bench\n", tree, [parent.id])

    def _tree_with(self, tree: pygit2.Tree, parts: list[str], blob: pygit2.Oid) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(tree)
        name = parts[0]
        if len(parts) == 1:
            builder.insert(name, blob, pygit2.enums.FileMode.BLOB)
        else:
            builder.insert(name, self._tree_with(self.repo[tree[name].id], parts[1:], blob),
                           pygit2.enums.FileMode.TREE)
        return builder.write()


class FloorAndFileWrite(FloorWrite):
    """The raw floor plus the work-tree file (temp file + rename): what the store adds by design."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.file = path / MEMORY_PATH
        self.tmp = path / ".git" / "bench.tmp"

    def __call__(self, i: int) -> None:
        super().__call__(i)
        self.tmp.write_bytes(memory_content(i))
        os.replace(self.tmp, self.file)


class GitCliWrite:
    """Write the file, then ``git commit -a`` in a subprocess: what most git-memory tools do."""

    def __init__(self, path: Path):
        self.path = path
        self.file = path / MEMORY_PATH

    def __call__(self, i: int) -> None:
        self.file.write_bytes(memory_content(i))
        subprocess.run(["git", "-C", str(self.path), "commit", "-a", "-q", "--no-verify",
                        "-m", "memory: replace agent bench"], env=GIT_ENV, check=True)


# -- scenarios ---------------------------------------------------------------------


def memory_write(bench: Bench) -> None:
    """A memory write through the store against the raw floor and the git CLI, small and big repo."""
    for files in (10, 1_000 if bench.quick else 10_000):
        label = f"{files:,} files"
        base = build_repository(bench.workdir / f"base-{files}", files)
        store = StoreWrite(copy_repository(base, bench.workdir / f"store-{files}"))
        floor = FloorWrite(copy_repository(base, bench.workdir / f"floor-{files}"))
        floor_file = FloorAndFileWrite(copy_repository(base, bench.workdir / f"floor-file-{files}"))
        git_cli = GitCliWrite(copy_repository(base, bench.workdir / f"git-{files}"))
        try:
            rows = bench.measure("memory write", label, {
                "store: MemoryStore.write": store,
                "floor: pygit2 commit": floor,
                "floor + work-tree file (for reference)": floor_file,
                "git CLI: commit -a": git_cli,
            })
        finally:
            store.close()
        store_row, floor_row, _, git_row = rows.values()
        bench.compare(store_row, floor_row, 1.3)
        bench.compare(store_row, git_row, 0.4)


def session_append(bench: Bench) -> None:
    """Appending one message to a long session costs about what it costs for a short one.

    nui writes the full list every time; each sample writes the session's messages plus
    a new last one (a different one each time), so the session keeps its size.
    """
    path = build_repository(bench.workdir / "sessions", 10)
    sizes = (10, 5_000)
    sessions = {size: [chat_message(n) for n in range(size)] for size in sizes}
    with Gitmem.open(path, create=False) as mem:
        for size, messages in sessions.items():
            mem.sessions.write("claude-code", f"session-{size}", messages, "resume", "/home/me")

        def appender(size: int) -> Callable[[int], None]:
            def append(i: int) -> None:
                mem.sessions.write("claude-code", f"session-{size}",
                                   sessions[size] + [chat_message(size + i)], "resume", "/home/me")
            return append

        rows = bench.measure("session append", "10 files", {
            f"store: +1 message to {size:,}": appender(size) for size in sizes})
    short, long = rows.values()
    bench.compare(long, short, 1.5)


def chat_message(n: int) -> dict[str, Any]:
    """A nui chat message: short user turns, longer assistant turns with a tool call."""
    if n % 2 == 0:
        return {"id": f"m{n}", "role": "user", "content": f"please look at file {n} again",
                "createdAt": "2025-05-01T10:00:00.000Z"}
    return {"id": f"m{n}", "role": "assistant", "content": f"Done with step {n}. " * 20,
            "createdAt": "2025-05-01T10:00:01.000Z",
            "parts": [{"type": "tool", "id": f"p{n}", "toolCallId": f"call-{n}", "toolName": "read",
                       "toolArgs": {"path": f"src/file{n}.py"}, "toolResult": "ok " * 40}]}


SCENARIOS: list[Callable[[Bench], None]] = [memory_write, session_append]


# -- running and printing ----------------------------------------------------------


def run(quick: bool = False, json_path: str | None = None) -> list[Row]:
    """Run every scenario, print the table, and write the rows to ``json_path`` as JSON."""
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-") as scratch:
        bench = Bench(Path(scratch), quick=quick, samples=20 if quick else 200)
        for scenario in SCENARIOS:
            scenario(bench)
    print(format_table(bench.rows, quick))
    if json_path:
        Path(json_path).write_text(json.dumps(
            {"quick": quick, "machine": machine(), "rows": [row.as_dict() for row in bench.rows]},
            indent=2) + "\n")
    return bench.rows


def machine() -> dict[str, Any]:
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {"gitmem": __version__, "python": platform.python_version(),
            "pygit2": pygit2.__version__, "libgit2": pygit2.LIBGIT2_VERSION, "git": git,
            "cpus": os.cpu_count(), "platform": platform.platform()}


def format_table(rows: list[Row], quick: bool) -> str:
    info = machine()
    lines = [f"gitmem bench{' --quick' if quick else ''}: python {info['python']}, "
             f"libgit2 {info['libgit2']}, {info['git']}, {info['cpus']} CPUs",
             f"{'scenario':<16} {'repository':<13} {'measured':<48} {'n':>4} "
             f"{'median ms':>9} {'p95 ms':>8}  {'ratio':>6} {'target':>7}  ok"]
    for row in rows:
        if row.ratio is None:
            lines.append(f"{row.scenario:<16} {row.repo:<13} {row.what:<48} {len(row.samples):>4} "
                         f"{row.median:>9.2f} {row.p95:>8.2f}")
        else:
            lines.append(f"{row.scenario:<16} {row.repo:<13} {row.what:<48} {'':>4} {'':>9} "
                         f"{'':>8}  {row.ratio:>5.2f}x {'<= ' + format(row.target, 'g') + 'x':>7}"
                         f"  {'yes' if row.ok else 'NO'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitmem.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    run(args.quick, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
