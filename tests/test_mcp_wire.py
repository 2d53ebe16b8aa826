"""``gitmem mcp`` answers every request (issue 35): lines that are not JSON, not a request,
or not text (a lone surrogate escape, what ``JSON.stringify`` makes of a JavaScript string
cut inside a pair) get their JSON-RPC error; a ping is answered while a big write runs; a
write cancelled before its commit is not made. Driven with raw bytes and with the
TypeScript MCP SDK.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem

pytest.importorskip("mcp")

INSPECTOR = Path(__file__).resolve().parent / "mcp_inspector"
BIG = 20 << 20  # bytes of the write a ping is sent during
LATIN_1 = b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"note":"caf\xe9"}}'


def request(id_: int, method: str, **params) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode()


def tool_call(id_: int, tool: str, **arguments) -> bytes:
    return request(id_, "tools/call", name=tool, arguments=arguments)


class LineClient:
    """``gitmem mcp`` fed raw lines; its answers read by a thread, so that a missing one
    fails the test after a while instead of hanging it."""

    def __init__(self, repo: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=SUBPROCESS_ENV)
        self.answers: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send(request(1, "initialize", protocolVersion="2025-06-18", capabilities={},
                          clientInfo={"name": "raw", "version": "1"}))
        assert self.answer()["id"] == 1
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def _read(self) -> None:
        for line in self.process.stdout:
            self.answers.put(json.loads(line))

    def send(self, line: bytes) -> None:
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self) -> dict:
        try:
            return self.answers.get(timeout=60)
        except queue.Empty:
            raise AssertionError("gitmem mcp gave no answer within 60 s") from None

    def close(self) -> bytes:
        """End input; gitmem mcp exits 0. Its stderr."""
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0
        assert self.answers.empty(), self.answers.get()
        return self.process.stderr.read()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wire") / "repo"
    run_gitmem("init", str(path))
    return path


@pytest.fixture
def client(repo):
    opened = LineClient(repo)
    yield opened
    opened.close()


def test_lines_that_are_not_json_requests_or_text_are_answered_and_nothing_is_written(client, repo):
    before = Git(repo).count()
    for line, answer in [
        (rb'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_write",'
         rb'"arguments":{"record":"user","content":"a\ud800b"}}}',
         {"id": 2, "error": {"code": -32602, "data": {"path": "params.arguments.content"},
                             "message": 'params.arguments.content holds a lone surrogate (\\ud800) at '
                                        'character 1: that is not Unicode text (a JavaScript string '
                                        'cut inside a surrogate pair?)'}}),
        (b"{not json", {"id": None, "error": {"code": -32700, "message":
                                              "not JSON: Expecting property name enclosed in double "
                                              "quotes: line 1 column 2 (char 1)"}}),
        (b"[]", {"id": None, "error": {"code": -32600, "message": "not a JSON-RPC request: an array "
                                                                  "(MCP sends one message a line)"}}),
        (b'{"jsonrpc":"2.0","id":8}', {"id": 8, "error": {"code": -32600, "message":
                                                          'not a JSON-RPC request: no "method"'}}),
        (b'"abc"', {"id": None, "error": {"code": -32600, "message": "not a JSON-RPC request: a string"}}),
        (LATIN_1, {"id": None, "error": {"code": -32700, "message":
                                         f"not JSON: not UTF-8 (byte 0xe9 at {LATIN_1.index(0xe9)})"}}),
        (rb'{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"memory_read",'
         rb'"arguments":{"record":"agent:\udfffx"}}}',
         {"id": 10, "error": {"code": -32602, "data": {"path": "params.arguments.record"},
                              "message": 'params.arguments.record holds a lone surrogate (\\udfff) at '
                                         'character 6: that is not Unicode text (a JavaScript string '
                                         'cut inside a surrogate pair?)'}}),
    ]:
        client.send(line)
        assert client.answer() == {"jsonrpc": "2.0", **answer}, line
    # a notification cannot be answered: it is logged, and the next request is served
    client.send(rb'{"jsonrpc":"2.0","method":"notifications/progress","params":{"note":"\ud800"}}')
    client.send(tool_call(11, "memory_write", record="user", content="a\U0001f600b"))  # a whole pair is text
    assert client.answer()["result"]["isError"] is False
    assert (repo / "memory/user.md").read_text() == "a\U0001f600b\n"
    assert Git(repo).count() == before + 1


def test_a_file_of_requests_is_answered_line_by_line(repo, tmp_path):
    requests = tmp_path / "requests"
    requests.write_bytes(request(1, "initialize", protocolVersion="2025-06-18", capabilities={},
                                 clientInfo={"name": "file", "version": "1"}) + b"\n{not json\n")
    with requests.open("rb") as stdin:  # a regular file: read in a thread, not by the event loop
        done = subprocess.run([sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)], stdin=stdin,
                              capture_output=True, env=SUBPROCESS_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    # each line is answered; the answers carry their ids, and JSON-RPC does not order them
    lines = done.stdout.splitlines()
    answers = {answer["id"]: answer for answer in map(json.loads, lines)}
    assert len(lines) == 2 and set(answers) == {1, None}
    assert answers[1]["result"]["serverInfo"]["name"] == "gitmem"
    assert answers[None]["error"]["code"] == -32700


def test_a_ping_is_answered_while_a_big_write_runs(client):
    client.send(tool_call(20, "memory_write", record="agent:big", content="x" * BIG, mode="replace"))
    client.send(request(21, "ping"))
    first, second = client.answer(), client.answer()
    assert (first, second["id"]) == ({"jsonrpc": "2.0", "id": 21, "result": {}}, 20), first
    assert second["result"]["isError"] is False


def test_a_cancelled_write_that_waits_for_the_writers_lock_is_not_made(repo):
    git = Git(repo)
    client = LineClient(repo)
    client.send(tool_call(30, "memory_read", record="user"))  # the repository opened
    assert client.answer()["id"] == 30
    before = git.count()
    lock = os.open(repo / ".git/gitmem/lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another writer holds the repository
        client.send(tool_call(31, "memory_write", record="agent:cancelled", content="never"))
        client.send(request(32, "ping"))
        assert client.answer()["id"] == 32  # the loop serves on while the write waits
        client.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": 31, "reason": "the user pressed Esc"}}).encode())
        client.send(request(33, "ping"))
        assert client.answer()["id"] == 33
    finally:
        os.close(lock)  # the other writer lets go: the write takes the lock, and stops
    client.send(tool_call(34, "memory_write", record="agent:after", content="written"))
    assert client.answer()["id"] == 34  # and no answer for 31, as MCP says
    assert git.count() == before + 1 and not (repo / "memory/agents/cancelled.md").exists()
    client.close()  # its log written out
    assert "memory_write record='agent:cancelled': cancelled before its commit: nothing written" in (
        repo / ".git/gitmem/serve.log").read_text()


def test_a_write_cancelled_after_its_commit_point_is_made_whole_and_the_log_says_so(repo):
    git = Git(repo)
    client = LineClient(repo)
    client.send(tool_call(40, "memory_read", record="user"))
    assert client.answer()["id"] == 40
    before = git.count()
    written = repo / "memory/agents/late.md"
    main_lock = repo / ".git/refs/heads/main.lock"
    main_lock.write_text("")  # plain git moving main: the write waits for its turn (5 s at most)
    try:
        client.send(tool_call(41, "memory_write", record="agent:late", content="kept"))
        for _ in range(400):  # the work tree is written before main moves: past the last check
            if written.exists():
                break
            time.sleep(0.01)
        client.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": 41}}).encode())
        client.send(request(42, "ping"))
        assert client.answer()["id"] == 42
    finally:
        main_lock.unlink()
    client.send(request(43, "ping"))
    assert client.answer()["id"] == 43  # none for 41, as MCP says
    client.close()
    assert git.count() == before + 1 and written.read_text() == "kept\n" and git.status() == ""
    assert "memory_write record='agent:late': cancelled when it was done already (a write stands whole)" in (
        repo / ".git/gitmem/serve.log").read_text()


TS_CLIENT = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [python, repo, big] = process.argv.slice(1);
const client = new Client({ name: "ts-sdk", version: "1.0" });
await client.connect(new StdioClientTransport({ command: python, args: ["-m", "gitmem", "mcp", "--repo", repo],
                                                 stderr: "inherit" }));
const report = {};
try {
  await client.callTool({ name: "memory_write", arguments: { record: "user", content: "a\\ud800b" } },
                        undefined, { timeout: 30000 });
  report.surrogate = "answered as a result";
} catch (error) {
  report.surrogate = { code: error.code, message: error.message };
}
const order = [];
const write = client.callTool({ name: "memory_write", arguments: { record: "agent:big", mode: "replace",
                                                                   content: "x".repeat(Number(big)) } },
                              undefined, { timeout: 60000 }).then(() => order.push("write"));
await client.ping().then(() => order.push("ping"));
await write;
report.order = order;
await client.close();
console.log(JSON.stringify(report));
"""


