"""``gitmem nui install`` and ``gitmem nui handlers``: the extension folder nui installs.

The folder must pass nui's own checks (see shared/reference/nui-host-behaviour.md) and
its command must start a working server after nui has copied it without exec bits;
the handler commands edit the list in place, and the server routes by the result.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import SUBPROCESS_ENV, Git
from gitmem.faces.nui.handlers import load_handlers
from nui_client import NuiHost, install_as_nui, manifest_command


def gitmem_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gitmem", *args], cwd=cwd, capture_output=True,
                          text=True, env=SUBPROCESS_ENV, timeout=60)


def test_install_writes_a_folder_nui_accepts(tmp_path):
    done = gitmem_cli("nui", "install", "--repo", "memories", cwd=tmp_path)  # --dir: ./gitmem
    assert done.returncode == 0, done.stderr
    folder, repo = tmp_path / "gitmem", tmp_path / "memories"
    assert str(folder) in done.stdout and done.stderr == ""
    manifest = YAML(typ="safe").load((folder / "extension.yaml").read_text())
    assert not manifest.get("apiVersion")  # every nui build accepts an empty one
    assert manifest["name"] == "gitmem" == folder.name  # nui wants the name of the folder
    storage = manifest["contributions"]["storage"]
    handlers = load_handlers(folder / storage["source"]["file"]).handlers
    assert [(h.id, h.kind, h.agent_types) for h in handlers] == [
        ("gitmem-sessions", "sessionHistory", ("claude-code", "codex", "pi", "opencode")),
        ("gitmem-agent-memory", "agentMemory", ("claude-code", "codex", "pi", "opencode")),
        ("gitmem-user-memory", "userMemory", ())]
    # No shell: the absolute console script beside the interpreter (no `-m` import that
    # a gitmem/ folder in the current directory could shadow), and an absolute
    # repository because nui runs the command from its own copy of the folder.
    command = storage["runtime"]["command"]
    script = Path(sys.executable).absolute().parent / "gitmem"
    assert command == [str(script), "serve", "--repo", str(repo)] and script.is_file()
    assert (repo / ".git").is_dir() and Git(repo).count() == 1


def test_the_command_works_from_a_repository_path_with_spaces_and_quotes(tmp_path):
    repo = tmp_path / "my notes" / "it's \"mine\" é ${HOME}"
    extension = install_as_nui(tmp_path, repo, ["claude-code"], use_cli=True)
    command, _ = manifest_command(extension)
    assert command[-1] == str(repo)
    with NuiHost.spawn(extension) as host:
        assert host.call("storage.info")["name"] == "gitmem"
        assert host.call("storage.userMemory.write", {"handlerId": "gitmem-user-memory", "content": "hi",
                                                      "writeMode": "replace"}) == {"ok": True}
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.wait() == 0
        assert host.problems == []
    assert Git(repo).show("HEAD:memory/user.md") == "hi\n"


def test_handlers_list_add_remove_keep_the_file_and_steer_the_server(tmp_path):
    repo = tmp_path / "repo"
    extension = install_as_nui(tmp_path, repo, ["claude-code"])
    handlers_file = extension / "storage-handlers.yaml"
    original = handlers_file.read_text()

    def handlers(*args: str) -> subprocess.CompletedProcess:
        return gitmem_cli("nui", "handlers", *args, "--dir", str(extension), cwd=tmp_path)

    assert handlers("list").stdout.splitlines() == [
        "gitmem-sessions\tsessionHistory\tclaude-code",
        "gitmem-agent-memory\tagentMemory\tclaude-code",
        "gitmem-user-memory\tuserMemory\t"]
    done = handlers("add", "reviewer-notes", "agentMemory", "--agent-types", "ext:corp/reviewer,pi")
    assert done.returncode == 0, done.stderr
    edited = handlers_file.read_text()
    assert edited.startswith(original)  # comments, order and the user's entries untouched
    assert handlers("list").stdout.splitlines()[-1] == "reviewer-notes\tagentMemory\text:corp/reviewer,pi"

    for refused, says in ((("add", "reviewer-notes", "agentMemory", "--agent-types", "pi"), "already listed"),
                          (("add", "notes", "agentMemory"), "requires a non-empty agentTypes"),
                          (("remove", "nobody"), 'no handler "nobody"')):
        done = handlers(*refused)
        assert done.returncode != 0 and says in done.stderr, (refused, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
        assert handlers_file.read_text() == edited

    notes = {"handlerId": "reviewer-notes", "agentId": "ext:corp/reviewer"}
    with NuiHost.spawn(extension) as host:
        host.call("storage.info")
        assert host.call("storage.agentMemory.write", {**notes, "content": "be strict",
                                                       "writeMode": "replace"}) == {"ok": True}
        assert host.call("storage.agentMemory.read", notes) == {"content": "be strict\n"}
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.problems == []

    assert handlers("remove", "reviewer-notes").returncode == 0
    assert handlers_file.read_text() == original
    with NuiHost.spawn(extension) as host:
        host.call("storage.info")
        assert host.error("storage.agentMemory.read", notes)["code"] == -32602
        assert host.problems == []


@pytest.mark.parametrize("agent_types", ["", " , "])
def test_install_without_agent_types_is_refused(tmp_path, agent_types):
    done = gitmem_cli("nui", "install", "--dir", "ext", "--repo", "repo", "--agent-types", agent_types,
                      cwd=tmp_path)
    assert done.returncode != 0 and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "ext").exists() and not (tmp_path / "repo").exists()
