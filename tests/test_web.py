"""``gitmem web`` over HTTP: the real server as a subprocess, driven with plain requests
(the start line, the token and its cookie, Host and Origin checks, writes), and its
``/mcp`` driven by the MCP SDK's own streamable HTTP client.

The browser tests are in test_web_browser.py.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem

pytest.importorskip("starlette")  # the web extra: `pip install 'gitmem[web]'` (the test extra has it)
mcp = pytest.importorskip("mcp")
import httpx2  # noqa: E402  (the MCP SDK's HTTP client)
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from web_server import WebServer  # noqa: E402

REVIEWER = ["Checks types first.", "Reviews tests first.", "Asks before renaming."]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A repository with a user memory, an agent memory written three times, and a session."""
    path = tmp_path_factory.mktemp("web") / "memory"
    run_gitmem("init", str(path))
    Git(path)("config", "user.name", "Pat Person")
    Git(path)("config", "user.email", "pat@example.org")
    run_gitmem("memory", "write", "--user", repo=path, input="Prefers short answers.\n")
    for block in REVIEWER:
        run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=path, input=block)
    run_gitmem("session", "write", "claude-code", "s1", repo=path, input=json.dumps(
        {"messages": [{"id": "m1", "role": "user", "content": "hi"},
                      {"id": "m2", "role": "assistant", "content": "hello"}]}))
    return path


@pytest.fixture(scope="module")
def web(repo: Path):
    with WebServer.start(repo) as server:
        yield server


@pytest.fixture(scope="module")
def cookie(web: WebServer) -> str:
    return web.login()


def head(repo: Path) -> str:
    return Git(repo)("rev-parse", "main").strip()


# -- start-up and the start's token -------------------------------------------------


def test_start_prints_one_line_and_the_token_becomes_a_cookie(web: WebServer):
    assert web.line.startswith("http://127.0.0.1:")
    status, headers, _ = web.request("GET", f"/?token={web.token}&kind=agent")
    assert status == 303 and headers["location"] == "/?kind=agent"  # the token leaves the address
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{web.cookie_name}={web.token};")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
    page = web.get("/?kind=agent", web.token)
    assert "agent:reviewer" in page and "session:claude-code/s1" not in page
    assert "default-src 'self'" in web.request("GET", "/", cookie=web.token)[1]["content-security-policy"]


def test_a_kept_alive_connection_has_tcp_nodelay():
    """``listen`` makes a TCP socket asyncio sets TCP_NODELAY on for each connection it
    accepts (issue 45: made without IPPROTO_TCP, it was not, and the last piece of each
    answer on a kept-alive connection waited for the client's delayed ACK, 44 ms a call)."""
    import asyncio
    import socket

    import uvicorn

    from gitmem.faces.web.app import _Server, listen

    async def app(scope, receive, send):
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})

    sock = listen("127.0.0.1", 0)
    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off"))

    async def second_answer_and_nodelay() -> tuple[bytes, int]:
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*sock.getsockname())
        for _ in range(2):  # the second on the same connection
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await reader.readuntil(b"\r\n\r\n")
            body = await reader.readexactly(2)
        (connection,) = server.server_state.connections
        nodelay = connection.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        writer.close()
        server.should_exit = True
        await serving
        return body, nodelay

    try:
        body, nodelay = asyncio.run(second_answer_and_nodelay())
    finally:
        sock.close()
    assert body == b"ok" and nodelay != 0


def test_each_start_makes_a_new_token(repo: Path, web: WebServer):
    with WebServer.start(repo) as other:
        assert other.token != web.token
        assert other.request("GET", "/", cookie=web.token)[0] == 401


@pytest.mark.parametrize("how", ["no token", "wrong token", "wrong cookie"])
def test_a_request_without_the_token_is_refused(web: WebServer, how: str):
    if how == "no token":
        status, _, body = web.request("GET", "/")
    elif how == "wrong token":
        wrong = web.token[:-1] + ("y" if web.token.endswith("x") else "x")  # a token ending in x: 1 in 64
        status, headers, body = web.request("GET", f"/?token={wrong}")
        assert "set-cookie" not in headers
    else:
        status, _, body = web.request("GET", "/record?name=user", cookie=web.token[::-1])
    assert status == 401
    assert "Prefers short answers" not in body and "open the address" in body


# -- writes refused: nothing written ----------------------------------------------------


