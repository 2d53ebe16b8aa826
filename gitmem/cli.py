"""The ``gitmem`` command: a thin mirror of the Python API.

Every command takes ``--repo PATH`` (else ``$GITMEM_REPO``, else
``~/.local/share/gitmem``), before or after the command's name. Bad input gives one
line on stderr and a non-zero exit. Each command's ``--help`` ends with an example
(:data:`EXAMPLES`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime

from gitmem import (__version__, clone, forget, history, kaboo_adapter, maintenance,
                    nui_extension, nui_import, rescue, serve, status, strictjson, sync, watch)
from gitmem.repository import Gitmem, default_repo_path


class CliError(Exception):
    """Bad input or an operation that cannot be done: printed as one line, exit 1."""


class UsageError(CliError):
    """A command given the wrong arguments, found after parsing: exit 2, as argparse's."""


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
    except UsageError as exc:
        print(f"gitmem: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # one line, never a traceback, for anything the user can fix
        print(f"gitmem: {one_line(exc)}", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message; for a file system error the file and the
    cause, without errno's "[Errno 17]"."""
    if isinstance(exc, OSError) and exc.strerror:
        cause = exc.strerror[0].lower() + exc.strerror[1:]
        return f"{exc.filename}: {cause}" if exc.filename else cause
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="gitmem", description="Memory and history for AI agents, kept in git.")
    parser.add_argument("--version", action="version", version=f"gitmem {__version__}")
    parser.add_argument("--repo", metavar="PATH", default=None, help=REPO_HELP)
    commands = parser.add_subparsers(metavar="COMMAND")

    init = _command(commands, "init", "create a gitmem repository", cmd_init)
    init.add_argument("path", nargs="?", help="where (default: --repo, $GITMEM_REPO or "
                      f"{default_repo_path()})")
    init.add_argument("--adopt", action="store_true",
                      help="keep records in a git repository gitmem did not make")
    clone.add_commands(commands, _command)

    memory = commands.add_parser("memory", help="read and write agent and user memory")
    memory_commands = memory.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("read", cmd_memory_read, "print the memory"),
                             ("write", cmd_memory_write, "replace (or --append to) the memory "
                              "with stdin"),
                             ("delete", cmd_memory_delete, "delete the memory")):
        sub = _command(memory_commands, name, help_, run)
        who = sub.add_mutually_exclusive_group()  # one is required: checked by _agent
        who.add_argument("--user", action="store_true", help="user memory")
        who.add_argument("--agent", metavar="ID", help="an agent's memory")
        if name == "write":
            sub.add_argument("--append", action="store_true",
                             help="append a block after a blank line instead of replacing")
            sub.add_argument("--allow-empty", action="store_true",
                             help="write even an empty stdin (`memory delete` removes a memory)")
    _command(memory_commands, "list", "list the memories: id, size in bytes, last change",
             cmd_memory_list)

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

    thread = commands.add_parser("thread", help="look at kaboo threads (as threads.* answers)")
    thread_commands = thread.add_subparsers(metavar="ACTION", required=True)
    _command(thread_commands, "list", "list threads as JSON lines: id, agentId, ownerId, "
             "createdAt, updatedAt", cmd_thread_list)
    for name, help_ in (("events", "print a thread's events as a JSON array"),
                        ("state", "print a thread's last state snapshot as JSON"),
                        ("messages", "print a thread's messages as a JSON array")):
        sub = _command(thread_commands, name, help_, cmd_thread_read)
        sub.add_argument("thread_id", metavar="THREAD_ID")
        sub.set_defaults(what=name)

    # Each edge module adds its own commands: log/show/diff/restore, import/export nui,
    # gc/fsck, serve, nui, kaboo, sync/remote, watch, status.
    for module in (history, nui_import, maintenance, serve, nui_extension, kaboo_adapter,
                   sync, watch, status, forget):
        module.add_commands(commands, _command)
    # gitmem rescue: merge back gitmem commits a history rewrite by hand took off main
    rescue.add_commands(commands, _command)

    # The bench works in folders of its own: no --repo.
    bench = commands.add_parser("bench", help="measure write and read costs against baselines",
                                description="measure write and read costs against baselines")
    bench.set_defaults(run=cmd_bench)
    bench.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    bench.add_argument("--only", metavar="PATTERN",
                       help="run only the scenarios whose name matches this regular expression")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    explain(parser)
    return parser


