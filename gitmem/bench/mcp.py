"""``gitmem bench`` scenarios for ``gitmem mcp`` (issue 27).

- A memory write (replace, 2 KB) as a ``memory_write`` tool call through ``gitmem mcp``
  against the same write as ``storage.agentMemory.write`` through ``gitmem serve
  --no-watch``, one request in flight each, on one repository (a record each): target
  at most 1.3x. The requests are encoded before the clock starts (the client's work).
- ``gitmem mcp`` from its spawn to the answer to ``initialize``, against ``python -c
  "import pygit2"`` and against importing the MCP SDK alone (what the SDK costs a start).
- A ``ping`` sent while a 20 MB ``memory_write`` runs (one every 5 ms, from when the write's
  line is sent to its answer), against a ping to an idle server: the tools run off the
  event loop, so a ping does not wait for the write.

    gitmem bench --only mcp
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from gitmem.bench.cold import bytecode_env, exited, spawn_rows
from gitmem.bench.core import Bench, Row
from gitmem.bench.serve import ServeWrite, memory_request
from gitmem.bench.workloads import ServeProcess, build_repository, memory_content

WRITE_TARGET = 1.3  # a write through MCP against the same write through gitmem serve
MCP_RECORD = "bench-mcp"  # the MCP server's record, beside serve's in one repository
SDK_IMPORTS = "import mcp.server.lowlevel, mcp.shared.message"  # what gitmem.faces.mcp.tools and .stdio load


class McpProcess(ServeProcess):
    """A ``gitmem mcp`` subprocess and a client of its newline-delimited JSON-RPC that waits
    for each answer (the framing every stdio MCP client uses)."""

    COMMAND = "mcp"

    def initialize(self) -> Any:
        """The handshake: ``initialize`` answered, then ``notifications/initialized`` sent."""
        result = self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": {"name": "gitmem-bench", "version": "1"}})
        self.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.stdin.flush()
        return result

    def send(self, request: bytes) -> Any:
        """Send one encoded request and return its result; a tool's error result raises."""
        result = super().send(request)
        if isinstance(result, dict) and result.get("isError"):
            raise RuntimeError(f"gitmem mcp: {result}")
        return result


class McpWrite(ServeWrite):
    """A ``memory_write`` (replace) through ``gitmem mcp``, timed as :class:`ServeWrite` is."""

    def __init__(self, repo: Path):  # the server initialised, the repository opened
        self.server = McpProcess(repo)
        self.server.initialize()
        self.server.call("tools/call", {"name": "memory_read", "arguments": {"record": "user"}})
        self.line = b""

    def prepare(self, i: int) -> None:
        self.line = self.server.encode("tools/call", {"name": "memory_write", "arguments": {
            "record": f"agent:{MCP_RECORD}", "content": memory_content(i).decode(), "mode": "replace"}})


def mcp_write(bench: Bench) -> None:
    """A memory write through ``gitmem mcp`` against the same write through ``gitmem serve``."""
    repo = build_repository(bench.workdir / "mcp-write", 10)
    served = ServeWrite(repo, memory_request, options=["--no-watch"])
    through_mcp = McpWrite(repo)
    try:
        serve_row, mcp_row = bench.measure("mcp write", "10 files", {
            "serve --no-watch: storage.agentMemory.write round trip": served,
            "gitmem mcp: memory_write tool call round trip": through_mcp,
        }).values()
    finally:
        served.close()
        through_mcp.close()
    bench.compare(mcp_row, serve_row, WRITE_TARGET)


def initialized(repo: Path, env: dict[str, str]):
    """Seconds from spawning ``gitmem mcp`` to its answer to ``initialize``."""
    def spawn() -> float:
        began = time.perf_counter()
        server = McpProcess(repo, env)
        try:
            server.initialize()
            return time.perf_counter() - began
        finally:
            server.close()
    return spawn


def mcp_startup(bench: Bench) -> None:
    """``gitmem mcp``'s first answer against importing pygit2, and the SDK's import alone."""
    repo = build_repository(bench.workdir / "mcp-startup", 10)
    env = bytecode_env(bench)
    pygit2_row, sdk_row, start_row = spawn_rows(bench, "mcp start-up", "10 files", {
        'python -c "import pygit2" (start and exit)': exited([sys.executable, "-c", "import pygit2"], env),
        f'python -c "{SDK_IMPORTS}" (start and exit)': exited([sys.executable, "-c", SDK_IMPORTS], env),
        "gitmem mcp: spawn to the initialize answer": initialized(repo, env),
    }, runs=bench.pick(3, 11)).values()
    bench.compare(start_row, pygit2_row)
    bench.compare(sdk_row, pygit2_row, what="  the SDK's import / import pygit2")


PING_WRITE = 20 << 20  # bytes of the memory_write the pings are sent during
PING_EVERY = 0.005  # seconds between the pings sent during a write


def pings_during_a_write(server: McpProcess, write: bytes) -> list[float]:
    """Send ``write``, then a ping every :data:`PING_EVERY` until its answer: each ping's ms."""
    server.stdin.write(write)
    server.stdin.flush()
    write_id, written, latencies = json.loads(write)["id"], False, []
    while not written:
        ping = server.encode("ping")
        began = time.perf_counter()
        server.stdin.write(ping)
        server.stdin.flush()
        while True:  # the write's answer may come first
            answered = json.loads(server.stdout.readline())
            if answered["id"] == write_id:
                written = True
                continue
            latencies.append((time.perf_counter() - began) * 1000)
            break
        time.sleep(PING_EVERY)
    return latencies


def mcp_ping_during_write(bench: Bench) -> None:
    """A ping while a 20 MB write runs, against a ping to an idle ``gitmem mcp``."""
    repo = build_repository(bench.workdir / "mcp-ping", 10)
    server = McpProcess(repo)
    try:
        server.initialize()
        idle = bench.measure("mcp ping during a write", "10 files", {
            "gitmem mcp: ping, idle": lambda i: server.call("ping")})["gitmem mcp: ping, idle"]
        during = Row("mcp ping during a write", "10 files", "gitmem mcp: ping during a 20 MB memory_write")
        for i in range(bench.pick(2, 6)):
            write = server.encode("tools/call", {"name": "memory_write", "arguments": {
                "record": f"agent:{MCP_RECORD}", "mode": "replace",
                "content": "x" * PING_WRITE + str(i)}})
            during.samples += pings_during_a_write(server, write)
        bench.add(during)
    finally:
        server.close()
    bench.compare(during, idle)


SCENARIOS = [mcp_write, mcp_startup, mcp_ping_during_write]
