"""``gitmem mcp``: the real server, driven by the MCP SDK's own client (``ClientSession``
over ``stdio_client``) and by the MCP Inspector's command line (when Node is there).

Every write is one commit naming the client; errors are tool results with ``isError``
and the server answers the next call; MCP, ``gitmem serve`` and a person editing by
hand on one repository lose nothing; a SIGKILL loses nothing that was answered.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.records.ids import encode
from nui_client import NuiHost

mcp = pytest.importorskip("mcp")  # the test extra holds it; `pip install 'gitmem[mcp]'`
from mcp import ClientSession, StdioServerParameters, stdio_client, types  # noqa: E402

CLIENT = types.Implementation(name="claude-code", version="2.1")
INSPECTOR = Path(__file__).resolve().parent / "mcp_inspector"
TOOLS = {"memory_read": ["record"], "memory_write": ["record", "content"], "memory_list": [],
         "history": ["record"], "memory_show": ["record", "at"], "search": ["query"],
         "read_unit": ["record", "unit_id"],
         "memory_view": ["path"], "memory_create": ["path", "file_text"],
         "memory_str_replace": ["path", "old_str", "new_str"],
         "memory_insert": ["path", "insert_line", "insert_text"], "memory_delete": ["path"],
         "memory_rename": ["old_path", "new_path"], "restore": ["record", "at"], "recent": []}


def server_params(repo: Path, *, command: list[str] | None = None) -> StdioServerParameters:
    argv = command or [sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)]
    return StdioServerParameters(command=argv[0], args=argv[1:], env=SUBPROCESS_ENV)


@asynccontextmanager
async def session(repo: Path, *, client: types.Implementation = CLIENT,
                  command: list[str] | None = None, errlog=None):
    """An initialised client session with a fresh ``gitmem mcp`` on ``repo``."""
    with anyio.fail_after(120):
        async with stdio_client(server_params(repo, command=command),
                                errlog=errlog or sys.stderr) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60,
                                     client_info=client) as opened:
                await opened.initialize()
                yield opened


async def call(opened: ClientSession, tool: str, **arguments) -> tuple[str, bool]:
    """The text of a tool's result and whether it is an error."""
    result = await opened.call_tool(tool, arguments)
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text, result.is_error


def run(test) -> None:
    anyio.run(test)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    run_gitmem("init", str(path))
    return path


def test_the_tools_and_their_schemas(repo):
    async def test():
        async with session(repo) as opened:
            tools = {tool.name: tool for tool in (await opened.list_tools()).tools}
            assert set(tools) == set(TOOLS)
            for name, required in TOOLS.items():
                schema = tools[name].input_schema
                assert schema["type"] == "object" and sorted(schema.get("required", [])) == sorted(required)
                assert set(required) <= set(schema["properties"])
                description = tools[name].description
                assert "\n" not in description and 20 < len(description) < 400
            assert tools["memory_write"].input_schema["properties"]["mode"]["enum"] == ["append", "replace"]
            assert tools["search"].input_schema["properties"]["history"]["type"] == "boolean"
            templates = (await opened.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["gitmem://memory/agent/{id}"]
    run(test)


class RawClient:
    """``gitmem mcp`` driven line by line, as any stdio client: each answer read before the
    next request (at end of input the SDK cancels what is still in flight)."""

    def __init__(self, repo: Path):
        self.process = subprocess.Popen([sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, env=SUBPROCESS_ENV)

    def send(self, message: dict) -> dict | None:
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        if "id" not in message:
            return None
        answer = json.loads(self.process.stdout.readline())  # protocol lines only
        assert answer["id"] == message["id"], answer
        return answer

    def initialize(self, version: str, client: str) -> dict:
        answer = self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": client, "version": version}}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer["result"]

    def call(self, tool: str, **arguments) -> dict:
        return self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}})["result"]

    def close(self) -> tuple[int, bytes]:
        """Kill it if it still runs; its exit status and what stdout held after the answers."""
        if self.process.poll() is None:
            self.process.kill()
        code = self.process.wait(timeout=30)
        rest = self.process.stdout.read()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            stream.close()
        return code, rest


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_older_clients_are_answered_in_their_protocol_version(repo, version):
    client = RawClient(repo)
    try:
        assert client.initialize(version, "old-client")["protocolVersion"] == version
        assert client.call("memory_write", record="user", content=version)["isError"] is False
        client.process.stdin.close()
        assert client.process.wait(timeout=30) == 0
    finally:
        assert client.close() == (0, b"")
    assert f"Gitmem-Client: old-client {version}" in Git(repo)("log", "-1", "--format=%B")


