"""The import rules of gitmem's layers (docs/architecture.md), read from the source with ``ast``.

Every import counts: at the top of a module, inside a function, under ``if
TYPE_CHECKING``, relative ones, and ``importlib.import_module("...")`` /
``__import__("...")`` with a literal name. The layers, lowest first: ``gitmem.errors``
(the errors' base and the one-line formatter: it imports nothing); the git engine
(``gitmem/git/``, the only importer of pygit2, importing no other gitmem module but
``gitmem.errors``); the records, stores, history, edits and search; finding and opening a
repository (``gitmem/opening/``); the facade; sync and upkeep; the faces
(``gitmem/faces/``, whose method tables get the stores they serve passed in) and the
bench; the CLI (``gitmem/cli/``), which no other module imports.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"
ROOT = "gitmem"  # the package root: `import gitmem`, or a name defined in gitmem/__init__.py
FACADE = ("gitmem.repository", ROOT)
# what the modules under each path may not import: the method tables are handed the stores they serve
TABLES = ("faces/rpc.py", "faces/nui/storage.py", "faces/nui/handlers.py", "faces/kaboo/threads.py", "faces/mcp/tools.py")
RULES = {table: ("gitmem.git", "gitmem.opening", *FACADE) for table in TABLES}
# the bench measures a raw pygit2 commit as the floor gitmem's own writes are compared with
PYGIT2_BASELINE = "bench/baselines.py"


def imported(source: str, module: str, package: Path = PACKAGE) -> set[str]:
    """The modules that the source of ``module`` (a dotted name in ``package``) imports.
    ``from gitmem import x`` counts as ``gitmem.x`` when x is a module, else as the root."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package upwards
                parts = module.split(".")[:-node.level]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                name = f"{base}.{alias.name}"
                folder = package.parent / Path(*name.split("."))
                is_module = folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file()
                found.add(name if is_module else base)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in ("import_module", "__import__"):
                found.add(node.args[0].value)
    return found


def breaks(module: str, forbidden: tuple[str, ...]) -> bool:
    return any(module == name or (name != ROOT and module.startswith(name + ".")) for name in forbidden)


