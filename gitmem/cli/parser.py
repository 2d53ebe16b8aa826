"""The command line's grammar: every command, its arguments, its help and its example.

:data:`COMMANDS` names each top-level command and the function (``"module.function"`` in
this package) adding its arguments. That function runs only for the command given (or for
all, in :func:`build_parser`), so parsing imports only what that command needs.

    parse(["memory", "read", "--user"])   # argparse's namespace, with .run, the command
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import cast

from gitmem import __version__
from gitmem.cli.names import did_you_mean


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line on stderr (its subcommands inherit it),
    naming the command whose help to see and, for a mistyped name, the closest ones."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message}{self._word_hint()} (see {self.prog} --help)\n")

    def _word_hint(self) -> str:
        """For a command taking words (search), the way to give one that starts with '-'."""
        takes_words = any(not action.option_strings and action.nargs in ("+", "*")
                          for action in self._actions)
        dashed = [arg for arg in getattr(self, "_given", ()) if arg.startswith("-") and arg != "--"
                  and arg.partition("=")[0] not in self._option_string_actions]
        if not takes_words or not dashed:
            return ""
        return f"; a word starting with '-' goes after --: {self.prog} -- {dashed[0]}"

    def parse_known_args(self, args=None, namespace=None):
        self._given = list(sys.argv[1:] if args is None else args)
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(namespace, _REFUSED_BY):  # the innermost command's, first
            setattr(namespace, _REFUSED_BY, self)
        return namespace, extras

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            refused_by = getattr(namespace, _REFUSED_BY, self)
            options = [name for name in refused_by._option_string_actions if name.startswith("--")]
            hint = did_you_mean(extras[0], options) if extras[0].startswith("--") else ""
            refused_by.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return namespace

    def _check_value(self, action, value):
        if action.choices is not None and value not in action.choices:
            names = ", ".join(map(repr, action.choices))
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}"
                                         f"{did_you_mean(value, action.choices)} (choose from {names})")


_REFUSED_BY = "_refused_by"  # in the namespace: the command that left arguments it does not take


class _Commands(argparse._SubParsersAction):
    """The top-level commands. A command's arguments are added (:meth:`fill`) when it is
    the one chosen, so that parsing imports only what that command needs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fillers: dict[str, str] = {}  # command name -> "module.function" adding its arguments

    def fill(self, name: str) -> None:
        where = self.fillers.pop(name, None)
        if where is not None:
            module, function = where.split(".")
            parser = self.choices[name]
            getattr(importlib.import_module(f"gitmem.cli.{module}"), function)(parser)
            explain(parser, name)

    def __call__(self, parser, namespace, values, option_string=None):
        self.fill(values[0])
        super().__call__(parser, namespace, values, option_string)



# Every top-level command, in the order `gitmem --help` lists them: its one-line help,
# and the function ("module.function" in this package) adding its arguments.
COMMANDS = (
    ("init", "create a gitmem repository", "repository.add_init"),
    ("clone", "copy a gitmem repository from a git remote, ready to sync (a second machine)",
     "repository.add_clone"),
    ("memory", "read and write agent and user memory", "records.add_memory"),
    ("session", "read and write chat sessions", "records.add_session"),
    ("thread", "look at kaboo threads (as threads.* answers)", "records.add_thread"),
    ("log", "commits that touched a record, newest first, with a summary of each change",
     "history.add_log"),
    ("blame", "each block of a memory, or message and event of a session or thread, with "
     "the commit that introduced it", "history.add_blame"),
    ("show", "a record as it was at a time", "history.add_show"),
    ("diff", "what changed in a record between two times", "history.add_diff"),
    ("restore", "write a record back as it was at a time, as a new commit",
     "history.add_restore"),
    ("recent", "what changed across every record since a time, newest first, each change "
     "with its diff", "history.add_recent"),
    ("search", "find the memory blocks, session messages and thread events that say "
     "something, now, at a time (--at) or (--history) ever", "search.add_search"),
    ("unit", "one block, message or event of a record by a search hit's unit_id, with its "
     "neighbours", "search.add_unit"),
    ("import", "bring data in from another store", "edges.add_import"),
    ("export", "write data out in another store's format", "edges.add_export"),
    ("gc", "pack the repository now (all objects into one pack, bounded memory)",
     "repository.add_gc"),
    ("fsck", "check git's objects, every JSONL line and every metadata file; exit 1 on a "
     "problem", "repository.add_fsck"),
    ("serve", "speak nui's storage protocol (and threads.*) on stdin/stdout", "edges.add_serve"),
    ("nui", "use gitmem as nui's storage extension", "edges.add_nui"),
    ("kaboo", "use gitmem as kaboo's thread store", "edges.add_kaboo"),
    ("mcp", "serve memory to MCP clients (Claude Code, Cursor, Codex) on stdin/stdout",
     "edges.add_mcp"),
    ("web", "a local site over memory, history and search, and MCP over HTTP at /mcp",
     "web.add_web"),
    ("sync", "fetch, merge and push with a git remote, losing nothing", "repository.add_sync"),
    ("remote", "configure git remotes to sync with", "repository.add_remote"),
    ("watch", "commit hand edits of the repository as they are saved (until Ctrl-C)",
     "edges.add_watch"),
    ("status", "hand edits waiting or refused, commits not pushed, last sync, index",
     "repository.add_status"),
    ("forget", "take a secret out of the commits not pushed yet (the line `gitmem sync` "
     "refused)", "repository.add_forget"),
    ("rescue", "merge back gitmem commits that a history rewrite by hand (git commit "
     "--amend, git reset) took off main", "repository.add_rescue"),
    # The bench works in folders of its own: no --repo.
    ("bench", "measure write and read costs against baselines", "edges.add_bench"),
)


