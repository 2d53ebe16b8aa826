"""``gitmem bench`` scenario for issue 19's start-up: ``gitmem serve`` as a repository grows.

Two repositories like a year of a busy harness's use, built with ``git fast-import``:
each commit writes one thread (its ``meta.json`` and events), one session or one of 20
agents' memories, in turn, with a thread and a session for every 25 commits. Rows:
``gitmem serve`` from its spawn to the ``storage.info`` answer, and to the answer of the
``threads.list`` that follows, at 5,000 commits (200 sessions) and at 100,000 (4,000
sessions; 10,000 commits with ``--quick``), the large within 1.2x of the small (the
hand-edit watcher on, as nui runs it).

    gitmem bench --only startup
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from gitmem.bench.cold import bytecode_env, spawn_rows
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, GITMEM, ServeProcess, fast_import

GROWTH_TARGET = 1.2  # the large repository's start against the small one's
WHAT = {"storage.info": "gitmem serve: spawn to the storage.info answer",
        "threads.list": "gitmem serve: spawn to the first threads.list answer"}
COMMITS_PER_RECORD = 25  # a thread and a session for this many commits
AGENTS = 20
START = 1_700_000_000  # the first commit's time; one commit a second after it


def build_year(path: Path, commits: int) -> Path:
    """A gitmem repository of ``commits`` commits of threads, sessions and memories."""
    subprocess.run([*GITMEM, "--repo", str(path), "init"], check=True, capture_output=True, env=GIT_ENV)
    records = max(10, commits // COMMITS_PER_RECORD)
    stream = []

    def inline(name: str, data: bytes) -> None:
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))

    for i in range(commits):
        kind, n = i % 3, (i * 7919) % records
        message = f"write {i}\n\nGitmem-Op: bench\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
                      b"data %d\n%s" % (START + i, len(message), message))
        if i == 0:
            stream.append(b"from refs/heads/main^0\n")
        if kind == 0:
            meta = {"threadId": f"t{n}", "agentId": "agent", "createdAt": n, "updatedAt": i}
            inline(f"threads/t{n}/meta.json", json.dumps(meta).encode())
            inline(f"threads/t{n}/events/000001.jsonl", b'{"type":"RUN_STARTED","n":%d}\n' % i)
        elif kind == 1:
            meta = {"agentType": "main", "sessionId": f"s{n}", "updatedAt": "2026-01-01T00:00:00Z"}
            inline(f"sessions/main/s{n}/meta.json", json.dumps(meta).encode())
            inline(f"sessions/main/s{n}/messages/000001.jsonl", b'{"role":"user","content":"m%d"}\n' % i)
        else:
            inline(f"memory/agents/agent{i % AGENTS}.md", b"- fact %d\n" % i)
    fast_import(path, stream)
    return path


def started(repo: Path, env: dict[str, str], method: str):
    """Seconds from spawning ``gitmem serve`` to its answer to ``storage.info`` (``method``
    ``"storage.info"``) or to the ``threads.list`` sent after it."""
    def spawn() -> float:
        began = time.perf_counter()
        server = ServeProcess(repo, env)
        try:
            server.call("storage.info")
            if method == "threads.list":
                server.call("threads.list")
            return time.perf_counter() - began
        finally:
            server.close()
    return spawn


def serve_startup(bench: Bench) -> None:
    """``gitmem serve``'s first answers at a small and a large repository."""
    sizes = bench.pick((1_000, 10_000), (5_000, 100_000))
    env = bytecode_env(bench)
    measured = {}
    for commits in sizes:
        repo = build_year(bench.workdir / f"startup-{commits}", commits)
        serve_once = started(repo, env, "threads.list")
        serve_once()  # the first start after the build: stat cache, indexes, bytecode
        setting = f"{commits:,} commits, {max(10, commits // COMMITS_PER_RECORD):,} sessions"
        for method in ("storage.info", "threads.list"):
            measured[setting, WHAT[method]] = started(repo, env, method)
    # the two sizes take turns, so that the load's drift hits both alike
    rows = spawn_rows(bench, "serve start-up", "", measured, runs=bench.pick(3, 11))
    small, large = (setting for setting, _ in list(measured)[::2])
    for what in WHAT.values():
        bench.add(Row("serve start-up", f"{sizes[1]:,} / {sizes[0]:,} commits", what,
                      ratio=rows[large, what].measured / rows[small, what].measured, target=GROWTH_TARGET))


SCENARIOS = [serve_startup]