def test_a_client_of_the_newest_protocol_discovers_instead_of_initializing(repo):
    async def test():
        with anyio.fail_after(120):
            async with stdio_client(server_params(repo)) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60,
                                         client_info=types.Implementation(name="new-client", version="9")) as opened:
                    found = await opened.discover()
                    assert found.supported_versions
                    assert (await call(opened, "memory_write", record="user", content="new"))[1] is False
    run(test)
    assert "Gitmem-Client: new-client 9" in Git(repo)("log", "-1", "--format=%B")


def test_each_tool_on_a_real_repository(repo, tmp_path):
    git = Git(repo)
    session_body = json.dumps({"messages": [{"id": "m1", "role": "user", "content": "hi"}],
                               "agentSessionId": "r1"})
    run_gitmem("session", "write", "claude-code", "s1", repo=repo, input=session_body)

    async def test():
        async with session(repo) as opened:
            assert await call(opened, "memory_read", record="user") == ("", False)
            text, error = await call(opened, "memory_write", record="user",
                                     content="Prefers short answers.", mode="replace")
            assert not error and text.startswith("replaced user in commit ")
            assert (await call(opened, "memory_write", record="agent:ext:corp/reviewer",
                               content="Checks types first."))[1] is False
            assert await call(opened, "memory_read", record="agent:ext:corp/reviewer") == (
                "Checks types first.\n", False)
            assert (await call(opened, "memory_write", record="user", content="Prefers short answers.",
                               mode="replace"))[0] == "user already held that: nothing to commit"
            listed = json.loads((await call(opened, "memory_list"))[0])
            assert [(m["record"], m["size"]) for m in listed] == [
                ("user", 23), ("agent:ext:corp/reviewer", 20)]
            assert listed[0]["commit"] == git("rev-parse", "HEAD~1").strip()
            log = json.loads((await call(opened, "history", record="user"))[0])
            assert [e["summary"] for e in log] == ["created: +1 -0 lines"]
            assert log[0]["id"] == listed[0]["commit"] and log[0]["date"].startswith("20")
            session_read = json.loads((await call(opened, "memory_read", record="session:claude-code/s1"))[0])
            assert session_read == {"messages": [{"id": "m1", "role": "user", "content": "hi"}],
                                    "agentSessionId": "r1"}
            assert json.loads((await call(opened, "history", record="session:claude-code/s1"))[0])[0][
                "summary"].startswith("created")
            resources = {r.uri: r.name for r in (await opened.list_resources()).resources}
            assert resources == {"gitmem://memory/user": "user",
                                 "gitmem://memory/agent/ext%3Acorp%2Freviewer": "agent:ext:corp/reviewer"}
            read = await opened.read_resource("gitmem://memory/agent/ext%3Acorp%2Freviewer")
            assert read.contents[0].text == "Checks types first.\n"
    run(test)
    # one commit a write, by gitmem, naming the client; the work tree and index in step
    message = git("log", "-1", "--format=%B", "--", "memory/agents")
    assert "Gitmem-Op: memory.append\nGitmem-Client: claude-code 2.1\nGitmem-Id: agent:ext:corp/reviewer" in message
    assert git.count("memory") == 2 and git.status() == ""
    assert (repo / "memory/agents/ext%3acorp%2freviewer.md").read_text() == "Checks types first.\n"
    logged = (repo / ".git/gitmem/serve.log").read_text()
    assert "claude-code 2.1: memory_write record='agent:ext:corp/reviewer'" in logged
    assert "Checks types" not in logged  # ids, never content


