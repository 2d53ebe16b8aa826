"""The repository as a whole: ``init``, ``clone``, ``status``, ``sync``, ``remote``,
``rescue``, ``forget``, ``gc`` and ``fsck``."""

from __future__ import annotations

import argparse
import sys

from gitmem.cli.base import open_repo, print_json
from gitmem.cli.names import printable
from gitmem.cli.parser import command, positive_seconds, takes_repo

RESCUE_EXAMPLE = """\
example:
  gitmem rescue --list        # the gitmem commits a history rewrite took off main
  gitmem rescue               # merges each back, as one merge commit

a whole run, as it is, in a scratch repository:
  export GITMEM_REPO=/tmp/rescue-demo
  gitmem init && echo one | gitmem memory write --user --append
  echo two | gitmem memory write --user --append
  git -C "$GITMEM_REPO" reset --hard HEAD~1   # takes the write of "two" off main
  gitmem status                               # lists it under "dropped"
  gitmem rescue                               # merges it back: one commit
  gitmem memory read --user                   # one, then two

A commit dropped on purpose: `gitmem rescue --let-go COMMIT` stops keeping it.
"""


def add_init(init) -> None:
    takes_repo(init, cmd_init)
    init.add_argument("path", nargs="?",
                      help="where (default: --repo, $GITMEM_REPO or ~/.local/share/gitmem)")
    init.add_argument("--adopt", action="store_true",
                      help="keep records in a git repository gitmem did not make")


def add_clone(sub) -> None:
    takes_repo(sub, cmd_clone)
    sub.add_argument("url", metavar="URL", help="the remote (what `git clone` takes)")
    sub.add_argument("path", nargs="?", metavar="PATH",
                     help="where (default: --repo, $GITMEM_REPO or ~/.local/share/gitmem)")


def add_gc(sub) -> None:
    takes_repo(sub, cmd_gc)
    sub.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    sub.add_argument("--prune-forgotten", action="store_true",
                     help="first stop keeping the commits `gitmem forget` replaced")


def add_fsck(sub) -> None:
    takes_repo(sub, cmd_fsck)
    sub.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def add_sync(sync_) -> None:
    from gitmem.sync.exchange import SYNC_TIMEOUT, TIMEOUT_KEY
    takes_repo(sync_, cmd_sync)
    sync_.add_argument("remote", nargs="?", metavar="REMOTE",
                       help="the remote (default: branch.main.remote, origin, or the only one)")
    sync_.add_argument("--allow-secrets", action="store_true",
                       help="push even if the new commits seem to add secrets")
    sync_.add_argument("--allow-unrelated-histories", action="store_true",
                       help="merge the remote's main even if it shares no commit with this "
                            "repository (two repositories started apart)")
    sync_.add_argument("--timeout", type=positive_seconds, metavar="SECONDS",
                       help=f"give up after this long, retries included (default: git config "
                            f"{TIMEOUT_KEY}, else {SYNC_TIMEOUT:g})")


def add_remote(remote) -> None:
    remote_commands = remote.add_subparsers(metavar="ACTION", required=True)
    add = command(remote_commands, "add", "add a remote (as `git remote add`)", cmd_remote_add)
    add.add_argument("name", metavar="NAME")
    add.add_argument("url", metavar="URL")
    command(remote_commands, "list", "list the remotes as NAME<TAB>URL", cmd_remote_list)
    remove = command(remote_commands, "remove", "remove a remote (as `git remote remove`)",
                     cmd_remote_remove)
    remove.add_argument("name", metavar="NAME")


def add_status(parser) -> None:
    takes_repo(parser, cmd_status)
    parser.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def add_forget(sub) -> None:
    takes_repo(sub, cmd_forget)
    sub.add_argument("path", metavar="PATH",
                     help="the file the finding names (memory/user.md), or a record (user, "
                          "agent:<id>, session:<type>/<id>, thread:<id>)")
    sub.add_argument("--secret", required=True, metavar="FINGERPRINT",
                     help="the fingerprint `gitmem sync` printed for the finding")


def add_rescue(parser) -> None:
    takes_repo(parser, cmd_rescue)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = RESCUE_EXAMPLE
    parser.add_argument("commits", nargs="*", metavar="COMMIT",
                        help="only these dropped commits (ids or unique prefixes; default: all)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true", help="list the dropped commits, merge nothing")
    action.add_argument("--let-go", action="store_true",
                        help="stop keeping the COMMITs named (dropped on purpose): they are "
                             "listed no more and never merged back")
    parser.add_argument("--json", action="store_true", help="JSON, for scripts")


def cmd_init(args) -> None:
    from gitmem.opening.location import default_repo_path
    from gitmem.opening.policy import private_umask
    from gitmem.repository import Gitmem
    private_umask()
    path = args.path or args.repo or default_repo_path()
    with Gitmem.open(path, create=True, adopt=args.adopt) as mem:
        print(f"gitmem repository at {mem.engine.workdir}")


