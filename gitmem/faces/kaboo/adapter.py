"""The TypeScript ``GitMemThreadStore``: the npm package ``gitmem-kaboo`` in
``templates/kaboo/`` (``gitmem kaboo path``), or copied into a project (``gitmem kaboo init DIR``).

The adapter is one CommonJS module, an ES module re-exporting it, and their type
declarations; it needs no build step and no npm dependency, and talks to ``gitmem serve``
over a child's pipes.

    npm install "$(gitmem kaboo path)"   # import { GitMemThreadStore } from "gitmem-kaboo";
    gitmem kaboo init src/               # import { GitMemThreadStore } from "./gitmem-thread-store.mjs";
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gitmem.errors import GitmemError

ADAPTER_FILES = ("gitmem-thread-store.cjs", "gitmem-thread-store.mjs", "gitmem-thread-store.d.cts",
                 "gitmem-thread-store.d.mts")


class AdapterExists(GitmemError):
    """A file of the adapter is already there with other content."""


def package_folder() -> Path:
    """The folder of the npm package ``gitmem-kaboo`` that this gitmem ships."""
    return Path(str(resources.files("gitmem.templates") / "kaboo"))


def init_adapter(directory: Path, *, force: bool = False) -> list[Path]:
    """Write the adapter's files into ``directory`` (created if missing); returns their paths.

    Refuses, writing nothing, when one of them exists with other content, unless ``force``.
    """
    source = package_folder()
    files = {directory / name: (source / name).read_bytes() for name in ADAPTER_FILES}
    for path, data in files.items():
        if not force and path.exists() and path.read_bytes() != data:
            raise AdapterExists(f"{path} exists and differs from gitmem's adapter; "
                                "use --force to replace it")
    directory.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        path.write_bytes(data)
    return list(files)
