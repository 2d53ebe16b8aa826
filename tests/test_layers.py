"""The import rules of gitmem's layers, read from the source with ``ast``.

Every import counts: at the top of a module, inside a function, under ``if
TYPE_CHECKING``, and ``importlib.import_module("...")`` / ``__import__("...")`` with a
literal name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gitmem

PACKAGE = Path(gitmem.__file__).parent
# The bench measures a raw pygit2 commit as the floor gitmem's own writes are compared with.
PYGIT2_ALLOWED = ("git", "bench")


def imported_modules(source: str) -> set[str]:
    """The absolute names of every module ``source`` imports, wherever the import is."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
            if name in ("import_module", "__import__"):
                found.add(node.args[0].value)
    return found


def modules() -> dict[str, set[str]]:
    """``{path inside gitmem/: modules it imports}`` for every Python file of the package."""
    return {file.relative_to(PACKAGE).as_posix(): imported_modules(file.read_text())
            for file in sorted(PACKAGE.rglob("*.py"))}


def imports_pygit2(names: set[str]) -> bool:
    return any(name == "pygit2" or name.startswith("pygit2.") for name in names)


def test_the_finder_sees_imports_everywhere_in_a_module():
    source = (
        "import os, pygit2.enums\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from gitmem.cli import main\n"
        "def later():\n    import gitmem.git.engine as e\n    from pygit2 import Oid\n"
        "class C:\n    def m(self):\n        importlib.import_module('gitmem.sync')\n"
        "from . import sibling\n"
    )
    assert imported_modules(source) == {"os", "pygit2.enums", "typing", "gitmem.cli",
                                        "gitmem.git.engine", "pygit2", "gitmem.sync"}


def test_only_the_git_package_imports_pygit2():
    found = modules()
    assert imports_pygit2(found["git/engine.py"])  # the rule reads the real modules
    outside = sorted(path for path, names in found.items()
                     if imports_pygit2(names) and path.split("/")[0] not in PYGIT2_ALLOWED)
    assert outside == []
