"""``gitmem mcp`` against what the world hands it (issue 27): memory files that are not
UTF-8, stdin at /dev/null, a start inside a memory repository, calls a model gets wrong,
and client configuration files kept as symlinks or written in TOML's other forms.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem

pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402
from test_mcp import CLIENT, call, config_cli, run, session  # noqa: E402


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    run_gitmem("init", str(path))
    return path


def gitmem_bytes(*args: str, stdin: bytes, cwd: Path | None = None, env: dict | None = None):
    done = subprocess.run([sys.executable, "-m", "gitmem", *args], input=stdin, capture_output=True,
                          env={**SUBPROCESS_ENV, **(env or {})}, cwd=cwd, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def test_a_memory_that_is_not_utf8_is_read_with_a_note_and_the_server_keeps_serving(repo):
    gitmem_bytes("--repo", str(repo), "memory", "write", "--agent", "lat", stdin=b"caf\xe9 latin1\n")
    (repo / "memory/agents/hand.md").write_bytes(b"na\xefve by hand\n")  # an editor saving Latin-1

    async def test():
        async with session(repo) as opened:
            for tool, arguments in [("memory_read", {"record": "agent:lat"}),
                                    ("memory_show", {"record": "agent:lat", "at": "@"}),
                                    ("memory_read", {"record": "agent:hand"})]:
                result = await opened.call_tool(tool, arguments)
                assert not result.is_error, result
                text, note = (part.text for part in result.content)
                assert text in ("caf\ufffd latin1\n", "na\ufffdve by hand\n"), text
                assert note.startswith("note: the record is not all UTF-8") and "\n" not in note
            read = await opened.read_resource("gitmem://memory/agent/lat")
            assert read.contents[0].text == "caf\ufffd latin1\n"
            assert (await call(opened, "memory_write", record="agent:ok", content="still here"))[1] is False
    run(test)
    logged = (repo / ".git/gitmem/serve.log").read_text()
    assert logged.count("not all UTF-8") == 4 and "Traceback" not in logged
    assert (repo / "memory/agents/lat.md").read_bytes() == b"caf\xe9 latin1\n"  # read, never rewritten


def test_stdin_at_dev_null_ends_the_server_at_once(repo):
    done = subprocess.run([sys.executable, "-m", "gitmem", "mcp", "--repo", str(repo)],
                          stdin=subprocess.DEVNULL, capture_output=True, env=SUBPROCESS_ENV, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_mcp_and_its_config_use_the_repository_holding_the_current_folder(tmp_path):
    home, inside = tmp_path / "home", tmp_path / "m1"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": "", "XDG_DATA_HOME": "", "CODEX_HOME": ""}
    env = {**{k: v for k, v in SUBPROCESS_ENV.items() if k != "GITMEM_REPO"}, **env}
    subprocess.run([sys.executable, "-m", "gitmem", "init"], env=env, check=True, capture_output=True)
    gitmem_bytes("memory", "write", "--user", stdin=b"default user\n", env=env)
    run_gitmem("init", str(inside))
    gitmem_bytes("--repo", str(inside), "memory", "write", "--user", stdin=b"hi\n")
    (inside / "notes").mkdir()

    async def test():
        params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp"],
                                       env=env, cwd=str(inside / "notes"))
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write, client_info=CLIENT) as opened:
                    await opened.initialize()
                    assert await call(opened, "memory_read", record="user") == ("hi\n", False)
    run(test)

    printed = subprocess.run([sys.executable, "-m", "gitmem", "mcp", "config", "--client", "cursor"],
                             cwd=inside / "notes", env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(printed.stdout)["mcpServers"]["gitmem"]["args"][-2:] == ["--repo", str(inside.resolve())]
    written = subprocess.run([sys.executable, "-m", "gitmem", "mcp", "config", "--client", "cursor",
                              "--write"], cwd=inside, env=env, capture_output=True, text=True, timeout=60)
    assert written.returncode == 0, written.stderr
    entry = json.loads((home / ".cursor/mcp.json").read_text())["mcpServers"]["gitmem"]
    assert entry["args"][-1] == str(inside.resolve())


def test_show_before_the_record_existed_and_unknown_arguments_are_errors(repo):
    git = Git(repo)

    async def test():
        async with session(repo) as opened:
            await call(opened, "memory_write", record="agent:x", content="one")
            text, error = await call(opened, "memory_show", record="agent:x", at="2020-01-01")
            assert error and text == "agent:x did not exist at that time (before the first commit)"
            text, error = await call(opened, "memory_write", record="agent:x", content="two", extra=1)
            assert error and text == ("memory_write takes no argument 'extra' "
                                      "(its arguments: record, content, mode)")
            text, error = await call(opened, "memory_list", verbose=True)
            assert error and "memory_list takes no argument 'verbose' (its arguments: none)" == text
            assert await call(opened, "memory_read", record="agent:x") == ("one\n", False)
    run(test)
    cli = run_gitmem("show", "agent:x", "--at", "2020-01-01", repo=repo, check=False)
    assert cli.returncode == 1 and "agent:x did not exist at that time" in cli.stderr
    assert git.count("memory/agents/x.md") == 1  # the refused write wrote nothing


def test_config_write_keeps_a_symlink_and_the_entry_keys_a_person_added(tmp_path, repo):
    home, dotfiles = tmp_path / "home", tmp_path / "dotfiles"
    (home / ".cursor").mkdir(parents=True)
    dotfiles.mkdir()
    target = dotfiles / "mcp.json"
    target.write_text(json.dumps({"mcpServers": {"z": {"command": "z"}, "gitmem": {
        "command": "old", "args": [], "env": {"GITMEM_LOG": "x"}, "disabled": False}}}))
    link = home / ".cursor/mcp.json"
    link.symlink_to(target)
    config_cli(home, "--client", "cursor", "--write", "--repo", str(repo))
    assert link.is_symlink() and link.resolve() == target
    servers = json.loads(target.read_text())["mcpServers"]
    assert servers["z"] == {"command": "z"}
    assert servers["gitmem"]["env"] == {"GITMEM_LOG": "x"} and servers["gitmem"]["disabled"] is False
    assert servers["gitmem"]["command"] != "old" and servers["gitmem"]["args"][-1] == str(repo.resolve())


@pytest.mark.parametrize("text, form", [
    ('mcp_servers = { other = { command = "x" } }\n', "an inline table (mcp_servers = { ... })"),
    ("mcp_servers = 3\n", "a value that is not a table")])
def test_codex_toml_that_cannot_take_the_table_is_refused_saying_why(tmp_path, repo, text, form):
    path = tmp_path / "config.toml"
    path.write_text(text)
    done = config_cli(tmp_path, "--client", "codex", "--write", "--file", str(path),
                      "--repo", str(repo), check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == (f"gitmem: {path} writes mcp_servers as {form}, to which a "
                           "[mcp_servers.gitmem] table cannot be added: write each server as its "
                           "own [mcp_servers.<name>] table, then run again\n")
    assert path.read_text() == text


def test_codex_toml_that_is_not_toml_is_refused_at_its_own_line(tmp_path, repo):
    path = tmp_path / "config.toml"
    path.write_text('model = "o4"\nx = = 1\n')
    done = config_cli(tmp_path, "--client", "codex", "--write", "--file", str(path),
                      "--repo", str(repo), check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"gitmem: {path} is not valid TOML (") and "(at line 2," in done.stderr
    assert done.stderr.endswith("): fix it, then run again\n")
    assert path.read_text() == 'model = "o4"\nx = = 1\n'