def test_the_typescript_sdk_gets_an_answer_for_a_broken_string_and_a_ping_during_a_write(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the TypeScript MCP SDK runs on Node")
    if not (INSPECTOR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(f"the TypeScript MCP SDK is not installed: run `npm ci` in {INSPECTOR}")
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    done = subprocess.run([node, "--input-type=module", "-e", TS_CLIENT, sys.executable, str(repo), str(BIG)],
                          capture_output=True, text=True, timeout=180, cwd=INSPECTOR, env=SUBPROCESS_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["surrogate"]["code"] == -32602, report
    assert "params.arguments.content holds a lone surrogate (\\ud800)" in report["surrogate"]["message"]
    assert report["order"] == ["ping", "write"]
    assert not (repo / "memory/user.md").exists()


TS_PAGES = """
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
const [python, repo] = process.argv.slice(1);
const client = new Client({ name: "ts-sdk", version: "1.0" });
await client.connect(new StdioClientTransport({ command: python, args: ["-m", "gitmem", "mcp", "--repo", repo],
                                                 stderr: "inherit" }));
const report = {};
for (const agent of ["five", "eight"]) {
  let text = "", offset = 0, pages = 0, size = null;
  while (offset !== null) {
    const answer = await client.callTool({ name: "memory_read", arguments: { record: `agent:${agent}`, offset } },
                                         undefined, { timeout: 120000 });
    text += answer.content.map((part) => part.text).join("");
    size = answer.structuredContent.size;
    offset = answer.structuredContent.next_offset;
    pages += 1;
  }
  report[agent] = { length: text.length, size, pages, head: text.slice(0, 20), tail: text.slice(-20) };
}
await client.ping();
report.connected = true;
await client.close();
console.log(JSON.stringify(report));
"""


def test_the_typescript_sdk_reads_a_5_and_an_8_mib_memory_in_pages_and_stays_connected(tmp_path):
    """Issue 43: a 5 MiB memory answered as text and structure was a 10 MiB line, past the
    TypeScript SDK's read buffer: the connection died. The text comes once, in pages."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the TypeScript MCP SDK runs on Node")
    if not (INSPECTOR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail(f"the TypeScript MCP SDK is not installed: run `npm ci` in {INSPECTOR}")
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    texts = {}
    for agent, mib in (("five", 5), ("eight", 8)):
        line = "".join(f"{agent} line {n} of notes about the build é\n" for n in range(40))
        texts[agent] = (line * (mib * 2**20 // len(line) + 1))[:mib * 2**20].rstrip("\n") + "\n"
        run_gitmem("memory", "write", "--agent", agent, repo=repo, input=texts[agent])
    done = subprocess.run([node, "--input-type=module", "-e", TS_PAGES, sys.executable, str(repo)],
                          capture_output=True, text=True, timeout=600, cwd=INSPECTOR, env=SUBPROCESS_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report.pop("connected")
    for agent, text in texts.items():
        assert report[agent] == {"length": len(text), "size": len(text), "pages": -(-len(text) // 2**20),
                                 "head": text[:20], "tail": text[-20:]}