REPO_HELP = "the repository (default: $GITMEM_REPO or ~/.local/share/gitmem)"


def _command(commands, name: str, help_: str, run, example: str | None = None
             ) -> argparse.ArgumentParser:
    """A command taking ``--repo``; its ``--help`` ends with ``example`` (else the one in
    :data:`EXAMPLES`)."""
    sub = commands.add_parser(name, help=help_, description=help_)
    if example:
        _set_example(sub, example)
    # SUPPRESS: a --repo given before the command's name is not reset by this default.
    sub.add_argument("--repo", metavar="PATH", default=argparse.SUPPRESS, help=REPO_HELP)
    sub.set_defaults(run=run)
    return sub


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    try:
        value = strictjson.finite_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, not {text}")
    return value


# One example for every command (a new one may bring its own: `_command(..., example=)`);
# `explain` puts it under the command's --help.
EXAMPLES = {
    "init": "gitmem init ~/gitmem",
    "clone": "gitmem clone git@example.org:me/memory.git ~/gitmem",
    "memory read": "gitmem memory read --agent reviewer",
    "memory write": "echo 'prefers short answers' | gitmem memory write --user --append",
    "memory delete": "gitmem memory delete --agent reviewer",
    "memory list": "gitmem memory list",
    "session read": "gitmem session read claude-code 6f1c2a",
    "session write": """echo '{"messages": [{"role": "user", "content": "hi"}]}' | """
                     "gitmem session write claude-code s1",
    "session append": """echo '{"messages": [{"role": "assistant", "content": "hello"}]}' | """
                      "gitmem session append claude-code s1",
    "session delete": "gitmem session delete claude-code s1",
    "session list": "gitmem session list",
    "thread list": "gitmem thread list",
    "thread events": "gitmem thread events t1",
    "thread state": "gitmem thread state t1",
    "thread messages": "gitmem thread messages t1",
    "log": "gitmem log user -n 5",
    "show": "gitmem show user --at yesterday",
    "diff": "gitmem diff agent:reviewer --since '3 days ago'",
    "restore": "gitmem restore user --at HEAD~2",
    "import nui": "gitmem import nui --dry-run",
    "export nui": "gitmem export nui ~/nui-backup",
    "gc": "gitmem gc",
    "fsck": "gitmem fsck --json",
    "serve": "gitmem serve --repo ~/gitmem --sync-interval 300",
    "nui install": "gitmem nui install --dir ./gitmem --agent-types claude-code,codex",
    "nui handlers list": "gitmem nui handlers list --dir ./gitmem",
    "nui handlers add": "gitmem nui handlers add notes agentMemory --agent-types pi --dir ./gitmem",
    "nui handlers remove": "gitmem nui handlers remove notes --dir ./gitmem",
    "kaboo init": "gitmem kaboo init src/",
    "sync": "gitmem sync origin",
    "remote add": "gitmem remote add origin git@example.org:me/memory.git",
    "remote list": "gitmem remote list",
    "remote remove": "gitmem remote remove origin",
    "watch": "gitmem watch --debounce 2",
    "status": "gitmem status --json",
    "forget": "gitmem forget memory/user.md --secret 3f9a0c1d2e4b5a6f",
    "bench": "gitmem bench --quick --only memory",
    # groups: one of their commands
    "memory": "gitmem memory read --user",
    "session": "gitmem session list",
    "thread": "gitmem thread list",
    "import": "gitmem import nui --dry-run",
    "export": "gitmem export nui ~/nui-backup",
    "nui": "gitmem nui install --dir ./gitmem",
    "nui handlers": "gitmem nui handlers list --dir ./gitmem",
    "kaboo": "gitmem kaboo init src/",
    "remote": "gitmem remote list",
}


