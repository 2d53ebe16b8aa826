"""Moving in from nui's built-in storage (and back): ``gitmem import nui``, ``gitmem export nui``."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from gitmem.bench.history import make_nui_data
from gitmem.cli.edges import progress_bar
from gitmem.faces.nui.importer import export_nui, import_nui, sanitise
from nui_client import NuiHost, install_as_nui

SESSIONS = "gitmem-sessions"
AGENT_TYPES = ["claude-code", "codex", "ext:corp/reviewer"]


@pytest.fixture
def nui_data(tmp_path: Path) -> tuple[Path, dict]:
    """A realistic nui data folder: 6 sessions (tool parts, images, a sub-agent), memory."""
    folder = tmp_path / "nui"
    return folder, make_nui_data(folder, sessions=6)


def test_an_import_reads_back_through_gitmem_serve_equal_to_the_source(
        nui_data, tmp_path, repo_path, cli, git):
    folder, data = nui_data
    assert any("images" in m for ms in data["sessionMessages"].values() for m in ms)
    out = cli("import", "nui", "--data-dir", str(folder)).stdout
    assert out.endswith("imported 6 sessions, 1 user memory, 2 agent memories (0 unchanged)\n")
    assert "add agent memory ext:corp/reviewer (from ext-corp-reviewer.md)" in out
    assert git.count() == 1 + 6 + 3  # init, then one commit per record
    with NuiHost.spawn(install_as_nui(tmp_path, repo_path, AGENT_TYPES)) as host:
        for entry in data["sessions"]:
            read = host.call("storage.session.read", {
                "handlerId": SESSIONS, "sessionId": entry["id"], "agentType": entry["agentType"],
                "workingDir": "/elsewhere"})
            assert read == {"messages": data["sessionMessages"][entry["id"]],
                            "agentSessionId": data["agentSessions"][entry["id"]]}
        for agent_id, file in (("claude-code", "claude-code.md"),
                               ("ext:corp/reviewer", "ext-corp-reviewer.md")):
            assert host.call("storage.agentMemory.read", {
                "handlerId": "gitmem-agent-memory", "agentId": agent_id}) == {
                "content": (folder / "memory" / "agents" / file).read_text()}
        assert host.call("storage.userMemory.read", {"handlerId": "gitmem-user-memory"}) == {
            "content": (folder / "memory" / "user.md").read_text()}
        assert host.call("storage.shutdown") == {"ok": True}
    assert host.problems == []
    first = data["sessions"][0]
    from gitmem.repository import Gitmem
    with Gitmem.open(repo_path) as mem:
        meta = mem.sessions.meta(first["agentType"], first["id"])
    assert meta["nuiSession"] == first and meta["workingDir"] == first["workingDir"]
    assert meta["subAgentSessions"] == {"explorer": data["agentSessions"][f"{first['id']}#explorer"]}


def test_a_second_import_changes_nothing_and_a_dry_run_changes_nothing(nui_data, mem, cli, git):
    folder, data = nui_data
    mem.close()
    dry = cli("import", "nui", "--data-dir", str(folder), "--dry-run").stdout
    assert git.count() == 1
    assert dry.count("would add session ") == 6 and "would add user memory" in dry
    assert dry.endswith("dry run: would import 6 sessions, 1 user memory, 2 agent memories "
                        "(0 unchanged)\n")
    cli("import", "nui", "--data-dir", str(folder))
    count = git.count()
    again = cli("import", "nui", "--data-dir", str(folder)).stdout
    assert again == "imported nothing (9 unchanged)\n" and git.count() == count
    # a change at the source is one commit for that record only
    data["sessionMessages"][data["sessions"][1]["id"]].append({"id": "new", "role": "user", "content": "?"})
    (folder / "data.json").write_text(json.dumps(data, indent=2))
    (folder / "memory" / "user.md").write_text("Prefers long answers.\n")
    out = cli("import", "nui", "--data-dir", str(folder), env={"NUI_DATA_DIR": "/nonexistent"}).stdout
    assert out.splitlines()[:2] == [
        f"update session {data['sessions'][1]['agentType']}/{data['sessions'][1]['id']} (9 messages)",
        "update user memory"]
    assert git.count() == count + 2


def test_export_then_import_is_a_no_op(nui_data, mem, tmp_path, git):
    folder, data = nui_data
    import_nui(mem, folder)
    mem.sessions.write("pi", "native", [{"id": "x", "role": "user", "content": "made in gitmem"}],
                       "", "/w")
    mem.memory.write("no session of mine", agent_id="ext:lonely/agent")
    out = tmp_path / "exported"
    report = export_nui(mem, out)
    assert (report.sessions, report.agent_memories, report.user_memory) == (7, 3, True)
    count = git.count()
    plan = import_nui(mem, out)
    assert plan.changes == [] and git.count() == count
    # what was imported comes out as it went in
    exported = json.loads((out / "data.json").read_text())
    assert [s for s in exported["sessions"] if s["id"] != "native"] == sorted(
        data["sessions"], key=lambda s: (s["createdAt"], s["id"]))
    assert {k: v for k, v in exported["agentSessions"].items()} == data["agentSessions"]
    assert {k: v for k, v in exported["sessionMessages"].items() if k != "native"} == data["sessionMessages"]
    for name in ("user.md", "agents/claude-code.md", "agents/ext-corp-reviewer.md"):
        assert (out / "memory" / name).read_bytes() == (folder / "memory" / name).read_bytes()
    assert (out / "memory/agents/ext-lonely-agent.md").read_text() == "no session of mine\n"
    assert oct((out / "data.json").stat().st_mode & 0o777) == "0o600"


def test_an_export_keeps_what_else_is_in_data_json(mem, tmp_path):
    out = tmp_path / "nui"
    out.mkdir()
    (out / "data.json").write_text(json.dumps({
        "settings": {"theme": "dark"},
        "sessions": [{"id": "theirs", "agentType": "codex"}],
        "sessionMessages": {"theirs": [{"id": "t"}]}, "agentSessions": {"theirs": "r"}}))
    mem.sessions.write("codex", "mine", [{"id": "m"}])
    report = export_nui(mem, out)
    data = json.loads((out / "data.json").read_text())
    assert data["settings"] == {"theme": "dark"}
    assert [s["id"] for s in data["sessions"]] == ["theirs", "mine"]
    assert data["sessionMessages"] == {"theirs": [{"id": "t"}], "mine": [{"id": "m"}]}
    assert report.notes and "kept 1 session" in report.notes[0]


def test_agents_sharing_a_nui_file_name_are_all_exported_each_to_its_own_file(mem, tmp_path, cli):
    """nui's name for both is bad-id.md: the agent whose id it is gets it, the other a name
    of its own beside it, and a note says which went where; nothing is dropped."""
    for agent in ("bad-id", "bad\nid", "bad id", "bad-id.2"):
        mem.memory.write(f"memory of {agent!r}", agent_id=agent)
    out = tmp_path / "nui"
    report = export_nui(mem, out)
    agents = out / "memory" / "agents"
    assert report.agent_memories == 4
    assert (agents / "bad-id.md").read_text() == "memory of 'bad-id'\n"
    assert (agents / "bad-id.2.md").read_text() == "memory of 'bad-id.2'\n"
    others = {path.name: path.read_text() for path in agents.iterdir()
              if path.name not in ("bad-id.md", "bad-id.2.md")}
    assert sorted(others.values()) == ["memory of 'bad id'\n", "memory of 'bad\\nid'\n"]
    assert all(name.startswith("bad-id.") and name.endswith(".md") for name in others)
    [note] = report.notes
    assert "'bad-id'" in note and "'bad\\nid'" in note and "'bad id'" in note
    assert all(name in note for name in others) and "nui reads bad-id.md" in note
    done = cli("export", "nui", str(tmp_path / "again"))
    assert "bad-id.md" in done.stdout + done.stderr


def test_agent_memory_names_are_mapped_back_or_kept_and_said_so(tmp_path, mem, cli):
    folder = tmp_path / "nui"
    (folder / "memory" / "agents").mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({"sessions": [
        {"id": "a", "agentType": "ext:corp/reviewer"}, {"id": "b", "agentType": "ext:corp:reviewer"},
        {"id": "c", "agentType": "my agent!"}]}))
    for name in ("ext-corp-reviewer", "my-agent-", "stranger", "claude-code"):
        (folder / "memory" / "agents" / f"{name}.md").write_text(f"{name}\n")
    plan = import_nui(mem, folder)
    assert set(mem.memory.agents()) == {"ext-corp-reviewer", "my agent!", "stranger", "claude-code"}
    assert mem.memory.read(agent_id="my agent!") == "my-agent-\n"
    assert sorted(plan.notes) == [
        "agent memory claude-code.md: no agent id seen in data.json or the repository sanitises "
        "to 'claude-code'; imported as agent id 'claude-code'",
        "agent memory ext-corp-reviewer.md could be any of ext:corp/reviewer, ext:corp:reviewer; "
        "imported as agent id 'ext-corp-reviewer'",
        "agent memory stranger.md: no agent id seen in data.json or the repository sanitises to "
        "'stranger'; imported as agent id 'stranger'"]
    assert sanitise("ext:corp/reviewer") == "ext-corp-reviewer" and sanitise("a::b") == "a-b"


@pytest.mark.parametrize("content, says", [
    ("not json", "is not JSON"), ("[]", "does not hold a JSON object"),
    ('{"sessions": {}}', "'sessions' is not a JSON list")])
def test_a_bad_data_file_is_a_one_line_error(tmp_path, cli, content, says):
    folder = tmp_path / "nui"
    folder.mkdir()
    (folder / "data.json").write_text(content)
    done = cli("import", "nui", "--data-dir", str(folder), check=False)
    assert done.returncode == 1 and says in done.stderr and done.stderr.count("\n") == 1
    done = cli("import", "nui", "--data-dir", str(tmp_path / "missing"), check=False)
    assert done.returncode == 1 and "no nui data folder" in done.stderr


def test_the_data_dir_defaults_to_nui_data_dir(nui_data, cli):
    folder, _ = nui_data
    out = cli("import", "nui", "--dry-run", env={"NUI_DATA_DIR": str(folder)}).stdout
    assert "would import 6 sessions" in out


def test_the_progress_bar_only_draws_on_a_terminal():
    assert progress_bar("import", io.StringIO()) is None
    main, secondary = os.openpty()
    with os.fdopen(secondary, "w") as terminal:
        draw = progress_bar("import", terminal)
        for done in range(1, 4):
            draw(done, 3)
    drawn = b""
    while True:  # until the closed terminal says end of file (EIO on Linux)
        try:
            chunk = os.read(main, 1000)
        except OSError:
            break
        if not chunk:
            break
        drawn += chunk
    os.close(main)
    drawn = drawn.decode()
    assert drawn.endswith("\rimport [" + "#" * 30 + "] 3/3\r\n")


def test_a_change_of_type_alone_at_the_source_is_imported(nui_data, mem, cli, git):
    folder, data = nui_data
    mem.close()
    session = data["sessions"][0]
    data["sessionMessages"][session["id"]][0]["flag"] = 1
    (folder / "data.json").write_text(json.dumps(data, indent=2))
    cli("import", "nui", "--data-dir", str(folder))
    count = git.count()
    data["sessionMessages"][session["id"]][0]["flag"] = True
    (folder / "data.json").write_text(json.dumps(data, indent=2))
    out = cli("import", "nui", "--data-dir", str(folder)).stdout
    assert out.startswith(f"update session {session['agentType']}/{session['id']}") and git.count() == count + 1


def test_an_export_never_overwrites_a_file_it_did_not_write(mem, tmp_path, cli, git):
    """nui's own memory in DIR is not gitmem's to replace: refused and named; --force keeps
    it beside the new file and says where. What an export wrote, the next one replaces."""
    out = tmp_path / "nui"
    (out / "memory" / "agents").mkdir(parents=True)
    (out / "memory" / "user.md").write_text("nui's own user memory\n")
    (out / "memory" / "agents" / "pi.md").write_text("nui's own pi memory\n")
    (out / "memory" / "agents" / "same.md").write_text("same\n")  # as gitmem holds it: no harm
    mem.memory.write("gitmem's user memory")
    mem.memory.write("gitmem's pi memory", agent_id="pi")
    mem.memory.write("same", agent_id="same")
    mem.close()
    done = cli("export", "nui", str(out), check=False)
    assert done.returncode == 1 and done.stdout == "" and done.stderr.count("\n") == 1
    assert "memory/user.md" in done.stderr and "memory/agents/pi.md" in done.stderr
    assert "same.md" not in done.stderr and "--force" in done.stderr
    assert (out / "memory" / "user.md").read_text() == "nui's own user memory\n"
    assert not (out / "data.json").exists()
    forced = cli("export", "nui", str(out), "--force").stdout
    kept = out / "memory" / "user.md.before-export"
    assert f"kept the old {out / 'memory' / 'user.md'} as {kept}" in forced
    assert kept.read_text() == "nui's own user memory\n"
    assert (out / "memory" / "agents" / "pi.md.before-export").read_text() == "nui's own pi memory\n"
    assert (out / "memory" / "user.md").read_text() == "gitmem's user memory\n"
    # what export wrote, it replaces; a file changed since is nui's again
    cli("memory", "write", "--user", input="newer")
    cli("export", "nui", str(out))
    assert (out / "memory" / "user.md").read_text() == "newer\n"
    (out / "memory" / "agents" / "pi.md").write_text("nui wrote this since\n")
    done = cli("export", "nui", str(out), check=False)
    assert done.returncode == 1 and "memory/agents/pi.md" in done.stderr
    assert "memory/user.md" not in done.stderr


def test_an_export_does_not_replace_a_session_of_data_json_it_did_not_write(mem, tmp_path, cli):
    out = tmp_path / "nui"
    out.mkdir()
    (out / "data.json").write_text(json.dumps({
        "sessions": [{"id": "s1", "agentType": "codex"}], "sessionMessages": {"s1": [{"id": "nui's"}]}}))
    mem.sessions.write("codex", "s1", [{"id": "gitmem's"}])
    mem.close()
    done = cli("export", "nui", str(out), check=False)
    assert done.returncode == 1 and "data.json" in done.stderr and "s1" in done.stderr
    cli("export", "nui", str(out), "--force")
    old = json.loads((out / "data.json.before-export").read_text())
    assert old["sessionMessages"] == {"s1": [{"id": "nui's"}]}
    assert json.loads((out / "data.json").read_text())["sessionMessages"] == {"s1": [{"id": "gitmem's"}]}


@pytest.mark.parametrize("theirs", [
    {"id": "s3", "name": "NUI OWN S3", "workingDir": "/home/me", "agentType": "codex",
     "createdAt": "2026-01-01T00:00:00.000Z"},
    {"id": "s3", "agentType": "codex", "messages": [{"id": "NUI OWN"}]},
])
def test_an_export_does_not_replace_a_session_entry_of_data_json_it_did_not_write(
        mem, tmp_path, cli, theirs):
    """nui's own entry for a session gitmem holds too (renamed in nui, another workingDir,
    its messages inside it) was replaced without a word when sessionMessages had none."""
    out = tmp_path / "nui"
    out.mkdir()
    before = json.dumps({"sessions": [theirs], "sessionMessages": {}, "agentSessions": {}})
    (out / "data.json").write_text(before)
    mem.sessions.write("codex", "s3", [{"id": "gitmem's"}])
    mem.close()
    done = cli("export", "nui", str(out), check=False)
    assert done.returncode == 1 and "data.json" in done.stderr and "s3" in done.stderr, done.stderr
    assert (out / "data.json").read_text() == before
    cli("export", "nui", str(out), "--force")
    assert "NUI OWN" in (out / "data.json.before-export").read_text()
    assert "NUI OWN" not in (out / "data.json").read_text()
    cli("export", "nui", str(out))  # what the export wrote it replaces