REFUSED_WRITES = {
    "no token": ({}, False, None, 401),
    "wrong token": ({}, "wrong", None, 401),
    "foreign Host": ({"Host": "attacker.example:80"}, True, None, 421),
    "rebinding Host": ({"Host": "evil.example.com:{port}"}, True, None, 421),
    "cross-site Origin": ({"Origin": "https://attacker.example"}, True, None, 403),
    "cross-site fetch": ({"Sec-Fetch-Site": "cross-site"}, True, None, 403),
    "form without the token": ({}, True, "", 403),
    "form with a wrong token": ({}, True, "nope", 403),
}


@pytest.mark.parametrize("how", list(REFUSED_WRITES))
@pytest.mark.parametrize("path", ["/edit", "/restore"])
def test_a_refused_write_writes_nothing(repo: Path, web: WebServer, how: str, path: str):
    headers, with_cookie, form_token, expected = REFUSED_WRITES[how]
    headers = {k: v.format(port=web.port) for k, v in headers.items()}
    before = head(repo)
    commit = Git(repo)("rev-list", "main").split()[-1]
    form = {"name": "agent:reviewer", "base": before, "content": "taken over", "at": commit,
            "token": web.token if form_token is None else form_token}
    cookie = web.token if with_cookie is True else ("x" * 32 if with_cookie else None)
    status, _, body = web.request("POST", path, headers=headers, cookie=cookie, form=form)
    assert status == expected, body
    assert head(repo) == before
    assert "taken over" not in run_gitmem("memory", "read", "--agent", "reviewer", repo=repo).stdout


def test_a_write_is_a_post(web: WebServer, repo: Path):
    before = head(repo)
    status, _, _ = web.request("GET", f"/restore?name=user&at=@~1&token={web.token}", cookie=web.token)
    assert status in (303, 405)
    assert head(repo) == before


def test_listening_elsewhere_needs_a_flag_and_says_what_it_exposes(repo: Path):
    refused = run_gitmem("web", "--host", "0.0.0.0", "--port", "0", repo=repo, check=False)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "--allow-remote" in refused.stderr
    with WebServer.start(repo, "--host", "0.0.0.0", "--allow-remote") as open_web:
        # reached by an address of this machine: any IP is ours, a name another site holds is not
        elsewhere = {"Host": f"10.1.2.3:{open_web.port}", "Origin": f"http://10.1.2.3:{open_web.port}"}
        assert open_web.request("GET", "/", cookie=open_web.token, headers=elsewhere)[0] == 200
        assert open_web.request("GET", "/", cookie=open_web.token,
                                headers={"Host": f"evil.example:{open_web.port}"})[0] == 421
        assert open_web.request("GET", "/", cookie=open_web.token,
                                headers={**elsewhere, "Origin": "http://evil.example"})[0] == 403
    status, stderr = open_web.stop()
    assert status == 0
    assert "other machines can reach" in stderr and "plain HTTP" in stderr


# -- bearer tokens and /mcp -------------------------------------------------------------


def test_tokens_are_kept_hashed_outside_the_repository(repo: Path):
    secret = run_gitmem("web", "token", "add", "kept", "--read-only", repo=repo).stdout.strip()
    assert secret.startswith("gmw_") and len(secret) > 40
    listed = json.loads(run_gitmem("web", "token", "list", "--json", repo=repo).stdout)
    assert {"name": "kept", "readOnly": True} in [{k: t[k] for k in ("name", "readOnly")} for t in listed]
    kept = (repo / ".git" / "gitmem" / "web-tokens.json").read_text()
    assert secret not in kept and "kept" in kept
    assert oct((repo / ".git" / "gitmem" / "web-tokens.json").stat().st_mode & 0o777) == "0o600"
    grep = subprocess.run(["grep", "-r", "-l", secret[4:], str(repo)], capture_output=True, text=True)
    assert grep.stdout == ""  # not in the work tree, not in any object, not in the index
    again = run_gitmem("web", "token", "add", "kept", repo=repo, check=False)
    assert again.returncode == 1 and "already" in again.stderr
    assert run_gitmem("web", "token", "remove", "kept", repo=repo).returncode == 0
    gone = run_gitmem("web", "token", "remove", "kept", repo=repo, check=False)
    assert gone.returncode == 1 and "no token" in gone.stderr


