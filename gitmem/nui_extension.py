"""``gitmem nui``: package gitmem as a nui storage extension and edit its handler list.

    gitmem nui install --dir ./gitmem --repo ~/gitmem --agent-types claude-code,codex
    nui extension add ./gitmem
    gitmem nui handlers add notes agentMemory --agent-types pi --dir ./gitmem
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gitmem.protocol.handlers import (
    DEFAULT_FILE, add_handler, load_handlers, remove_handler)
from gitmem.repository import Gitmem, default_repo_path, template_files

DEFAULT_AGENT_TYPES = ("claude-code", "codex", "pi", "opencode")
KINDS = ("sessionHistory", "agentMemory", "userMemory")


def serve_command(repo: Path, python: str = sys.executable) -> list[str]:
    """How nui starts ``gitmem serve`` on ``repo``: the ``gitmem`` console script beside
    ``python``, else ``python -P -m gitmem`` (``-I`` before 3.11), so that a ``gitmem/``
    folder in the current directory (the extension folder itself) cannot shadow the
    package. Absolute paths: nui runs it without a shell, from the extension folder."""
    interpreter = Path(python).absolute()
    script = interpreter.parent / "gitmem"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), "serve", "--repo", str(repo)]
    isolate = "-P" if sys.version_info >= (3, 11) else "-I"
    return [str(interpreter), isolate, "-m", "gitmem", "serve", "--repo", str(repo)]


def install(directory: Path, repo: Path, agent_types: list[str], *,
            python: str = sys.executable, force: bool = False) -> Path:
    """Render ``templates/nui-extension/`` into ``directory`` for ``repo``; returns the folder.

    An existing ``storage-handlers.yaml`` is kept (handlers added since, agent types
    chosen) unless ``force``; ``extension.yaml`` is always written again.
    """
    if not agent_types:  # checked before writing anything: a refused install leaves no files
        raise ValueError("at least one agent type is needed (nui requires agentTypes for "
                         "sessionHistory and agentMemory handlers)")
    repo = repo.expanduser().resolve()
    command = serve_command(repo, python)
    values = {"{{command}}": json.dumps(command), "{{agent_types}}": json.dumps(agent_types)}
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in template_files("nui-extension").items():
        if name == DEFAULT_FILE and (directory / name).exists() and not force:
            continue
        text = data.decode("utf-8")
        for key, value in values.items():
            text = text.replace(key, value)
        (directory / name).write_text(text, encoding="utf-8")
    load_handlers(directory / DEFAULT_FILE)  # the rendered list must be one nui accepts
    Gitmem.open(repo, create=True).close()
    return directory


def add_commands(commands, command) -> None:
    """Add ``gitmem nui install`` and ``gitmem nui handlers list|add|remove`` to the CLI."""
    nui = commands.add_parser("nui", help="use gitmem as nui's storage extension")
    nui_commands = nui.add_subparsers(metavar="ACTION", required=True)
    install_cmd = command(nui_commands, "install", "write a nui extension folder that runs "
                          "gitmem serve on the repository", cmd_install)
    install_cmd.add_argument("--dir", default="gitmem", help="the folder to write (default: ./gitmem)")
    install_cmd.add_argument("--agent-types", default=",".join(DEFAULT_AGENT_TYPES),
                             help="comma-separated nui agent types whose sessions and memory "
                                  f"gitmem keeps (default: {','.join(DEFAULT_AGENT_TYPES)})")
    install_cmd.add_argument("--force", action="store_true",
                             help="also write storage-handlers.yaml again (dropping handlers "
                                  "added since)")

    handlers = nui_commands.add_parser("handlers", help="list or edit storage-handlers.yaml")
    handler_commands = handlers.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("list", cmd_handlers_list, "print the handlers"),
                             ("add", cmd_handlers_add, "add a handler"),
                             ("remove", cmd_handlers_remove, "remove the handlers with an id")):
        sub = handler_commands.add_parser(name, help=help_, description=help_)
        sub.add_argument("--dir", default="gitmem", help="the extension folder (default: ./gitmem)")
        sub.set_defaults(run=run)
        if name in ("add", "remove"):
            sub.add_argument("id", metavar="ID")
        if name == "add":
            sub.add_argument("kind", choices=KINDS)
            sub.add_argument("--agent-types", default="",
                             help="comma-separated agent types (not for userMemory)")


def cmd_install(args) -> None:
    agent_types = _split(args.agent_types)
    kept = (Path(args.dir) / DEFAULT_FILE).exists() and not args.force
    folder = install(Path(args.dir), Path(args.repo) if args.repo else default_repo_path(),
                     agent_types, force=args.force)
    if kept:
        print(f"kept {folder / DEFAULT_FILE} as it is (--force writes it again)")
    print(f"nui extension written to {folder.resolve()}; install it with: "
          f"nui extension add {folder.resolve()}")


def cmd_handlers_list(args) -> None:
    for handler in load_handlers(Path(args.dir) / DEFAULT_FILE).handlers:
        print(f"{handler.id}\t{handler.kind}\t{','.join(handler.agent_types)}")


def cmd_handlers_add(args) -> None:
    add_handler(Path(args.dir) / DEFAULT_FILE, args.id, args.kind, _split(args.agent_types))


def cmd_handlers_remove(args) -> None:
    remove_handler(Path(args.dir) / DEFAULT_FILE, args.id)


def _split(csv: str) -> list[str]:
    return [part.strip() for part in csv.split(",") if part.strip()]