def modules() -> dict[str, set[str]]:
    """``{path inside gitmem/: the modules it imports}`` for every Python file of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        found[path.relative_to(PACKAGE).as_posix()] = imported(path.read_text("utf-8"), module)
    return found


def test_the_finder_sees_imports_everywhere_in_a_module():
    source = '''
import gitmem, os, pygit2.enums
from typing import TYPE_CHECKING
from gitmem import __version__
from gitmem.records import strictjson
from .. import rpc
from ...stores import jsonl
if TYPE_CHECKING:
    from gitmem.cli import main
def later():
    from gitmem.repository import Gitmem
    import gitmem.git.engine as engine
    from pygit2 import Oid
class C:
    def m(self):
        importlib.import_module('gitmem.sync.exchange')
'''
    found = imported(source, "gitmem.faces.nui.storage")
    assert found >= {"gitmem", "os", "pygit2.enums", "pygit2", "typing", "gitmem.records.strictjson",
                     "gitmem.faces.rpc", "gitmem.stores.jsonl", "gitmem.cli", "gitmem.repository",
                     "gitmem.git.engine", "gitmem.sync.exchange"}
    assert sorted(name for name in found if breaks(name, RULES["faces/nui/storage.py"])) == [
        "gitmem", "gitmem.git.engine", "gitmem.repository"]
    assert not breaks("gitmem.records.strictjson", RULES["faces/rpc.py"])  # a submodule is not the root
    assert breaks("gitmem.git.snapshot", RULES["faces/mcp/tools.py"]) and breaks("gitmem.cli.serve", ("gitmem.cli",))


def test_only_the_git_package_imports_pygit2():
    found = modules()
    assert "pygit2" in found["git/engine.py"]  # the rule reads the real modules
    outside = sorted(path for path, names in found.items()
                     if any(breaks(name, ("pygit2",)) for name in names)
                     and not path.startswith("git/") and path != PYGIT2_BASELINE)
    assert outside == []


def test_only_the_mcp_face_and_gitmem_webs_mcp_import_the_mcp_sdk():
    found = modules()
    assert "mcp" in found["faces/mcp/tools.py"]  # the rule reads the real modules
    importers = sorted(path for path, names in found.items() if any(breaks(name, ("mcp",)) for name in names))
    assert importers == ["faces/mcp/stdio.py", "faces/mcp/tools.py", "faces/web/mcp_http.py"]


def test_only_gitmem_web_imports_the_web_extra():
    """Starlette, uvicorn, Jinja2 and markdown-it (``gitmem[web]``) load for ``gitmem web`` only."""
    web = ("starlette", "uvicorn", "jinja2", "markdown_it", "markupsafe")
    found = modules()
    assert "starlette.applications" in found["faces/web/app.py"]
    importers = {path for path, names in found.items() if any(breaks(name, web) for name in names)}
    assert importers and all(path.startswith("faces/web/") for path in importers)


@pytest.mark.parametrize("sdk, face", [("anthropic", "anthropic"), ("agents", "openai_agents"),
                                       ("langgraph", "langgraph")])
def test_only_its_face_imports_an_agent_sdk(sdk, face):
    """``gitmem --version`` and every other command load neither SDK: only the face and the
    public module that names it do."""
    importers = sorted(path for path, names in modules().items() if any(breaks(name, (sdk,)) for name in names))
    assert importers and all(path.startswith(f"faces/{face}/") for path in importers)
    users = sorted(path for path, names in modules().items()
                   if any(breaks(name, (f"gitmem.faces.{face}",)) for name in names)
                   and not path.startswith(f"faces/{face}/"))
    assert users == [f"{face}.py"]


def test_the_git_package_imports_no_other_gitmem_module_but_the_errors():
    wrong = {path: sorted(name for name in names if breaks(name, (ROOT,))
                          and not breaks(name, ("gitmem.git", "gitmem.errors")))
             for path, names in modules().items() if path.startswith("git/")}
    assert {path: names for path, names in wrong.items() if names} == {}


def test_only_the_cli_package_imports_the_cli():
    wrong = sorted(path for path, names in modules().items()
                   if not path.startswith("cli/") and path != "__main__.py"
                   and any(breaks(name, ("gitmem.cli",)) for name in names))
    assert wrong == []


@pytest.mark.parametrize("table", TABLES)
def test_a_method_table_imports_neither_the_engine_nor_the_facade(table):
    found = modules()
    assert table in found, f"no module gitmem/{table}"
    assert sorted(name for name in found[table] if breaks(name, RULES[table])) == []


def test_no_module_imports_one_that_imports_it_back():
    names = {"gitmem." + path.removesuffix(".py").replace("/", ".").removesuffix(".__init__"): found
             for path, found in modules().items()}

    def module_of(name: str) -> str:  # "gitmem.git.engine.GitEngine" -> "gitmem.git.engine"
        while name not in names and "." in name:
            name = name.rsplit(".", 1)[0]
        return name

    graph = {module: {module_of(name) for name in found if name == ROOT or name.startswith("gitmem.")} - {module}
             for module, found in names.items()}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError, naming the circle


# docs/architecture.md: the layers, lowest first (a package stands for all its modules)
LAYERS = [
    ("gitmem.errors",),
    ("gitmem.git",),
    ("gitmem.records",),
    ("gitmem.stores",),
    ("gitmem.history",),
    ("gitmem.edits",),
    ("gitmem.search",),
    ("gitmem.opening",),
    ("gitmem.repository", ROOT),
    ("gitmem.sync", "gitmem.upkeep"),
    ("gitmem.faces", "gitmem.anthropic", "gitmem.openai_agents", "gitmem.langgraph", "gitmem.bench"),
    ("gitmem.cli", "gitmem.__main__"),
]


def layer_of(module: str) -> int:
    for number, members in enumerate(LAYERS):
        if any(module == name or (name != ROOT and module.startswith(name + ".")) for name in members):
            return number
    raise AssertionError(f"{module} is in no layer of the table in docs/architecture.md")


def test_every_module_imports_only_its_own_layer_or_lower_ones():
    wrong = []
    for path, found in modules().items():
        module = "gitmem." + path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        module = ROOT if module == "gitmem.__init__" else module
        for name in found:
            if (name == ROOT or name.startswith("gitmem.")) and layer_of(name) > layer_of(module):
                wrong.append(f"{module} imports {name}")
    assert wrong == []
