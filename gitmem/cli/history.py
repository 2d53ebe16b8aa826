"""``gitmem log``, ``blame``, ``show``, ``diff``, ``restore`` and ``recent``: a record's history
(:mod:`gitmem.history.versions`, :mod:`gitmem.history.blame`). ``log`` pages and colours on a terminal,
as ``git log`` does."""

from __future__ import annotations

import argparse
import json
import sys

from gitmem.cli.base import CliError, open_repo, print_json
from gitmem.cli.names import missing, printable, say_missing
from gitmem.cli.parser import NO_PAGER_HELP, RECORDS, positive_int, takes_repo

WHEN = ("a version of the record (@ its newest, @~2 two changes of it back), a revision "
        "(HEAD~3, a hash) or a date/time as git reads one (2026-11-01: the end of that day, "
        "2026-11-01T14:00, today, '3 days ago', 'last friday')")


def add_log(sub) -> None:
    from gitmem.cli import pager  # only log pages: not loaded for the other commands
    takes_repo(sub, cmd_log)
    sub.add_argument("record", nargs="?", metavar="RECORD",
                     help=f"{RECORDS} (default: every commit)")
    sub.add_argument("-n", "--max-count", type=positive_int, metavar="N",
                     help="show at most N commits")
    sub.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    sub.add_argument("--color", default="auto", choices=pager.COLOURS, metavar="WHEN",
                     help="colour commit ids as git does: auto (on a terminal), always or "
                          "never (default: auto)")
    # SUPPRESS: `gitmem --no-pager log` is not reset by this default.
    sub.add_argument("--no-pager", action="store_true", default=argparse.SUPPRESS,
                     help=NO_PAGER_HELP)


def add_blame(sub) -> None:
    takes_repo(sub, cmd_blame)
    sub.add_argument("record", metavar="RECORD", help=RECORDS)
    sub.add_argument("--json", action="store_true", help="one JSON array, for scripts")


def add_show(sub) -> None:
    _record_at_a_time(takes_repo(sub, cmd_show), default="@")


def add_diff(sub) -> None:
    takes_repo(sub, cmd_diff)
    sub.add_argument("record", metavar="RECORD", help=RECORDS)
    sub.add_argument("--since", metavar="WHEN", help=f"from {WHEN} (default: the beginning)")
    sub.add_argument("--until", metavar="WHEN", help="to WHEN (default: now)")
    sub.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def add_restore(sub) -> None:
    _record_at_a_time(takes_repo(sub, cmd_restore))


def add_recent(sub) -> None:
    takes_repo(sub, cmd_recent)
    sub.add_argument("--since", default="1 day ago", metavar="WHEN",
                     help="a date/time or a commit, as WHEN elsewhere (default: '1 day ago')")
    sub.add_argument("-n", "--max-count", type=positive_int, default=50, metavar="N",
                     help="show at most N changes (default: 50)")
    sub.add_argument("--json", action="store_true", help="one JSON array, for scripts")


def _record_at_a_time(sub, default: str | None = None) -> None:
    """RECORD and ``--at WHEN``, as ``show`` (by ``default`` the newest version) and
    ``restore`` (always told which) take them."""
    sub.add_argument("record", metavar="RECORD", help=RECORDS)
    sub.add_argument("--at", required=default is None, default=default, metavar="WHEN",
                     help=WHEN + (f" (default: {default}, the newest)" if default else ""))
    sub.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def _open(args):
    """The repository, drawing a bar on a terminal while its record index reads a long
    history (a clone's, an import's)."""
    from gitmem.cli.edges import progress_bar
    mem = open_repo(args)
    mem.record_index.progress = progress_bar("reading the history")
    return mem


def cmd_log(args) -> None:
    from gitmem.cli import pager
    from gitmem.history.versions import log
    from gitmem.records.dates import format_date
    with _open(args) as mem:
        entries = log(mem, args.record, limit=args.max_count)
        if args.record and not entries:
            _say_no_record(mem, args.record)
    colour = pager.use_colour(args.color)
    with pager.paged(not args.no_pager):
        if args.json:
            print_json([e.to_json() for e in entries])
            return
        for e in entries:
            c = e.commit
            print(f"{pager.yellow(c.id[:10], colour)}  {format_date(c.time, c.offset)}  "
                  f"{printable(c.author):<24}  [{e.summary}]  {printable(c.summary)}")


