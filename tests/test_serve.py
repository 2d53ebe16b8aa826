"""``gitmem serve`` as nui runs it: a real subprocess, spawned from the installed extension.

Every test starts the command that ``extension.yaml`` names, from the folder nui
copies the extension into, and speaks to it over pipes the way the nui host does
(see tests/nui_client.py). The JSON-RPC framing itself is tested in test_rpc.py and
the handler list in test_handlers.py; here it is the whole process on a real repository.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path

import pytest

from gitmem import __version__
from gitmem.faces.nui.handlers import add_handler
from gitmem.repository import Gitmem
from nui_client import NuiHost, go_json, install_as_nui

AGENT_TYPES = ["claude-code", "codex"]
SESSIONS = "gitmem-sessions"
AGENT_MEMORY = "gitmem-agent-memory"
USER_MEMORY = "gitmem-user-memory"


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    """The repository, a few folders deep in tmp_path: an id that escaped it by some
    ``..`` would land inside tmp_path, where the ids test looks."""
    return tmp_path / "home" / "me" / "data" / "repo"


@pytest.fixture
def extension(tmp_path: Path, repo_path: Path) -> Path:
    """The extension rendered for the test's repository and installed as nui installs it."""
    return install_as_nui(tmp_path, repo_path, AGENT_TYPES)


@pytest.fixture
def spawn(extension: Path):
    """``spawn(extra_args=(), env=None)`` starts the extension as nui does; all killed afterwards.

    Every stdout line any of them wrote must have been one nui can read.
    """
    started: list[NuiHost] = []

    def start(**options) -> NuiHost:
        host = NuiHost.spawn(extension, **options)
        started.append(host)
        return host

    yield start
    for host in started:
        host.close()
    assert [problem for host in started for problem in host.problems] == []


def stop(host: NuiHost) -> None:
    """End the process as nui does (``storage.shutdown``) and check it exits 0."""
    assert host.call("storage.shutdown") == {"ok": True}
    assert host.wait() == 0, host.stderr()


def session(session_id: str, agent_type: str = "claude-code", handler: str = SESSIONS, **extra) -> dict:
    """Params naming a session, as nui sends them."""
    return {"handlerId": handler, "sessionId": session_id, "agentType": agent_type,
            "workingDir": "/home/me/project", **extra}


def message(i: int, text: str | None = None, **extra) -> dict:
    """A nui chat message; odd ones are assistant turns with a text and a tool part."""
    if i % 2 == 0:
        return {"id": f"m{i}", "role": "user", "content": text or f"question {i} <b>&amp;</b>",
                "createdAt": "2025-06-01T10:00:00Z", **extra}
    parts = [{"type": "text", "id": f"p{i}a", "content": f"let me look ({i})"},
             {"type": "tool", "id": f"p{i}b", "content": "", "toolCallId": f"call_{i}",
              "toolName": "bash", "toolArgs": {"command": f"ls -la dir{i}"},
              "toolResult": f"total {i}\nfile{i}.txt\n"}]
    return {"id": f"m{i}", "role": "assistant", "content": text or f"answer {i}",
            "createdAt": "2025-06-01T10:00:01Z", "parts": parts, **extra}


def worktree(repo: Path) -> dict[str, bytes]:
    """Every file of the work tree (``.git`` left out) and its bytes."""
    return {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*")
            if p.is_file() and p.relative_to(repo).parts[0] != ".git"}


def head_trailer(git, key: str) -> str:
    return git("log", "-1", f"--format=%(trailers:key={key},valueonly)").strip()


# -- spawned as nui spawns it --------------------------------------------------------


def test_spawned_as_nui_spawns_it(tmp_path, repo_path, git):
    extension = install_as_nui(tmp_path, repo_path, AGENT_TYPES, use_cli=True)
    assert {f.name: f.stat().st_mode & 0o777 for f in extension.iterdir()} == {
        "README.md": 0o644, "extension.yaml": 0o644, "storage-handlers.yaml": 0o644}
    with NuiHost.spawn(extension) as host:
        # storage.info first, as nui sends it right after the spawn.
        assert host.call("storage.info") == {"id": "gitmem", "name": "gitmem", "version": __version__}
        text = "<script>alert('&')</script> \u2028 done"
        request = go_json({"content": text})
        assert b"\\u003cscript\\u003e" in request and b"\\u0026" in request and b"<" not in request
        assert host.call("storage.userMemory.write",
                         {"handlerId": USER_MEMORY, "content": text, "writeMode": "replace"}) == {"ok": True}
        assert host.call("storage.userMemory.read", {"handlerId": USER_MEMORY}) == {"content": text + "\n"}
        stop(host)
        assert host.problems == []
    assert head_trailer(git, "Gitmem-Handler") == USER_MEMORY
    assert git.status() == ""


