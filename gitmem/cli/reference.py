"""The command reference (docs/cli-reference.md), written from the parser itself: every
command and subcommand, its arguments with their help, and its example.

    python -m gitmem.cli.reference > docs/cli-reference.md   # after changing a command

``tests/test_cli_reference.py`` fails while the file differs from :func:`reference`.
"""

from __future__ import annotations

import argparse
import re

from gitmem.cli.parser import REPO_HELP, build_parser

HEADER = """\
# Every command

<!-- Written by `python -m gitmem.cli.reference > docs/cli-reference.md` from the parser
(gitmem/cli/parser.py and the commands' modules); tests/test_cli_reference.py checks it.
Change the commands, not this file. -->

Each command as `gitmem COMMAND --help` shows it: what it does, how it is called, its
arguments and its example. Every command takes `--repo PATH` (see [gitmem](#gitmem)),
before or after its name; [the command line](cli.md) says what else they share.
"""
_CODE_SPAN = re.compile(r"(`[^`]*`)")


def reference() -> str:
    """docs/cli-reference.md: a section for ``gitmem`` and for every command under it, in
    the order ``--help`` lists them."""
    parser = build_parser()
    return "\n".join([HEADER, *(_section(command) for command in _commands(parser))])


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every command under it, each once, parents first."""
    found = [parser]
    for sub in _subcommands(parser):
        found += _commands(sub)
    return found


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += [sub for sub in action.choices.values() if sub not in found]
    return found


def _section(parser: argparse.ArgumentParser) -> str:
    shown = [action for action in parser._actions if not isinstance(action, argparse._HelpAction)]
    lines = [f"## {parser.prog}", ""]
    if parser.description:
        lines += [_markdown(parser.description), ""]
    lines += ["```text", _usage(parser, shown), "```", ""]
    arguments = [action for action in shown if not isinstance(action, argparse._SubParsersAction)
                 and (action.help != REPO_HELP or parser.prog == "gitmem")]  # said once, at the top
    lines += [f"- `{_invocation(action)}`{_described(action, parser.prog)}" for action in arguments]
    lines += [f"- [`{sub.prog}`](#{_anchor(sub.prog)}){': ' + _markdown(sub.description) if sub.description else ''}"
              for sub in _subcommands(parser)]
    if arguments or _subcommands(parser):
        lines.append("")
    if parser.epilog:
        lines += ["```text", parser.epilog.strip("\n"), "```", ""]
    return "\n".join(lines)


def _usage(parser: argparse.ArgumentParser, actions: list[argparse.Action]) -> str:
    """The usage line of ``--help`` on one line (no wrapping), without ``-h``."""
    formatter = argparse.HelpFormatter(parser.prog, width=1_000_000)
    formatter.add_usage(parser.usage, actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _invocation(action: argparse.Action) -> str:
    """``--max-count N``, ``-n``, ``COMMIT ...``: how the argument is written."""
    if action.metavar is not None:
        value = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        value = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        value = action.dest.upper() if action.option_strings else action.dest
    if action.nargs == "?":
        value = f"[{value}]"
    elif action.nargs == "*":
        value = f"[{value} ...]"
    elif action.nargs == "+":
        value = f"{value} [{value} ...]"
    elif isinstance(action.nargs, int):
        value = " ".join([value] * action.nargs)
    if not action.option_strings:
        return value
    names = ", ".join(action.option_strings)
    return names if action.nargs == 0 else f"{names} {value}"


def _described(action: argparse.Action, prog: str) -> str:
    """``: the help (default: ...)``, or "" for an argument with neither."""
    text = action.help or ""
    if "%" in text:  # argparse's own expansion of %(default)s and the like
        text = text % {**vars(action), "prog": prog}
    text = _markdown(text)
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    default = action.default
    if action.nargs != 0 and default not in (None, argparse.SUPPRESS, "", []) and "default" not in text:
        notes.append(f"default: `{default}`")
    if action.choices is not None and action.metavar is not None:
        notes.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    text = " ".join([text, *(f"({note})" for note in notes)]).strip()
    return f": {text}" if text else ""


def _markdown(text: str) -> str:
    """Plain help text as Markdown shows it: code spans kept, ``*``, ``\\`` and ``<``
    outside them escaped (``agent:<id>`` would read as an HTML tag)."""
    parts = _CODE_SPAN.split(" ".join(text.split()))
    return "".join(part if index % 2 else
                   part.replace("\\", "\\\\").replace("*", "\\*").replace("<", "&lt;")
                   for index, part in enumerate(parts))


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a heading of words and hyphens."""
    return heading.lower().replace(" ", "-")


if __name__ == "__main__":
    print(reference(), end="")
