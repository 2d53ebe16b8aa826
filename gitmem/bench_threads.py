"""Measurements of the kaboo thread store, for ``gitmem bench`` (issue 4's targets).

Each function builds what it needs under ``root`` and returns its samples in seconds;
``suite`` pairs each measurement with its baseline, measured in the same run:

- appending a 50-event run to a thread of 10,000 events vs to a thread that started
  empty, the two taking turns (<= 1.5x);
- ``threads.readEvents`` of 10,000 events from a just-started ``gitmem serve`` vs
  ``json.loads`` of the same events from one local file (<= 3x);
- ``read_state`` of a 100,000-event thread, warm (<= 5 ms);
- at the same sizes, the seed's ``JsonFileThreadStore`` (the whole JSON file rewritten
  per append), implemented here in Python;
- ``list_threads`` of 10,000 threads, first call and after one thread changed.

    for result in suite(Path("/tmp/bench"), quick=True):   # or: python -m gitmem.bench_threads
        print(result["name"], statistics.median(result["samples"]))
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitmem.repository import Gitmem

RUN_SIZE = 50


def run_events(run: int, size: int = RUN_SIZE) -> list[dict[str, Any]]:
    """One agent run as kaboo persists it: text deltas, a tool call, a state snapshot."""
    message = f"m{run}"
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": f"r{run}", "timestamp": 1_700_000_000_000 + run},
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        {"type": "TOOL_CALL_START", "toolCallId": f"c{run}", "toolCallName": "search"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": f"c{run}", "delta": '{"query": "quarterly numbers"}'},
        {"type": "TOOL_CALL_END", "toolCallId": f"c{run}"},
    ]
    tail = [{"type": "TEXT_MESSAGE_END", "messageId": message},
            {"type": "STATE_SNAPSHOT", "snapshot": {"step": run, "kaboo_session": {"pending": []}}},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": f"r{run}"}]
    for i in range(size - len(events) - len(tail)):
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": message,
                       "delta": f"token {i} of the answer, with some words ", "timestamp": 1_700_000_000_000 + i})
    return (events + tail)[:size]


def history(count: int) -> list[dict[str, Any]]:
    """``count`` events made of whole runs."""
    events: list[dict[str, Any]] = []
    run = 0
    while len(events) < count:
        events.extend(run_events(run))
        run += 1
    return events[:count]


def _filled(mem: Gitmem, thread_id: str, count: int, batch: int = 10_000) -> None:
    events = history(count)
    for start in range(0, count, batch):
        mem.threads.append_events(thread_id, "bench", events[start:start + batch])


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


# -- gitmem ----------------------------------------------------------------------------


def append_runs(root: Path, prior_events: int, *, runs: int = 20) -> tuple[list[float], list[float]]:
    """Seconds per ``append_events`` of a 50-event run: ``(to a thread that held
    prior_events, to one that started empty)``, the two taking turns in one repository."""
    with Gitmem.open(root / f"append-{prior_events}") as mem:
        _filled(mem, "long", prior_events)
        mem.threads.append_events("short", "bench", run_events(0))  # created outside the samples
        samples: dict[str, list[float]] = {"long": [], "short": []}
        for run in range(1, runs + 1):
            for thread_id, found in samples.items():
                found.append(_timed(lambda: mem.threads.append_events(thread_id, "bench", run_events(run))))
        return samples["long"], samples["short"]


def read_state_warm(root: Path, events: int, *, repeats: int = 50) -> list[float]:
    """Seconds per ``read_state`` of a thread of ``events`` events, after a first call."""
    with Gitmem.open(root / f"state-{events}") as mem:
        _filled(mem, "long", events)
        mem.threads.read_state("long")
        return [_timed(lambda: mem.threads.read_state("long")) for _ in range(repeats)]


def read_events_fresh_server(root: Path, events: int, *, repeats: int = 5,
                             command: list[str] | None = None) -> list[float]:
    """Seconds for ``threads.readEvents`` of ``events`` events, asked of a ``gitmem serve``
    just started (its caches cold) and decoded by the client: one server per sample."""
    repo = root / f"read-{events}"
    with Gitmem.open(repo) as mem:
        _filled(mem, "long", events)
    command = command or [sys.executable, "-m", "gitmem"]
    samples = []
    for _ in range(repeats):
        server = subprocess.Popen([*command, "serve", "--repo", str(repo)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=1 << 20)
        try:
            _call(server, "threads.list", {})  # started and answering
            samples.append(_timed(lambda: _call(server, "threads.readEvents", {"threadId": "long"})))
        finally:
            server.stdin.close()
            server.wait(timeout=30)
    return samples


def _call(server: subprocess.Popen, method: str, params: dict) -> Any:
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
    server.stdin.flush()
    answer = json.loads(server.stdout.readline())
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']['message']}")
    return answer["result"]


def list_threads(root: Path, threads: int, *, repeats: int = 5) -> tuple[list[float], list[float]]:
    """Seconds per ``list_threads`` of ``threads`` threads: ``(first call after opening
    the repository, the next call)``."""
    from gitmem.stores.sessions import meta_bytes

    repo = root / f"list-{threads}"
    with Gitmem.open(repo) as mem:
        store = mem.threads
        mem.engine.commit({f"{store.folder(f't{n}')}/meta.json": meta_bytes(
            {"threadId": f"t{n}", "agentId": "bench", "ownerId": None, "createdAt": n, "updatedAt": n})
            for n in range(threads)}, "bench: many threads")
    cold, warm = [], []
    for _ in range(repeats):
        with Gitmem.open(repo) as mem:
            cold.append(_timed(mem.threads.list_threads))
            mem.threads.append_events("t0", "bench", run_events(0))  # one thread changed
            warm.append(_timed(mem.threads.list_threads))
    return cold, warm


# -- the seed's JsonFileThreadStore ---------------------------------------------------


class JsonFileThreadStore:
    """The seed's store: every thread in one JSON file, rewritten whole on each write."""

    def __init__(self, file: Path):
        self.file = file
        self.data: dict[str, dict[str, Any]] = json.loads(file.read_text()) if file.exists() else {}

    def append_events(self, thread_id: str, agent_id: str, events: list[dict[str, Any]]) -> None:
        now = time.time_ns() // 1_000_000
        row = self.data.setdefault(thread_id, {"agentId": agent_id, "ownerId": None, "events": [],
                                               "messages": [], "createdAt": now, "updatedAt": now})
        row["agentId"] = agent_id
        row["events"].extend(events)
        row["updatedAt"] = now
        self.file.write_text(json.dumps(self.data, separators=(",", ":")))

    def read_state(self, thread_id: str) -> Any:
        for event in reversed(self.data.get(thread_id, {}).get("events", [])):
            if event.get("type") == "STATE_SNAPSHOT":
                snapshot = event.get("snapshot")
                return snapshot if isinstance(snapshot, (dict, list)) else None
        return None


