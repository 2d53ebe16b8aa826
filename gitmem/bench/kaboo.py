"""``gitmem bench`` scenarios for the TypeScript adapter, the npm package gitmem-kaboo (issue 28).

- :func:`kaboo_cold_start`: ``gitmem serve`` from its spawn to its first ``threads.list``
  answer (what a kaboo store waits for first), against ``python -c "import pygit2"`` from
  spawn to exit (target <= 1.5x); samples taken as in :mod:`gitmem.bench.cold`;
- :func:`kaboo_shared_process`: in Node, a second ``GitMemThreadStore`` on a repository
  whose ``gitmem serve`` a first store runs: its construction and first call, against one
  more call of the first store (target <= 2x: a round trip, not a start). Needs ``node``
  on PATH; without it the scenario adds no rows and says so.

    gitmem bench --only kaboo
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from gitmem.bench.cold import answered, bytecode_env, exited, spawn_rows
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, build_repository
from gitmem.faces.kaboo.adapter import package_folder
from gitmem.repository import Gitmem

COLD_TARGET = 1.5  # spawn to the first threads.* answer, against python -c "import pygit2"
SHARED_TARGET = 2.0  # a second store's first call, against one round trip
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


def with_threads(repo):
    """``repo`` with :data:`THREADS` threads of a few events each."""
    with Gitmem.open(repo, create=False) as mem:
        for i in range(THREADS):
            mem.threads.append_events(f"t{i}", "agent", [{"type": "RUN_STARTED", "runId": f"r{i}"}])
    return repo


SCENARIOS = [kaboo_cold_start, kaboo_shared_process]