def test_five_appends_are_five_commits_joined_by_blank_lines_and_show_goes_back(repo):
    git = Git(repo)

    async def test():
        async with session(repo) as opened:
            for n in range(5):
                assert (await call(opened, "memory_write", record="agent:reviewer",
                                   content=f"block {n}\n"))[1] is False
            assert (await call(opened, "memory_show", record="agent:reviewer", at="@~2")) == (
                "block 0\n\nblock 1\n\nblock 2\n", False)
            assert (await call(opened, "memory_show", record="agent:reviewer", at="@"))[0].count("block") == 5
            back = git("rev-parse", "HEAD~4").strip()  # the commit of the first append
            assert await call(opened, "memory_show", record="agent:reviewer", at=back) == ("block 0\n", False)
            assert (await call(opened, "history", record="agent:reviewer", limit=2))[0].count('"id"') == 2
    run(test)
    assert git.count("memory/agents/reviewer.md") == 5
    assert (repo / "memory/agents/reviewer.md").read_text() == "\n\n".join(
        f"block {n}" for n in range(5)) + "\n"
    assert all("Gitmem-Client: claude-code 2.1" in git("log", "-1", "--format=%B", f"HEAD~{n}")
               for n in range(5))


def test_a_save_by_hand_from_an_older_version_is_merged_before_the_next_write(repo):
    git = Git(repo)
    path = repo / "memory/agents/reviewer.md"

    async def test():
        async with session(repo) as opened:
            await call(opened, "memory_write", record="agent:reviewer", content="first")
            editor = path.read_text()  # a person opens the file...
            await call(opened, "memory_write", record="agent:reviewer", content="second")
            path.write_text(editor + "added by hand\n")  # ...and saves it over the newer version
            await call(opened, "memory_write", record="agent:reviewer", content="third")
            text, _ = await call(opened, "memory_read", record="agent:reviewer")
            assert text == "first\n\nsecond\n\nadded by hand\n\nthird\n"  # merged: nothing lost
    run(test)
    authors = git.log("memory/agents/reviewer.md", fmt="%an|%s")
    # the save is a commit of its own, under the person's identity, between gitmem's
    assert [a.split("|")[1] for a in authors] == ["memory: append to agent reviewer",
                                                  "hand edit: memory/agents/reviewer.md",
                                                  "memory: append to agent reviewer",
                                                  "memory: append to agent reviewer"]
    assert not authors[1].startswith("gitmem") and authors[0].startswith("gitmem")
    assert git.status() == ""


def test_errors_are_tool_results_and_the_server_answers_the_next_call(repo, tmp_path):
    git = Git(repo)
    before = git.count()
    outside = tmp_path / "escaped.md"
    missing = tmp_path / "not-yet"

    async def test():
        async with session(repo) as opened:
            for arguments, words in [
                ({"record": "nobody", "content": "x"}, "is not a record: use user or agent:<id>"),
                ({"record": "thread:t1", "content": "x"}, "cannot be written here"),
                ({"record": "user", "content": "x", "mode": "prepend"}, 'mode must be "append" or "replace"'),
                ({"record": "agent:", "content": "x"}, "agent id"),
                ({"record": "user"}, '"content" is required'),
                ({"record": "user", "content": " \n"}, '"content" is empty'),
            ]:
                text, error = await call(opened, "memory_write", **arguments)
                assert error and words in text and "\n" not in text, (arguments, text)
                assert await call(opened, "memory_read", record="user") == ("", False)  # still serving
            text, error = await call(opened, "search", query="  ")
            assert error and text == '"query" is empty: give query a value'
            text, error = await call(opened, "memory_show", record="user", at="not a time")
            assert error and "is neither a revision nor a date" in text
            text, error = await call(opened, "history", record="user", limit=0)
            assert error and '"limit" must be a whole number from 1 to 1000' in text
            text, error = await call(opened, "no_such_tool")
            assert error and "no tool 'no_such_tool'" in text
            with pytest.raises(mcp.MCPError, match="no resource gitmem://elsewhere"):
                await opened.read_resource("gitmem://elsewhere")
            assert (await call(opened, "memory_write", record="user", content="still here"))[1] is False
        # a repository that is not there: said, and found once it is made
        async with session(missing) as opened:
            text, error = await call(opened, "memory_read", record="user")
            assert error and text.startswith(f"no gitmem repository at {missing}")
            assert text.endswith(f"`gitmem init {missing}` creates one")
            assert not missing.exists()  # nothing made where nothing was asked for
            run_gitmem("init", str(missing))
            assert (await call(opened, "memory_write", record="user", content="found"))[1] is False
    run(test)
    assert not outside.exists() and not list(tmp_path.glob("**/escaped*"))
    assert git.count() == before + 1 and git.status() == ""
    assert Git(missing).count("memory/user.md") == 1