def json_file_append_runs(root: Path, prior_events: int, *,
                          runs: int = 20) -> tuple[list[float], list[float]]:
    """Like :func:`append_runs`, on the seed's JSON file (both threads in it, as the seed keeps them)."""
    store = JsonFileThreadStore(root / f"json-append-{prior_events}.json")
    store.append_events("long", "bench", history(prior_events))
    store.append_events("short", "bench", run_events(0))
    samples: dict[str, list[float]] = {"long": [], "short": []}
    for run in range(1, runs + 1):
        for thread_id, found in samples.items():
            found.append(_timed(lambda: store.append_events(thread_id, "bench", run_events(run))))
    return samples["long"], samples["short"]


def json_file_read_state(root: Path, events: int, *, repeats: int = 50) -> list[float]:
    """Like :func:`read_state_warm`, on the seed's JSON file (loaded once, scanned per call)."""
    file = root / f"json-state-{events}.json"
    JsonFileThreadStore(file).append_events("long", "bench", history(events))
    store = JsonFileThreadStore(file)
    return [_timed(lambda: store.read_state("long")) for _ in range(repeats)]


def json_file_loads(root: Path, events: int, *, repeats: int = 5) -> list[float]:
    """Seconds to read and ``json.loads`` ``events`` events from one local file."""
    file = root / f"events-{events}.json"
    file.write_text(json.dumps(history(events), separators=(",", ":")))
    return [_timed(lambda: json.loads(file.read_bytes())) for _ in range(repeats)]