def cmd_clone(args) -> None:
    from gitmem.cli.edges import progress_bar
    from gitmem.sync.clone import REMOTE, clone
    from gitmem.opening.policy import private_umask
    private_umask()
    with clone(args.url, args.path or args.repo, progress=progress_bar("reading the history")) as mem:
        print(f"cloned {args.url} into {mem.engine.workdir} (remote {REMOTE}); "
              f"`gitmem sync` exchanges commits with it")


def cmd_gc(args) -> None:
    from gitmem.git.base import EngineError
    from gitmem.upkeep.maintenance import pack
    with open_repo(args) as mem:
        if args.prune_forgotten:
            from gitmem.sync.forget import prune_forgotten
            for name in prune_forgotten(mem.engine):
                print(f"dropped {name}", file=sys.stderr)
        report = pack(mem.engine, full=True, wait=600.0)
    if args.json:
        print_json(report._asdict())
    elif report.method == "skipped":
        raise EngineError("another gitmem process kept packing this repository for 10 minutes")
    else:
        print(f"{report.method}: loose objects {report.loose_before} -> {report.loose_after}, "
              f"packs {report.packs_before} -> {report.packs_after} ({report.seconds:.1f} s)")


def cmd_fsck(args) -> int:
    from gitmem.upkeep.maintenance import fsck
    with open_repo(args) as mem:
        report = fsck(mem)
    if args.json:
        print_json(report.to_json())
    else:
        bad_objects = any(p.where.startswith("object") for p in report.problems)
        print(f"objects: {'PROBLEMS' if bad_objects else 'ok'} ({report.objects_checked_by})")
        print(f"content at HEAD: {report.jsonl_files} JSONL files ({report.lines} lines), "
              f"{report.json_files} JSON files, {report.blobs} blobs")
        for problem in report.problems:
            print(f"problem: {problem}")
        print("ok" if report.ok else f"{len(report.problems)} problem"
              f"{'s' if len(report.problems) != 1 else ''} found")
    return 0 if report.ok else 1


def cmd_sync(args) -> None:
    from gitmem.sync.exchange import SecretsRefused, sync
    with open_repo(args) as mem:
        try:
            result = sync(mem, args.remote, allow_secrets=args.allow_secrets, timeout=args.timeout,
                          allow_unrelated_histories=args.allow_unrelated_histories)
        except SecretsRefused as exc:
            for line in exc.report():
                print(f"gitmem: {line}", file=sys.stderr)
            raise
    for line in result.describe():
        print(line)


def cmd_remote_add(args) -> None:
    with open_repo(args) as mem:
        mem.engine.remotes.add(args.name, args.url)


def cmd_remote_list(args) -> None:
    from gitmem.git.remote import scrub_credentials
    with open_repo(args) as mem:
        for name in mem.engine.remotes.names():
            print(f"{name}\t{scrub_credentials(mem.engine.config_get(f'remote.{name}.url') or '')}")


def cmd_remote_remove(args) -> None:
    with open_repo(args) as mem:
        mem.engine.remotes.remove(args.name)


def cmd_status(args) -> None:
    from gitmem.opening.location import locate_repo
    from gitmem.upkeep.status import describe, status
    with open_repo(args) as mem:
        report = status(mem)
    report["chosen_by"] = locate_repo(args.repo)[1]
    if args.json:
        print_json(report)
    else:
        print("\n".join(map(printable, describe(report))))  # a path is one row, escapes and all


def cmd_forget(args) -> None:
    from gitmem.sync.forget import forget_secret
    with open_repo(args) as mem:
        for line in forget_secret(mem, args.path, args.secret).describe():
            print(line)


def cmd_rescue(args) -> None:
    from gitmem.records.dates import format_date
    from gitmem.sync.rescue import RescueError, chosen, find_lost, let_go, rescue
    if args.let_go and not args.commits:
        raise RescueError("--let-go needs the COMMITs to let go (see `gitmem rescue --list`)")
    with open_repo(args) as mem:
        if args.list or args.let_go:
            dropped = (let_go(mem.engine, args.commits) if args.let_go else
                       chosen(find_lost(mem.engine), args.commits or None))
            report = [d.to_json() for d in dropped]
            lines = [f"{'let go ' if args.let_go else ''}{d.commit[:10]}  "
                     f"{format_date(d.time, d.offset)}  {d.summary}" for d in dropped]
        else:
            rescued = rescue(mem, args.commits or None)
            report = [r.to_json() for r in rescued]
            lines = [f"merged back {r.dropped.commit[:10]} ({r.dropped.summary}) as {r.merge[:10]}: "
                     f"{len(r.files)} file{'s' if len(r.files) != 1 else ''} changed" for r in rescued]
            lines += [f"to tidy     {spot}" for r in rescued for spot in r.spots]
            lines += [f"not updated (uncommitted hand edit): {p}" for r in rescued for p in r.kept]
    if args.json:
        print_json(report)
    elif lines:
        print("\n".join(lines))
    else:
        print("nothing dropped: main holds every commit gitmem made")