def test_mcp_takes_every_agent_id_the_cli_takes_and_keeps_it_inside_the_repository(repo, tmp_path):
    """``agent:../x`` is an id like any other (the CLI and nui's wire store it escaped, as
    ``memory/agents/%2e.%2fx.md``): MCP reads and writes it, and nothing lands outside."""
    odd = ["../x", "../../escaped", "..", "/etc/passwd", "\\x", "a/../../b"]
    for agent in odd[::2]:  # written by the CLI, read through MCP
        run_gitmem("memory", "write", "--agent", agent, repo=repo, input=f"cli wrote {agent}")

    async def test():
        async with session(repo) as opened:
            for agent in odd[::2]:
                assert await call(opened, "memory_read", record=f"agent:{agent}") == (
                    f"cli wrote {agent}\n", False)
            for agent in odd[1::2]:
                text, error = await call(opened, "memory_write", record=f"agent:{agent}",
                                         content=f"mcp wrote {agent}")
                assert not error, text
            listed = {m["record"] for m in json.loads((await call(opened, "memory_list"))[0])}
            assert listed == {f"agent:{agent}" for agent in odd}
            resource = await opened.read_resource("gitmem://memory/agent/..%2Fx")
            assert resource.contents[0].text == "cli wrote ../x\n"
    run(test)
    for agent in odd[1::2]:  # written through MCP, read by the CLI
        assert run_gitmem("memory", "read", "--agent", agent, repo=repo).stdout == f"mcp wrote {agent}\n"
    assert (repo / "memory/agents/%2e.%2f..%2fescaped.md").read_text() == "mcp wrote ../../escaped\n"
    assert not list(tmp_path.glob("**/escaped*")) and not (tmp_path / "b.md").exists()
    assert sorted(p.name for p in (repo / "memory/agents").iterdir()) == sorted(
        f"{encode(agent)}.md" for agent in odd)
    assert Git(repo).status() == ""


def test_search_answers_hits(repo):
    # Written against the search interface of issue 26 (Gitmem.search); fails until it is merged.
    async def test():
        async with session(repo) as opened:
            await call(opened, "memory_write", record="agent:reviewer", content="Checks the types first.")
            await call(opened, "memory_write", record="agent:reviewer", content="Rewritten.", mode="replace")
            text, error = await call(opened, "search", query="types")
            assert not error, text
            hits = json.loads(text)["hits"]
            assert hits == [] or all({"record", "snippet", "score"} <= set(hit) for hit in hits)
            text, error = await call(opened, "search", query="types", history=True, limit=5)
            assert not error, text
            hits = json.loads(text)["hits"]
            assert hits and hits[0]["record"] == "agent:reviewer" and "types" in hits[0]["snippet"]
    run(test)


def test_mcp_and_serve_and_a_hand_edit_racing_on_one_record_lose_nothing(repo, tmp_path):
    git = Git(repo)
    before = git.count()
    serve = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)], cwd=tmp_path,
                    env=SUBPROCESS_ENV)
    served: list[str] = []

    def serve_appends():
        for n in range(30):
            serve.call("storage.agentMemory.write", {"handlerId": "h", "agentId": "shared",
                                                      "content": f"serve {n}", "writeMode": "append"})
            served.append(f"serve {n}")

    async def test():
        async with session(repo) as opened:
            writer = threading.Thread(target=serve_appends)
            writer.start()
            for n in range(30):
                assert (await call(opened, "memory_write", record="agent:shared", content=f"mcp {n}"))[1] is False
                if n == 15:  # a person saves user memory meanwhile; serve's watcher commits it
                    with open(repo / "memory/user.md", "a", encoding="utf-8") as file:
                        file.write("edited by hand\n")
            await anyio.to_thread.run_sync(writer.join, 60)
            assert served == [f"serve {n}" for n in range(30)]
            # the hand edit is committed before MCP reads it
            assert (await call(opened, "memory_read", record="user"))[0] == "edited by hand\n"
    with serve:
        run(test)
        serve.call("storage.shutdown")
        assert serve.wait() == 0
    blocks = (repo / "memory/agents/shared.md").read_text().rstrip("\n").split("\n\n")
    assert sorted(blocks) == sorted([f"mcp {n}" for n in range(30)] + [f"serve {n}" for n in range(30)])
    assert [b for b in blocks if b.startswith("mcp")] == [f"mcp {n}" for n in range(30)]
    assert git.count("memory/agents/shared.md") == 60
    assert git.count() == before + 61  # and one commit of the hand edit
    assert git.status() == "" and git.fsck() is not None


