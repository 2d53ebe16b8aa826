"""``gitmem bench`` scenarios for the TypeScript adapter, the npm package gitmem-kaboo (issue 28).

- :func:`kaboo_cold_start`: ``gitmem serve`` from its spawn to its first ``threads.list``
  answer (what a kaboo store waits for first), against ``python -c "import pygit2"`` from
  spawn to exit (target <= 1.5x); samples taken as in :mod:`gitmem.bench.cold`;
- :func:`kaboo_shared_process`: in Node, a second ``GitMemThreadStore`` on a repository
  whose ``gitmem serve`` a first store runs: its construction and first call, against one
  more call of the first store (target <= 2x: a round trip, not a start). Needs ``node``
  on PATH; without it the scenario adds no rows and says so;
- :func:`kaboo_replay`: in Node, the runner's calls of a real run replayed (hydrate:
  readEvents, readMessages, readState; then appendEvents of the run's 36 events and
  saveMessages of the whole list; listThreads every tenth run) on ``GitMemThreadStore``
  and on the seed's JSON-file store, per call (target <= 2x); beside it the floor of one
  such write: a raw pygit2 commit of the file with its work-tree file and index entry
  (:class:`~gitmem.bench.baselines.FloorFileAndIndexWrite`), against the JSON-file
  store's write. Needs ``node``, as above.

    gitmem bench --only kaboo
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys

from gitmem.bench.baselines import FloorFileAndIndexWrite
from gitmem.bench.cold import answered, bytecode_env, exited, spawn_rows
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, build_repository
from gitmem.faces.kaboo.adapter import package_folder
from gitmem.repository import Gitmem

COLD_TARGET = 1.5  # spawn to the first threads.* answer, against python -c "import pygit2"
SHARED_TARGET = 2.0  # a second store's first call, against one round trip
REPLAY_TARGET = 2.0  # a call of a replayed run, against the seed's JSON-file store
THREADS = 10


def kaboo_cold_start(bench: Bench) -> None:
    """Spawn to the first ``threads.list`` answer against ``python -c "import pygit2"``."""
    repo = with_threads(build_repository(bench.workdir / "kaboo-cold", 10))
    env = bytecode_env(bench)
    baseline = 'python -c "import pygit2" (start and exit)'
    rows = spawn_rows(bench, "kaboo cold start", f"{THREADS} threads", {
        baseline: exited([sys.executable, "-c", "import pygit2"], env),
        "gitmem serve: spawn to the first threads.list answer": answered(repo, env, "threads.list"),
    }, runs=bench.pick(5, 21))
    pygit2_row = rows.pop(baseline)
    for row in rows.values():
        bench.compare(row, pygit2_row, COLD_TARGET, what="serve's first threads.list / import pygit2")


_SHARED = """
const [adapter, repo, gitmem, count] = process.argv.slice(1);
const { GitMemThreadStore } = await import(adapter);
const first = new GitMemThreadStore({ repo, gitmem });
for (let i = 0; i < 5; i++) await first.listThreads();
const one = [], second = [];
for (let i = 0; i < Number(count); i++) {
  let started = performance.now();
  await first.listThreads();
  one.push(performance.now() - started);
  started = performance.now();
  const other = new GitMemThreadStore({ repo, gitmem });
  await other.listThreads();
  second.push(performance.now() - started);
  if (other.pid !== first.pid) throw new Error("the second store started a gitmem serve of its own");
  await other.close();
}
await first.close();
console.log(JSON.stringify({ one, second }));
"""


def kaboo_shared_process(bench: Bench) -> None:
    """A second store's construction and first call on a shared ``gitmem serve``, against
    one more round trip of the first store; the two take turns, in one Node process."""
    node = shutil.which("node")
    if node is None:
        print("kaboo_shared_process: node is not on PATH; no rows", file=sys.stderr)
        return
    repo = with_threads(build_repository(bench.workdir / "kaboo-shared", 10))
    gitmem = bench.workdir / "gitmem"  # an executable, as the store's `gitmem` option wants
    gitmem.write_text(f"#!/bin/sh\nexec {sys.executable} -P -m gitmem \"$@\"\n")
    gitmem.chmod(0o755)
    adapter = package_folder() / "gitmem-thread-store.mjs"
    done = subprocess.run([node, "--input-type=module", "-e", _SHARED, str(adapter), str(repo), str(gitmem),
                           str(bench.pick(20, 200))], env=GIT_ENV, capture_output=True, text=True,
                          timeout=600, check=True)
    samples = json.loads(done.stdout)
    setting = f"{THREADS} threads, one Node process"
    round_trip = bench.add(Row("kaboo shared process", setting, "threads.list, one round trip",
                               samples=samples["one"]))
    second = bench.add(Row("kaboo shared process", setting, "a second store: new, then its first call",
                           samples=samples["second"]))
    bench.compare(second, round_trip, SHARED_TARGET, what="second store's first call / one round trip")


_REPLAY = """
import { readFileSync, writeFileSync, existsSync } from "node:fs";
const [adapter, repo, gitmem, runs, jsonFile] = process.argv.slice(1);
const { GitMemThreadStore } = await import(adapter);
class JsonFileStore {  // the seed's store, as its guide writes it: one JSON file, rewritten on each write
  constructor(file) { this.file = file; this.data = existsSync(file) ? JSON.parse(readFileSync(file, "utf8")) : {}; }
  flush() { writeFileSync(this.file, JSON.stringify(this.data)); }
  async appendEvents(id, agentId, events, ownerId) {
    const now = Date.now();
    const row = this.data[id] ?? (this.data[id] = { id, agentId, ownerId: ownerId ?? null, createdAt: now,
                                                     updatedAt: now, events: [], messages: [] });
    row.agentId = agentId;
    if (ownerId != null) row.ownerId = ownerId;
    row.events.push(...events);
    row.updatedAt = now;
    this.flush();
  }
  async readEvents(id) { return this.data[id]?.events ?? []; }
  async readState(id) {
    const events = this.data[id]?.events ?? [];
    for (let i = events.length - 1; i >= 0; i--) {
      if (events[i].type === "STATE_SNAPSHOT") {
        const s = events[i].snapshot;
        return s && typeof s === "object" ? s : null;
      }
    }
    return null;
  }
  async saveMessages(id, messages) { const row = this.data[id]; if (row) { row.messages = messages; this.flush(); } }
  async readMessages(id) { return this.data[id]?.messages ?? []; }
  async listThreads() {
    return Object.values(this.data).map(({ events, messages, ...thread }) => thread)
      .sort((a, b) => b.updatedAt - a.updatedAt);
  }
}
function runEvents(t, r) {
  const events = [{ type: "RUN_STARTED", threadId: t, runId: `r${r}` },
                  { type: "TEXT_MESSAGE_START", messageId: `m${r}`, role: "assistant" }];
  for (let i = 0; i < 31; i++) events.push({ type: "TEXT_MESSAGE_CONTENT", messageId: `m${r}`, delta: `word ${i} ` });
  events.push({ type: "TEXT_MESSAGE_END", messageId: `m${r}` }, { type: "STATE_SNAPSHOT", snapshot: { step: r } },
              { type: "RUN_FINISHED", threadId: t, runId: `r${r}` });
  return events;
}
async function replay(store, count, samples) {
  const messages = {};
  const timed = async (f) => { const s = performance.now(); await f(); samples?.push(performance.now() - s); };
  for (let r = 0; r < count; r++) {
    const t = `thread-${r % 5}`;
    await timed(() => store.readEvents(t));
    await timed(() => store.readMessages(t));
    await timed(() => store.readState(t));
    await timed(() => store.appendEvents(t, "agent", runEvents(t, r)));
    const list = (messages[t] ??= []);
    list.push({ id: `u${r}`, role: "user", content: `question ${r}` }, { id: `m${r}`, role: "assistant", content: `answer ${r}` });
    await timed(() => store.saveMessages(t, list));
    if (r % 10 === 0) await timed(() => store.listThreads());
  }
}
const gitmemStore = new GitMemThreadStore({ repo, gitmem });
const seedStore = new JsonFileStore(jsonFile);
await replay(gitmemStore, 5);
await replay(seedStore, 5);
const ours = [], seed = [];
for (let turn = 0; turn < 4; turn++) {  // taking turns, so the machine's drift hits both alike
  await replay(gitmemStore, Number(runs) / 4, ours);
  await replay(seedStore, Number(runs) / 4, seed);
}
await gitmemStore.close();
console.log(JSON.stringify({ ours, seed }));
"""


def kaboo_replay(bench: Bench) -> None:
    """A replay of the runner's calls on ``GitMemThreadStore`` and on the seed's JSON-file
    store, per call, and the floor of a write beside the seed's write."""
    node = shutil.which("node")
    if node is None:
        print("kaboo_replay: node is not on PATH; no rows", file=sys.stderr)
        return
    repo = with_threads(build_repository(bench.workdir / "kaboo-replay", 10))
    gitmem = bench.workdir / "gitmem"
    gitmem.write_text(f"#!/bin/sh\nexec {sys.executable} -P -m gitmem \"$@\"\n")
    gitmem.chmod(0o755)
    adapter = package_folder() / "gitmem-thread-store.mjs"
    runs = bench.pick(20, 200)
    done = subprocess.run([node, "--input-type=module", "-e", _REPLAY, str(adapter), str(repo), str(gitmem),
                           str(runs), str(bench.workdir / "kaboo-replay.json")], env=GIT_ENV,
                          capture_output=True, text=True, timeout=1200, check=True)
    samples = json.loads(done.stdout)
    setting = f"{runs} runs on 5 threads, one Node process"
    # the mean, not the median: a run's two writes are what a call costs, its reads the most calls
    ours = bench.add(Row("kaboo replay", setting, "GitMemThreadStore, a call (mean)",
                         value=statistics.fmean(samples["ours"])))
    seed = bench.add(Row("kaboo replay", setting, "the seed's JSON-file store, a call (mean)",
                         value=statistics.fmean(samples["seed"])))
    bench.compare(ours, seed, REPLAY_TARGET)
    floor_repo = with_threads(build_repository(bench.workdir / "kaboo-floor", 10))
    events = floor_repo / "threads" / "floor" / "events" / "000000.jsonl"
    events.parent.mkdir(parents=True)
    with Gitmem.open(floor_repo, create=False) as mem:
        mem.engine.commit({"threads/floor/events/000000.jsonl": b"{}\n"}, "bench: the floor's file")
    from gitmem.bench.baselines import JsonFileThreadStore
    seed_file = JsonFileThreadStore(bench.workdir / "kaboo-floor.json")
    rows = bench.measure("kaboo replay", "one write", {
        "floor: a raw pygit2 commit of one file, its work-tree file and index entry":
            FloorFileAndIndexWrite(floor_repo, "threads/floor/events/000000.jsonl"),
        "the seed's JSON-file store: appendEvents of a run":
            lambda i: seed_file.append_events(f"t{i % 5}", "bench", [{"type": "RUN_STARTED", "runId": str(i)}] * 36),
    }, samples=bench.pick(10, 50))
    floor, seed_write = rows.values()
    bench.compare(floor, seed_write, what="the floor of a write / the seed's write")


def with_threads(repo):
    """``repo`` with :data:`THREADS` threads of a few events each."""
    with Gitmem.open(repo, create=False) as mem:
        for i in range(THREADS):
            mem.threads.append_events(f"t{i}", "agent", [{"type": "RUN_STARTED", "runId": f"r{i}"}])
    return repo


SCENARIOS = [kaboo_cold_start, kaboo_shared_process, kaboo_replay]
