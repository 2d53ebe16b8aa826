"""Names as the command line shows them: the closest ones to a name that does not exist,
and ids with their control characters escaped, so that one id is one row of a listing.

    did_you_mean("msgs", ["messages", "workingDir"])   # " (did you mean messages?)"
    printable("evil\\nagent")                           # "evil\\\\nagent": one line
    say_missing("agent memory 'nobody'", "nobody", ["nobodies"], "gitmem memory list")
    # stderr: gitmem: no agent memory 'nobody' (closest: nobodies)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from gitmem.records.ids import printable  # noqa: F401 (the listings take it from here)


def closest(name: str, names: Iterable[str], count: int = 3) -> list[str]:
    """Up to ``count`` of ``names`` close to ``name``, the closest first."""
    import difflib  # here: only a name that does not exist needs it
    return difflib.get_close_matches(name, list(names), n=count, cutoff=0.5)


def did_you_mean(name: str, names: Iterable[str]) -> str:
    """`` (did you mean X?)`` naming the closest of ``names`` to ``name``, or "" when none is close."""
    close = closest(name, names)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def missing(what: str, name: str, names: Iterable[str], listing: str) -> str:
    """``no WHAT`` (the missing record, as the caller names it), with the closest of
    ``names`` to ``name``, else the command ``listing`` that lists them."""
    close = closest(name, names)
    hint = f"closest: {', '.join(map(printable, close))}" if close else f"`{listing}` lists them"
    return f"no {printable(what)} ({hint})"


def say_missing(what: str, name: str, names: Iterable[str], listing: str) -> None:
    """:func:`missing`'s line on stderr. The command still answers as for an empty record
    and exits 0: a record never written reads as empty, as nui reads it."""
    print(f"gitmem: {missing(what, name, names, listing)}", file=sys.stderr)