def test_a_sigkill_between_writes_loses_nothing_answered(repo, tmp_path):
    git = Git(repo)
    pid_file = tmp_path / "pid"
    # the shell writes its pid and becomes the server: the pid is the server's
    command = ["/bin/sh", "-c", f'echo $$ > "{pid_file}"; exec "$0" "$@"', sys.executable, "-m",
               "gitmem", "mcp", "--repo", str(repo)]
    answered: list[str] = []

    async def test():
        async with session(repo, command=command) as opened:
            for n in range(8):
                await call(opened, "memory_write", record="agent:killed", content=f"kept {n}")
                answered.append(f"kept {n}")
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            with pytest.raises(Exception):  # noqa: B017 - the connection is gone, however it says so
                await call(opened, "memory_write", record="agent:killed", content="never answered")
    run(test)
    assert (repo / "memory/agents/killed.md").read_text().rstrip("\n").split("\n\n")[:8] == answered
    git.fsck()

    async def after():  # the next server finds everything, and writes on
        async with session(repo) as opened:
            text, _ = await call(opened, "memory_read", record="agent:killed")
            assert text.startswith("\n\n".join(answered))
            assert (await call(opened, "memory_write", record="agent:killed", content="after"))[1] is False
    run(after)
    assert git.status() == "" and git.count("memory/agents/killed.md") >= 9


def test_the_mcp_inspector_cli_lists_calls_and_reads(repo):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the MCP Inspector runs on Node")
    cli = INSPECTOR / "node_modules" / "@modelcontextprotocol" / "inspector" / "cli" / "build" / "cli.js"
    if not cli.exists():
        pytest.fail(f"the MCP Inspector is not installed: run `npm ci` in {INSPECTOR}")
    server = [sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)]

    def inspector(*args: str) -> dict:
        done = subprocess.run([node, str(cli), *server, "--cli", *args], capture_output=True,
                              text=True, env=SUBPROCESS_ENV, timeout=120, cwd=INSPECTOR)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    names = [tool["name"] for tool in inspector("--method", "tools/list")["tools"]]
    assert sorted(names) == sorted(TOOLS)
    written = inspector("--method", "tools/call", "--tool-name", "memory_write",
                        "--tool-arg", "record=agent:inspector", "--tool-arg", "content=seen by node")
    assert not written.get("isError") and "appended to agent:inspector" in written["content"][0]["text"]
    read = inspector("--method", "tools/call", "--tool-name", "memory_read",
                     "--tool-arg", "record=agent:inspector")
    assert read["content"][0]["text"] == "seen by node\n"
    assert "Gitmem-Client: " in Git(repo)("log", "-1", "--format=%B")


def test_sigterm_ends_the_server_while_its_client_keeps_the_pipe_open(repo):
    client = RawClient(repo)
    try:
        client.initialize("2025-06-18", "host")
        assert client.call("memory_write", record="user", content="before")["isError"] is False
        client.process.send_signal(signal.SIGTERM)  # stdin stays open, as a host stopping servers
        assert client.process.wait(timeout=30) == 0
    finally:
        assert client.close() == (0, b"")  # nothing but protocol, and nothing after it
    assert "stopped" in (repo / ".git/gitmem/serve.log").read_text()
    assert (repo / "memory/user.md").read_text() == "before\n" and Git(repo).status() == ""


# -- gitmem mcp config -------------------------------------------------------------------