def cmd_recent(args) -> None:
    """Each change as ``git log -p`` shows a commit: id, date, author, what made it, then
    the diff of every file it changed."""
    from gitmem.records.dates import format_date
    with _open(args) as mem:
        changes = mem.recent(args.since, limit=args.max_count)
    if args.json:
        print_json([change.to_json() for change in changes])
        return
    for change in changes:
        c, found = change.commit, change.to_json()
        print(f"{c.id[:10]}  {format_date(c.time, c.offset)}  {printable(c.author)}  "
              f"[{found['op'] or 'git'}]  {printable(c.summary)}")
        for file in found["changes"]:
            sys.stdout.write(file["diff"])
        print()


def record_names(mem) -> list[str]:
    """The name of every record at HEAD, as listings show them (:func:`gitmem.records.layout.record_name`)."""
    from gitmem.records import layout
    snapshot = mem.engine.snapshot()
    return ([layout.record_name(path) for path in snapshot.files(layout.MEMORY)
             if layout.record_path(path) == path]
            + [layout.record_name(mem.sessions.folder(t, s), (t, s))
               for t, s in mem.sessions.list(snapshot=snapshot)]
            + [layout.record_name(mem.threads.folder(t["id"]), (t["id"],))
               for t in mem.threads.list_threads(snapshot=snapshot)]
            + [layout.record_name(path) for path in snapshot.files(layout.STORE)
               if layout.record_path(path) == path])


def cmd_blame(args) -> None:
    from gitmem.history.blame import blame
    from gitmem.records.dates import format_date
    with _open(args) as mem:
        found = blame(mem, args.record)
        if not found:
            names = record_names(mem)
            if args.record not in names:
                _say_no_record(mem, args.record, names)
    if args.json:
        print_json([b.to_json() for b in found])
        return
    for b in found:
        c = b.commit
        origin = f"{c.id[:10]}  {format_date(c.time, c.offset)}  {c.author:<24}  {b.op or '-'}" + (
            f" ({b.handler})" if b.handler else "")
        if b.kind == "block":
            print(origin)
            print("".join(f"    {line}\n" for line in b.value.splitlines()), end="")
        else:
            text = json.dumps(b.value, ensure_ascii=False)
            print(f"{origin}  {b.kind} {b.index}: {text[:80]}{'...' if len(text) > 80 else ''}")


def never_written(mem, record: str) -> bool:
    """True when no commit ever held ``record`` (a name mistyped, most likely)."""
    from gitmem.records.layout import parse_record
    return not mem.record_index.versions(parse_record(record).path)


def _no_record(mem, record: str) -> CliError:
    return CliError(missing(f"record {record}", record, record_names(mem), "gitmem memory list"))


def _say_no_record(mem, record: str, names: list[str] | None = None) -> None:
    say_missing(f"record {record}", record, record_names(mem) if names is None else names,
                "gitmem memory list")


def cmd_show(args) -> None:
    from gitmem.history.versions import NoRecord, show
    with _open(args) as mem:
        try:
            shown = show(mem, args.record, args.at)
        except NoRecord:
            raise _no_record(mem, args.record) from None
        if not shown.exists and never_written(mem, args.record):
            raise _no_record(mem, args.record)
    if args.json:
        print_json(shown.to_json())
        if not shown.exists:
            sys.exit(1)
        return
    if not shown.exists:  # exit 1, as for a path git show cannot find
        at = shown.commit[:10] if shown.commit else "that time (before the first commit)"
        raise CliError(f"{shown.record} did not exist at {at}")
    if "content" in shown.value:
        sys.stdout.write(shown.value["content"])
    else:
        print_json(shown.value)


def cmd_diff(args) -> None:
    from gitmem.history.versions import NoRecord, diff
    with _open(args) as mem:
        try:
            changes = diff(mem, args.record, args.since, args.until)
        except NoRecord:  # @~N of a record never written: its every diff is empty
            changes = diff(mem, args.record)
        if not changes.files and never_written(mem, args.record):  # said, as log says it
            _say_no_record(mem, args.record)
    if args.json:
        print_json(changes.to_json())
    else:
        sys.stdout.write(changes.patch)


def cmd_restore(args) -> None:
    from gitmem.history.versions import NoRecord, restore
    with _open(args) as mem:
        try:
            done = restore(mem, args.record, args.at)
        except NoRecord:
            raise _no_record(mem, args.record) from None
    source = done.source[:10] if done.source else "before the first commit"
    if args.json:
        print_json(done.to_json())
    elif done.commit is None:
        print(f"{done.record} already is as it was at {source}; nothing to commit")
    else:
        print(f"restored {done.record} as it was at {source}, in commit {done.commit[:10]}")
