"""``gitmem forget PATH --secret FINGERPRINT``: take a secret back before it leaves the machine.

``gitmem sync`` refuses to push commits that add a likely secret, and names each
finding by file and fingerprint (:mod:`gitmem.sync.secrets`). Deleting the memory does not
help: the secret is still in the commit that added it. This makes the commits not
pushed yet (to any remote) again without the lines of PATH whose fingerprint is
FINGERPRINT, keeping every other change, author, date and message; the work tree
follows. A line already on a remote is refused: it has left the machine (rotate the
secret).

The old commits stay reachable under ``refs/gitmem/forgotten/<UTC time>`` (so
nothing is lost if the wrong line went) until ``gitmem gc --prune-forgotten``;
after that git drops them once their reflog entries expire, as for any commit.

    result = forget_secret(mem, "memory/user.md", "3f9a0c1d2e4b5a6f")
    print(result.describe())
"""

from __future__ import annotations

import time
from collections import namedtuple
from collections.abc import Callable

from gitmem.edits.handedits import HandEdits
from gitmem.git.base import EngineError, check_path
from gitmem.git.engine import GitEngine
from gitmem.records import layout
from gitmem.repository import Gitmem
from gitmem.sync import secrets

FORGOTTEN_REFS = "refs/gitmem/forgotten"


class ForgetRefused(EngineError):
    """Nothing to take back, or the line has been pushed already; nothing was changed."""


class Forgotten(namedtuple("Forgotten", "path fingerprint rewritten tip kept_ref hand_edited")):
    """What one forget did: the line with ``fingerprint`` in ``path`` forgotten, the commits
    made again (``rewritten``, a count), the new ``tip`` of main, where the old commits are
    kept (``kept_ref``), and the work-tree files left alone (``hand_edited``: they hold an
    uncommitted edit)."""

    __slots__ = ()

    def describe(self) -> list[str]:
        lines = [f"forgot the line with fingerprint {self.fingerprint} in {self.path}: "
                 f"{self.rewritten} unpushed commit{'s' if self.rewritten != 1 else ''} made "
                 f"again, now at {self.tip[:10]}",
                 f"the old commits are kept as {self.kept_ref} until "
                 "`gitmem gc --prune-forgotten`"]
        lines += [f"not updated (uncommitted hand edit): {path}" for path in self.hand_edited]
        return lines


def forget_secret(mem: Gitmem, target: str, fingerprint: str) -> Forgotten:
    """Drop the lines of ``target`` (a file path as a finding names it, or a record name
    such as ``user``) whose :func:`~gitmem.sync.secrets.fingerprint` is ``fingerprint`` from
    every commit not pushed yet. Raises :class:`ForgetRefused` when no such commit adds
    one, or when a pushed commit holds one."""
    engine = mem.engine
    path = _path_of(target)
    HandEdits.of(engine).commit_pending()  # an edit saved by hand is part of what is rewritten
    head = engine.head()
    pushed = {remote: tip for remote in engine.remotes.names()
              if (tip := engine.remotes.tip(remote)) is not None}
    unpushed = engine.log.new_commits(head, list(pushed.values())) if head else []

    def holds(snapshot, file: str) -> bool:
        data = snapshot.read(file) or b""
        return any(secrets.fingerprint(file, line) == fingerprint for line in data.splitlines())

    for remote, tip in pushed.items():
        _refuse_if_held(engine, engine.snapshot(tip), path, holds, f"on {remote} (pushed)")
    unpushed_set = set(unpushed)
    for commit in unpushed:  # a line a pushed parent holds came from the remote
        for parent in engine.log.commit_info(commit).parents:
            if parent not in unpushed_set:
                _refuse_if_held(engine, engine.snapshot(parent), path, holds, "in a pushed commit")
    adding = [f for f in secrets.scan(engine, unpushed)
              if f.fingerprint == fingerprint and _under(f.path, path)]
    if not adding:
        raise ForgetRefused(f"no commit waiting to be pushed adds a line with fingerprint "
                            f"{fingerprint} to {path} (`gitmem sync` lists the findings)")

    def without_the_line(file: str, data: bytes) -> bytes:
        return _without_lines(data, lambda line: secrets.fingerprint(file, line) == fingerprint)

    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    kept_ref = f"{FORGOTTEN_REFS}/{stamp}.{time.time_ns() % 1_000_000_000:09d}Z"
    tip, hand_edited = engine.rewrite_commits(
        unpushed, path, without_the_line, kept_ref,
        f"forget: the line with fingerprint {fingerprint} in {path}")
    mem.search_index.drop()  # it may hold the line too: built again, from the new commits
    mem.search_index.vectors.drop()  # and a vector made from it
    return Forgotten(path, fingerprint, len(unpushed), tip, kept_ref, hand_edited)


def prune_forgotten(engine: GitEngine) -> list[str]:
    """Stop keeping the commits that :func:`forget_secret` replaced; returns the refs dropped."""
    names = engine.refs.refs_under(FORGOTTEN_REFS)
    for name in names:
        engine.refs.delete_ref(name)
    return names


def _path_of(target: str) -> str:
    try:
        return layout.parse_record(target).path
    except layout.BadRecordName:
        return check_path(target.strip("/"))


def _without_lines(data: bytes, doomed: Callable[[bytes], bool]) -> bytes:
    """``data`` without its ``doomed`` lines, and without the blank line each leaves at the
    start, at the end or doubled (a memory's block was the line and its blank line)."""
    kept: list[bytes] = []
    after_dropped = False
    for line in data.splitlines(keepends=True):
        if doomed(line):
            after_dropped = True
            continue
        if after_dropped and not line.strip() and (not kept or not kept[-1].strip()):
            continue  # the blank line the dropped one leaves first, or doubled
        after_dropped = False
        kept.append(line)
    while after_dropped and kept and not kept[-1].strip():  # ... or last
        kept.pop()
    return b"".join(kept)


def _under(file: str, path: str) -> bool:
    return file == path or file.startswith(path + "/")


def _refuse_if_held(engine: GitEngine, snapshot, path: str, holds, where: str) -> None:
    files = [path] if snapshot.blob_id(path) else list(snapshot.files(path))
    for file in files:
        if holds(snapshot, file):
            raise ForgetRefused(
                f"{file}: the line is already {where}; it has left this machine, so "
                "rewriting here cannot take it back: rotate the secret, then edit it out")
