"""gitmem writes a repository only where it was asked to (issue 35).

A git repository that gitmem refused (a project's code, on ``main`` or ``master``) is
refused by every face the same way on every start, and nothing is written into it, until
``gitmem init --adopt``. A repository is created only by ``init``, ``clone``, the install
commands, at the default location, or by a face's own create option (``gitmem serve
--create``, the kaboo store's ``create: true``): a mistyped path is one error naming the
nearest gitmem repository. No repository is made inside a gitmem repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gitmem
from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.git.base import EngineError

ADAPTER = Path(__file__).resolve().parent.parent / "templates" / "kaboo" / "gitmem-thread-store.mjs"
WRITE_A_THREAD = {"jsonrpc": "2.0", "id": 1, "method": "threads.appendEvents",
                  "params": {"threadId": "t1", "agentId": "a", "events": [{"type": "RUN_STARTED"}]}}


def code_repository(path: Path, branch: str) -> Git:
    """A project's repository as its person makes it: ``git init -b BRANCH``, two commits."""
    git = Git(path)
    path.mkdir()
    git("init", "-q", "-b", branch)
    (path / "main.py").write_text("print('hi')\n")
    (path / "README.md").write_text("# my project\n")
    git("add", "-A")
    git("commit", "-q", "-m", "first")
    (path / "main.py").write_text("print('hello')\n")
    git("commit", "-q", "-am", "second")
    return git


def every_file(folder: Path) -> dict[str, tuple[int, int, int]]:
    """{path: (mode, size, mtime)} of every file and folder under ``folder``, .git included."""
    found = {}
    for top, folders, files in os.walk(folder):
        for name in folders + files:
            st = os.lstat(os.path.join(top, name))
            found[os.path.relpath(os.path.join(top, name), folder)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return found


def gitmem_script() -> str:
    """The gitmem console script of this Python (what `pip install` makes)."""
    script = Path(sys.executable).parent / "gitmem"
    if not script.is_file():
        pytest.skip("no gitmem console script beside this Python")
    return str(script)


# -- each face, started on a repository and asked to write ------------------------------


def by_serve(repo: Path, *options: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo), *options],
                          input=json.dumps(WRITE_A_THREAD) + "\n", capture_output=True, text=True,
                          env=SUBPROCESS_ENV, timeout=60)
    answer = json.loads(done.stdout.splitlines()[0])
    return answer["error"]["message"] if "error" in answer else "ok"


def by_mcp(repo: Path) -> str:
    from test_mcp import RawClient
    client = RawClient(repo)
    try:
        client.initialize("2025-06-18", "claude-code")
        result = client.call("memory_write", record="user", content="likes tea")
    finally:
        client.close()
    return result["content"][0]["text"] if result.get("isError") else "ok"


def by_kaboo(repo: Path, *, create: bool = False) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the kaboo store needs Node 18+)")
    options = {"repo": str(repo), "gitmem": gitmem_script(), **({"create": True} if create else {})}
    script = (f"import {{ GitMemThreadStore }} from {json.dumps(str(ADAPTER))};\n"
              f"const store = new GitMemThreadStore({json.dumps(options)});\n"
              "try { await store.appendEvents('t1', 'a', [{ type: 'RUN_STARTED' }]); console.log('ok'); }\n"
              "catch (error) { console.log(error.message); }\n"
              "await store.close();\n")
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True,
                          env=SUBPROCESS_ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def by_cli(repo: Path) -> str:
    done = run_gitmem("memory", "write", "--user", input="likes tea", repo=repo, check=False)
    assert "Traceback" not in done.stderr
    return done.stderr.strip() if done.returncode else "ok"


def by_python(repo: Path, *, create: bool = True) -> str:
    try:
        with gitmem.open(repo, create=create) as mem:
            mem.memory.write("likes tea", mode="append")
    except EngineError as exc:
        return str(exc)
    return "ok"


FACES = (by_serve, by_mcp, by_kaboo, by_cli, by_python)


# -- a repository gitmem refused ----------------------------------------------------------


@pytest.mark.parametrize("branch", ["main", "master"])
def test_a_refused_repository_is_refused_by_every_face_on_every_start_and_nothing_is_written(tmp_path, branch):
    project = tmp_path / "project"
    git = code_repository(project, branch)
    before = every_file(project)
    with pytest.raises(EngineError) as refused:
        gitmem.open(project)
    reason = str(refused.value)
    assert "did not make" in reason and f"gitmem init --adopt {project}" in reason
    # Before, serve's refused start left its log, and every start after it (any face)
    # took the repository for gitmem's: one round shows it on master, two on main.
    for start in (1, 2) if branch == "main" else (1,):
        for face in FACES:
            said = face(project)
            assert reason in said, f"{face.__name__}, start {start}: {said}"
    assert every_file(project) == before  # no .git/gitmem/serve.log, nothing
    assert git("branch", "--list").split() == ["*", branch]  # no main beside master
    adopted = run_gitmem("init", "--adopt", str(project), check=False)
    if branch == "main":
        assert adopted.returncode == 0, adopted.stderr
        assert [face(project) for face in FACES] == ["ok"] * len(FACES)
        assert git("branch", "--list").split() == ["*", "main"]
        assert git("show", "HEAD:main.py") == "print('hello')\n"
    else:  # adopted only on main: said, and still nothing written
        assert "branch -m master main" in adopted.stderr
        assert reason in by_cli(project) and every_file(project) == before


