"""``gitmem bench`` scenarios for issue 19's record index: a record's history in time
that follows its own changes, not the repository's.

Repositories of 1,000 and 20,000 commits are built once per run with ``git fast-import``
(a record changed 12 times among the first commits, every other commit changing
another memory). Rows, each against ``git log --numstat -- PATH`` run beside it:

- ``gitmem log RECORD`` and ``gitmem show RECORD --at DATE`` as commands (a process each,
  the index already built), <= 2x git at 20,000 commits (with fewer, git answers
  faster than Python starts: shown, no target) and within 1.5x of themselves from the small
  repository to the large one (the log within 1.2x, and within 1.5x of the floor at
  each size: the interpreter importing pygit2, then ``git log -- PATH``, which must read
  the history itself); the same calls inside one process, for the index's own share, and
  the bytes of the index a log of the record reads (its part, not the whole);
- building the index the first time (every commit diffed once, for reference);
- what the index costs a write: it is not written by writes, so the cost is catching up
  on them at the next use, per commit, against a memory write (<= 5%).

    gitmem bench --only record
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, StoreWrite, command, copy_repository, fast_import
from gitmem.repository import Gitmem

RECORD = "agent:target"
RECORD_PATH = "memory/agents/target.md"
CHANGES = 12  # of the record, among the first commits
START = 1_700_000_000  # the first commit's time; one commit a minute after it
AT = f"@{START + 20 * 60}"  # a date between the record's changes
CATCH_UP = 50  # writes the index catches up on at once
GROWTH_TARGETS = {"gitmem log RECORD": 1.2, "gitmem show RECORD --at DATE": 1.5}  # large / small
LOG_FLOOR = "floor: python -c 'import pygit2' + git log -- PATH"


def build_history(path: Path, commits: int) -> Path:
    """A gitmem repository of ``commits`` commits made by ``git fast-import``: ``RECORD``
    changed :data:`CHANGES` times early on, each other commit appending to one of 40
    other agents' memories."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    stream = []

    def inline(name: str, data: bytes) -> None:
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))

    for i in range(commits):
        mine = i < 3 * CHANGES and i % 3 == 1
        name = RECORD_PATH if mine else f"memory/agents/other-{i % 40}.md"
        message = f"memory: append to agent {i}\n\nGitmem-Op: memory.append\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
                      b"data %d\n%s" % (START + 60 * i, len(message), message))
        if i == 0:
            inline("README.md", b"# memory\n")
        inline(name, f"- fact {i}\n".encode() * (1 + i % 5))
    fast_import(path, stream)
    return path


class FreshOpen:
    """``call(mem)`` on a repository opened anew before each run (untimed): what a
    process that just started pays, without Python's own start-up."""

    def __init__(self, path: Path, call):
        self.path, self.call = path, call
        self.mem: Gitmem | None = None

    def prepare(self, i: int) -> None:
        if self.mem is not None:
            self.mem.close()
        self.mem = Gitmem.open(self.path, create=False)

    def __call__(self, i: int) -> None:
        self.call(self.mem)

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()


