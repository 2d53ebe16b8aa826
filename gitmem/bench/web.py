"""``gitmem bench`` scenarios for issue 38's ``gitmem web``: a page against the CLI's
same answer, on a repository of 20,000 commits (2,000 with --quick) holding a session
of 100,000 messages (about 40 MB; 10,000 with --quick).

The server runs as ``gitmem web`` does (a subprocess, started once, answering over
HTTP on loopback); each page is one request. Its rows, each <= 2x the command beside it:

- a memory's page (``/record?name=agent:target``) against ``gitmem memory read``;
- the session's page (its last messages) against ``gitmem session read``;
- a record's timeline (its first page) against ``gitmem log RECORD``;
- a search page against ``gitmem search WORDS``.

And :func:`mcp_http` (issue 45): a ``memory_read`` tool call over MCP's streamable HTTP
(``/mcp``, a bearer token, one kept-alive connection) against the same call over stdio
(``gitmem mcp``) on the same repository (<= 1.5x), beside the floor of any answer over
the same HTTP stack (a static file on the same connection).

    gitmem bench --only web
"""

from __future__ import annotations

import http.client
import json
import re
import select
import subprocess
import sys
from typing import IO, cast
from urllib.parse import quote

from gitmem.bench.core import Bench
from gitmem.bench.mcp import McpProcess
from gitmem.bench.record_index import RECORD, build_history
from gitmem.bench.workloads import GIT_ENV, build_repository, command, session_messages
from gitmem.repository import Gitmem

AGENT_TYPE = "claude-code"
SESSION = "long"
WORDS = "fact"
START_DEADLINE = 120.0  # seconds for the server's first line


class Page:
    """GET one page of a running ``gitmem web`` (the cookie of its printed token sent)."""

    def __init__(self, port: int, cookie: str, path: str):
        self.port, self.cookie, self.path = port, cookie, path

    def __call__(self, i: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            connection.request("GET", self.path, headers={"Cookie": self.cookie})
            answer = connection.getresponse()
            answer.read()
            if answer.status != 200:
                raise RuntimeError(f"{self.path}: HTTP {answer.status}")
        finally:
            connection.close()


def web_pages(bench: Bench) -> None:
    """A record's page, its timeline, a session's page and a search page, each against the CLI."""
    commits = bench.pick(2_000, 20_000)
    messages = bench.pick(10_000, 100_000)
    path = build_history(bench.workdir / f"web-{commits}", commits)
    with Gitmem.open(path, create=False) as mem:
        mem.sessions.write(AGENT_TYPE, SESSION, session_messages(messages), "resume", "/home/me")
        mem.changes(RECORD)  # the record index, built once as gitmem clone does
        mem.search(WORDS)  # and the search index
    size = sum(f.stat().st_size for f in (path / "sessions").rglob("*.jsonl"))
    setting = f"{commits:,} commits, a session of {messages:,} messages ({size / 1e6:.0f} MB)"
    server = subprocess.Popen([sys.executable, "-m", "gitmem", "web", "--repo", str(path), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=GIT_ENV)
    try:
        port, cookie = _started(server)
        gitmem = (sys.executable, "-m", "gitmem")
        repo = ("--repo", str(path))
        session = quote(f"session:{AGENT_TYPE}/{SESSION}")
        rows = bench.measure("web", setting, {
            "page: a memory": Page(port, cookie, f"/record?name={quote(RECORD)}"),
            "gitmem memory read --agent target": command(*gitmem, "memory", "read", "--agent", "target", *repo),
            "page: the session (its last messages)": Page(port, cookie, f"/record?name={session}"),
            "gitmem session read": command(*gitmem, "session", "read", AGENT_TYPE, SESSION, *repo),
            "page: a timeline": Page(port, cookie, f"/timeline?name={quote(RECORD)}"),
            "gitmem log RECORD": command(*gitmem, "log", RECORD, *repo),
            "page: search": Page(port, cookie, f"/search?q={WORDS}"),
            f"gitmem search {WORDS}": command(*gitmem, "search", WORDS, *repo),
        }, samples=bench.pick(5, 15))
    finally:
        server.terminate()
        server.wait(30)
    for page, cli in (("page: a memory", "gitmem memory read --agent target"),
                      ("page: the session (its last messages)", "gitmem session read"),
                      ("page: a timeline", "gitmem log RECORD"),
                      ("page: search", f"gitmem search {WORDS}")):
        bench.compare(rows[page], rows[cli], 2.0)


HTTP_TARGET = 1.5  # an MCP call over HTTP, against the same call over stdio


class McpHttp:
    """A client of ``gitmem web``'s ``/mcp`` on one kept-alive connection: initialised once,
    then each call one POST whose answer is read whole (JSON, or one server-sent event)."""

    def __init__(self, port: int, token: str):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}
        self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "gitmem-bench", "version": "1"}}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict) -> object:
        self.connection.request("POST", "/mcp", json.dumps(message), self.headers)
        answer = self.connection.getresponse()
        body = answer.read().decode()
        if answer.status not in (200, 202):
            raise RuntimeError(f"/mcp: HTTP {answer.status}: {body[:200]}")
        session = answer.getheader("mcp-session-id")
        if session:
            self.headers["mcp-session-id"] = session
        data = [line[5:] for line in body.splitlines() if line.startswith("data:")]
        return json.loads(data[-1] if data else body) if body.strip() else None

    def __call__(self, i: int) -> None:
        answer = self.post({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                            "params": {"name": "memory_read", "arguments": {"record": "user"}}})
        if not isinstance(answer, dict) or "result" not in answer or answer["result"].get("isError"):
            raise RuntimeError(f"/mcp: {answer}")

    def close(self) -> None:
        self.connection.close()