# -- every method ----------------------------------------------------------------------


def test_every_method_round_trips_with_one_commit_per_write(spawn, git):
    host = spawn(extra_args=("--late-window", "0"))  # each write as sent (see test_nui_host.py)
    assert host.call("storage.info")["name"] == "gitmem"
    commits = git.count()

    def write(method: str, params: dict) -> None:
        nonlocal commits
        assert host.call(method, params) == {"ok": True}
        commits += 1  # the commit exists by the time the answer is out
        assert git.count() == commits
        assert head_trailer(git, "Gitmem-Handler") == params["handlerId"]

    def read(method: str, params: dict) -> dict:
        result = host.call(method, params)
        assert git.count() == commits  # reads never commit
        return result

    user = {"handlerId": USER_MEMORY}
    assert read("storage.userMemory.read", user) == {"content": ""}
    write("storage.userMemory.write", {**user, "content": "likes tea", "writeMode": "replace"})
    write("storage.userMemory.write", {**user, "content": "short answers", "writeMode": "append"})
    assert read("storage.userMemory.read", user) == {"content": "likes tea\n\nshort answers\n"}
    write("storage.userMemory.delete", user)
    assert read("storage.userMemory.read", user) == {"content": ""}

    agent = {"handlerId": AGENT_MEMORY, "agentId": "codex"}
    assert read("storage.agentMemory.read", agent) == {"content": ""}
    write("storage.agentMemory.write", {**agent, "content": "# Codex\nuse tabs", "writeMode": "replace"})
    write("storage.agentMemory.write", {**agent, "content": "run the tests", "writeMode": "append"})
    assert read("storage.agentMemory.read", agent) == {"content": "# Codex\nuse tabs\n\nrun the tests\n"}
    write("storage.agentMemory.delete", agent)
    assert read("storage.agentMemory.read", agent) == {"content": ""}

    empty = {"messages": [], "agentSessionId": ""}
    assert read("storage.session.read", session("s1")) == empty
    first = [message(0), message(1)]
    write("storage.session.write", session("s1", messages=first, agentSessionId="resume-1"))
    assert read("storage.session.read", session("s1")) == {"messages": first, "agentSessionId": "resume-1"}
    longer = first + [message(2), message(3)]
    write("storage.session.write", session("s1", messages=longer, agentSessionId="resume-2"))
    assert read("storage.session.read", session("s1", workingDir="/elsewhere")) == {
        "messages": longer, "agentSessionId": "resume-2"}
    write("storage.session.write", session("s1", messages=None, agentSessionId="resume-2"))
    assert read("storage.session.read", session("s1")) == {"messages": [], "agentSessionId": "resume-2"}
    write("storage.session.delete", session("s1", agentSessionId="resume-2"))
    assert read("storage.session.read", session("s1")) == empty

    stop(host)
    assert git.count() == commits
    assert git.status() == ""


def test_a_restarted_server_reads_back_everything(spawn):
    records = [
        ("storage.userMemory", {"handlerId": USER_MEMORY}, "likes tea\n"),
        ("storage.agentMemory", {"handlerId": AGENT_MEMORY, "agentId": "claude-code"}, "be brief\n"),
        ("storage.agentMemory", {"handlerId": AGENT_MEMORY, "agentId": "codex"}, "use tabs\n"),
    ]
    sessions = [(session("s1"), [message(0), message(1)], "resume-a"),
                (session("s1", "codex"), [message(0, "same id, other agent type")], ""),
                (session("s2"), [message(i) for i in range(5)], "resume-b")]
    host = spawn()
    host.call("storage.info")
    for method, params, content in records:
        host.call(method + ".write", {**params, "content": content, "writeMode": "replace"})
    for params, messages, resume in sessions:
        host.call("storage.session.write", {**params, "messages": messages, "agentSessionId": resume})
    stop(host)

    host = spawn()
    host.call("storage.info")
    for method, params, content in records:
        assert host.call(method + ".read", params) == {"content": content}
    for params, messages, resume in sessions:
        assert host.call("storage.session.read", {**params, "workingDir": "/moved"}) == {
            "messages": messages, "agentSessionId": resume}
    stop(host)