def config_cli(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_gitmem("mcp", "config", *args, env={"HOME": str(home), "XDG_CONFIG_HOME": "",
                                                   "CODEX_HOME": ""}, check=check)


def test_config_write_keeps_the_servers_and_settings_already_there(tmp_path):
    home, repo = tmp_path / "home", tmp_path / "memory repo"
    home.mkdir()
    claude = home / ".claude.json"
    claude.write_text(json.dumps({"numStartups": 3, "projects": {"/p": {"mcpServers": {}}},
                                  "mcpServers": {"other": {"type": "stdio", "command": "other-mcp"}}}))
    done = config_cli(home, "--client", "claude-code", "--write", "--repo", str(repo))
    assert str(claude) in done.stdout
    config = json.loads(claude.read_text())
    assert config["numStartups"] == 3 and config["projects"] == {"/p": {"mcpServers": {}}}
    assert config["mcpServers"]["other"] == {"type": "stdio", "command": "other-mcp"}
    entry = config["mcpServers"]["gitmem"]
    assert entry["type"] == "stdio" and Path(entry["command"]).is_absolute()
    assert entry["args"][-3:] == ["mcp", "--repo", str(repo.resolve())] and (repo / ".git").is_dir()
    config_cli(home, "--client", "claude-code", "--write", "--repo", str(repo))  # again: one entry
    assert sorted(json.loads(claude.read_text())["mcpServers"]) == ["gitmem", "other"]

    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4"\n\n# my tools\n[mcp_servers.other]\ncommand = "other-mcp"\n'
                     'args = ["--x"]\n\n[mcp_servers.gitmem]\ncommand = "old"\n\n[profiles.fast]\n'
                     'model = "o4-mini"\n')
    config_cli(home, "--client", "codex", "--write", "--repo", str(repo))
    text = codex.read_text()
    assert "# my tools" in text and text.count("[mcp_servers.gitmem]") == 1 and '"old"' not in text
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads(text)
    assert config["mcp_servers"]["other"] == {"command": "other-mcp", "args": ["--x"]}
    assert config["mcp_servers"]["gitmem"]["args"][-1] == str(repo.resolve())
    assert config["profiles"] == {"fast": {"model": "o4-mini"}} and config["model"] == "o4"

    cursor = home / ".cursor" / "mcp.json"  # no file yet: made, private
    config_cli(home, "--client", "cursor", "--write", "--repo", str(repo))
    assert list(json.loads(cursor.read_text())["mcpServers"]) == ["gitmem"]
    assert cursor.stat().st_mode & 0o777 == 0o600

    (home / ".cursor" / "mcp.json").write_text("{not json")
    done = config_cli(home, "--client", "cursor", "--write", "--repo", str(repo), check=False)
    assert done.returncode == 1 and "is not valid JSON" in done.stderr and "Traceback" not in done.stderr
    assert cursor.read_text() == "{not json"  # left as it was


def test_config_prints_the_entry_and_the_entry_starts_a_working_server(tmp_path, repo):
    printed = json.loads(config_cli(tmp_path, "--client", "claude-desktop", "--repo", str(repo)).stdout)
    entry = printed["mcpServers"]["gitmem"]
    assert not (tmp_path / ".config").exists()  # printing writes nothing

    async def test():
        async with session(repo, command=[entry["command"], *entry["args"]]) as opened:
            assert (await call(opened, "memory_write", record="user", content="via desktop"))[1] is False
    run(test)
    assert (repo / "memory/user.md").read_text() == "via desktop\n"


def test_nui_install_mcp_declares_the_server_in_the_manifest(tmp_path):
    from ruamel.yaml import YAML
    done = subprocess.run([sys.executable, "-m", "gitmem", "nui", "install", "--mcp", "--repo", "mem"],
                          cwd=tmp_path, capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "gitmem"
    manifest = YAML(typ="safe").load((folder / "extension.yaml").read_text())
    source = manifest["contributions"]["catalog"]["mcpServers"]["source"]["file"]
    assert manifest["contributions"]["storage"]["runtime"]["command"][1] == "serve"
    servers = json.loads((folder / source).read_text())["mcpServers"]
    assert [s["name"] for s in servers] == ["gitmem"]
    command = servers[0]["command"]
    assert command[1:] == ["mcp", "--repo", str((tmp_path / "mem").resolve())]

    async def test():
        async with session(tmp_path / "mem", command=command) as opened:
            assert len((await opened.list_tools()).tools) == len(TOOLS)
    run(test)