def test_a_log_left_by_an_older_gitmem_does_not_make_a_repository_gitmems(tmp_path):
    project = tmp_path / "project"
    code_repository(project, "main")
    (project / ".git" / "gitmem").mkdir()  # what a refused `gitmem serve` of before left
    (project / ".git" / "gitmem" / "serve.log").write_text("ERROR not serving: ...\n")
    assert "did not make" in by_cli(project)
    assert "did not make" in by_serve(project)
    assert sorted(p.name for p in (project / ".git" / "gitmem").iterdir()) == ["serve.log"]


def test_adopt_leaves_the_mode_of_the_persons_own_files(tmp_path):
    project = tmp_path / "project"
    git = code_repository(project, "main")
    (project / ".gitattributes").write_text("*.py diff=python\n")
    git("add", "-A")
    git("commit", "-q", "-m", "attributes")
    for name in ("README.md", ".gitattributes", "main.py"):
        (project / name).chmod(0o644)
    run_gitmem("init", "--adopt", str(project))
    run_gitmem("memory", "write", "--user", input="likes tea", repo=project)
    assert {name: (project / name).stat().st_mode & 0o777 for name in ("README.md", ".gitattributes", "main.py")} \
        == {"README.md": 0o644, ".gitattributes": 0o644, "main.py": 0o644}
    assert (project / "memory" / "user.md").stat().st_mode & 0o777 == 0o600
    assert git("show", "HEAD:README.md") == "# my project\n"


# -- a repository only where asked -------------------------------------------------------


@pytest.fixture
def agents(tmp_path) -> Path:
    """``agents/agent-memory``: the gitmem repository a typo misses."""
    repo = tmp_path / "agents" / "agent-memory"
    run_gitmem("init", str(repo))
    return repo


def test_a_mistyped_path_is_one_error_naming_the_repository_meant(agents, tmp_path):
    typo = agents.parent / "agent-memroy"
    for face in (by_serve, by_mcp, by_kaboo, by_cli, lambda path: by_python(path, create=False)):
        said = face(typo)
        assert f"no gitmem repository at {typo} (did you mean {agents}?)" in said, said
        assert f"gitmem init {typo}" in said
    assert "--create" in by_serve(typo) and "create: true" in by_serve(typo)
    deeper = tmp_path / "agent" / "agent-memory"  # a typo in a folder above: nothing made there either
    assert f"no gitmem repository at {deeper}" in by_serve(deeper)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agents"]
    assert sorted(p.name for p in agents.parent.iterdir()) == ["agent-memory"]


def test_serve_and_the_kaboo_store_create_a_repository_when_asked(tmp_path):
    served, stored = tmp_path / "new" / "served", tmp_path / "new" / "stored"
    assert by_serve(served, "--create") == "ok" and (served / ".git").is_dir()
    assert by_kaboo(stored, create=True) == "ok" and (stored / ".git").is_dir()
    assert Git(stored)("log", "--format=%s").splitlines()[-1] == "init: gitmem repository"


def test_the_default_repository_is_made_on_first_use_by_serve(tmp_path):
    env = {**{k: v for k, v in SUBPROCESS_ENV.items() if k != "GITMEM_REPO"},
           "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-m", "gitmem", "serve"], input=json.dumps(WRITE_A_THREAD) + "\n",
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert "result" in json.loads(done.stdout.splitlines()[0]), done.stdout
    assert (tmp_path / "data" / "gitmem" / "threads").is_dir()


def test_no_repository_is_made_inside_a_gitmem_repository(agents):
    (agents / "threads").mkdir()
    (agents / "threads" / "notes.txt").write_text("mine\n")
    inside = f"is inside the gitmem repository {agents}: use {agents} itself"
    before = every_file(agents)
    for path in (agents / "threads", agents / "new"):
        for args in (("init", str(path)), ("init", "--adopt", str(path)),
                     ("memory", "read", "--user", "--repo", str(path))):
            done = run_gitmem(*args, check=False)
            assert done.returncode == 1 and inside in done.stderr, (args, done.stderr)
            assert "--adopt" not in done.stderr
        for said in (by_serve(path), by_serve(path, "--create"), by_python(path)):
            assert inside in said and "--adopt" not in said, said
    cloned = run_gitmem("clone", str(agents), str(agents / "new"), check=False)
    assert cloned.returncode == 1 and inside in cloned.stderr
    assert every_file(agents) == before