def json_file_startup_read(root: Path, events: int, *, repeats: int = 5) -> list[float]:
    """The seed's cold ``readEvents``: load the whole store file (here one thread of ``events``)."""
    file = root / f"json-read-{events}.json"
    JsonFileThreadStore(file).append_events("long", "bench", history(events))
    return [_timed(lambda: list(JsonFileThreadStore(file).data["long"]["events"])) for _ in range(repeats)]


# -- the suite -------------------------------------------------------------------------


def suite(root: Path, *, quick: bool = False, command: list[str] | None = None) -> list[dict[str, Any]]:
    """Every measurement with its baseline and target: ``{name, samples, baseline,
    baseline_samples, target_ratio | target_seconds}`` (samples in seconds)."""
    root.mkdir(parents=True, exist_ok=True)
    prior, read, state = (1_000, 1_000, 10_000) if quick else (10_000, 10_000, 100_000)
    runs, repeats = (5, 2) if quick else (20, 5)
    long, short = append_runs(root, prior, runs=runs)
    seed_long, seed_short = json_file_append_runs(root, prior, runs=runs)
    loads = json_file_loads(root, read, repeats=repeats)
    list_cold, list_warm = list_threads(root, prior, repeats=repeats)
    return [
        {"name": f"threads: append a {RUN_SIZE}-event run to {prior:,} events", "samples": long,
         "baseline": "the same to a thread that started empty", "baseline_samples": short,
         "target_ratio": 1.5},
        {"name": f"threads: seed JsonFileThreadStore, append a run to {prior:,} events",
         "samples": seed_long, "baseline": "gitmem, the same", "baseline_samples": long},
        {"name": "threads: seed JsonFileThreadStore, append a run to a thread that started empty",
         "samples": seed_short, "baseline": "gitmem, the same", "baseline_samples": short},
        {"name": f"threads: readEvents of {read:,} events, fresh gitmem serve",
         "samples": read_events_fresh_server(root, read, repeats=repeats, command=command),
         "baseline": "json.loads of the same events from one file", "baseline_samples": loads,
         "target_ratio": 3.0},
        {"name": f"threads: seed JsonFileThreadStore, load {read:,} events",
         "samples": json_file_startup_read(root, read, repeats=repeats),
         "baseline": "json.loads of the same events from one file", "baseline_samples": loads},
        {"name": f"threads: read_state of {state:,} events, warm",
         "samples": read_state_warm(root, state), "target_seconds": 0.005,
         "baseline": "seed JsonFileThreadStore read_state, in memory",
         "baseline_samples": json_file_read_state(root, state)},
        {"name": f"threads: list_threads of {prior:,} threads, first call", "samples": list_cold},
        {"name": f"threads: list_threads of {prior:,} threads after one changed", "samples": list_warm},
    ]


def main() -> None:
    """``python -m gitmem.bench_threads [--quick]``: print the suite (``$GITMEM_CMD``: the
    gitmem to serve with, split on spaces; default this Python's)."""
    command = os.environ.get("GITMEM_CMD", "").split() or None
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-threads-") as scratch:
        for result in suite(Path(scratch), quick="--quick" in sys.argv[1:], command=command):
            median = statistics.median(result["samples"])
            line = f"{result['name']}: {median * 1000:.2f} ms"
            if result.get("baseline_samples"):
                base = statistics.median(result["baseline_samples"])
                line += f"  ({median / base:.2f}x {result['baseline']}: {base * 1000:.2f} ms)"
            if "target_ratio" in result:
                line += f"  target <= {result['target_ratio']}x"
            if "target_seconds" in result:
                line += f"  target <= {result['target_seconds'] * 1000:g} ms"
            print(line)


if __name__ == "__main__":
    main()