async def _mcp_call(web: WebServer, secret: str | None, tool: str | None = None, **arguments):
    """(tool names, the call's text, is_error) through the SDK's streamable HTTP client."""
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{web.url}/mcp", http_client=http) as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                names = [t.name for t in (await session.list_tools()).tools]
                if tool is None:
                    return names, None, None
                result = await session.call_tool(tool, arguments)
                return names, result.content[0].text, result.is_error


def test_mcp_reads_and_writes_with_a_read_write_token(repo: Path, web: WebServer):
    secret = run_gitmem("web", "token", "add", "laptop", repo=repo).stdout.strip()
    names, text, error = anyio.run(lambda: _mcp_call(
        web, secret, "memory_write", record="agent:remote", content="Seen from afar."))
    assert "memory_write" in names and not error, text
    message = Git(repo)("log", "-1", "--format=%B", "main")
    assert "Gitmem-Token: laptop" in message and "Gitmem-Client: " in message
    _, text, error = anyio.run(lambda: _mcp_call(web, secret, "memory_read", record="agent:remote"))
    assert not error and text.strip() == "Seen from afar."


def test_a_read_only_token_reads_and_cannot_write(repo: Path, web: WebServer):
    secret = run_gitmem("web", "token", "add", "reader", "--read-only", repo=repo).stdout.strip()
    before = head(repo)
    names, text, error = anyio.run(lambda: _mcp_call(web, secret, "memory_read", record="agent:reviewer"))
    assert not error and REVIEWER[0] in text
    assert "memory_write" not in names and "search" in names
    _, text, error = anyio.run(lambda: _mcp_call(
        web, secret, "memory_write", record="agent:reviewer", content="overwritten", mode="replace"))
    assert error and "read-only" in text
    assert head(repo) == before


@pytest.mark.parametrize("how", ["none", "wrong", "removed", "not bearer"])
def test_mcp_without_a_valid_token_gets_401_and_nothing_else(repo: Path, web: WebServer, how: str):
    secret = {"none": None, "wrong": "gmw_" + "x" * 43, "not bearer": None}.get(how)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if how == "removed":
        secret = run_gitmem("web", "token", "add", "gone", repo=repo).stdout.strip()
        run_gitmem("web", "token", "remove", "gone", repo=repo)
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    if how == "not bearer":
        headers["Authorization"] = f"Basic {web.token}"
    before = head(repo)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "memory_write", "arguments": {"record": "user", "content": "x"}}}
    status, answer, body = web.request("POST", "/mcp", headers=headers, body=json.dumps(call).encode())
    assert status == 401 and answer["www-authenticate"].startswith("Bearer")
    assert json.loads(body)["error"] == "invalid_token"
    assert head(repo) == before
    with pytest.RaisesGroup(mcp.MCPError, flatten_subgroups=True):  # the SDK's client: refused at the start
        anyio.run(lambda: _mcp_call(web, secret))


def test_writes_through_mcp_over_http_serve_and_mcp_at_once_lose_nothing(tmp_path: Path):
    """Three faces on one repository, each appending to the same memory at once: every
    answered write is there, once."""
    from nui_client import NuiHost, install_as_nui
    repo = tmp_path / "memory"
    run_gitmem("init", str(repo))
    secret = run_gitmem("web", "token", "add", "writer", repo=repo).stdout.strip()
    writes = 12
    host = NuiHost.spawn(install_as_nui(tmp_path, repo))
    try:
        with WebServer.start(repo) as web:
            async def over_http() -> None:
                async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http:
                    async with streamable_http_client(f"{web.url}/mcp", http_client=http) as streams:
                        async with ClientSession(streams[0], streams[1]) as session:
                            await session.initialize()
                            for i in range(writes):
                                done = await session.call_tool("memory_write", {"record": "agent:codex",
                                                                                "content": f"http {i}"})
                                assert not done.is_error, done.content[0].text

            async def over_stdio() -> None:
                params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp", "--repo", str(repo)],
                                               env=SUBPROCESS_ENV)
                async with stdio_client(params) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        for i in range(writes):
                            done = await session.call_tool("memory_write", {"record": "agent:codex",
                                                                            "content": f"stdio {i}"})
                            assert not done.is_error, done.content[0].text

            failures: list[BaseException] = []

            def over_serve() -> None:
                try:
                    write_all()
                except BaseException as error:  # noqa: BLE001 - the test fails below with it
                    failures.append(error)

            def write_all() -> None:
                for i in range(writes):
                    assert host.call("storage.agentMemory.write", {
                        "handlerId": "gitmem-agent-memory", "agentId": "codex",
                        "content": f"serve {i}", "writeMode": "append"}) == {"ok": True}

            serving = threading.Thread(target=over_serve)
            serving.start()

            async def both() -> None:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(over_http)
                    tasks.start_soon(over_stdio)

            anyio.run(both)
            serving.join(120)
            assert failures == [] and not serving.is_alive()
    finally:
        host.close()
    text = run_gitmem("memory", "read", "--agent", "codex", repo=repo).stdout
    blocks = [block.strip() for block in text.split("\n\n")]
    expected = {f"{face} {i}" for face in ("http", "stdio", "serve") for i in range(writes)}
    assert sorted(blocks) == sorted(expected)
    assert host.problems == []
    assert Git(repo)("fsck", "--no-progress").strip() == ""


