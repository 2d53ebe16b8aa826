"""The layering of the stores and the protocol, checked on the source: every import
statement counts, those inside functions included.

- stores (gitmem/stores/) import nothing from the protocol, the edges or the facade;
- protocol (gitmem/protocol/) imports nothing from the git engine or the facade: whoever
  builds a method table hands it the stores.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gitmem"
ROOT = "gitmem"  # the package root: `import gitmem`, or a name defined in gitmem/__init__.py
EDGES = ("gitmem.serve", "gitmem.watch", "gitmem.sync", "gitmem.cli", "gitmem.nui_extension",
         "gitmem.nui_import", "gitmem.kaboo_adapter")
FACADE = ("gitmem.repository", ROOT)
RULES = {
    "stores": ("gitmem.protocol", *EDGES, *FACADE),
    "protocol": ("gitmem.engine", "gitmem.git", *FACADE),
}


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
    return found


def breaks(module: str, forbidden: tuple[str, ...]) -> bool:
    return any(module == name or (name != ROOT and module.startswith(name + ".")) for name in forbidden)


def layer_files(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", RULES)
def test_a_layer_imports_no_module_above_it(layer):
    files = layer_files(layer)
    assert files, f"no modules found in gitmem/{layer}/"
    wrong = {}
    for path in files:
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        bad = sorted(name for name in imported(path.read_text("utf-8"), module)
                     if breaks(name, RULES[layer]))
        if bad:
            wrong[str(path.relative_to(PACKAGE.parent))] = bad
    assert wrong == {}


def test_every_kind_of_import_is_seen():
    source = '''
import gitmem
from gitmem import __version__, strictjson
from . import rpc
from ..stores import jsonl

def later():
    from gitmem.repository import Gitmem
    import gitmem.engine as engine
'''
    found = imported(source, "gitmem.protocol.nui")
    assert found >= {"gitmem", "gitmem.strictjson", "gitmem.protocol.rpc", "gitmem.stores.jsonl",
                     "gitmem.repository", "gitmem.engine"}
    assert sorted(name for name in found if breaks(name, RULES["protocol"])) == [
        "gitmem", "gitmem.engine", "gitmem.repository"]
    assert not breaks("gitmem.strictjson", RULES["protocol"])  # a submodule is not the root
    assert breaks("gitmem.git.snapshot", RULES["protocol"]) and breaks("gitmem.cli.serve", RULES["stores"])