def explain(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give every command under ``parser`` a description (its one-line help) and its
    example from :data:`EXAMPLES`; a group lists its commands with their help."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            full = f"{path} {name}".strip()
            if sub.description is None:
                sub.description = helps.get(name)
            if sub.epilog is None and full in EXAMPLES:
                _set_example(sub, EXAMPLES[full])
            explain(sub, full)


def _set_example(parser: argparse.ArgumentParser, example: str) -> None:
    parser.epilog = f"example:\n  {example}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def open_repo(args, *, create: bool = False) -> Gitmem:
    """The repository named by ``--repo`` (or the default one); it must exist unless ``create``."""
    return Gitmem.open(args.repo, create=create)


def cmd_init(args) -> None:
    path = args.path or args.repo or default_repo_path()
    with Gitmem.open(path, create=True, adopt=args.adopt) as mem:
        print(f"gitmem repository at {mem.engine.workdir}")


def _agent(args) -> str | None:
    if not args.user and args.agent is None:
        raise UsageError("say whose memory: --user or --agent ID (see --help)")
    return None if args.user else args.agent


def cmd_memory_read(args) -> None:
    with open_repo(args) as mem:
        sys.stdout.write(mem.memory.read(_agent(args)))


def cmd_memory_write(args) -> None:
    agent = _agent(args)
    content = sys.stdin.read()
    if not content.strip() and not args.allow_empty:
        raise CliError("stdin is empty: nothing written (use `gitmem memory delete` to remove "
                       "a memory, or --allow-empty to write it empty)")
    with open_repo(args) as mem:
        mem.memory.write(content, agent, "append" if args.append else "replace")


def cmd_memory_delete(args) -> None:
    with open_repo(args) as mem:
        mem.memory.delete(_agent(args))


def cmd_memory_list(args) -> None:
    """One line a memory: ``user`` or ``agent:<id>``, its size in bytes, its last change."""
    with open_repo(args) as mem:
        snapshot = mem.engine.snapshot()
        owners = ([None] if snapshot.exists(mem.memory.path(None)) else []) + sorted(
            mem.memory.agents(snapshot=snapshot))
        for agent in owners:
            path = mem.memory.path(agent)
            size = len(snapshot.read(path) or b"")
            last = mem.engine.history(path, limit=1)
            when = datetime.fromtimestamp(last[0].time).astimezone().strftime(
                "%Y-%m-%d %H:%M") if last else "-"
            print(f"{'user' if agent is None else f'agent:{agent}'}\t{size}\t{when}")


def cmd_session_read(args) -> None:
    with open_repo(args) as mem:
        messages, agent_session_id = mem.sessions.read(args.agent_type, args.session_id)
    json.dump({"messages": messages, "agentSessionId": agent_session_id}, sys.stdout,
              ensure_ascii=False)
    sys.stdout.write("\n")


def _session_body() -> dict:
    """The JSON object on stdin, ``{"messages": [...], "agentSessionId": ..., "workingDir": ...}``."""
    try:
        body = strictjson.loads(sys.stdin.read())
    except ValueError as exc:  # not JSON, or NaN / Infinity (strictjson words it as the wire)
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


def cmd_thread_list(args) -> None:
    with open_repo(args) as mem:
        for thread in mem.threads.list_threads():
            print(json.dumps(thread, ensure_ascii=False))


def cmd_thread_read(args) -> None:
    with open_repo(args) as mem:
        threads = mem.threads
        if args.what == "state":
            sys.stdout.write(threads.read_state_json(args.thread_id) + "\n")
            return
        pieces = (threads.read_events_json if args.what == "events"
                  else threads.read_messages_json)(args.thread_id)
        sys.stdout.write(b"".join(pieces).decode("utf-8") + "\n")


def cmd_bench(args) -> None:
    from gitmem.bench.core import run
    run(quick=args.quick, json_path=args.json, only=args.only)


if __name__ == "__main__":
    sys.exit(main())
