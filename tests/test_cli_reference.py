"""docs/cli-reference.md is the parser's own account of every command: it cannot fall
behind a command, an argument or an example."""

from __future__ import annotations

import argparse
from pathlib import Path

from gitmem.cli.parser import build_parser
from gitmem.cli.reference import reference

PAGE = Path(__file__).resolve().parent.parent / "docs" / "cli-reference.md"


def test_the_command_reference_is_the_parsers():
    assert PAGE.read_text(encoding="utf-8") == reference(), (
        "docs/cli-reference.md is out of date: python -m gitmem.cli.reference > docs/cli-reference.md")


def every_command(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from every_command(sub)


def test_the_reference_names_every_command_its_arguments_and_its_example():
    sections = {section.split("\n", 1)[0]: section for section in reference().split("\n## ")[1:]}
    commands = list(every_command(build_parser()))
    # the four that no page described before the reference
    assert {"gitmem session delete", "gitmem thread state", "gitmem thread messages",
            "gitmem nui handlers remove"} <= {parser.prog for parser in commands}
    assert sorted(sections) == sorted(parser.prog for parser in commands)
    for parser in commands:
        section = sections[parser.prog]
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            choices = "{" + ",".join(action.choices) + "}" if action.choices else None
            for name in action.option_strings or [action.metavar or choices or action.dest]:
                assert name in section, f"{parser.prog}: {name}"
        assert parser.epilog is None or parser.epilog.strip("\n") in section, parser.prog
