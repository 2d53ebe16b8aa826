"""``gitmem web``: the site over the repository (and MCP over HTTP at /mcp), and the
bearer tokens of /mcp. The site needs the ``web`` extra; the token commands do not."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from gitmem.cli.base import CliError, open_repo, print_json
from gitmem.cli.parser import command, takes_repo, whole_number


def add_web(web) -> None:
    takes_repo(web, cmd_web)
    web.add_argument("--port", type=_port, default=None,
                     help="the port (default 7420; 0: any free port)")
    web.add_argument("--host", default="127.0.0.1",
                     help="the address to listen on (default 127.0.0.1: this machine only)")
    web.add_argument("--allow-remote", action="store_true",
                     help="allow a --host that other machines can reach (says what that exposes)")
    web.add_argument("--open", action="store_true", help="open the address in a browser")
    web.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    actions = web.add_subparsers(metavar="ACTION")  # none: serve
    token = actions.add_parser("token", help="the bearer tokens of /mcp (MCP over HTTP)",
                               description="the bearer tokens of /mcp (MCP over HTTP)")
    verbs = token.add_subparsers(metavar="VERB", required=True)
    add = command(verbs, "add", "make a token and print it (once; it is kept only hashed, in "
                  ".git/gitmem/)", cmd_token_add)
    add.add_argument("name", help="what the token is for (letters, digits, '.', '_', '-')")
    add.add_argument("--read-only", action="store_true", help="the token can read, never write")
    listed = command(verbs, "list", "list the tokens (names, never secrets)", cmd_token_list)
    listed.add_argument("--json", action="store_true")
    remove = command(verbs, "remove", "revoke a token (a running server stops taking it at once)",
                     cmd_token_remove)
    remove.add_argument("name")


def _port(text: str) -> int:
    """An argparse type: a TCP port, 0 to 65535."""
    value = whole_number(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"a port is at most 65535, not {value}")
    return value


def cmd_web(args) -> int:
    try:
        from gitmem.faces.web.app import DEFAULT_PORT, NotLoopback, run
    except ImportError as exc:
        raise CliError(f"gitmem web needs its extra ({exc}): pip install 'gitmem[web]'") from None
    try:
        return run(args.repo, host=args.host, port=DEFAULT_PORT if args.port is None else args.port,
                   open_browser=args.open, allow_remote=args.allow_remote, log_level=args.log_level)
    except (NotLoopback, OSError) as exc:
        raise CliError(str(exc)) from None


def _tokens(args):
    from gitmem.faces.web.tokens import Tokens
    with open_repo(args) as mem:
        return Tokens(mem.engine.private_dir)


def cmd_token_add(args) -> None:
    from gitmem.faces.web.tokens import TokenError
    try:
        secret = _tokens(args).add(args.name, read_only=args.read_only)
    except TokenError as exc:
        raise CliError(str(exc)) from None
    print(secret)
    print(f"token {args.name} ({'read-only' if args.read_only else 'read-write'}) made: give it to "
          "the MCP client as `Authorization: Bearer <token>`; it is shown only now", file=sys.stderr)


def cmd_token_list(args) -> None:
    found = _tokens(args).list()
    if args.json:
        print_json([{"name": t.name, "readOnly": t.read_only, "created": t.created} for t in found])
        return
    for t in found:
        made = datetime.fromtimestamp(t.created).isoformat(timespec="seconds")
        print(f"{t.name:<24}  {'read-only ' if t.read_only else 'read-write'}  made {made}")


def cmd_token_remove(args) -> None:
    from gitmem.faces.web.tokens import TokenError
    try:
        _tokens(args).remove(args.name)
    except TokenError as exc:
        raise CliError(str(exc)) from None
    print(f"token {args.name} removed")
