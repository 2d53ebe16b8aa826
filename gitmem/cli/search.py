"""``gitmem search``: the hits of a query, as lines or JSON (:mod:`gitmem.search.query`);
``gitmem unit``: the unit a hit's unit_id names, with its neighbours.

:func:`main` asks :func:`plain_search` first, for every command: it reads the plain forms
of a search (the options spelt out, the words in one run) without argparse, whose import
was a fifth of a warm search. Anything else, ``--help`` or a mistake included, is left to
the parser, which says what is wrong as for any other command.

    plain_search(["--repo", "~/gitmem", "search", "deploy", "--json"])   # a namespace
    plain_search(["search", "--hist", "deploy"])                        # None: argparse's
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

from gitmem.cli.base import open_repo, print_json, quick_first

_FLAGS = ("--history", "--json", "--meaning")
_VALUES = ("--repo", "--kind", "--record", "--limit", "--context")  # each takes the next argument


def add_search(sub) -> None:
    from gitmem.cli.parser import (  # only when it is built
        RECORDS,
        positive_int,
        takes_repo,
        whole_number,
    )
    from gitmem.search.query import KINDS
    takes_repo(sub, cmd_search)
    sub.add_argument("query", nargs="+", metavar="QUERY",
                     help="any text, a question in plain words say (several arguments are one "
                          'query; one starting with - goes after --); operators when it uses '
                          'them: "a phrase", prefix*, OR between alternatives, -word to leave out')
    sub.add_argument("--history", action="store_true",
                     help="also text no longer there, with the commits that added and removed it")
    sub.add_argument("--kind", choices=KINDS, help="only records of this kind")
    sub.add_argument("--record", metavar="RECORD", help=f"only this record: {RECORDS}")
    sub.add_argument("--since", metavar="WHEN",
                     help="only text added or removed at or after WHEN (a revision or a date, "
                          "as for gitmem log)")
    sub.add_argument("--until", metavar="WHEN", help="only text added or removed at or before WHEN")
    sub.add_argument("--at", metavar="WHEN",
                     help="search the memory as it was at WHEN (a revision or a date)")
    sub.add_argument("--context", type=whole_number, default=0, metavar="N",
                     help="also show the N units before and after each hit")
    sub.add_argument("--limit", type=positive_int, default=20, metavar="N",
                     help="at most N hits (default: 20)")
    sub.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    sub.add_argument("--meaning", action="store_true",
                     help="also rank by meaning (needs gitmem[semantic] or GITMEM_EMBEDDINGS; embeds "
                          "the units without a vector first): gitmem search --meaning which pet "
                          "did we get")


def plain_search(argv: list[str]) -> SimpleNamespace | None:
    """What the parser would make of ``gitmem ARGV`` when it is a plain search: ``--repo``
    before the command's name, then options spelt out in full and the words in one run.
    None for anything else."""
    if "search" not in argv:
        return None
    args = SimpleNamespace(repo=None, no_pager=False, history=False, json=False, meaning=False, kind=None,
                           record=None, since=None, until=None, at=None, limit=20, context=0,
                           query=[], run=cmd_search)
    command, words_ended = False, False
    rest = iter(argv)
    for arg in rest:
        name, equals, value = arg.partition("=")
        if name in _VALUES and (command or name == "--repo"):
            if not equals:
                following = next(rest, None)
                if following is None:
                    return None
                value = following
            if value.startswith("-") or not _take(args, name[2:], value):
                return None
            words_ended = bool(args.query)
        elif arg in _FLAGS and command:
            setattr(args, arg[2:], True)
            words_ended = bool(args.query)
        elif arg.startswith("-"):
            return None  # --help, --since, an abbreviation, "--", a -word: the parser's
        elif not command:
            if arg != "search":
                return None
            command = True
        elif words_ended:
            return None  # the parser takes the words in one run, and refuses a second
        else:
            args.query.append(arg)
    return args if args.query else None


def _take(args: SimpleNamespace, option: str, value: str) -> bool:
    """Set ``option`` to ``value`` as the parser would; False when it would refuse it."""
    if option == "kind":
        from gitmem.search.query import KINDS
        if value not in KINDS:
            return False
    elif option in ("limit", "context"):
        try:
            number = int(value)  # as positive_int and whole_number read it
        except ValueError:
            return False
        if number < (1 if option == "limit" else 0):
            return False
        setattr(args, option, number)
        return True
    setattr(args, option, value)
    return True


@quick_first
def cmd_search(args) -> None:
    from gitmem.records.ids import printable
    from gitmem.opening.location import locate_repo
    from gitmem.search.query import quick_search
    query = " ".join(args.query)
    hits = None
    if args.since is None and args.until is None and args.at is None and not args.meaning:
        hits = quick_search(locate_repo(args.repo)[0], query, history=args.history,
                            kind=args.kind, record=args.record, limit=args.limit,
                            context=args.context)
    if hits is None:
        from gitmem.cli.edges import progress_bar
        with open_repo(args) as mem:
            mem.search_index.catch_up(progress_bar("indexing for search"))
            hits = mem.search(query, history=args.history, kind=args.kind, record=args.record,
                              since=args.since, until=args.until, at=args.at, limit=args.limit,
                              context=args.context, meaning=args.meaning,
                              progress=progress_bar("embedding for search") if args.meaning else None)
    if not hits:
        print(f"gitmem: no hits for {query!r}", file=sys.stderr)
    if args.json:
        print_json([hit.as_json() for hit in hits])
        return
    for hit in hits:
        when = f"added {hit.added[:10]} {hit.added_date}"
        if hit.removed:
            when += f", removed {hit.removed[:10]} {hit.removed_date}"
        print(f"{printable(hit.record)}  {printable(hit.unit)} {printable(str(hit.unit_id))}  "
              f"{hit.date}  {hit.score:.2f}  {when}")
        for near in hit.context:
            if near["offset"] < 0:
                print(f"    [{printable(str(near['unit_id']))}] {_line(near['text'])}")
        print(f"  > {' '.join(hit.snippet.split())}")
        for near in hit.context:
            if near["offset"] > 0:
                print(f"    [{printable(str(near['unit_id']))}] {_line(near['text'])}")


def _line(text: str, width: int = 160) -> str:
    """``text`` on one line, cut at ``width`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def add_unit(sub) -> None:
    from gitmem.cli.parser import RECORDS, takes_repo, whole_number
    takes_repo(sub, cmd_unit)
    sub.add_argument("record", metavar="RECORD", help=f"the record: {RECORDS}")
    sub.add_argument("unit_id", metavar="UNIT_ID",
                     help="a search hit's unit_id: a message's id, else the unit's position from 0 "
                          "(in a thread a position names an event)")
    sub.add_argument("--context", type=whole_number, default=0, metavar="N",
                     help="also the N units before and after it")
    sub.add_argument("--json", action="store_true", help="one JSON array, for scripts")


def cmd_unit(args) -> None:
    from gitmem.records.ids import printable
    with open_repo(args) as mem:
        units = mem.read_unit(args.record, args.unit_id, context=args.context)
    if args.json:
        print_json([unit.as_json() for unit in units])
        return
    for unit in units:
        mark = ">" if unit.asked else " "
        print(f"{mark} {printable(unit.unit)} {printable(str(unit.unit_id))}  {unit.date or ''}".rstrip())
        for line in unit.text.splitlines() or [""]:
            print(f"    {printable(line)}")
