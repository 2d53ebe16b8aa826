"""``gitmem kaboo init DIR``: copy the TypeScript ``GitMemThreadStore`` into a kaboo project.

The adapter is one ES module and its type declarations (``templates/kaboo/``); it needs
no build step and no npm dependency, and talks to ``gitmem serve`` over a child's pipes.

    gitmem kaboo init src/
    # import { GitMemThreadStore } from "./gitmem-thread-store.mjs";
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

ADAPTER_FILES = ("gitmem-thread-store.mjs", "gitmem-thread-store.d.mts")


class AdapterExists(Exception):
    """A file of the adapter is already there with other content."""


def init_adapter(directory: Path, *, force: bool = False) -> list[Path]:
    """Write the adapter's files into ``directory`` (created if missing); returns their paths.

    Refuses, writing nothing, when one of them exists with other content, unless ``force``.
    """
    source = resources.files("gitmem.templates") / "kaboo"
    files = {directory / name: (source / name).read_bytes() for name in ADAPTER_FILES}
    for path, data in files.items():
        if not force and path.exists() and path.read_bytes() != data:
            raise AdapterExists(f"{path} exists and differs from gitmem's adapter; "
                                "use --force to replace it")
    directory.mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        path.write_bytes(data)
    return list(files)


def add_commands(commands, command) -> None:
    """Add ``gitmem kaboo init`` to the CLI."""
    kaboo = commands.add_parser("kaboo", help="use gitmem as kaboo's thread store")
    kaboo_commands = kaboo.add_subparsers(metavar="ACTION", required=True)
    init = kaboo_commands.add_parser(
        "init", help="copy the TypeScript GitMemThreadStore into a project folder",
        description="copy the TypeScript GitMemThreadStore into a project folder")
    init.add_argument("dir", metavar="DIR", help="where to put gitmem-thread-store.mjs and .d.mts")
    init.add_argument("--force", action="store_true", help="replace files that differ")
    init.set_defaults(run=cmd_init)


def cmd_init(args) -> None:
    paths = init_adapter(Path(args.dir), force=args.force)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    print(f'use it: import {{ GitMemThreadStore }} from "./{ADAPTER_FILES[0]}";\n'
          '        createKabooRunner(new GitMemThreadStore({ repo: "/path/to/repo" }))')
