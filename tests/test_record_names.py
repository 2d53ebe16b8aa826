"""Names a listing prints are names the commands take (issue 35, items 8 and 9): a record is
listed by its ids when that name leads back to it, else by its path, and listings take in
the edits waiting on disk, as reads do.

Real repositories, the real CLI, files saved on disk as a person saves them.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import run_gitmem
from gitmem.records.layout import parse_record, record_name

LONG_ID = "reviewer-" + "x" * 300


def listed(repo) -> dict[str, str]:
    """``gitmem memory list``: {name: size}."""
    rows = [line.split("\t") for line in run_gitmem("memory", "list", repo=repo).stdout.splitlines()]
    return {name: size for name, size, _when in rows}


def test_a_long_agent_id_is_listed_by_a_name_log_and_show_take(mem, repo_path):
    mem.memory.write("likes tea", LONG_ID)
    (name, size), = listed(repo_path).items()
    assert name.startswith("note:agents/reviewer-xxx") and "~" in name  # no meta.json keeps the id
    assert size == "10"
    log = run_gitmem("log", name, repo=repo_path)
    assert "memory: replace" in log.stdout and log.stderr == ""
    assert run_gitmem("show", name, "--at", "@", repo=repo_path).stdout == "likes tea\n"


def test_a_memory_file_saved_by_hand_is_listed_by_a_name_the_commands_take(mem, repo_path):
    (repo_path / "memory" / "agents").mkdir(parents=True)
    (repo_path / "memory" / "agents" / "Upper.md").write_text("saved by hand\n")
    names = listed(repo_path)  # the listing commits the save first
    assert names == {"note:agents/Upper.md": "14"}
    assert run_gitmem("show", "note:agents/Upper.md", "--at", "@", repo=repo_path).stdout == \
        "saved by hand\n"
    assert "hand edit" in run_gitmem("log", "note:agents/Upper.md", repo=repo_path).stdout
    missed = run_gitmem("memory", "read", "--agent", "Upper", repo=repo_path)
    assert missed.stdout == "" and "(closest: note:agents/Upper.md)" in missed.stderr
    assert mem.memory.agents() == []  # no id reads that file: the API lists none
    assert mem.memory.paths() == ["memory/agents/Upper.md"]


def test_a_session_id_holding_a_slash_is_named_so_that_log_and_show_take_it(mem, repo_path):
    mem.sessions.write("claude-code", "a/b", [{"id": "m1", "role": "user", "content": "zebra"}])
    found = run_gitmem("search", "zebra", repo=repo_path).stdout.split()
    name = found[0]
    assert name == "sessions/claude-code/a%2fb"
    assert "session: write" in run_gitmem("log", name, repo=repo_path).stdout
    assert '"zebra"' in run_gitmem("show", name, "--at", "@", repo=repo_path).stdout
    assert run_gitmem("session", "list", repo=repo_path).stdout == "claude-code\ta/b\n"


def test_a_long_session_id_found_by_search_is_named_so_that_show_takes_it(mem, repo_path):
    mem.sessions.write("claude-code", LONG_ID, [{"id": "m1", "role": "user", "content": "walrus"}])
    name = run_gitmem("search", "walrus", repo=repo_path).stdout.split()[0]
    assert name.startswith("sessions/claude-code/reviewer-xxx") and "~" in name
    assert '"walrus"' in run_gitmem("show", name, repo=repo_path).stdout
    assert "session: write" in run_gitmem("log", name, repo=repo_path).stdout


def test_memory_list_takes_in_the_edits_waiting_on_disk(mem, repo_path):
    mem.memory.write("soon removed", "gone")
    (repo_path / "memory" / "agents" / "new2.md").write_text("x\n")
    (repo_path / "memory" / "agents" / "gone.md").unlink()
    assert listed(repo_path) == {"agent:new2": "2"}


def test_session_and_thread_lists_take_in_the_edits_waiting_on_disk(mem, repo_path):
    mem.sessions.write("claude-code", "gone", [{"id": "m1"}])
    mem.threads.append_events("gone", "planner", [{"type": "RUN_STARTED"}])
    shutil.copytree(repo_path / "sessions" / "claude-code" / "gone", repo_path / "sessions" / "pi" / "new")
    (repo_path / "sessions" / "pi" / "new" / "meta.json").write_text(
        json.dumps({"agentType": "pi", "sessionId": "new"}))
    shutil.rmtree(repo_path / "sessions" / "claude-code")
    shutil.copytree(repo_path / "threads" / "gone", repo_path / "threads" / "new")
    (repo_path / "threads" / "new" / "meta.json").write_text(json.dumps({"threadId": "new", "updatedAt": 1}))
    shutil.rmtree(repo_path / "threads" / "gone")
    assert run_gitmem("session", "list", repo=repo_path).stdout == "pi\tnew\n"
    threads = run_gitmem("thread", "list", repo=repo_path).stdout.splitlines()
    assert [json.loads(line)["id"] for line in threads] == ["new"]


@pytest.mark.parametrize("path", [
    "memory/user.md", "memory/agents/reviewer.md", "memory/agents/%52eviewer.md",
    "memory/agents/Upper.md", "memory/agents/ext%3acorp%2freviewer.md",
    f"memory/agents/{'x' * 163}~0123456789abcdef.md", "sessions/claude-code/a%2fb",
    "sessions/ext%3acorp%2freviewer/s1", "sessions/ext%3acorp%2freviewer/a%2fb", "threads/a%2fb"])
def test_every_record_name_leads_back_to_its_record(path):
    assert parse_record(record_name(path)).path == path
