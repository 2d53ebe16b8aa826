"""``gitmem bench`` scenarios for the kaboo thread store (issue 4's targets).

- :func:`thread_append`: a 50-event run appended to a thread of 10,000 events vs to a
  new thread (<= 1.5x), beside SQLite and the seed's ``JsonFileThreadStore`` (the
  whole JSON file rewritten per append); and to a new thread with a request key (kaboo's
  adapter sends one with every write) vs without (<= 1.1x);
- :func:`thread_reads`: the events of a 10,000-event thread, read first after opening
  the repository and again, against ``json.loads`` of the same events from one file,
  SQLite and the seed's store; ``threads.readEvents`` from a just-started
  ``gitmem serve`` (<= 3x ``json.loads`` of a file, which is also timed right after a
  server start, see :class:`LoadsAfterServerStart`, and warm); ``read_state`` of a
  100,000-event thread, warm (<= 5 ms);
- :func:`thread_list`: ``list_threads`` of 10,000 threads, first call after opening
  and after one thread changed, against SQLite.

    gitmem bench --only thread
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitmem.bench.baselines import SQLITE, JsonFileThreadStore, SqliteStore
from gitmem.bench.core import Bench
from gitmem.bench.workloads import ColdRead, ServeProcess
from gitmem.records.meta import meta_bytes
from gitmem.repository import Gitmem

RUN_SIZE = 50
READ_STATE_TARGET_MS = 5.0
KEYED_TARGET = 1.1  # an append with a requestKey (kaboo's adapter sends one) against one without


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
    tail: list[dict[str, Any]] = [{"type": "TEXT_MESSAGE_END", "messageId": message},
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


def filled(path: Path, thread_id: str, count: int, batch: int = 10_000) -> Path:
    """The repository at ``path`` with thread ``thread_id`` of ``count`` events (appended in batches)."""
    events = history(count)
    with Gitmem.open(path) as mem:
        for start in range(0, count, batch):
            mem.threads.append_events(thread_id, "bench", events[start:start + batch])
    return path


def thread_append(bench: Bench) -> None:
    """A 50-event run appended to a long thread and to a new one: gitmem, SQLite, the seed's store.

    The long thread grows by a run per sample, so the samples are capped to keep it
    within about 20% of its starting length.
    """
    prior = bench.pick(1_000, 10_000)
    db = SqliteStore(bench.workdir / "threads.sqlite")
    db.append_events("long", "bench", history(prior))
    seed = JsonFileThreadStore(bench.workdir / "threads.json")  # every thread in one file
    seed.append_events("long", "bench", history(prior))
    long, new = f"to a thread of {prior:,} events", "to a new thread"
    with Gitmem.open(filled(bench.workdir / "thread-append", "long", prior), create=False) as mem:
        rows = bench.measure("thread append", f"run of {RUN_SIZE} events", {
            f"store: {long}": lambda i: mem.threads.append_events("long", "bench", run_events(i)),
            f"store: {new}": lambda i: mem.threads.append_events(f"new-{i}", "bench", run_events(i)),
            f"store: {new}, with a request key": lambda i: mem.threads.append_events(
                f"keyed-{i}", "bench", run_events(i), request_key=f"bench-{i}"),
            f"{SQLITE}: {long}": lambda i: db.append_events("long", "bench", run_events(i)),
            f"{SQLITE}: {new}": lambda i: db.append_events(f"new-{i}", "bench", run_events(i)),
            f"seed JsonFileThreadStore: {long}": lambda i: seed.append_events("long", "bench", run_events(i)),
            f"seed JsonFileThreadStore: {new}":
                lambda i: seed.append_events(f"new-{i}", "bench", run_events(i)),
        }, samples=min(bench.samples, prior // RUN_SIZE // 5))
    db.close()
    bench.compare(rows[f"store: {long}"], rows[f"store: {new}"], 1.5)
    bench.compare(rows[f"store: {new}, with a request key"], rows[f"store: {new}"], KEYED_TARGET,
                  what="store: a request key / none, to a new thread")
    for baseline in (SQLITE, "seed JsonFileThreadStore"):
        bench.compare(rows[f"store: {long}"], rows[f"{baseline}: {long}"], what=f"store / {baseline}, {long}")


class FreshServerRead:
    """``threads.readEvents`` asked of a ``gitmem serve`` started just before (untimed,
    answering already): its caches are cold. The answer is decoded, as a client would."""

    def __init__(self, repo: Path, thread_id: str):
        self.repo = repo
        self.thread_id = thread_id
        self.server: ServeProcess | None = None

    def prepare(self, i: int) -> None:
        self.close()
        self.server = ServeProcess(self.repo)
        self.server.call("threads.list")

    def __call__(self, i: int) -> Any:
        assert self.server is not None  # started by prepare(), which Bench.measure calls first
        return self.server.call("threads.readEvents", {"threadId": self.thread_id})

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


class LoadsAfterServerStart(FreshServerRead):
    """``json.loads`` of the events from a file, prepared (untimed) as :class:`FreshServerRead`
    is: a server started and answering. Starting a process cools the caches of the one that
    decodes; right after one, the same ``json.loads`` took 6.4-7.9 ms instead of 4.1 in a
    full bench run. The served read always pays that, so its baseline pays it too."""

    def __init__(self, repo: Path, events_file: Path):
        super().__init__(repo, "long")
        self.events_file = events_file

    def __call__(self, i: int) -> Any:
        return json.loads(self.events_file.read_bytes())


def thread_reads(bench: Bench) -> None:
    """Reading a thread's events cold, warm, through a fresh server; ``read_state`` warm."""
    count = bench.pick(1_000, 10_000)
    repo = filled(bench.workdir / "thread-read", "long", count)
    events_file = bench.workdir / "events.json"
    events_file.write_text(json.dumps(history(count), separators=(",", ":")))
    db = SqliteStore(bench.workdir / "thread-read.sqlite")
    db.append_events("long", "bench", history(count))
    seed_file = bench.workdir / "thread-read-seed.json"
    JsonFileThreadStore(seed_file).append_events("long", "bench", history(count))
    setting = f"thread of {count:,} events"
    cold = ColdRead(repo, lambda mem: mem.threads.read_events("long"))
    try:
        with Gitmem.open(repo, create=False) as mem:
            cold_row, warm_row, loads, _, _ = bench.measure("read", setting, {
                "store: read_events, first after opening": cold,
                "store: read_events again (warm)": lambda i: mem.threads.read_events("long"),
                "file: json.loads of the events": lambda i: json.loads(events_file.read_bytes()),
                f"{SQLITE}: SELECT": lambda i: db.read_events("long"),
                "seed JsonFileThreadStore: load the file": lambda i: JsonFileThreadStore(seed_file),
            }).values()
    finally:
        cold.close()
        db.close()
    bench.compare(cold_row, loads, what="store, first read / json.loads")
    bench.compare(warm_row, loads, what="store, warm / json.loads")
    fresh, loads_after_start = FreshServerRead(repo, "long"), LoadsAfterServerStart(repo, events_file)
    try:  # json.loads again, in the same turns: the server's samples are few and slow to take
        served, loads_after, loads_beside = bench.measure("read", setting, {
            "serve: threads.readEvents, just started": fresh,
            "file: json.loads of the events, after the same server start": loads_after_start,
            "file: json.loads of the events, in the same turns":
                lambda i: json.loads(events_file.read_bytes()),
        }, samples=min(bench.samples, 20)).values()
    finally:
        fresh.close()
        loads_after_start.close()
    bench.compare(served, loads_after, 3.0,
                  what="serve readEvents, just started / json.loads after the same start")
    bench.compare(served, loads_beside, what="serve readEvents, just started / json.loads, warm")

    state_events = bench.pick(10_000, 100_000)
    seed = JsonFileThreadStore(bench.workdir / "thread-state-seed.json")
    seed.append_events("long", "bench", history(state_events))
    with Gitmem.open(filled(bench.workdir / "thread-state", "long", state_events), create=False) as mem:
        state, _ = bench.measure("read", f"thread of {state_events:,} events", {
            "store: read_state (warm)": lambda i: mem.threads.read_state("long"),
            "seed JsonFileThreadStore: read_state, all in memory": lambda i: seed.read_state("long"),
        }).values()
    state.target = READ_STATE_TARGET_MS


