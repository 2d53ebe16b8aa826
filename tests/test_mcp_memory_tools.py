"""The memory tool's commands, ``restore`` and ``recent`` as MCP tools of ``gitmem mcp``,
driven by the MCP SDK's client (which checks each result's ``structuredContent`` against
the tool's ``outputSchema``; these tests check it with jsonschema too).

The commands answer as ``gitmem.anthropic.MemoryTool`` does (the SDK's local backend's
texts, see tests/test_memory_tool.py), each change one commit naming the client.
"""

from __future__ import annotations

import json
import sys

import anyio
import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from nui_client import NuiHost
from test_mcp import CLIENT, run, session

pytest.importorskip("mcp")
anthropic = pytest.importorskip("anthropic")
import jsonschema  # noqa: E402  (a dependency of mcp)
from anthropic.lib.tools import ToolError  # noqa: E402

from gitmem.anthropic import MemoryTool  # noqa: E402
from test_memory_tool import RECORDED, tool_uses  # noqa: E402


async def structured_call(opened, tools: dict, name: str, **arguments) -> tuple[str, bool, dict | None]:
    """(text, is_error, structuredContent) of a call, the structure checked against the
    tool's declared output schema."""
    result = await opened.call_tool(name, arguments)
    assert result.content[0].type == "text"
    if not result.is_error:
        jsonschema.validate(result.structured_content, tools[name].output_schema)
    return result.content[0].text, result.is_error, result.structured_content


async def listed_tools(opened) -> dict:
    return {tool.name: tool for tool in (await opened.list_tools()).tools}


def test_every_tool_has_a_title_annotations_and_an_output_schema(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))

    async def test():
        async with session(repo) as opened:
            tools = await listed_tools(opened)
            for tool in tools.values():
                assert tool.title and tool.annotations is not None and tool.annotations.title == tool.title
                jsonschema.Draft202012Validator.check_schema(tool.output_schema)
                assert tool.output_schema["type"] == "object"
                assert tool.annotations.open_world_hint is False
            reads = {"memory_read", "memory_list", "memory_view", "history", "memory_show", "recent", "search",
                     "read_unit"}
            assert {n for n, t in tools.items() if t.annotations.read_only_hint} == reads
            destructive = {n for n, t in tools.items() if t.annotations.destructive_hint}
            assert destructive == {"memory_delete", "memory_write", "restore"}
            assert all(t.annotations.destructive_hint is False for n, t in tools.items()
                       if n not in reads | destructive)
            assert "memory_view" in opened.instructions and "/memories/user.md" in opened.instructions
    run(test)


def test_the_commands_answer_as_the_memory_tool_does(tmp_path):
    repo, reference_repo = tmp_path / "repo", tmp_path / "reference"
    run_gitmem("init", str(repo))
    git = Git(repo)
    commands = tool_uses(json.loads(RECORDED.read_text()))
    with MemoryTool(repo=reference_repo) as reference:
        expected = []
        for command in commands:
            try:
                expected.append((reference.call(command), False))
            except ToolError as error:
                expected.append((error.content, True))

    async def test():
        async with session(repo) as opened:
            tools = await listed_tools(opened)
            for command, (text, refused) in zip(commands, expected, strict=True):
                arguments = {k: v for k, v in command.items() if k != "command"}
                before = git("rev-parse", "HEAD")
                answer, error, structured = await structured_call(
                    opened, tools, f"memory_{command['command']}", **arguments)
                assert (answer, error) == (text, refused), command
                if error or command["command"] == "view":
                    assert git("rev-parse", "HEAD") == before
                    continue
                assert structured["answer"] == text and structured["commit"] == git("rev-parse", "HEAD").strip()
                assert f"Gitmem-Client: {CLIENT.name} {CLIENT.version}" in git("log", "-1", "--format=%B")
            # the notes are records: read, listed and logged by every other tool
            text, _, structured = await structured_call(opened, tools, "memory_read",
                                                        record="note:notes/meetings.md")
            assert text == (repo / "memory/notes/meetings.md").read_text()
            assert structured == {"record": "note:notes/meetings.md", "offset": 0, "size": len(text),
                                  "next_offset": None}  # the text is answered once
            assert (await structured_call(opened, tools, "memory_read",
                                          record="/memories/notes/meetings.md"))[0] == text
            _, _, listed = await structured_call(opened, tools, "memory_list")
            assert [m["record"] for m in listed["memories"]] == ["user", "note:notes/meetings.md"]
            _, _, logged = await structured_call(opened, tools, "history", record="user")
            assert [e["trailers"]["Gitmem-Op"] for e in logged["entries"]] == ["memories.create"]
            # a refused argument is said as the other tools say it
            text, error, _ = await structured_call(opened, tools, "memory_insert", path="/memories/user.md",
                                                   insert_line="2", insert_text="x")
            assert error and '"insert_line" is required, as a whole number' in text
    run(test)
    assert git.status() == ""


