"""Safe defaults for a newcomer (issue 18): what gitmem refuses before it costs data or privacy.

Each test here failed on the main of the day: init adopting a code repository, an empty
stdin wiping memory, NaN stored and served, empty ids accepted, a re-install dropping
handlers, a dry run creating the repository.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from test_cli import assert_one_line_error
from gitmem.errors import InvalidInput
from gitmem.repository import ForeignRepository, Gitmem
from nui_client import NuiHost


def code_repository(path: Path, branch: str = "master") -> Git:
    """A project's repository: a commit of source files on ``branch``."""
    git = Git(path)
    path.mkdir()
    git("init", "-q", f"--initial-branch={branch}")
    (path / "setup.py").write_text("print('hi')\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("x = 1\n")
    git("add", "-A")
    git("commit", "-q", "-m", "code")
    return git


# -- init in a code repository ------------------------------------------------------


def test_init_refuses_a_code_repository_and_names_adopt(tmp_path):
    project = tmp_path / "project"
    git = code_repository(project)
    before = git("rev-parse", "HEAD")
    done = run_gitmem("init", str(project), check=False)
    assert_one_line_error(done, says="--adopt")
    assert "setup.py" in done.stderr and "branch master" in done.stderr
    assert git("rev-parse", "HEAD") == before and git("branch", "--list").split() == ["*", "master"]
    assert git.status() == "" and not (project / ".git" / "gitmem").exists()
    # a memory command on it is refused the same way: nothing commits into the project
    assert_one_line_error(run_gitmem("memory", "write", "--user", repo=project, input="x",
                                     check=False), says="--adopt")
    assert git("branch", "--list").split() == ["*", "master"]


def test_adopt_never_creates_a_second_branch(tmp_path):
    project = tmp_path / "project"
    git = code_repository(project, "master")
    done = run_gitmem("init", "--adopt", str(project), check=False)
    assert_one_line_error(done, says="git -C")
    assert "branch -m master main" in done.stderr
    assert git("branch", "--list").split() == ["*", "master"]
    git("branch", "-m", "master", "main")
    run_gitmem("init", "--adopt", str(project))
    run_gitmem("memory", "write", "--user", repo=project, input="likes tea")
    assert git("branch", "--list").split() == ["*", "main"]
    assert git.show("HEAD:memory/user.md") == "likes tea\n"
    assert (project / "setup.py").stat().st_mode & 0o777 == 0o644  # the project's own files


def test_api_refuses_a_code_repository_unless_adopted(tmp_path):
    project = tmp_path / "project"
    code_repository(project, "main")
    with pytest.raises(ForeignRepository):
        Gitmem.open(project)
    with Gitmem.open(project, adopt=True) as mem:
        mem.memory.write("x")
    with Gitmem.open(project, create=False) as mem:  # adopted once: gitmem's from now on
        assert mem.memory.read() == "x\n"


def test_init_of_an_empty_git_repository_on_master_uses_main(tmp_path):
    path = tmp_path / "empty"
    path.mkdir()
    git = Git(path)
    git("init", "-q", "--initial-branch=master")
    run_gitmem("init", str(path))
    assert git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git("branch", "--list").split() == ["*", "main"] and git.status() == ""


def test_init_on_a_file_names_the_file(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("hi")
    assert_one_line_error(run_gitmem("init", str(file), check=False), says=f"{file} is a file")


def test_export_to_a_file_names_the_file_without_errno(tmp_path, repo_path):
    run_gitmem("init", str(repo_path))
    run_gitmem("memory", "write", "--user", repo=repo_path, input="x")
    file = tmp_path / "out"
    file.write_text("hi")
    assert_one_line_error(run_gitmem("export", "nui", str(file), repo=repo_path, check=False),
                          says=f"{file} is a file")
    assert file.read_text() == "hi"


# -- empty stdin ----------------------------------------------------------------------


@pytest.mark.parametrize("stdin", ["", "\n  \n"])
def test_memory_write_refuses_an_empty_stdin(repo_path, stdin):
    run_gitmem("init", str(repo_path))
    run_gitmem("memory", "write", "--user", repo=repo_path, input="likes tea")
    count = Git(repo_path).count()
    done = run_gitmem("memory", "write", "--user", repo=repo_path, input=stdin, check=False)
    assert_one_line_error(done, says="memory delete")
    assert "--allow-empty" in done.stderr
    assert run_gitmem("memory", "read", "--user", repo=repo_path).stdout == "likes tea\n"
    assert Git(repo_path).count() == count
    run_gitmem("memory", "write", "--user", "--allow-empty", repo=repo_path, input=stdin)
    assert run_gitmem("memory", "read", "--user", repo=repo_path).stdout.strip() == ""


# -- non-finite numbers ---------------------------------------------------------------


@pytest.mark.parametrize("number, words", [("NaN", "NaN is not JSON"),
                                           ("Infinity", "Infinity is not JSON"),
                                           ("-Infinity", "-Infinity is not JSON"),
                                           ("1e400", "number out of range: 1e400")])
def test_the_cli_refuses_non_finite_numbers_with_the_wire_words(repo_path, number, words):
    run_gitmem("init", str(repo_path))
    body = '{"messages": [{"role": "user", "n": %s}]}' % number
    for command in ("write", "append"):
        done = run_gitmem("session", command, "claude-code", "s1", repo=repo_path, input=body,
                          check=False)
        assert_one_line_error(done, says=words)
    assert Git(repo_path).count() == 1
    # the wire says the same
    with NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                 cwd=repo_path, env=SUBPROCESS_ENV) as host:
        host.send(('{"jsonrpc":"2.0","id":1,"method":"threads.appendEvents","params":'
                   '{"threadId":"t","agentId":"a","events":[{"n":%s}]}}' % number).encode())
        answer = host.answer()
        assert answer["error"]["code"] == -32700 and words in answer["error"]["message"]
        host.call("storage.shutdown")


@pytest.mark.parametrize("value, words", [(math.nan, "NaN is not JSON"),
                                          (math.inf, "Infinity is not JSON"),
                                          (-math.inf, "-Infinity is not JSON")])
def test_the_api_refuses_non_finite_numbers(mem, git, value, words):
    count = git.count()
    calls = [lambda: mem.sessions.write("claude-code", "s1", [{"n": [1, {"x": value}]}]),
             lambda: mem.sessions.append("claude-code", "s1", [{"n": value}]),
             lambda: mem.threads.append_events("t1", "a", [{"type": "X", "n": value}]),
             lambda: mem.threads.save_messages("t1", [{"id": "m", "n": value}])]
    for call in calls:
        with pytest.raises(ValueError, match=words):
            call()
    assert git.count() == count


def test_import_refuses_non_finite_numbers(tmp_path, repo_path):
    nui = tmp_path / "nui"
    nui.mkdir()
    (nui / "data.json").write_text('{"sessions": [{"id": "s1", "agentType": "claude-code"}], '
                                   '"sessionMessages": {"s1": [{"n": NaN}]}}')
    done = run_gitmem("import", "nui", "--data-dir", str(nui), repo=repo_path, check=False)
    assert_one_line_error(done, says="NaN is not JSON")
    assert "data.json" in done.stderr


# -- empty ids ------------------------------------------------------------------------


@pytest.mark.parametrize("empty", ["", "  ", "\t\n"])
def test_the_api_refuses_empty_ids(mem, git, empty):
    count = git.count()
    calls = [lambda: mem.memory.write("x", agent_id=empty),
             lambda: mem.memory.read(empty),
             lambda: mem.sessions.write(empty, "s1", []),
             lambda: mem.sessions.write("claude-code", empty, []),
             lambda: mem.sessions.read("claude-code", empty),
             lambda: mem.threads.append_events(empty, "a", [{"type": "X"}]),
             lambda: mem.threads.save_messages(empty, [])]
    for call in calls:
        with pytest.raises(InvalidInput, match="must not be empty"):
            call()
    mem.engine.index.refresher.flush()
    assert git.count() == count and git.status() == ""


@pytest.mark.parametrize("args", [("memory", "write", "--agent", ""),
                                  ("memory", "read", "--agent", " "),
                                  ("session", "write", "", "s1"),
                                  ("session", "write", "claude-code", " "),
                                  ("thread", "events", "")])
def test_the_cli_refuses_empty_ids(repo_path, args):
    run_gitmem("init", str(repo_path))
    done = run_gitmem(*args, repo=repo_path, input='{"messages": []}', check=False)
    assert_one_line_error(done, says="must not be empty")
    assert Git(repo_path).count() == 1


def test_the_wire_refuses_empty_ids_with_invalid_params(repo_path):
    requests = [("storage.session.write", {"handlerId": "h", "agentType": "claude-code",
                                           "sessionId": " ", "messages": []}),
                ("storage.session.read", {"handlerId": "h", "agentType": "claude-code",
                                          "sessionId": ""}),
                ("storage.agentMemory.write", {"handlerId": "h", "agentId": "", "content": "x"}),
                ("threads.appendEvents", {"threadId": "", "agentId": "a", "events": [{"type": "X"}]}),
                ("threads.readEvents", {"threadId": "  "})]
    with NuiHost([sys.executable, "-m", "gitmem", "serve", "--create", "--repo", str(repo_path)],
                 cwd=repo_path.parent, env=SUBPROCESS_ENV) as host:
        for method, params in requests:
            error = host.error(method, params)
            assert error["code"] == -32602 and "must not be empty" in error["message"], method
        host.call("storage.shutdown")
    assert Git(repo_path).count() == 1


def test_import_skips_sessions_without_agent_type_and_says_so(tmp_path, repo_path):
    nui = tmp_path / "nui"
    nui.mkdir()
    (nui / "data.json").write_text(json.dumps({
        "sessions": [{"id": "s1", "agentType": "claude-code"}, {"id": " ", "agentType": "x"}],
        "sessionMessages": {"s1": [{"role": "user"}], "orphan": [{"role": "user"}]}}))
    done = run_gitmem("import", "nui", "--data-dir", str(nui), repo=repo_path)
    assert "orphan" in done.stdout and "skipped" in done.stdout
    assert run_gitmem("session", "list", repo=repo_path).stdout == "claude-code\ts1\n"


# -- nui install keeps the handler list; a dry run writes nothing ------------------------


def test_nui_install_again_keeps_storage_handlers_unless_forced(tmp_path):
    folder, repo = tmp_path / "ext", tmp_path / "repo"
    run_gitmem("nui", "install", "--dir", str(folder), "--repo", str(repo))
    run_gitmem("nui", "handlers", "add", "notes", "agentMemory", "--agent-types", "pi",
               "--dir", str(folder))
    handlers = (folder / "storage-handlers.yaml").read_text()
    (folder / "extension.yaml").write_text("stale\n")
    done = run_gitmem("nui", "install", "--dir", str(folder), "--repo", str(repo),
                      "--agent-types", "codex")
    assert "kept" in done.stdout
    assert (folder / "storage-handlers.yaml").read_text() == handlers
    assert "notes" in handlers and "apiVersion" in (folder / "extension.yaml").read_text()
    run_gitmem("nui", "install", "--dir", str(folder), "--repo", str(repo), "--force",
               "--agent-types", "codex")
    assert "notes" not in (folder / "storage-handlers.yaml").read_text()


def test_import_dry_run_writes_nothing_anywhere(tmp_path):
    nui = tmp_path / "nui"
    (nui / "memory").mkdir(parents=True)
    (nui / "memory" / "user.md").write_text("likes tea\n")
    (nui / "data.json").write_text(json.dumps({
        "sessions": [{"id": "s1", "agentType": "claude-code"}],
        "sessionMessages": {"s1": [{"role": "user", "content": "hi"}]}}))
    repo = tmp_path / "repo"
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    done = run_gitmem("import", "nui", "--dry-run", "--data-dir", str(nui), repo=repo)
    assert "would add session claude-code/s1" in done.stdout
    assert "would add user memory" in done.stdout
    assert not repo.exists() and sorted(str(p) for p in tmp_path.rglob("*")) == before
    # into an existing repository: no commit, no file
    run_gitmem("init", str(repo))
    files = sorted(str(p) for p in repo.rglob("*") if ".git" not in p.parts)
    head = Git(repo)("rev-parse", "HEAD")
    run_gitmem("import", "nui", "--dry-run", "--data-dir", str(nui), repo=repo)
    assert Git(repo)("rev-parse", "HEAD") == head
    assert sorted(str(p) for p in repo.rglob("*") if ".git" not in p.parts) == files


# -- import path safety -----------------------------------------------------------------


def test_a_gitmem_folder_in_the_current_directory_does_not_break_serve(tmp_path):
    """`gitmem nui install --dir ./gitmem` makes exactly such a folder."""
    work = tmp_path / "work"
    work.mkdir()
    repo = tmp_path / "repo"
    done = subprocess.run([sys.executable, "-P", "-m", "gitmem", "nui", "install", "--repo",
                           str(repo)], cwd=work, capture_output=True, text=True,
                          env=SUBPROCESS_ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (work / "gitmem" / "extension.yaml").is_file()
    extension = work / "gitmem"
    from nui_client import manifest_command
    command, _ = manifest_command(extension)
    for cwd in (work, extension):  # a gitmem/ folder beside, and nui's own cwd
        with NuiHost(command, cwd=cwd, env=SUBPROCESS_ENV) as host:
            assert host.call("storage.info")["name"] == "gitmem"
            assert host.call("storage.shutdown") == {"ok": True}
            assert host.wait() == 0


def test_without_a_console_script_the_command_keeps_the_current_folder_off_the_path(tmp_path):
    from gitmem.faces.nui.extension import serve_command
    python = tmp_path / "bin" / "python3"  # no gitmem script beside it
    command = serve_command(tmp_path / "repo", str(python))
    assert command[:3] == [str(python), "-P" if sys.version_info >= (3, 11) else "-I", "-m"]
    assert os.path.isabs(command[-1])


def test_the_kaboo_adapter_runs_the_console_script_by_default(tmp_path):
    """No `-m` import: a gitmem/ folder in kaboo's current directory cannot shadow gitmem."""
    import shutil
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the kaboo adapter needs Node 18+)")
    adapter = Path(__file__).resolve().parent.parent / "templates" / "kaboo" / \
        "gitmem-thread-store.mjs"
    work = tmp_path / "project"
    (work / "gitmem").mkdir(parents=True)
    (work / "use.mjs").write_text(
        f'import {{ GitMemThreadStore }} from {json.dumps(str(adapter))};\n'
        'const store = new GitMemThreadStore({ repo: process.argv[2], create: true });\n'
        'await store.appendEvents("t1", "agent", [{ type: "RUN_STARTED" }]);\n'
        'console.log(JSON.stringify(await store.readEvents("t1")));\n'
        'await store.close();\n')
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run([node, "use.mjs", str(tmp_path / "repo")], cwd=work, capture_output=True,
                          text=True, env={**SUBPROCESS_ENV, "PATH": path}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"type": "RUN_STARTED"}]
