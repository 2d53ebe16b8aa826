"""The CLI refuses what the wire refuses, and says so when a name does not exist (issue 24)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, run_gitmem
from gitmem.repository import Gitmem
from nui_client import NuiHost, install_as_nui
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


# -- names that do not exist -----------------------------------------------------------


@pytest.fixture
def records(repo, cli):
    cli("memory", "write", "--agent", "reviewer", input="r")
    cli("memory", "write", "--agent", "nobodies", input="n")
    cli("session", "write", "claude-code", "nope2", input='{"messages": [{"id": "m"}]}')
    cli("session", "write", "claude-code", "s1", input='{"messages": [{"id": "m"}]}')
    with Gitmem.open(repo, create=False) as mem:
        mem.threads.append_events("nopes", "planner", [{"type": "RUN_STARTED"}])
    return repo


@pytest.mark.parametrize("args, says, closest", [
    (("memory", "read", "--agent", "nobody"), "no agent memory 'nobody'", "nobodies"),
    (("session", "read", "claude-code", "nope"), "no session claude-code/nope", "nope2"),
    (("thread", "events", "nope"), "no thread 'nope'", "nopes"),
    (("thread", "messages", "nope"), "no thread 'nope'", "nopes"),
    (("thread", "state", "nope"), "no thread 'nope'", "nopes"),
    (("log", "agent:nobody"), "no record agent:nobody", "agent:nobodies"),
    (("log", "session:claude-code/nope"), "no record session:claude-code/nope", "nope2"),
    (("memory", "read", "--agent", "r"), "no agent memory 'r'", "agent:reviewer"),
    (("blame", "agent:nobody"), "no record agent:nobody", "agent:nobodies"),
    (("blame", "session:claude-code/nope"), "no record session:claude-code/nope", "nope2"),
    (("blame", "thread:nope", "--json"), "no record thread:nope", "thread:nopes"),
])
def test_a_name_that_does_not_exist_says_so_with_the_closest(records, cli, args, says, closest):
    """Exit 0 and the empty answer a record never written reads as (scripts keep working,
    nui reads it so too), with one line on stderr naming the closest names."""
    done = cli(*args)
    assert done.stderr.count("\n") == 1 and says in done.stderr and closest in done.stderr, done.stderr
    assert done.stdout in ("", "[]\n", "null\n", '{"messages": [], "agentSessionId": ""}\n')


@pytest.mark.parametrize("args, says, closest", [
    (("show", "agent:nobody", "--at", "@"), "no record agent:nobody", "agent:nobodies"),
    (("show", "session:claude-code/nope", "--at", "2020-01-01"), "no record session:claude-code/nope", "nope2"),
    (("show", "thread:nope", "--at", "HEAD", "--json"), "no record thread:nope", "thread:nopes"),
    (("restore", "agent:nobody", "--at", "@~1"), "no record agent:nobody", "agent:nobodies"),
    (("restore", "session:claude-code/nope", "--at", "HEAD"), "no record session:claude-code/nope", "nope2"),
])
def test_show_and_restore_of_a_record_never_written_name_the_closest(records, cli, args, says, closest):
    """Refused, exit 1, as a version that does not exist is; the line names the record
    and the closest ones, as log's does, not its count of versions."""
    done = cli(*args, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr and closest in done.stderr, done.stderr
    assert "version" not in done.stderr, done.stderr


@pytest.mark.parametrize("since", [(), ("--since", "@~1"), ("--since", "2020-01-01", "--until", "@")])
def test_diff_of_a_record_never_written_is_empty_and_names_the_closest(records, cli, since):
    """A read, as log is: the empty diff, exit 0, one line on stderr."""
    done = cli("diff", "agent:nobody", *since, check=False)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "no record agent:nobody (closest: agent:nobodies" in done.stderr


def test_a_name_that_exists_says_nothing_more(records, cli):
    for args in (("memory", "read", "--agent", "reviewer"), ("session", "read", "claude-code", "s1"),
                 ("thread", "events", "nopes"), ("log", "agent:reviewer"), ("blame", "agent:reviewer"), ("memory", "read", "--user"),
                 ("diff", "agent:reviewer"), ("show", "agent:reviewer", "--at", "@")):
        done = cli(*args)
        assert "no " not in done.stderr, (args, done.stderr)


def test_control_characters_in_ids_are_escaped_in_listings(repo, cli):
    cli("memory", "write", "--agent", "evil\nagent:forged\t1", input="x")
    cli("session", "write", "a\tb", "s\r1\x1b[2J", input='{"messages": [{"id": "m"}]}')
    rows = cli("memory", "list").stdout.splitlines()
    assert len(rows) == 1 and rows[0].startswith("agent:evil\\nagent:forged\\t1\t")
    assert cli("session", "list").stdout == "a\\tb\ts\\r1\\x1b[2J\n"
    with Gitmem.open(repo, create=False) as mem:
        mem.threads.append_events("t\n2", "a\u2028b", [{"type": "RUN_STARTED"}])
    listed = cli("thread", "list").stdout
    assert listed.count("\n") == 1 and json.loads(listed)["id"] == "t\n2"


def test_nui_handlers_add_and_remove_say_what_changed(tmp_path, repo):
    folder = tmp_path / "ext"
    run_gitmem("nui", "install", "--dir", str(folder), "--agent-types", "pi", repo=repo)
    added = run_gitmem("nui", "handlers", "add", "notes", "agentMemory", "--agent-types", "pi",
                       "--dir", str(folder))
    assert "added handler notes (agentMemory, pi)" in added.stdout and "storage-handlers.yaml" in added.stdout
    removed = run_gitmem("nui", "handlers", "remove", "notes", "--dir", str(folder))
    assert "removed handler notes" in removed.stdout


def test_nui_install_says_it_made_a_repository_and_writes_nothing_pointing_nowhere(tmp_path):
    missing = tmp_path / "new"
    done = run_gitmem("nui", "install", "--dir", str(tmp_path / "ext"), repo=missing)
    assert f"made a new gitmem repository at {missing}" in done.stdout and (missing / ".git").is_dir()
    again = run_gitmem("nui", "install", "--dir", str(tmp_path / "ext"), repo=missing)
    assert "made a new" not in again.stdout
    (tmp_path / "a-file").write_text("")
    nowhere = tmp_path / "a-file" / "repo"
    done = run_gitmem("nui", "install", "--dir", str(tmp_path / "ext2"), repo=nowhere, check=False)
    assert_one_line_error(done, code=1)
    assert not (tmp_path / "ext2").exists()


def test_serve_says_when_it_makes_the_repository_it_was_pointed_at(tmp_path, repo):
    """With --create (the kaboo store's create: true) a missing repository is made, and said
    on stderr; a repository that exists is not."""
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "storage.userMemory.read",
                          "params": {"handlerId": "gitmem-user-memory"}}) + "\n"
    for path, made in ((tmp_path / "new", True), (repo, False)):
        done = subprocess.run([sys.executable, "-m", "gitmem", "serve", "--create", "--repo", str(path)],
                              input=request, capture_output=True, text=True, env=SUBPROCESS_ENV,
                              timeout=60)
        assert json.loads(done.stdout.splitlines()[0])["result"] == {"content": ""}
        assert (f"made a new gitmem repository at {path}" in done.stderr) is made, done.stderr


