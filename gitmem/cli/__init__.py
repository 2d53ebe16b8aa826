"""The ``gitmem`` command: a thin mirror of the Python API.

Every command takes ``--repo PATH`` (else ``$GITMEM_REPO``, else
``~/.local/share/gitmem``), before or after the command's name. Bad input gives one
line on stderr and a non-zero exit. Each command's ``--help`` ends with an example
(:data:`gitmem.cli.parser.EXAMPLES`).

This package holds the argument parsing and the printing only; each command is a
call into the library. :mod:`gitmem.cli.parser` is the grammar (argparse): it adds a
command's arguments only for the command given, and each command imports the library
when it runs, so ``gitmem --version`` or ``gitmem memory read`` loads only what it
needs. A plain ``gitmem search`` is read without argparse (:mod:`gitmem.cli.search`).
Here: :func:`main`; :mod:`gitmem.cli.base` holds what every command shares.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from gitmem.cli.base import UsageError, warn_on_stderr
from gitmem.cli.search import plain_search
from gitmem.errors import one_line

if TYPE_CHECKING:
    import argparse
    from types import SimpleNamespace


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args: argparse.Namespace | SimpleNamespace | None = plain_search(argv)
    if args is None:
        from gitmem.cli.parser import parse  # argparse: not loaded for a plain search
        args = parse(argv)
        if args is None:  # no command: the help is on stderr
            return 2
    if not getattr(args.run, "quick_first", False):
        warn_on_stderr()
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
