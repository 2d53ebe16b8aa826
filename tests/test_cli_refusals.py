"""The CLI refuses what the wire refuses, and says so when a name does not exist (issue 24)."""

from __future__ import annotations

import json

import pytest

from conftest import run_gitmem
from test_cli import assert_one_line_error


@pytest.fixture
def repo(repo_path):
    run_gitmem("init", str(repo_path))
    return repo_path


def read_session(cli, agent_type="claude-code", session_id="s1"):
    return json.loads(cli("session", "read", agent_type, session_id).stdout)["messages"]


@pytest.mark.parametrize("command", ["write", "append"])
@pytest.mark.parametrize("body, says", [
    ('{"messages": ["hi", 3]}', "item 0"),
    ('{"messages": [{"id": "m1"}, 3]}', "item 1"),
    ('{"messages": [null]}', "item 0"),
    ('{"msgs": []}', "did you mean messages?"),
    ('{"messages": [], "agentSesionId": "r"}', "did you mean agentSessionId?"),
    ('{"messages": [], "agentSessionId": 5}', "agentSessionId"),
    ('{"messages": [], "workingDir": ["/w"]}', "workingDir"),
])
def test_a_session_body_the_wire_refuses_is_refused(repo, cli, git, command, body, says):
    count = git.count()
    assert_one_line_error(cli("session", command, "claude-code", "s1", input=body, check=False),
                          code=1, says=says)
    assert git.count() == count


def test_the_wire_refuses_the_same_non_objects(repo, tmp_path):
    from nui_client import NuiHost, install_as_nui
    with NuiHost.spawn(install_as_nui(tmp_path, repo, ["claude-code"])) as host:
        error = host.error("storage.session.write", {
            "handlerId": "gitmem-sessions", "agentType": "claude-code", "sessionId": "s1",
            "workingDir": "/w", "messages": ["hi", 3]})
        assert error["code"] == -32602 and "item 0" in error["message"]
        host.call("storage.shutdown")


def test_an_empty_list_over_a_stored_session_needs_allow_empty(repo, cli, git):
    cli("session", "write", "claude-code", "s1", input='{"messages": [{"id": "m1"}]}')
    count = git.count()
    for body in ('{"messages": []}', '{"messages": null}', "{}"):
        done = cli("session", "write", "claude-code", "s1", input=body, check=False)
        assert_one_line_error(done, code=1, says="--allow-empty")
        assert "1 message" in done.stderr
    assert git.count() == count and read_session(cli) == [{"id": "m1"}]
    cli("session", "write", "claude-code", "s1", "--allow-empty", input='{"messages": []}')
    assert git.count() == count + 1 and read_session(cli) == []
    cli("session", "write", "claude-code", "new", input='{"messages": []}')  # nothing to lose
    assert read_session(cli, session_id="new") == []
