"""A plain `gitmem search` is read without argparse (gitmem/cli/search.py), and means what
the parser would make of it.

Every command line is first offered to `plain_search`; whatever it takes must be exactly
the parser's reading, and whatever the parser would refuse or read otherwise it must leave
to the parser. Checked on many command lines against the real parser, then on the real
command: a warm plain search loads neither argparse nor pygit2 and answers as the
parser's form (`-- QUERY`) does.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SUBPROCESS_ENV, run_gitmem
from gitmem.cli.parser import build_parser
from gitmem.cli.search import plain_search

TOKENS = ["search", "search", "word", "other", "--repo", "--repo=r", "r", "--json", "--history",
          "--kind", "memory", "thread", "bogus", "--kind=session", "--limit", "5", "0", "-1",
          "--limit=3", "--limit=x", "+7", "--record", "agent:a", "--record=user", "-neg", "--",
          "--since", "--hist", "--help", "--no-pager", "--json=1", "", "a=b", "log"]


def parsed(argv: list[str]) -> dict | None:
    """The real parser's namespace for ``argv``, as a dict; None when it refuses it."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its one line of refusal
            found = vars(build_parser(complete=False).parse_args(argv))
    except SystemExit:
        return None
    return found if "run" in found else None


BEFORE = ["--repo", "r", "--repo=r", "--no-pager", "--json", "search"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(BEFORE), max_size=3), st.booleans(),
       st.lists(st.sampled_from(TOKENS), max_size=8))
def test_what_the_plain_reading_takes_is_what_the_parser_makes_of_it(before, command, after):
    argv = [*before, *(["search"] if command else []), *after]
    plain = plain_search(argv)
    if plain is not None:
        assert vars(plain) == parsed(argv)


@pytest.mark.parametrize("argv", [
    ["search", "deploy"],
    ["--repo", "r", "search", "deploy", "friday", "--json", "--limit", "5"],
    ["search", "--history", "--kind=memory", "--record", "agent:a", "deploy", "--repo=r"],
])
def test_the_plain_forms_are_read_without_the_parser(argv):
    assert plain_search(argv) is not None
    assert vars(plain_search(argv)) == parsed(argv)


@pytest.mark.parametrize("argv", [
    ["search", "--help"], ["search", "--", "-draft", "deploy"], ["search", "a", "--json", "b"],
    ["search", "--hist", "a"], ["search", "a", "--since", "yesterday"], ["search", "--limit", "0", "a"],
    ["search", "--kind", "bogus", "a"], ["--no-pager", "search", "a"], ["search"], ["log", "search"],
])
def test_anything_else_is_left_to_the_parser(argv):
    assert plain_search(argv) is None


# The command, then a last line on stderr naming which of argparse and pygit2 it loaded.
REPORTING_LOADED = ("import sys\nfrom gitmem.cli import main\nrc = main(sys.argv[1:])\n"
                    "sys.stderr.write('loaded: %s\\n' % sorted(m for m in ('argparse', 'pygit2')"
                    " if m in sys.modules))\nsys.exit(rc)\n")


def search(*args: str) -> tuple[list, str]:
    done = subprocess.run([sys.executable, "-c", REPORTING_LOADED, *args], capture_output=True,
                          text=True, env=SUBPROCESS_ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr.splitlines()[-1]


def test_a_warm_plain_search_loads_neither_argparse_nor_pygit2(tmp_path: Path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=repo,
               input="Checks types first, a marmoset habit.")
    for _ in range(20):  # the first searches build the index and take the stamp warm ones use
        plain = search("--repo", str(repo), "search", "marmoset", "--json")
        if plain[1] == "loaded: []":
            break
    parsers = search("--repo", str(repo), "search", "--json", "--", "marmoset")
    assert plain == (parsers[0], "loaded: []")
    assert [hit["record"] for hit in plain[0]] == ["agent:reviewer"]
    assert parsers[1] == "loaded: ['argparse']"  # the parser's form: warm, but through argparse


@pytest.mark.parametrize("query", ['"unbalanced', "OR", "-"])
def test_a_plain_search_of_what_would_not_parse_as_operators_is_answered(tmp_path: Path, query):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    assert plain_search(["search", query]) is not None or query.startswith("-")
    done = run_gitmem("search", query, repo=repo, check=False)
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == f"gitmem: no hits for {query!r}\n"


def test_a_word_starting_with_a_hyphen_goes_after_two_hyphens(tmp_path: Path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    done = run_gitmem("search", "-draft", repo=repo, check=False)  # an option to the parser
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