@pytest.mark.parametrize("value", ["-1", "-5000", "x"])
def test_serve_refuses_a_negative_max_response(repo, value):
    assert_one_line_error(run_gitmem("serve", "--max-response", value, repo=repo, check=False), code=2)


def test_serve_on_a_folder_holding_files_of_its_own_makes_nothing_there(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine\n")
    request = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "storage.userMemory.read",
                          "params": {"handlerId": "gitmem-user-memory"}}) + "\n"
    done = subprocess.run([sys.executable, "-m", "gitmem", "serve", "--create", "--repo", str(notes)],
                          input=request, capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=60)
    message = json.loads(done.stdout.splitlines()[0])["error"]["message"]
    assert "holds files of its own (todo.txt)" in message and "--adopt" in message
    assert sorted(p.name for p in notes.iterdir()) == ["todo.txt"]


def test_control_characters_in_ids_are_escaped_in_log_search_status_and_commits(repo, cli, git):
    """`log`, `search` and `status` printed them raw (an ESC sequence reaching the terminal,
    a row cut in two), and so did the commit subjects and the Gitmem-Id trailer."""
    cli("memory", "write", "--agent", "esc\x1b[31mred", input="hi there")
    cli("memory", "write", "--agent", "bad\nid", input="hi again")
    cli("session", "write", "a\nb", "s\x07", input='{"messages": [{"id": "m", "text": "hi"}]}')
    message = git("log", "-1", "--format=%B")
    assert message.splitlines()[0] == "session: write a\\nb/s\\x07 (1 message)", message
    assert "Gitmem-Id: session:a\\nb/s\\x07" in message.splitlines()
    subjects = git.log(fmt="%s")
    assert "memory: replace agent esc\\x1b[31mred" in subjects and "memory: replace agent bad\\nid" in subjects
    assert not any(c in "".join(git.log(fmt="%B")) for c in "\x1b\x07")
    entries = json.loads(cli("log", "--json").stdout)
    assert entries[0]["trailers"]["Gitmem-Id"] == "session:a\\nb/s\\x07"
    shown = cli("log").stdout
    assert "\x1b" not in shown and "\x07" not in shown
    assert all(len(row.split()[0]) == 10 for row in shown.splitlines())  # one row per commit
    found = cli("search", "hi").stdout
    assert "\x1b" not in found and "agent:bad\\nid" in found and "agent:esc\\x1b[31mred" in found
    assert cli("memory", "read", "--agent", "bad\nid").stdout == "hi again\n"  # the id kept whole
    cli("memory", "write", "--agent", "bad\nid", input="changed")
    cli("restore", "agent:bad\nid", "--at", "@~1")
    restored = git("log", "-1", "--format=%B")
    assert restored.splitlines()[0].startswith("restore: agent:bad\\nid as of "), restored
    assert "Gitmem-Id: agent:bad\\nid" in restored.splitlines() and "\x1b" not in restored
    assert cli("memory", "read", "--agent", "bad\nid").stdout == "hi again\n"
    (repo / "memory" / "agents" / "h\x1b[2Jx\ny.md").write_text("hand\n")
    status = cli("status").stdout
    assert "\x1b" not in status and "h\\x1b[2Jx\\ny.md" in status, status


