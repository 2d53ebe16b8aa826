"""The ``gitmem`` command: a thin mirror of the Python API.

Every command takes ``--repo PATH`` (else ``$GITMEM_REPO``, else
``~/.local/share/gitmem``). Bad input gives one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from gitmem import (__version__, history, kaboo_adapter, maintenance, nui_extension,
                    nui_import, serve, status, sync, watch)
from gitmem.repository import Gitmem, default_repo_path


class CliError(Exception):
    """Bad input or an operation that cannot be done: printed as one line, exit 1."""


class _OneLine(logging.Formatter):
    """``gitmem: message`` on one line; an exception logged with it is named on that line,
    never shown as a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {' '.join(str(error).split()) or type(error).__name__}"
        return f"gitmem: {text}"


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (its subcommands inherit it)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def main(argv: list[str] | None = None) -> int:
    # Warnings (a refused hand edit, a packing failure) go to stderr as one line each;
    # `gitmem serve` sends everything to its log file instead.
    stderr = logging.StreamHandler()
    stderr.setFormatter(_OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[stderr])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # one line, never a traceback, for anything the user can fix
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"gitmem: {message}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gitmem", description="Memory and history for AI agents, kept in git.")
    parser.add_argument("--version", action="version", version=f"gitmem {__version__}")
    commands = parser.add_subparsers(metavar="COMMAND")

    init = _command(commands, "init", "create a gitmem repository", cmd_init)
    init.add_argument("path", nargs="?", help="where (default: --repo, $GITMEM_REPO or "
                      f"{default_repo_path()})")

    memory = commands.add_parser("memory", help="read and write agent and user memory")
    memory_commands = memory.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("read", cmd_memory_read, "print the memory"),
                             ("write", cmd_memory_write, "replace (or --append to) the memory "
                              "with stdin"),
                             ("delete", cmd_memory_delete, "delete the memory")):
        sub = _command(memory_commands, name, help_, run)
        who = sub.add_mutually_exclusive_group(required=True)
        who.add_argument("--user", action="store_true", help="user memory")
        who.add_argument("--agent", metavar="ID", help="an agent's memory")
        if name == "write":
            sub.add_argument("--append", action="store_true",
                             help="append a block after a blank line instead of replacing")

    session = commands.add_parser("session", help="read and write chat sessions")
    session_commands = session.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("read", cmd_session_read, "print {messages, agentSessionId} as JSON"),
                             ("write", cmd_session_write, "replace the session with "
                              "{messages, agentSessionId, workingDir} JSON from stdin"),
                             ("append", cmd_session_append, "add the messages of "
                              "{messages, agentSessionId?, workingDir?} JSON from stdin"),
                             ("delete", cmd_session_delete, "delete the session")):
        sub = _command(session_commands, name, help_, run)
        sub.add_argument("agent_type", metavar="AGENT_TYPE")
        sub.add_argument("session_id", metavar="SESSION_ID")
    _command(session_commands, "list", "list sessions as AGENT_TYPE<TAB>SESSION_ID",
             cmd_session_list)

    # Each edge module adds its own commands: log/show/diff/restore, import/export nui,
    # gc/fsck, serve, nui, kaboo, sync/remote, watch, status.
    for module in (history, nui_import, maintenance, serve, nui_extension, kaboo_adapter,
                   sync, watch, status):
        module.add_commands(commands, _command)

    bench = _command(commands, "bench", "measure write and read costs against baselines",
                     cmd_bench)
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    bench.add_argument("--only", metavar="PATTERN",
                       help="run only the scenarios whose name matches this regular expression")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    return parser


def _command(commands, name: str, help_: str, run) -> argparse.ArgumentParser:
    sub = commands.add_parser(name, help=help_, description=help_)
    sub.add_argument("--repo", metavar="PATH",
                     help="the repository (default: $GITMEM_REPO or ~/.local/share/gitmem)")
    sub.set_defaults(run=run)
    return sub


def open_repo(args, *, create: bool = False) -> Gitmem:
    """The repository named by ``--repo`` (or the default one); it must exist unless ``create``."""
    return Gitmem.open(args.repo, create=create)


def cmd_init(args) -> None:
    path = args.path or args.repo or default_repo_path()
    with Gitmem.open(path, create=True) as mem:
        print(f"gitmem repository at {mem.engine.workdir}")


def _agent(args) -> str | None:
    return None if args.user else args.agent


def cmd_memory_read(args) -> None:
    with open_repo(args) as mem:
        sys.stdout.write(mem.memory.read(_agent(args)))


def cmd_memory_write(args) -> None:
    content = sys.stdin.read()
    with open_repo(args) as mem:
        mem.memory.write(content, _agent(args), "append" if args.append else "replace")


def cmd_memory_delete(args) -> None:
    with open_repo(args) as mem:
        mem.memory.delete(_agent(args))


def cmd_session_read(args) -> None:
    with open_repo(args) as mem:
        messages, agent_session_id = mem.sessions.read(args.agent_type, args.session_id)
    json.dump({"messages": messages, "agentSessionId": agent_session_id}, sys.stdout,
              ensure_ascii=False)
    sys.stdout.write("\n")


def _session_body() -> dict:
    """The JSON object on stdin, ``{"messages": [...], "agentSessionId": ..., "workingDir": ...}``."""
    try:
        body = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        raise CliError(f"stdin is not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages", []), (list, type(None))):
        raise CliError('stdin must be a JSON object like {"messages": [...], "agentSessionId": ""}')
    return body


def cmd_session_write(args) -> None:
    body = _session_body()
    with open_repo(args) as mem:
        mem.sessions.write(args.agent_type, args.session_id, body.get("messages"),
                           str(body.get("agentSessionId") or ""), str(body.get("workingDir") or ""))


def cmd_session_append(args) -> None:
    body = _session_body()
    given = [body.get(key) for key in ("agentSessionId", "workingDir")]
    with open_repo(args) as mem:
        mem.sessions.append(args.agent_type, args.session_id, body.get("messages"),
                            *(None if value is None else str(value) for value in given))


def cmd_session_delete(args) -> None:
    with open_repo(args) as mem:
        mem.sessions.delete(args.agent_type, args.session_id)


def cmd_session_list(args) -> None:
    with open_repo(args) as mem:
        for agent_type, session_id in mem.sessions.list():
            print(f"{agent_type}\t{session_id}")


def cmd_bench(args) -> None:
    from gitmem.bench.core import run
    run(quick=args.quick, json_path=args.json, only=args.only)


if __name__ == "__main__":
    sys.exit(main())