class ListAfterChange:
    """``list_threads`` after one thread got an event (untimed): the listing is rebuilt."""

    def __init__(self, mem: Gitmem):
        self.mem = mem

    def prepare(self, i: int) -> None:
        self.mem.threads.append_events("t0", "bench", [{"type": "CUSTOM", "name": "bench", "value": i}])

    def __call__(self, i: int) -> Any:
        return self.mem.threads.list_threads()


def thread_list(bench: Bench) -> None:
    """``list_threads`` of 10,000 threads: first call after opening, after one changed, SQLite."""
    count = bench.pick(200, 10_000)
    repo = bench.workdir / "thread-list"
    with Gitmem.open(repo) as mem:
        mem.engine.commit({f"{mem.threads.folder(f't{n}')}/meta.json": meta_bytes(
            {"threadId": f"t{n}", "agentId": "bench", "ownerId": None, "createdAt": n, "updatedAt": n})
            for n in range(count)}, "bench: many threads")
    db = SqliteStore(bench.workdir / "thread-list.sqlite")
    db.add_threads([(f"t{n}", "bench", n) for n in range(count)])
    cold = ColdRead(repo, lambda mem: mem.threads.list_threads())
    try:
        with Gitmem.open(repo, create=False) as mem:
            first, changed, sqlite = bench.measure("threads.list", f"{count:,} threads", {
                "store: list_threads, first after opening": cold,
                "store: list_threads after one thread changed": ListAfterChange(mem),
                f"{SQLITE}: SELECT every thread": lambda i: db.list_threads(),
            }, samples=min(bench.samples, 20)).values()
    finally:
        cold.close()
        db.close()
    bench.compare(first, sqlite, what="store, first call / SQLite")
    bench.compare(changed, sqlite, what="store, after one changed / SQLite")


SCENARIOS = [thread_append, thread_reads, thread_list]