class StaticFile:
    """GET a static file of ``gitmem web`` on one kept-alive connection: the floor of any
    answer over its HTTP stack (uvicorn and Starlette), no gitmem code in it."""

    def __init__(self, port: int, cookie: str):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.cookie = cookie

    def __call__(self, i: int) -> None:
        self.connection.request("GET", "/static/web.css", headers={"Cookie": self.cookie})
        answer = self.connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"/static/web.css: HTTP {answer.status}")

    def close(self) -> None:
        self.connection.close()


class McpStdio:
    """The same ``memory_read`` call through a ``gitmem mcp`` subprocess."""

    def __init__(self, repo):
        self.server = McpProcess(repo)
        self.server.initialize()

    def __call__(self, i: int) -> None:
        self.server.call("tools/call", {"name": "memory_read", "arguments": {"record": "user"}})

    def close(self) -> None:
        self.server.close()


def mcp_http(bench: Bench) -> None:
    """A tool call over MCP's HTTP transport against the same call over stdio."""
    path = build_repository(bench.workdir / "mcp-http", 10)
    with Gitmem.open(path, create=False) as mem:
        mem.memory.write("Prefers short answers.")
    token = subprocess.run([sys.executable, "-m", "gitmem", "--repo", str(path), "web", "token", "add", "bench"],
                           capture_output=True, text=True, env=GIT_ENV, check=True).stdout.strip()
    server = subprocess.Popen([sys.executable, "-m", "gitmem", "web", "--repo", str(path), "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=GIT_ENV)
    clients: list[McpHttp | McpStdio | StaticFile] = []
    try:
        port, cookie = _started(server)
        over_http, over_stdio, static = McpHttp(port, token), McpStdio(path), StaticFile(port, cookie)
        clients += [over_http, over_stdio, static]
        rows = bench.measure("mcp over http", "10 files, one kept-alive connection", {
            "memory_read over HTTP (/mcp of gitmem web)": over_http,
            "memory_read over stdio (gitmem mcp)": over_stdio,
            "floor: GET /static/web.css, the same server and connection": static},
            samples=bench.pick(20, 200))
    finally:
        for client in clients:
            client.close()
        server.terminate()
        server.wait(30)
    http_row, stdio_row, floor = rows.values()
    bench.compare(http_row, stdio_row, HTTP_TARGET)
    bench.compare(floor, stdio_row, what="the HTTP stack's floor / memory_read over stdio")


def _started(server: subprocess.Popen) -> tuple[int, str]:
    """The port and the cookie of the server's printed address, once it is ready."""
    stdout = cast(IO[str], server.stdout)  # a PIPE, in text: never None
    ready, _, _ = select.select([stdout], [], [], START_DEADLINE)
    line = stdout.readline().strip() if ready else ""
    found = re.match(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)$", line)
    if found is None:
        raise RuntimeError(f"gitmem web did not start: {line!r}")
    port = int(found[1])
    return port, f"gitmem_web_{port}={found[2]}"


SCENARIOS = [web_pages, mcp_http]