def test_restore_puts_a_version_back_as_a_new_commit(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))

    async def test():
        async with session(repo) as opened:
            tools = await listed_tools(opened)
            await structured_call(opened, tools, "memory_create", path="/memories/plan.md", file_text="one\n")
            await structured_call(opened, tools, "memory_str_replace", path="/memories/plan.md",
                                  old_str="one", new_str="two")
            text, error, done = await structured_call(opened, tools, "restore", record="/memories/plan.md",
                                                      at="@~1")
            assert not error and text.startswith("restored note:plan.md as at ")
            assert (repo / "memory/plan.md").read_text() == "one\n"
            text, error, again = await structured_call(opened, tools, "restore", record="note:plan.md",
                                                       at="@~2")
            assert not error and again["commit"] is None and "nothing to commit" in text
            text, error, _ = await structured_call(opened, tools, "restore", record="note:plan.md", at="@~9")
            assert error and "goes back further" in text
            return done
    done = anyio.run(test)
    git = Git(repo)
    assert done["commit"] == git("rev-parse", "HEAD").strip() and git.count("memory/plan.md") == 3
    assert "Gitmem-Op: restore" in git("log", "-1", "--format=%B")


def test_recent_shows_a_hand_edit_a_sync_and_a_nui_write_each_with_its_diff(synced, tmp_path):
    repo, remote = synced
    git = Git(repo)
    start = git("rev-parse", "HEAD").strip()
    laptop = tmp_path / "laptop"  # another machine: a clone that writes and syncs
    run_gitmem("clone", str(remote), str(laptop))
    run_gitmem("memory", "write", "--agent", "reviewer", repo=laptop, input="written on the laptop")
    run_gitmem("sync", repo=laptop)
    with open(repo / "memory/user.md", "a", encoding="utf-8") as file:  # a person, in an editor
        file.write("edited by hand\n")
    serve = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)], cwd=tmp_path,
                    env=SUBPROCESS_ENV)
    with serve:
        serve.call("storage.agentMemory.write", {"handlerId": "nui-handler", "agentId": "helper",
                                                 "content": "written by nui", "writeMode": "append"})
        serve.call("storage.shutdown")
        assert serve.wait() == 0
    run_gitmem("sync", repo=repo)
    (repo / "memory/notes").mkdir()  # saved after the sync, still waiting when recent is asked
    (repo / "memory/notes/todo.md").write_text("- call the bank\n")

    async def test():
        async with session(repo) as opened:
            tools = await listed_tools(opened)
            text, error, found = await structured_call(opened, tools, "recent", since=start)
            assert not error and json.loads(text) == found["changes"]
            by_hour = (await structured_call(opened, tools, "recent", since="1 hour ago"))[2]
            return found["changes"], by_hour["changes"]

    changes, by_hour = anyio.run(test)
    assert [c["id"] for c in changes] == git("log", "--first-parent", "--format=%H").split()[:len(changes)]
    assert changes[-1]["id"] != start and len(by_hour) > len(changes)  # since: after that commit

    def change_of(record: str, line: str) -> dict:
        found = [c for c in changes if any(f["record"] == record and f"\n+{line}\n" in f["diff"]
                                           for f in c["changes"])]
        assert len(found) == 1, (record, [c["summary"] for c in changes])
        return found[0]

    assert change_of("user", "edited by hand")["op"] == "hand-edit"
    waiting = change_of("note:notes/todo.md", "- call the bank")
    assert waiting["op"] == "hand-edit" and waiting["id"] == changes[0]["id"]  # committed by recent
    nui = change_of("agent:helper", "written by nui")
    assert nui["op"] == "memory.append" and nui["trailers"]["Gitmem-Handler"] == "nui-handler"
    synced_in = change_of("agent:reviewer", "written on the laptop")
    assert synced_in["op"] in ("sync.merge", "memory.replace")  # a merge, or the laptop's own commit
