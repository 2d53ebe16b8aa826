"""Measurements of hand edits, for ``gitmem bench`` (issue 5's targets).

Two scenarios in the form :mod:`gitmem.bench` runs (``scenario(bench)``):

- :func:`hand_edit_latency`: from an editor's save (a temp file renamed over the
  memory file) to the commit being readable through ``gitmem serve``, with the
  default debounce and no reads meanwhile (target <= 1.2 s), and the same when a
  read comes right after the save ("read your own edits": the read commits it);
- :func:`watcher_overhead`: a memory write through the store with the watcher
  running against the same without it (target <= 1.05x), and, for the record, a
  store opened without hand edits (no check for an edit before each write).

    gitmem bench --only 'hand_edit|watcher'
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import ServeProcess, build_repository, copy_repository
from gitmem.edits.watch import DEBOUNCE, Watcher
from gitmem.git.engine import GitEngine
from gitmem.repository import Gitmem

LATENCY_TARGET = 1.2  # seconds from a save to the commit being readable, default debounce
OVERHEAD_TARGET = 1.05  # the watcher's cost on an API write
COMMIT_BOUND = 60  # seconds to wait for the watcher's commit of a save before giving up


def _read_memory(server: ServeProcess) -> str:
    """The user memory, read through ``server``."""
    return server.call("storage.userMemory.read", {"handlerId": "bench"})["content"]


def _save(path: Path, text: str) -> None:
    """Save as most editors do: a temp file beside the target, renamed over it."""
    tmp = path.with_name(f".{path.name}.bench-tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def hand_edit_latency(bench: Bench) -> None:
    """Save -> readable through ``gitmem serve``: by the watcher (nothing reading), and by a read."""
    repo = build_repository(bench.workdir / "hand-edits", 10)
    user_md = repo / "memory" / "user.md"
    server = ServeProcess(repo)  # it runs the watcher
    with GitEngine.open(repo, create=False) as observer:
        try:
            server.call("storage.userMemory.write",
                        {"handlerId": "bench", "content": "start", "writeMode": "replace"})
            by_watcher = Row("hand edits", "10 files", "save -> readable via serve, watcher "
                             f"(debounce {DEBOUNCE:g} s)", target=LATENCY_TARGET * 1000)
            for i in range(2 if bench.quick else 8):
                head = observer.head()
                saved = time.perf_counter()
                _save(user_md, f"edited {i}\n")
                while observer.head() == head:  # reading HEAD only: this commits nothing
                    if time.perf_counter() - saved > COMMIT_BOUND:
                        raise RuntimeError(f"the watcher did not commit a save in {COMMIT_BOUND} s")
                    time.sleep(0.002)
                assert _read_memory(server) == f"edited {i}\n"
                by_watcher.samples.append((time.perf_counter() - saved) * 1000)
                time.sleep(0.2)
            by_read = Row("hand edits", "10 files", "save -> read via serve (read commits it)")
            plain = Row("hand edits", "10 files", "read via serve, nothing edited")
            for i in range(5 if bench.quick else 30):
                started = time.perf_counter()
                _read_memory(server)
                plain.samples.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                _save(user_md, f"read back {i}\n")
                assert _read_memory(server) == f"read back {i}\n"
                by_read.samples.append((time.perf_counter() - started) * 1000)
        finally:
            server.close()
    bench.rows += [by_watcher, by_read, plain]


class _Writer:
    """Memory appends through the store of one repository, with or without hand edits/watcher."""

    def __init__(self, path: Path, *, hand_edits: bool, watch: bool):
        self.mem = Gitmem.open(path, create=False, hand_edits=hand_edits)
        self.watcher = Watcher(self.mem).start() if watch else None

    def __call__(self, i: int) -> None:
        self.mem.memory.write(f"note {i}", "bench", mode="append")

    def settle(self) -> None:
        """Let the watcher handle the turn's events before another writer's turn (untimed)."""
        if self.watcher is not None:
            time.sleep(self.watcher.debounce + 0.3)

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        self.mem.close()


def watcher_overhead(bench: Bench) -> None:
    """A memory append with the watcher running vs without (and without hand edits at all)."""
    base = build_repository(bench.workdir / "watch-base", 10)
    writers = {
        "store, watcher running": _Writer(copy_repository(base, bench.workdir / "watch-on"),
                                          hand_edits=True, watch=True),
        "store (hand-edit check on write)": _Writer(copy_repository(base, bench.workdir / "watch-off"),
                                                    hand_edits=True, watch=False),
        "store without hand edits": _Writer(copy_repository(base, bench.workdir / "watch-none"),
                                            hand_edits=False, watch=False),
    }
    # Long turns: the watcher's settle (a debounce) after each turn stays a small part of the run.
    long_turns = dataclasses.replace(bench, turn=max(bench.turn, bench.samples // 4))
    try:
        rows = long_turns.measure("hand edits", "10 files", writers)
    finally:
        for writer in writers.values():
            writer.close()
    watching, default, _bare = rows.values()
    bench.compare(watching, default, OVERHEAD_TARGET)


SCENARIOS = [hand_edit_latency, watcher_overhead]
