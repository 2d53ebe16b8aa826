"""The Python API refuses what the wire refuses, each naming the parameter its caller used
(issue 35, item 10 and the blank ids of `threads.appendEvents`): a ValueError
(`gitmem.errors.InvalidInput`) in Python, -32602 naming the param on the wire, and no
commit either way."""

from __future__ import annotations

import sys

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.errors import InvalidInput
from nui_client import NuiHost


@pytest.mark.parametrize("call, words", [
    (lambda mem: mem.sessions.append("a", "n", ["x"]), "messages[0] must be a JSON object, not str"),
    (lambda mem: mem.sessions.write("a", "n", [{"id": "m"}, 3]), "messages[1] must be a JSON object"),
    (lambda mem: mem.sessions.write("a", "n", "hi"), "messages must be a list of JSON objects, not str"),
    (lambda mem: mem.sessions.write("a", "n", [], agent_session_id=7), "agent_session_id must be a string"),
    (lambda mem: mem.sessions.append("a", "n", [{}], working_dir=b"/w"), "working_dir must be a string"),
    (lambda mem: mem.sessions.write(" ", "n", []), "agent_type must not be empty"),
    (lambda mem: mem.sessions.append("a", "", [{}]), "session_id must not be empty"),
    (lambda mem: mem.memory.write(123), "content must be a string, not int"),
    (lambda mem: mem.memory.write(b"x"), "content must be a string, not bytes"),
    (lambda mem: mem.memory.write("x", mode="prepend"), "mode must be 'replace' or 'append', not 'prepend'"),
    (lambda mem: mem.memory.write("x", agent_id=" "), "agent_id must not be empty"),
    (lambda mem: mem.threads.append_events("t1", "", [{"type": "X"}]), "agent_id must not be empty"),
    (lambda mem: mem.threads.append_events("t1", " \t", [{"type": "X"}]), "agent_id must not be empty"),
    (lambda mem: mem.threads.append_events("t1", "a", [{"type": "X"}], owner_id=5), "owner_id must be"),
    (lambda mem: mem.threads.append_events("", "a", [{"type": "X"}]), "thread_id must not be empty"),
    (lambda mem: mem.threads.append_events("t1", "a", ["RUN_STARTED"]), "events[0] must be a JSON object"),
])
def test_the_api_refuses_with_the_name_of_its_parameter(mem, git, call, words):
    count = git.count()
    with pytest.raises(InvalidInput) as refused:
        call(mem)
    assert words in str(refused.value)
    assert "writeMode" not in str(refused.value)  # the wire's name, not the caller's
    assert git.count() == count


@pytest.mark.parametrize("method, params, name", [
    ("threads.appendEvents", {"threadId": "t1", "agentId": "", "events": [{"type": "X"}]}, "agentId"),
    ("threads.appendEvents", {"threadId": "t1", "agentId": "  ", "events": [{"type": "X"}]}, "agentId"),
    ("threads.appendEvents", {"threadId": " ", "agentId": "a", "events": [{"type": "X"}]}, "threadId"),
    ("threads.readEvents", {"threadId": ""}, "threadId"),
    ("storage.session.write", {"handlerId": "h", "agentType": "pi", "sessionId": " ", "messages": []},
     "sessionId"),
    ("storage.agentMemory.write", {"handlerId": "h", "agentId": "", "content": "x"}, "agentId"),
])
def test_the_wire_refuses_blank_ids_naming_the_param(repo_path, method, params, name):
    run_gitmem("init", str(repo_path))
    with NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                 cwd=repo_path.parent, env=SUBPROCESS_ENV) as host:
        error = host.error(method, params)
        assert error["code"] == -32602 and error["message"].startswith(f'param "{name}" must not be empty')
        assert error["data"] == {"param": name}
        host.call("storage.shutdown")
    assert Git(repo_path).count() == 1  # the repository's first commit only