def test_deletes_say_what_they_deleted_and_name_the_closest_of_what_is_not_there(records, cli, git):
    done = cli("memory", "delete", "--agent", "reviewer")
    head = git("rev-parse", "HEAD").strip()
    assert done.stdout == f"deleted agent:reviewer in commit {head[:10]}\n" and done.stderr == ""
    done = cli("session", "delete", "claude-code", "s1")
    head = git("rev-parse", "HEAD").strip()
    assert done.stdout == f"deleted session:claude-code/s1 in commit {head[:10]}\n" and done.stderr == ""
    count = git.count()
    again = cli("memory", "delete", "--agent", "reviewer")  # nothing there: exit 0, no commit, said
    assert again.stdout == "" and again.stderr.count("\n") == 1
    assert "no agent memory 'reviewer' to delete (closest: agent:nobodies)" in again.stderr
    nope = cli("session", "delete", "claude-code", "nope")
    assert nope.stdout == "" and nope.stderr.count("\n") == 1
    assert "no session claude-code/nope to delete (closest: claude-code/nope2" in nope.stderr
    user = cli("memory", "delete", "--user")
    assert user.stdout == "" and "no user memory to delete" in user.stderr
    assert git.count() == count


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving the repository to another user needs root")
def test_a_repository_of_another_user_is_refused_as_git_refuses_it_with_the_way_out(repo, tmp_path):
    """git refuses a repository another user owns (its config could run commands); so does
    gitmem, in one line naming git's own remedy, which then lets it in."""
    run_gitmem("memory", "write", "--user", repo=repo, input="Likes tea.")
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, 65534, 65534)  # nobody's, as a folder copied from another account
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}  # libgit2 reads the global config from $HOME/.gitconfig
    for args in (["memory", "read", "--user"], ["log", "user"], ["search", "tea"]):
        refused = run_gitmem(*args, repo=repo, env=env, check=False)
        assert_one_line_error(refused)
        assert "belongs to another user" in refused.stderr
        assert f"git config --global --add safe.directory {repo.resolve()}" in refused.stderr
    trust = refused.stderr.split("run `", 1)[1].split("`", 1)[0].split()
    subprocess.run(trust, check=True, env={**SUBPROCESS_ENV, **env,
                                           "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")})
    assert run_gitmem("memory", "read", "--user", repo=repo, env=env).stdout == "Likes tea.\n"
