"""What ``pip install .`` (not only an editable install) puts in place: every package."""

from __future__ import annotations

from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_of_gitmem_is_listed_for_installation():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts)
             for init in (ROOT / "gitmem").rglob("__init__.py")}
    assert found - listed == set()


def test_the_wheel_says_the_package_is_typed():
    """PEP 561's marker, in the package data: a user's type checker reads gitmem's hints."""
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["gitmem"] and (ROOT / "gitmem" / "py.typed").is_file()