def record_index_history(bench: Bench) -> None:
    """``gitmem log`` and ``show --at`` of one record at two repository sizes, taking turns."""
    sizes = bench.pick((1_000, 5_000), (1_000, 20_000))
    settings = [f"{commits:,} commits" for commits in sizes]
    operations: dict[tuple[str, str], Callable[[int], Any]] = {}
    opened: list[FreshOpen] = []
    for commits, setting in zip(sizes, settings, strict=True):
        path = build_history(bench.workdir / f"record-index-{commits}", commits)
        with Gitmem.open(path, create=False) as mem:
            started = time.perf_counter()
            mem.changes(RECORD)  # the first use builds the index
            built = time.perf_counter() - started
        bench.add(Row("record index", setting, "first use: index built (every commit diffed)",
                      value=built * 1000))
        with Gitmem.open(path, create=False) as mem:  # another process: what a log reads
            mem.changes(RECORD)
            read = mem.record_index.reads.bytes
        bench.add(Row("record index", setting, "index bytes a log of the record reads",
                      value=read / 1000, unit="KB"))
        gitmem = (sys.executable, "-m", "gitmem")
        log_fresh = FreshOpen(path, lambda mem: mem.changes(RECORD))
        show_fresh = FreshOpen(path, lambda mem: mem.show(RECORD, AT))
        opened += [log_fresh, show_fresh]
        operations.update({
            (setting, "gitmem log RECORD"): command(*gitmem, "log", RECORD, "--repo", str(path)),
            (setting, "gitmem show RECORD --at DATE"): command(*gitmem, "show", RECORD, "--at", AT,
                                                               "--repo", str(path)),
            (setting, "git log --numstat -- PATH"): command("git", "-C", str(path), "log", "--numstat",
                                                            "--", RECORD_PATH),
            (setting, LOG_FLOOR): command(sys.executable, "-c", "import subprocess, sys, pygit2; "
                                          "subprocess.run(sys.argv[1:], check=True)",
                                          "git", "-C", str(path), "log", "--", RECORD_PATH),
            (setting, "in process: mem.changes(RECORD) after opening"): log_fresh,
            (setting, "in process: mem.show(RECORD, DATE) after opening"): show_fresh,
        })
    try:  # the two sizes take turns, so that the load's drift hits both alike
        rows = bench.measure("record index", "", operations, samples=bench.pick(5, 20))
    finally:
        for fresh in opened:
            fresh.close()
    for setting, commits in zip(settings, sizes, strict=True):
        git = rows[setting, "git log --numstat -- PATH"]
        # Below 20,000 commits git answers faster than the interpreter starts (at 1,000:
        # 12-18 ms against the floor row's 120-170 ms): there the floor is the target.
        against_git = 2.0 if commits >= 20_000 else None
        bench.compare(rows[setting, "gitmem log RECORD"], git, against_git)
        bench.compare(rows[setting, "gitmem log RECORD"], rows[setting, LOG_FLOOR], 1.5)
        bench.compare(rows[setting, "gitmem show RECORD --at DATE"], git, against_git)
    small, large = settings
    for what in ("gitmem log RECORD", "gitmem show RECORD --at DATE",
                 "in process: mem.changes(RECORD) after opening"):
        bench.add(Row("record index", f"{sizes[1]:,} / {sizes[0]:,} commits", what,
                      ratio=rows[large, what].measured / rows[small, what].measured,
                      target=GROWTH_TARGETS.get(what)))


class CatchUp:
    """:data:`CATCH_UP` memory writes (untimed), then the index brought up to date on them."""

    def __init__(self, path: Path):
        self.mem = Gitmem.open(path, create=False)
        self.mem.changes(RECORD)

    def prepare(self, i: int) -> None:
        for n in range(CATCH_UP):
            self.mem.memory.write(f"- catch-up fact {i}.{n}", "catch-up", mode="append")

    def __call__(self, i: int) -> None:
        self.mem.record_index.versions(RECORD_PATH)

    def close(self) -> None:
        self.mem.close()


def record_index_write_cost(bench: Bench) -> None:
    """What the index costs each write: catching up on it later, against the write."""
    path = bench.workdir / "record-index-writes"
    source = bench.workdir / "record-index-1000"
    if not source.exists():
        build_history(source, 1_000)
    copy_repository(source, path)
    write, catch_up = StoreWrite(path), CatchUp(path)
    try:
        rows = bench.measure("record index", "1,000 commits", {
            "MemoryStore.write": write,
            f"index catching up on {CATCH_UP} writes": catch_up,
        }, samples=bench.pick(5, 40))
    finally:
        write.close()
        catch_up.close()
    per_write = rows[f"index catching up on {CATCH_UP} writes"].measured / CATCH_UP
    bench.add(Row("record index", "1,000 commits", "index, per write / MemoryStore.write",
                  ratio=per_write / rows["MemoryStore.write"].measured, target=0.05))


SCENARIOS = [record_index_history, record_index_write_cost]