def build_parser(*, complete: bool = True) -> argparse.ArgumentParser:
    """The whole command line; with ``complete=False`` each command's arguments are added
    only when that command is parsed (what :func:`main` uses)."""
    parser = _Parser(
        prog="gitmem", description="Memory and history for AI agents, kept in git.")
    parser.add_argument("--version", action="version", version=f"gitmem {__version__}")
    parser.add_argument("--repo", metavar="PATH", default=None, help=REPO_HELP)
    parser.add_argument("--no-pager", action="store_true", help=NO_PAGER_HELP)
    commands = cast(_Commands, parser.add_subparsers(metavar="COMMAND", action=_Commands))
    for name, help_, filler in COMMANDS:
        commands.add_parser(name, help=help_, description=help_)
        commands.fillers[name] = filler
    if complete:
        for name, _help, _filler in COMMANDS:
            commands.fill(name)
    explain(parser)
    return parser



def parse(argv: list[str]) -> argparse.Namespace | None:
    """The arguments of ``gitmem ARGV`` (exit 2 with one line when they are wrong); None,
    with the help on stderr, when they name no command."""
    parser = build_parser(complete=False)
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return None
    return args


REPO_HELP = ("the repository (default: $GITMEM_REPO, else the gitmem repository holding the "
             "current folder, else ~/.local/share/gitmem)")
RECORDS = ("user, agent:<id>, note:<path>, session:<agentType>/<sessionId>, thread:<threadId> "
           "or store:<namespace>/<key>")
NO_PAGER_HELP = "do not pipe the output into a pager ($GIT_PAGER, $PAGER or less)"


def command(commands, name: str, help_: str, run, example: str | None = None
            ) -> argparse.ArgumentParser:
    """A command taking ``--repo``; its ``--help`` ends with ``example`` (else the one in
    :data:`EXAMPLES`)."""
    sub = commands.add_parser(name, help=help_, description=help_)
    if example:
        _set_example(sub, example)
    return takes_repo(sub, run)


def takes_repo(parser: argparse.ArgumentParser, run) -> argparse.ArgumentParser:
    """Give ``parser`` the ``--repo`` option and ``run``, the function that runs it."""
    # SUPPRESS: a --repo given before the command's name is not reset by this default.
    parser.add_argument("--repo", metavar="PATH", default=argparse.SUPPRESS, help=REPO_HELP)
    parser.set_defaults(run=run)
    return parser


def whole_number(text: str, least: int = 0) -> int:
    """An argparse type: a whole number, ``least`` or more (``--max-response``: 0 lifts the cap)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    return whole_number(text, 1)


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0 (:func:`gitmem.sync.exchange.positive_seconds`)."""
    from gitmem.sync.exchange import positive_seconds as parse  # only where the option is given
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    from gitmem.records import strictjson
    try:
        value = strictjson.finite_float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, not {text}")
    return value


# One example for every command (a new one may bring its own: `command(..., example=)`);
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
    "blame": "gitmem blame agent:reviewer",
    "show": "gitmem show user --at yesterday",
    "diff": "gitmem diff agent:reviewer --since '3 days ago'",
    "restore": "gitmem restore user --at HEAD~2",
    "recent": "gitmem recent --since '2 hours ago'",
    "search": "gitmem search 'when do we deploy?' --context 1  # or: 'deploy* -staging' --history",
    "unit": "gitmem unit session:claude-code/6f1c m42 --context 2",
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
    "kaboo path": 'gitmem kaboo path    # npm install "$(gitmem kaboo path)"',
    "mcp": "gitmem mcp --repo ~/gitmem",
    "mcp config": "gitmem mcp config --client cursor --write",
    "web": "gitmem web --repo ~/gitmem --open",
    "web token": "gitmem web token add laptop --read-only",
    "web token add": "gitmem web token add laptop --read-only",
    "web token list": "gitmem web token list",
    "web token remove": "gitmem web token remove laptop",
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
