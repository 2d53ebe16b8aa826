"""Cold start (issue 17): a command imports what it uses when it runs, so `gitmem --version`
and `gitmem memory read` do not load the git engine, YAML, the watcher, asyncio, msgspec or
the bench. Checked on sys.modules at the exit of the real command."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import gitmem
from conftest import SUBPROCESS_ENV, run_gitmem

PACKAGE = Path(gitmem.__file__).resolve().parent
HEAVY = ("pygit2", "ruamel.yaml", "watchfiles", "asyncio", "msgspec", "gitmem.bench",
         "mcp", "anyio", "pydantic", "gitmem.faces.mcp.tools")

# `python -m gitmem ARGS`, writing the names in sys.modules at exit to the file named first
# (-X importtime would miss what importlib.import_module loads).
RUN_RECORDING_MODULES = """\
import atexit, runpy, sys
out, sys.argv = sys.argv[1], ["gitmem", *sys.argv[2:]]

@atexit.register
def record():
    with open(out, "w", encoding="utf-8") as file:
        file.write("\\n".join(sys.modules))

runpy.run_module("gitmem", run_name="__main__", alter_sys=True)
"""


def imported(tmp_path: Path, *args: str) -> set[str]:
    """The modules ``python -m gitmem ARGS`` had imported when it exited."""
    out = tmp_path / f"modules-{len(list(tmp_path.iterdir()))}"
    done = subprocess.run([sys.executable, "-c", RUN_RECORDING_MODULES, str(out), *args],
                          capture_output=True, text=True, timeout=60,
                          env={**SUBPROCESS_ENV, "PYTHONPATH": str(PACKAGE.parent)})
    assert done.returncode == 0, done.stderr[-2000:]
    return set(out.read_text(encoding="utf-8").split("\n"))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cold") / "repo"
    run_gitmem("init", str(path))
    run_gitmem("memory", "write", "--user", repo=path, input="prefers tea")
    return path


@pytest.fixture(scope="module")
def loaded(repo, tmp_path_factory) -> dict[str, set[str]]:
    """What each command imported, run once each."""
    folder = tmp_path_factory.mktemp("modules")
    return {"--version": imported(folder, "--version"),
            "memory read --user": imported(folder, "memory", "read", "--user", "--repo", str(repo))}


@pytest.fixture(scope="module")
def opened(repo, tmp_path_factory) -> dict[str, set[str]]:
    """What each command that opens the repository imported, run once each."""
    folder = tmp_path_factory.mktemp("opened")
    imported(folder, "log", "user", "--repo", str(repo))  # the first builds the record index (runs git)
    return {"log": imported(folder, "log", "user", "--repo", str(repo)),
            "show": imported(folder, "show", "user", "--at", "HEAD", "--repo", str(repo)),
            "memory read --user": imported(folder, "memory", "read", "--user", "--repo", str(repo)),
            "blame": imported(folder, "blame", "user", "--repo", str(repo)),
            "serve": served_first(folder, repo)}


def test_the_import_list_is_read(loaded):
    # what the checks below look for is reported at all: a memory read needs the engine
    assert {"pygit2", "gitmem.git.engine", "gitmem.cli.records"} <= loaded["memory read --user"]
    assert {"gitmem", "gitmem.cli", "argparse"} <= loaded["--version"]


@pytest.mark.parametrize("command, module", [
    *(("--version", module) for module in HEAVY),
    *(("memory read --user", module) for module in HEAVY if module != "pygit2"),
])
def test_a_command_does_not_import_what_it_does_not_use(loaded, command, module):
    assert module not in loaded[command]


def test_the_package_root_loads_the_repository_on_first_use():
    source = ("import sys, gitmem\n"
              "print('pygit2' in sys.modules, gitmem.__version__)\n"
              "print(gitmem.open == gitmem.Gitmem.open, 'pygit2' in sys.modules)\n"
              "print(gitmem.default_repo_path is gitmem.repository.default_repo_path)\n"
              "print(sorted(set(gitmem.__all__) - set(dir(gitmem))))\n")
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True,
                          env={**SUBPROCESS_ENV, "PYTHONPATH": str(PACKAGE.parent)}, timeout=60)
    assert done.stdout.splitlines() == [f"False {gitmem.__version__}", "True True", "True", "[]"], \
        done.stderr
    with pytest.raises(AttributeError, match="no_such_name"):
        gitmem.no_such_name  # noqa: B018


def test_gitmem_mcp_answers_initialize_before_loading_the_git_engine(repo, tmp_path):
    pytest.importorskip("mcp")
    out = tmp_path / "modules-mcp"
    initialize = ('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
                  '"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')
    done = subprocess.run([sys.executable, "-c", RUN_RECORDING_MODULES, str(out), "mcp", "--repo",
                           str(repo)], input=initialize, capture_output=True, text=True, timeout=60,
                          env={**SUBPROCESS_ENV, "PYTHONPATH": str(PACKAGE.parent)})
    assert done.returncode == 0 and '"serverInfo":{"name":"gitmem"' in done.stdout, done.stderr
    loaded = set(out.read_text(encoding="utf-8").split("\n"))
    assert {"mcp", "gitmem.faces.mcp.tools"} <= loaded  # the SDK: the start's one big cost
    assert not {"pygit2", "gitmem.git.engine", "gitmem.repository"} & loaded  # opened at first use
    assert not dataclasses_made(loaded)


def served_first(tmp_path: Path, repo: Path, env: dict[str, str] | None = None) -> set[str]:
    """The modules ``gitmem serve`` had imported when it exited after answering one
    ``threads.list`` (its input ends right after: nothing runs in the background)."""
    out = tmp_path / f"modules-{len(list(tmp_path.iterdir()))}"
    request = b'{"jsonrpc": "2.0", "id": 1, "method": "threads.list"}\n'
    done = subprocess.run([sys.executable, "-c", RUN_RECORDING_MODULES, str(out), "serve", "--repo", str(repo)],
                          input=request, capture_output=True, timeout=60,
                          env={**SUBPROCESS_ENV, "PYTHONPATH": str(PACKAGE.parent), **(env or {})})
    assert done.returncode == 0 and b'"result":{"threads":[]}' in done.stdout, done.stderr[-2000:]
    return set(out.read_text(encoding="utf-8").split("\n"))


def test_serve_answers_kaboo_without_yaml_or_the_watcher(repo, tmp_path):
    loaded = served_first(tmp_path, repo)
    assert {"pygit2", "gitmem.faces.kaboo.threads", "gitmem.git.engine"} <= loaded
    assert not loaded & {"ruamel.yaml", "watchfiles", "gitmem.edits.watch", "gitmem.sync.exchange", "asyncio", "gitmem.bench",
                          "importlib.resources"}  # the templates of a new repository
    # a handler list, as nui has it, is read (and checked) before the first answer
    extension = tmp_path / "extension"
    extension.mkdir()
    (extension / "storage-handlers.yaml").write_text("storageHandlers:\n  - {id: me, kind: userMemory}\n")
    assert "ruamel.yaml" in served_first(tmp_path, repo, {"NUI_EXTENSION_DIR": str(extension)})


# Issue 39: each class dataclasses makes costs ~0.7 ms (it compiles its methods with exec);
# the records on the path of a command are namedtuples or slotted classes. (dataclasses
# itself is loaded all the same: pygit2.index imports it.)
def dataclasses_made(modules: set[str]) -> set[str]:
    """The dataclasses that gitmem's modules among ``modules`` make."""
    return {f"{name}.{cls.__name__}" for name in modules if name.startswith("gitmem")
            for cls in vars(importlib.import_module(name)).values()
            if isinstance(cls, type) and cls.__module__ == name and dataclasses.is_dataclass(cls)}


@pytest.mark.parametrize("command", ["log", "show", "memory read --user", "blame", "serve"])
def test_a_command_that_opens_the_repository_makes_no_dataclass(opened, command):
    assert "gitmem.git.engine" in opened[command]  # the repository was opened
    assert not dataclasses_made(opened[command])


@pytest.mark.parametrize("command", ["log", "show", "memory read --user", "serve"])
def test_a_command_that_opens_the_repository_leaves_what_only_some_need(opened, command):
    # tempfile: a git run's stderr; difflib: a merge; ctypes: a work-tree write (serve's own
    # start loads it, for its parent-death signal)
    unused = {"tempfile", "difflib"} if command == "serve" else {"tempfile", "difflib", "ctypes"}
    assert not unused & opened[command]