def test_programmatic_extension_route(spawn, extension, git):
    host = spawn()
    result = host.call("extension.initialize", {"extensionName": "gitmem", "extensionDir": str(extension),
                                                "apiUrl": "http://127.0.0.1:7411"})
    assert result == {"name": "gitmem", "version": __version__, "storageHandlers": [
        {"id": SESSIONS, "kind": "sessionHistory", "agentTypes": AGENT_TYPES},
        {"id": AGENT_MEMORY, "kind": "agentMemory", "agentTypes": AGENT_TYPES},
        {"id": USER_MEMORY, "kind": "userMemory"}]}
    params = {"handlerId": AGENT_MEMORY, "agentId": "claude-code"}
    assert host.call("storage.agentMemory.write", {**params, "content": "x", "writeMode": "append"}) == {"ok": True}
    assert host.call("storage.agentMemory.read", params) == {"content": "x\n"}
    assert host.call("extension.shutdown") == {"ok": True}
    assert host.wait() == 0
    assert git.status() == ""


# -- errors ----------------------------------------------------------------------------


def test_error_table_each_answered_then_the_server_goes_on(spawn, repo_path, git):
    # A session whose metadata is not an object, committed with plain git: writing it is a
    # failure inside the method (-32603: gitmem does not write over what a person must fix),
    # reading it answers its messages.
    broken = repo_path / "sessions" / "claude-code" / "broken"
    broken.mkdir(parents=True)
    (broken / "meta.json").write_text("[1]\n")
    git("add", "-A")
    git("commit", "-q", "-m", "a broken session")

    host = spawn()
    host.call("storage.info")
    sent = 1
    raw = [  # (line, code, whether the answer carries the line's id)
        (b'{"id":%d,"jsonrpc":"2.0","method":"storage.info","params":{', -32700, False),
        (b'\xff\xfe{"id":%d}', -32700, False),
        (b"[]", -32600, False),
        (b'"storage.info"', -32600, False),
        (b'{"id":%d,"jsonrpc":"2.0","params":{}}', -32600, True),
        (b'{"id":%d,"method":"storage.info","params":{}}', -32600, True),
        (b'{"id":%d,"jsonrpc":"2.0","method":"storage.nothing","params":{}}', -32601, True),
        (b'{"id":%d,"jsonrpc":"2.0","method":"storage.userMemory.read","params":[1]}', -32602, True),
    ]
    for template, code, echoed in raw:
        request_id = host.new_id()
        host.send(template % request_id if b"%d" in template else template)
        answer = host.answer()
        assert answer["error"]["code"] == code, (template, answer)
        assert answer["id"] == (request_id if echoed else None)
        assert host.call("storage.info")["name"] == "gitmem"
        sent += 2

    error = host.error("storage.session.write", {"handlerId": SESSIONS, "agentType": "codex", "messages": []})
    assert error["code"] == -32602 and '"sessionId"' in error["message"]
    assert error["data"] == {"param": "sessionId"}
    error = host.error("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                                     "content": ["not", "text"], "writeMode": "replace"})
    assert error["code"] == -32602 and '"content"' in error["message"]
    error = host.error("storage.session.write", {**session("broken"), "messages": []})
    assert error["code"] == -32603 and "sessions/claude-code/broken/meta.json" in error["message"]
    assert "\n" not in error["message"] and 0 < len(error["message"]) <= 500
    assert host.call("storage.session.read", session("fine")) == {"messages": [], "agentSessionId": ""}
    sent += 4
    stop(host)
    assert len(host.lines) == sent + 1  # one answer per request, nothing else on stdout


def test_wrong_params_and_routing_change_nothing(spawn, repo_path, git):
    host = spawn()
    host.call("storage.info")
    host.call("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                            "content": "kept", "writeMode": "replace"})
    head, files = git("rev-parse", "HEAD"), worktree(repo_path)
    memory = {"handlerId": AGENT_MEMORY, "agentId": "codex", "content": "lost", "writeMode": "replace"}
    cases = [  # (method, params, the param the error must name)
        ("storage.agentMemory.write", {**memory, "writeMode": "merge"}, "writeMode"),
        ("storage.agentMemory.write", {**memory, "content": 42}, "content"),
        ("storage.agentMemory.write", {k: v for k, v in memory.items() if k != "agentId"}, "agentId"),
        ("storage.agentMemory.delete", {"agentId": "codex"}, "handlerId"),
        ("storage.session.write", session("s1", messages="not a list"), "messages"),
        ("storage.session.write", session("s1", agentSessionId=7, messages=[message(0)]), "agentSessionId"),
        # routing by the installed storage-handlers.yaml
        ("storage.userMemory.write", {"handlerId": "nobody", "content": "x"}, "handlerId"),
        ("storage.agentMemory.write", {**memory, "handlerId": USER_MEMORY}, "handlerId"),
        ("storage.userMemory.delete", {"handlerId": SESSIONS}, "handlerId"),
        ("storage.session.write", session("s1", handler=AGENT_MEMORY, messages=[]), "handlerId"),
        ("storage.session.write", session("s1", "pi", messages=[message(0)]), "agentType"),
        ("storage.session.delete", session("s1", "Claude-Code"), "agentType"),
        ("storage.agentMemory.write", {**memory, "agentId": "pi"}, "agentId"),
        ("storage.agentMemory.delete", {"handlerId": AGENT_MEMORY, "agentId": "opencode"}, "agentId"),
        ("storage.agentMemory.read", {"handlerId": AGENT_MEMORY, "agentId": "pi"}, "agentId"),
        ("storage.session.read", session("s1", "pi"), "agentType"),
    ]
    for method, params, name in cases:
        error = host.error(method, params)
        assert error["code"] == -32602, (method, params, error)
        assert error["data"] == {"param": name}, (method, params, error)
        # the message names the param, or quotes the value it refuses
        assert name in error["message"] or f'"{params.get(name)}"' in error["message"], error
    assert git("rev-parse", "HEAD") == head
    assert worktree(repo_path) == files
    assert host.call("storage.agentMemory.read", {"handlerId": AGENT_MEMORY, "agentId": "codex"}) == {
        "content": "kept\n"}
    stop(host)
    assert git("rev-parse", "HEAD") == head
    assert git.status() == ""  # the index is refreshed in the background: by exit at the latest


def test_an_invalid_handler_file_stops_the_server_before_it_starts(spawn, extension, repo_path):
    # (every rule nui checks is tested on the loader, in test_handlers.py)
    (extension / "storage-handlers.yaml").write_text(
        "storageHandlers:\n  - {id: me, kind: userMemory}\n  - {id: notes, kind: agentMemory}\n")
    names = 'storageHandlers[1] (id "notes")'
    host = spawn()
    assert host.wait() != 0
    assert host.lines == []
    message, = host.stderr().splitlines()
    assert message.startswith("gitmem: ") and names in message and "storage-handlers.yaml" in message
    # nui throws stderr away: the user finds the reason in the log
    assert names in (repo_path / ".git" / "gitmem" / "serve.log").read_text()


def test_a_repository_that_cannot_be_opened_is_answered_as_an_error(spawn, tmp_path):
    not_a_repo = tmp_path / "a-file"
    not_a_repo.write_text("")
    host = spawn(extra_args=("--repo", str(not_a_repo)))
    error = host.error("storage.info")
    assert error["code"] == -32603 and f"gitmem cannot serve {not_a_repo}" in error["message"]
    host.close_stdin()
    assert host.wait() != 0
    assert len(host.lines) == 1  # the answer, nothing else on stdout
    assert len(host.stderr().splitlines()) == 1


@pytest.mark.parametrize("where", ["inside a file", "in a folder it may not write"])
def test_a_repository_path_that_cannot_be_made_says_where_and_what_to_do(spawn, tmp_path, where):
    if where == "inside a file":
        blocking = tmp_path / "notes.txt"
        blocking.write_text("")
    else:
        if os.geteuid() == 0:
            pytest.skip("root may write any folder")
        blocking = tmp_path / "read-only"
        blocking.mkdir(mode=0o555)
    repo = blocking / "memory" / "agent"
    host = spawn(extra_args=("--repo", str(repo)))
    message = host.error("threads.list")["message"]
    assert message.startswith(f"gitmem cannot serve {repo}: ") and "fsck" not in message
    if where == "inside a file":
        assert message.endswith(f"; {blocking} is a file, not a folder: choose a repository path outside it")
    else:
        assert f"; {repo} cannot be created in {blocking} (Permission denied): choose a path in a folder" in message
    host.close_stdin()
    assert host.wait() == 1 and not repo.exists()


# -- ids -------------------------------------------------------------------------------

ODD_IDS = ["ext:corp/reviewer", "a/b/c", "..", "../../..", "../../../escape", "./x", "/abs/olute",
           "nul\x00byte", "new\nline", "C:\\Windows\\x", "con", "Reviewer", "reviewer", "é😀",
           "x" * 1000, "x" * 999 + "y", "/.." * 333 + "!"]
SESSION_IDS = ["..", "a/../../b", "\n.", "nul\x00",  # "" and "\n" are refused
               "s" * 1000, "%2e%2e", "~x", ".git"]


def listing(folder: Path, skip: Path) -> set[str]:
    """Every path under ``folder`` (recursively), outside ``skip``."""
    return {str(path) for path in folder.rglob("*") if skip not in path.parents and path != skip}


def test_odd_ids_round_trip_and_stay_inside_the_repository(spawn, extension, tmp_path, repo_path, git):
    add_handler(extension / "storage-handlers.yaml", "odd-sessions", "sessionHistory", ODD_IDS)
    add_handler(extension / "storage-handlers.yaml", "odd-memory", "agentMemory", ODD_IDS)
    inside_tmp = listing(tmp_path, skip=repo_path)

    pairs = [(agent_type, SESSION_IDS[i % len(SESSION_IDS)]) for i, agent_type in enumerate(ODD_IDS)]
    pairs += [("codex", session_id) for session_id in SESSION_IDS]
    host = spawn()
    host.call("storage.info")
    for i, agent_id in enumerate(ODD_IDS):
        host.call("storage.agentMemory.write", {"handlerId": "odd-memory", "agentId": agent_id,
                                                "content": f"memory {i}", "writeMode": "replace"})
    for i, (agent_type, session_id) in enumerate(pairs):
        handler = SESSIONS if agent_type == "codex" else "odd-sessions"
        host.call("storage.session.write", session(session_id, agent_type, handler,
                                                   messages=[message(0, f"session {i}")],
                                                   agentSessionId=f"resume {i}"))

    def read_back(host: NuiHost) -> None:
        for i, agent_id in enumerate(ODD_IDS):
            assert host.call("storage.agentMemory.read", {"handlerId": "odd-memory", "agentId": agent_id}) \
                == {"content": f"memory {i}\n"}, agent_id
        for i, (agent_type, session_id) in enumerate(pairs):
            handler = SESSIONS if agent_type == "codex" else "odd-sessions"
            assert host.call("storage.session.read", session(session_id, agent_type, handler)) == {
                "messages": [message(0, f"session {i}")], "agentSessionId": f"resume {i}"}, (agent_type, session_id)

    read_back(host)
    stop(host)
    host = spawn()
    read_back(host)
    stop(host)

    assert git.count() == 1 + len(ODD_IDS) + len(pairs)  # one commit each: no two ids collided
    assert git.status() == ""
    for path in worktree(repo_path):
        assert path in ("README.md", ".gitattributes") or path.startswith(("memory/agents/", "sessions/")), path
        assert all(len(part.encode()) <= 255 for part in Path(path).parts)
    assert listing(tmp_path, skip=repo_path) == inside_tmp
    assert not any(Path("/").glob("abs*")) and not any(Path("/").glob("escape*"))


# -- size ------------------------------------------------------------------------------


def image(size: int) -> str:
    """Base64 of random bytes, ``size`` characters long (random: git cannot compress it)."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()


def test_a_big_session_with_tool_parts_and_an_image_round_trips(spawn):
    messages = [message(i) for i in range(2000)]
    messages[1000]["images"] = [{"id": "img-1", "mediaType": "image/png", "data": image(3_000_000)}]
    host = spawn()
    host.call("storage.info")
    assert host.call("storage.session.write", session("big", messages=messages, agentSessionId="r")) == {"ok": True}
    assert host.call("storage.session.read", session("big")) == {"messages": messages, "agentSessionId": "r"}
    stop(host)
    host = spawn()  # the read nui makes after a restart, from the repository alone
    assert host.call("storage.session.read", session("big")) == {"messages": messages, "agentSessionId": "r"}
    assert 3_000_000 < max(map(len, host.lines)) < 4 * 1024 * 1024
    stop(host)


def test_a_session_written_whole_at_every_turn_rewrites_only_what_changed(spawn, repo_path, git):
    # nui sends the whole list each time, <, > and & escaped: the messages already
    # stored are recognised as they are, and stored as characters.
    host = spawn()
    host.call("storage.info")
    messages = [message(i) for i in range(1500)]
    host.call("storage.session.write", session("long", messages=messages))
    folder = "sessions/claude-code/long"
    chunks = git("ls-tree", "--name-only", "HEAD", f"{folder}/messages/").splitlines()
    assert len(chunks) > 2 and "question 0 <b>&amp;</b>" in git.show(f"HEAD:{chunks[0]}")

    messages.append(message(1500))
    host.call("storage.session.write", session("long", messages=messages))
    assert sorted(git.changed()) == [chunks[-1], f"{folder}/meta.json"]
    messages[2] = message(2, text="a\\u003cb, not a<b")  # the text, not the escape
    host.call("storage.session.write", session("long", messages=messages))
    assert sorted(git.changed()) == [chunks[0], f"{folder}/meta.json"]
    assert host.call("storage.session.read", session("long"))["messages"] == messages

    head = git("rev-parse", "HEAD")  # a number no JSON reader can hold: refused, nothing written
    host.send(go_json({"id": host.new_id(), "jsonrpc": "2.0", "method": "storage.session.write",
                       "params": session("long", messages=[*messages, {"n": "huge"}])}
                      ).replace(b'"huge"', b"1e400"))
    answer = host.answer()
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert git("rev-parse", "HEAD") == head
    assert host.call("storage.session.read", session("long"))["messages"] == messages
    stop(host)


def test_an_answer_over_4_mib_is_an_error_not_a_broken_line(spawn):
    host = spawn()
    host.call("storage.info")
    agent = {"handlerId": AGENT_MEMORY, "agentId": "codex"}
    assert host.call("storage.agentMemory.write", {**agent, "content": "y" * 5_000_000,
                                                   "writeMode": "replace"}) == {"ok": True}
    error = host.error("storage.agentMemory.read", agent)
    assert error["code"] == -32000 and "too large" in error["message"]
    assert error["data"]["size"] > error["data"]["limit"] == 4 * 1024 * 1024
    assert host.call("storage.info")["name"] == "gitmem"
    stop(host)
    assert max(map(len, host.lines)) < 1000  # a session read fits instead: test_nui_host.py


# -- stopping --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["storage.shutdown", "end of input", "SIGTERM"])
def test_every_answered_write_is_in_head_when_the_process_has_exited(spawn, repo_path, git, how):
    host = spawn()
    host.call("storage.info")
    commits = git.count()
    expected_user, expected_agents, expected_sessions = [], {}, {}
    request_ids = []
    for i in range(30):  # sent as one burst, answers read afterwards
        if i % 3 == 0:
            expected_user.append(f"note {i}")
            params = {"handlerId": USER_MEMORY, "content": f"note {i}", "writeMode": "append"}
            request_ids.append(host.send_request("storage.userMemory.write", params))
        elif i % 3 == 1:
            agent_id = AGENT_TYPES[i % 2]
            expected_agents[agent_id] = f"agent note {i}\n"
            params = {"handlerId": AGENT_MEMORY, "agentId": agent_id, "content": f"agent note {i}",
                      "writeMode": "replace"}
            request_ids.append(host.send_request("storage.agentMemory.write", params))
        else:
            key = ("claude-code", f"s{i % 4}")
            expected_sessions[key] = expected_sessions.get(key, []) + [message(i)]
            request_ids.append(host.send_request("storage.session.write", session(
                key[1], key[0], messages=expected_sessions[key])))
    if how == "storage.shutdown":
        request_ids.append(host.send_request("storage.shutdown"))
    elif how == "end of input":
        host.close_stdin()
    for request_id in request_ids:
        assert host.answer_to(request_id)["result"] == {"ok": True}
    if how == "SIGTERM":
        host.terminate()
    assert host.wait() == 0, host.stderr()

    assert git.status() == ""
    assert git.count() == commits + 30
    git.fsck()
    with Gitmem.open(repo_path, create=False) as mem:
        assert mem.memory.read() == "\n\n".join(expected_user) + "\n"
        for agent_id, content in expected_agents.items():
            assert mem.memory.read(agent_id) == content
        for (agent_type, session_id), messages in expected_sessions.items():
            assert mem.sessions.read(agent_type, session_id) == (messages, "")


# -- the log ---------------------------------------------------------------------------


def test_the_log_records_each_request_but_never_content(spawn, repo_path):
    marker = f"SECRET-{uuid.uuid4().hex}"
    host = spawn()
    host.call("storage.info")
    host.call("storage.userMemory.write", {"handlerId": USER_MEMORY, "content": marker, "writeMode": "replace"})
    host.call("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                            "content": f"# {marker}", "writeMode": "append"})
    host.call("storage.session.write", session("s-log", messages=[message(0, marker)], agentSessionId="r1"))
    host.call("storage.session.read", session("s-log"))
    host.call("storage.userMemory.read", {"handlerId": USER_MEMORY})
    host.error("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                             "content": marker, "writeMode": "merge"})
    host.send(b'{"id":%d,"jsonrpc":"2.0","params":{"content":"%s"' % (host.new_id(), marker.encode()))
    assert host.answer()["error"]["code"] == -32700
    stop(host)

    log_file = repo_path / ".git" / "gitmem" / "serve.log"
    assert log_file.stat().st_mode & 0o777 == 0o600
    log = log_file.read_text()
    assert marker not in log
    lines = log.splitlines()
    [write] = [line for line in lines if "storage.session.write" in line]
    for part in ("handlerId='gitmem-sessions'", "agentType='claude-code'", "sessionId='s-log'", "ms", " ok"):
        assert part in write, write
    [refused] = [line for line in lines if "storage.agentMemory.write" in line and "error" in line]
    assert "-32602" in refused and "agentId='codex'" in refused
    for method in ("storage.info", "storage.userMemory.write", "storage.userMemory.read",
                   "storage.session.read", "storage.shutdown"):
        assert any(method in line for line in lines), method
    assert any("-32700" in line for line in lines)


def test_log_file_and_level_options(spawn, tmp_path, repo_path):
    elsewhere = tmp_path / "logs" / "gitmem.log"
    host = spawn(extra_args=("--log-file", str(elsewhere), "--log-level", "WARNING"))
    host.call("storage.info")
    host.call("storage.userMemory.read", {"handlerId": USER_MEMORY})
    stop(host)
    assert elsewhere.exists() and "storage." not in elsewhere.read_text()
    assert not (repo_path / ".git" / "gitmem" / "serve.log").exists()


def test_storage_info_is_answered_before_the_work_tree_is_looked_at(spawn, repo_path):
    """nui waits on ``storage.info``: no look for hand edits stands before its answer. A
    memory saved by hand before the start is taken in when a read of it needs it (the
    watcher is off here; with it on, its first look comes after the first answer)."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("likes tea", agent_id="codex")
        before = mem.engine.head()
        saved = repo_path / mem.memory.path("codex")
    saved.write_text("likes coffee\n")
    host = spawn(extra_args=("--no-watch",))
    assert host.call("storage.info")["name"] == "gitmem"
    with Gitmem.open(repo_path, hand_edits=False) as mem:
        assert mem.engine.head() == before  # the save not yet taken in
    agent = {"handlerId": AGENT_MEMORY, "agentId": "codex"}
    assert host.call("storage.agentMemory.read", agent) == {"content": "likes coffee\n"}
    with Gitmem.open(repo_path, hand_edits=False) as mem:
        assert mem.engine.head() != before
        assert mem.engine.snapshot().read(mem.memory.path("codex")) == b"likes coffee\n"
    stop(host)