# -- history pages ---------------------------------------------------------------------


def fast_imported(path: Path, changes: list[tuple[int, str, str]]) -> Path:
    """A repository made by ``git fast-import``: one commit per (time, path, content)."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=SUBPROCESS_ENV)
    stream = []
    for when, file, content in changes:
        data, message = content.encode(), f"memory: write {file}\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter Someone <someone@example.org> %d +0000\n"
                      b"data %d\n%s" % (when, len(message), message))
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (file.encode(), len(data), data))
    subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=path, check=True,
                   env=SUBPROCESS_ENV)
    return path


def test_a_long_timeline_is_paged(tmp_path: Path):
    start = 1_760_000_000
    repo = fast_imported(tmp_path / "long", [(start + 60 * i, "memory/agents/paged.md", f"- fact {i}\n")
                                             for i in range(120)])
    with WebServer.start(repo) as web:
        cookie = web.login()
        first = web.get("/timeline?name=agent:paged", cookie)
        assert first.count('class="version"') == 50 and "120 versions" in first
        assert "page 1 of 3" in first and "- fact" not in first
        last = web.get("/timeline?name=agent:paged&page=2", cookie)
        assert last.count('class="version"') == 20
        ids = re.findall(r'name="to" value="([0-9a-f]{40})"', last)
        oldest = Git(repo)("rev-list", "--reverse", "main").split()[0]
        assert ids[-1] == oldest
        status, _, body = web.request("GET", "/timeline?name=agent:paged&page=x", cookie=cookie)
        assert status == 400 and "whole number" in body


def test_search_as_of_a_date_finds_what_the_records_held_then(tmp_path: Path):
    day = 86_400
    start = 1_767_225_600  # 2026-01-01T00:00:00Z
    repo = fast_imported(tmp_path / "dated", [
        (start, "memory/user.md", "The tangerine plan.\n"),
        (start + 31 * day, "memory/user.md", "The plum plan.\n")])
    with WebServer.start(repo, env={"TZ": "UTC"}) as web:
        cookie = web.login()
        now = web.get("/search?q=tangerine", cookie)
        assert 'id="no-hits"' in now
        then = web.get("/search?q=tangerine&asof=2026-01-15", cookie)
        assert then.count('class="hit-link"') == 1
        link = re.search(r'href="([^"]+)" class="hit-link"', then)[1].replace("&amp;", "&")
        first = Git(repo)("rev-list", "--reverse", "main").split()[0]
        assert f"at={first}" in link
        opened = web.get(link, cookie)
        assert "block hit" in opened and "tangerine" in opened
        assert 'id="no-hits"' in web.get("/search?q=plum&asof=2026-01-15", cookie)
        removed = web.get("/search?q=tangerine&history=1", cookie)
        assert removed.count('class="hit-link"') == 1 and "removed 2026-02-01" in removed


def test_an_edit_from_an_older_version_keeps_what_came_since(repo: Path, web: WebServer):
    form = web.get("/edit?name=agent:reviewer", web.token)
    base = re.search(r'name="base" value="([0-9a-f]{40})"', form)[1]
    shown = re.search(r'<textarea[^>]*>(.*?)</textarea>', form, re.S)[1]
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=repo, input="Written meanwhile.")
    edited = shown.replace(REVIEWER[0], "Checks the types last.").replace("\n", "\r\n")
    status, headers, _ = web.request("POST", "/edit", cookie=web.token, form={
        "token": web.token, "name": "agent:reviewer", "base": base, "content": edited})
    assert status == 303 and "saved=" in headers["location"]
    text = run_gitmem("memory", "read", "--agent", "reviewer", repo=repo).stdout
    assert "Checks the types last." in text and REVIEWER[0] not in text
    assert "Written meanwhile." in text and "\r" not in text
    git = Git(repo)
    assert git("log", "-1", "--format=%an", "main").strip() == "Pat Person"
    assert "Gitmem-Op: memory.edit" in git("log", "-1", "--format=%B", "main")


@pytest.mark.parametrize("path", ["/record?name=nope", "/timeline?name=agent:", "/record?name=user&at=HEAD~999",
                                  "/diff?name=user&from=@&to=@~999", "/activity?range=dates",
                                  "/activity?range=dates&since=2026-02-01&until=2026-01-01", "/edit?name=session:a/b"])
def test_bad_input_gets_a_page_saying_why(web: WebServer, path: str):
    status, _, body = web.request("GET", path, cookie=web.token)
    assert status == 400, body
    assert 'id="error"' in body and "Traceback" not in body


def test_no_search_is_refused(web: WebServer):
    """A lone quote is read as words (issue 36): no hits, not an error."""
    status, _, body = web.request("GET", "/search?q=%22", cookie=web.token)
    assert status == 200 and 'id="no-hits"' in body and 'id="error"' not in body


def test_a_thread_shows_its_events_and_the_state_they_derive(repo: Path, web: WebServer):
    import gitmem
    with gitmem.open(repo) as mem:  # as kaboo's threads.appendEvents writes them
        mem.threads.append_events("t1", "planner", [
            {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Plan the <b>launch</b>"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"step": 2, "goal": "launch"}}])
    page = web.get("/record?name=thread:t1", web.token)
    assert page.count('<li class="event') == 3
    assert "Plan the &lt;b&gt;launch&lt;/b&gt;" in page and "<b>launch</b>" not in page
    state = html.unescape(re.search(r'<pre id="state">(.*?)</pre>', page, re.S)[1])
    assert json.loads(state) == {"step": 2, "goal": "launch"}
    assert "thread:t1" in web.get("/?kind=thread", web.token)


def test_a_port_in_use_is_said_in_one_line(repo: Path, web: WebServer):
    done = run_gitmem("web", "--port", str(web.port), repo=repo, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"127.0.0.1:{web.port}" in done.stderr


def test_a_side_by_side_diff_keeps_lines_that_look_like_a_patchs_headers(repo: Path, web: WebServer):
    # removed and added, they are "--- a rule" and "+++ b plus" in the patch
    run_gitmem("memory", "write", "--agent", "dashes", repo=repo, input="kept\n-- a rule\n")
    run_gitmem("memory", "write", "--agent", "dashes", repo=repo, input="kept\n++ b plus\n")
    page = html.unescape(web.get("/diff?name=agent:dashes&from=@~1&to=@", web.token))
    assert re.findall(r'<td class="old">(.*?)</td>', page) == ["kept", "-- a rule"]
    assert re.findall(r'<td class="new">(.*?)</td>', page) == ["kept", "++ b plus"]


def test_a_memory_that_is_not_utf8_is_shown_with_replacement_characters(repo: Path, web: WebServer):
    (repo / "memory" / "agents" / "latin.md").write_bytes("Caf\u00e9 au lait.\n".encode("latin-1"))
    git = Git(repo)
    git("add", "memory/agents/latin.md")
    git("commit", "-q", "-m", "a Latin-1 memory, by hand")
    page = web.get("/record?name=agent:latin", web.token)
    assert "Caf\ufffd au lait." in page


def test_a_langgraph_store_item_is_listed_shown_and_in_the_timeline(tmp_path: Path):
    # the site's kinds lacked "store": any page listing such a record raised ValueError
    from gitmem.langgraph import Store
    path = tmp_path / "memory"
    run_gitmem("init", str(path))
    with Store(path) as store:
        store.put(("users", "pat"), "prefs", {"tone": "short answers"})
    with WebServer.start(path) as server:
        for page in ("/", "/?kind=store", "/activity"):
            assert "store:users/pat/prefs" in server.get(page, server.token), page
        assert "short answers" in server.get("/record?name=store:users/pat/prefs", server.token)
