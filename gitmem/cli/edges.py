"""Commands for the programs around gitmem: ``serve`` (nui, the kaboo adapter), ``nui``,
``kaboo``, ``import``/``export nui``, ``watch`` and ``bench``."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

from gitmem.cli.base import CliError, UsageError, open_repo
from gitmem.cli.names import printable
from gitmem.cli.parser import command, positive_seconds, seconds, takes_repo, whole_number


def add_import(importing) -> None:
    from gitmem.faces.nui.importer import ENV_DATA_DIR
    sub = command(importing.add_subparsers(metavar="SOURCE", required=True), "nui",
                  "import nui's built-in sessions, user memory and agent memory", cmd_import_nui)
    sub.add_argument("--data-dir", metavar="DIR",
                     help=f"nui's data folder (default: ${ENV_DATA_DIR}, else ~/.nui)")
    sub.add_argument("--dry-run", action="store_true", help="list what would change, change nothing")


def add_export(exporting) -> None:
    sub = command(exporting.add_subparsers(metavar="FORMAT", required=True), "nui",
                  "write sessions and memory in nui's built-in formats to DIR", cmd_export_nui)
    sub.add_argument("dir", metavar="DIR", help="where (data.json, memory/user.md, memory/agents/)")
    sub.add_argument("--force", action="store_true",
                     help="replace files export did not write, keeping each beside the new one "
                          "as NAME.before-export")


def add_serve(serve) -> None:
    from gitmem.git.base import DURABILITIES
    from gitmem.faces import rpc
    from gitmem.faces.nui.storage import LATE_WINDOW
    from gitmem.faces.serve import LATE_WINDOW_ENV, LOG_NAME
    takes_repo(serve, cmd_serve)
    serve.add_argument("--create", action="store_true",
                       help="create the repository if it is missing (without it, only the default "
                            "one is created: a mistyped --repo is an error)")
    serve.add_argument("--handlers", metavar="FILE",
                       help="storage-handlers.yaml (default: the one in $NUI_EXTENSION_DIR, or "
                            "$LOOP_EXTENSION_DIR, else accept every handler id)")
    serve.add_argument("--log-file", metavar="FILE",
                       help=f"where to log (default: .git/gitmem/{LOG_NAME} in the repository)")
    serve.add_argument("--log-level", default="INFO",
                       choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    serve.add_argument("--durability", choices=DURABILITIES,
                       help="fsync: every answered write is on disk, safe from power loss "
                            "(slower); fast: safe from crashes of gitmem itself (default: "
                            "$GITMEM_DURABILITY, else fast)")
    serve.add_argument("--max-response", type=whole_number, default=rpc.MAX_RESPONSE, metavar="BYTES",
                       help="longest answer line to write; longer ones become error -32000 "
                            "(default: nui's reader limit, 4 MiB; 0: no limit, for the kaboo "
                            "adapter, which reads lines of any length)")
    serve.add_argument("--late-window", type=seconds, metavar="SECONDS",
                       help="how long after a write an older write of the same session or "
                            "memory may still arrive (nui sends writes from goroutines) and is "
                            f"not taken over it; 0: off (default: ${LATE_WINDOW_ENV}, else "
                            f"{LATE_WINDOW:g})")
    serve.add_argument("--no-watch", action="store_true",
                       help="do not commit hand edits as they are saved (a read or write of "
                            "a record still commits a saved edit of it first)")
    serve.add_argument("--sync-interval", type=positive_seconds, metavar="SECONDS",
                       help="sync with the remote in the background this often")
    serve.add_argument("--sync-remote", metavar="REMOTE",
                       help="the remote for background syncs (default: as `gitmem sync`)")


def add_nui(nui) -> None:
    from gitmem.faces.nui.extension import DEFAULT_AGENT_TYPES, KINDS
    nui_commands = nui.add_subparsers(metavar="ACTION", required=True)
    install_cmd = command(nui_commands, "install", "write a nui extension folder that runs "
                          "gitmem serve on the repository", cmd_nui_install)
    install_cmd.add_argument("--dir", default="gitmem", help="the folder to write (default: ./gitmem)")
    install_cmd.add_argument("--agent-types", default=",".join(DEFAULT_AGENT_TYPES),
                             help="comma-separated nui agent types whose sessions and memory "
                                  f"gitmem keeps (default: {','.join(DEFAULT_AGENT_TYPES)})")
    install_cmd.add_argument("--force", action="store_true",
                             help="also write storage-handlers.yaml again (dropping handlers "
                                  "added since)")
    install_cmd.add_argument("--mcp", action="store_true",
                             help="also declare `gitmem mcp` in nui's catalog of MCP servers, so "
                                  "nui's agents get the memory tools (ref: ext:gitmem/gitmem)")

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


def add_kaboo(kaboo) -> None:
    kaboo_commands = kaboo.add_subparsers(metavar="ACTION", required=True)
    init = kaboo_commands.add_parser(
        "init", help="copy the TypeScript GitMemThreadStore into a project folder",
        description="copy the TypeScript GitMemThreadStore into a project folder")
    init.add_argument("dir", metavar="DIR", help="where to put the adapter's four files (.cjs, .mjs, .d.cts, .d.mts)")
    init.add_argument("--force", action="store_true", help="replace files that differ")
    init.set_defaults(run=cmd_kaboo_init)
    where = kaboo_commands.add_parser(
        "path", help="print the folder of the npm package gitmem-kaboo, for npm install",
        description="print the folder of the npm package gitmem-kaboo, for npm install")
    where.set_defaults(run=cmd_kaboo_path)


def add_mcp(mcp) -> None:
    from gitmem.faces.logfile import SERVE_LOG
    from gitmem.faces.mcp.config import CLIENTS
    takes_repo(mcp, cmd_mcp)
    mcp.add_argument("--log-file", metavar="FILE",
                     help=f"where to log (default: .git/gitmem/{SERVE_LOG} in the repository, "
                          "as gitmem serve)")
    mcp.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    actions = mcp.add_subparsers(metavar="ACTION")  # none: serve
    config = command(actions, "config", "print the entry declaring `gitmem mcp` in an MCP "
                     "client's configuration (--write: merge it into the client's file)",
                     cmd_mcp_config)
    config.add_argument("--client", choices=CLIENTS, default="claude-code",
                        help="the client (default: claude-code)")
    config.add_argument("--write", action="store_true",
                        help="merge the entry into the client's configuration file, keeping "
                             "its other servers (and create the repository if missing)")
    config.add_argument("--file", metavar="FILE",
                        help="the configuration file to merge into (default: the client's own)")


def add_watch(watch) -> None:
    from gitmem.edits.watch import DEBOUNCE, MAX_DELAY
    takes_repo(watch, cmd_watch)
    watch.add_argument("--debounce", type=seconds, default=DEBOUNCE, metavar="SECONDS",
                       help=f"quiet time before edits are committed (default {DEBOUNCE:g})")
    watch.add_argument("--max-delay", type=seconds, default=MAX_DELAY, metavar="SECONDS",
                       help="commit at the latest this long after the first change "
                            f"(default {MAX_DELAY:g})")


def add_bench(bench) -> None:
    bench.set_defaults(run=cmd_bench)
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    bench.add_argument("--only", metavar="PATTERN",
                       help="run only the scenarios whose name matches this regular expression")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")


def cmd_import_nui(args) -> None:
    from gitmem.faces.nui.importer import data_folder, import_nui, plan_import
    from gitmem.opening.location import locate_repo
    from gitmem.repository import Gitmem
    data_folder(args.data_dir)  # nothing to import: said before a repository is opened or made
    if args.dry_run:  # writes nothing anywhere: no repository is created, no edit committed
        folder = locate_repo(args.repo)[0]
        if not (folder / ".git").exists():
            plan = plan_import(None, args.data_dir)
        else:
            with Gitmem.open(folder, create=False, hand_edits=False) as mem:
                plan = plan_import(mem, args.data_dir)
    else:
        with open_repo(args, create=True) as mem:
            plan = import_nui(mem, args.data_dir, progress=progress_bar("import"))
    verb = "would " if args.dry_run else ""
    for action in plan.changes:
        print(f"{verb}{action}")
    for note in plan.notes:
        print(f"note: {note}")
    print(f"{'dry run: would import' if args.dry_run else 'imported'} {plan.summary()}")


def cmd_export_nui(args) -> None:
    from gitmem.faces.nui.importer import export_nui
    from gitmem.records.counts import counted
    with open_repo(args) as mem:
        report = export_nui(mem, args.dir, progress=progress_bar("export"), force=args.force)
    for note in report.notes:
        print(f"note: {note}")
    print(f"exported {counted(report.sessions, 'session')}, "
          f"{counted(report.agent_memories, 'agent memory', 'agent memories')}"
          f"{' and user memory' if report.user_memory else ''} to {args.dir}")


def progress_bar(label: str, stream=None):
    """A progress callback (``(done, total)``) drawing a bar on ``stream`` (stderr), or
    None when it is not a terminal."""
    stream = stream or sys.stderr
    if not stream.isatty():
        return None
    last = [0.0]

    def draw(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < 0.1:
            return
        last[0] = now
        filled = int(30 * done / total) if total else 30
        stream.write(f"\r{label} [{'#' * filled}{' ' * (30 - filled)}] {done}/{total}")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return draw


def cmd_serve(args) -> int:
    from gitmem.faces.serve import run
    from gitmem.opening.location import THE_DEFAULT, locate_repo
    if args.late_window is None:
        args.late_window = _late_window_from_env()
    repo, chosen_by = locate_repo(args.repo)
    return run(repo, create=args.create or chosen_by == THE_DEFAULT,
               handlers_path=args.handlers, log_file=args.log_file,
               log_level=args.log_level, durability=args.durability,
               max_response=args.max_response, late_window=args.late_window,
               watch_edits=not args.no_watch, sync_interval=args.sync_interval,
               sync_remote=args.sync_remote)


def _late_window_from_env() -> float:
    """``$GITMEM_LATE_WINDOW`` as ``--late-window`` takes it, else the default; a value it
    would refuse is a usage error naming the variable (the user passed no option)."""
    import argparse

    from gitmem.faces.nui.storage import LATE_WINDOW
    from gitmem.faces.serve import LATE_WINDOW_ENV
    text = os.environ.get(LATE_WINDOW_ENV)
    if not text:
        return LATE_WINDOW
    try:
        return seconds(text)
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"${LATE_WINDOW_ENV}: {exc} (unset it, or pass --late-window)") from None


def cmd_nui_install(args) -> None:
    from gitmem.faces.nui.extension import install
    from gitmem.faces.nui.handlers import DEFAULT_FILE
    from gitmem.git.facts import inspect_repository
    from gitmem.opening.location import locate_repo
    agent_types = _split(args.agent_types)
    repo = locate_repo(args.repo)[0]
    new = inspect_repository(repo) is None
    kept = (Path(args.dir) / DEFAULT_FILE).exists() and not args.force
    folder = install(Path(args.dir), repo, agent_types, force=args.force, mcp=args.mcp)
    if new:  # said, not done behind the person's back: a typo shows here
        print(f"made a new gitmem repository at {repo.expanduser().resolve()}")
    if kept:
        print(f"kept {folder / DEFAULT_FILE} as it is (--force writes it again)")
    print(f"nui extension written to {folder.resolve()}; install it with: "
          f"nui extension add {folder.resolve()}")


def cmd_handlers_list(args) -> None:
    from gitmem.faces.nui.handlers import DEFAULT_FILE, load_handlers
    for handler in load_handlers(Path(args.dir) / DEFAULT_FILE).handlers or ():  # a file's: never None
        print(f"{printable(handler.id)}\t{handler.kind}\t"
              f"{printable(','.join(handler.agent_types))}")


def cmd_handlers_add(args) -> None:
    from gitmem.faces.nui.handlers import DEFAULT_FILE, add_handler
    path = Path(args.dir) / DEFAULT_FILE
    handler = add_handler(path, args.id, args.kind, _split(args.agent_types))
    types = f", {printable(','.join(handler.agent_types))}" if handler.agent_types else ""
    print(f"added handler {printable(handler.id)} ({handler.kind}{types}) to {path}; "
          "nui reads it when the extension starts")


def cmd_handlers_remove(args) -> None:
    from gitmem.faces.nui.handlers import DEFAULT_FILE, remove_handler
    path = Path(args.dir) / DEFAULT_FILE
    count = remove_handler(path, args.id)
    print(f"removed handler {printable(args.id)}{f' ({count} entries)' if count > 1 else ''} "
          f"from {path}")


def _split(csv: str) -> list[str]:
    return [part.strip() for part in csv.split(",") if part.strip()]


def cmd_kaboo_init(args) -> None:
    from gitmem.faces.kaboo.adapter import ADAPTER_FILES, init_adapter
    paths = init_adapter(Path(args.dir), force=args.force)
    print(f"wrote {', '.join(str(p) for p in paths)}")
    print(f'use it: import {{ GitMemThreadStore }} from "./{ADAPTER_FILES[1]}";\n'
          '        createKabooRunner(new GitMemThreadStore({ repo: "/path/to/repo" }))')


def cmd_kaboo_path(args) -> None:
    from gitmem.faces.kaboo.adapter import package_folder
    print(package_folder())


def cmd_mcp(args) -> int:
    try:
        from gitmem.faces.mcp.server import run
    except ImportError as exc:
        raise CliError(f"gitmem mcp needs the MCP SDK ({exc}): pip install 'gitmem[mcp]'") from None
    return run(args.repo, log_file=args.log_file, log_level=args.log_level)


def cmd_mcp_config(args) -> None:
    from gitmem.faces.mcp import config as mcp_config
    from gitmem.opening.location import locate_repo
    repo = locate_repo(args.repo)[0]
    if not args.write:
        sys.stdout.write(mcp_config.entry_text(args.client, repo))
        return
    with open_repo(args, create=True):
        pass
    path = mcp_config.write(args.client, repo, path=Path(args.file) if args.file else None)
    print(f"declared gitmem ({repo.resolve()}) in {path}; restart {args.client} to use it")


def cmd_watch(args) -> int:
    from gitmem.edits.watch import Watcher
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, force=True,
                        format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    # Ctrl-C and SIGTERM only ask to stop: a KeyboardInterrupt landing inside a commit
    # would end the process with 130 and the pending edits uncommitted.
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    with open_repo(args) as mem:
        watcher = Watcher(mem, debounce=args.debounce, max_delay=args.max_delay).start()
        # Said once watching has begun: an edit saved after this line is seen.
        print(f"watching {mem.engine.workdir} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        watcher.watch_until(stopping)
    return 0


def cmd_bench(args) -> int:
    from gitmem.bench.core import run
    rows = run(quick=args.quick, json_path=args.json, only=args.only)
    return 1 if any(row.error is not None for row in rows) else 0
