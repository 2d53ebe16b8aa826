"""Rescue: gitmem's commits that a history rewrite by hand took off ``main``.

``git commit --amend`` or ``git reset`` can move ``main`` to a commit whose history
lacks writes gitmem acknowledged. Every move of ``main`` is in its reflog: a former
tip that gitmem made (its reflog entry is gitmem's) and that main's history no longer
holds is *dropped*. :func:`find_lost` keeps each one under
``refs/gitmem/rescue/<commit id>`` (only the newest of each dropped line: its history
comes along), so neither ``git gc`` nor a reflog expiry can delete it, and
``gitmem status`` lists it. :func:`rescue` merges it back with the sync merge rules
(:func:`gitmem.merge.merge_changes`; base: the common ancestor) as one merge commit
on ``main``, which puts it back in main's history, and releases the ref. Nothing is
reset: what the rewrite added (an amend's own change) stays. :func:`let_go` is for a
commit the person dropped on purpose: its ref is released and it is listed no more
(its id is kept in ``.git/gitmem/rescue-let-go``); it never enters main's history.

    for dropped in find_lost(mem.engine):
        print(dropped.commit[:10], dropped.summary)
    rescue(mem)          # every dropped commit; rescue(mem, ["1a2b3c"]) just that one
    let_go(mem.engine, ["1a2b3c"])
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterable
from typing import Any

from gitmem.git.base import EngineError, Identity
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.refs import ReflogEntry
from gitmem.handedits import HandEdits
from gitmem.history import format_date
from gitmem.merge import Spot, merge_changes
from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.rescue")

OP = "rescue"  # the Gitmem-Op trailer of the merge commits
LET_GO_FILE = "rescue-let-go"  # in .git/gitmem/: ids of dropped commits the person let go
LOOKED_FILE = "rescue-looked"  # in .git/gitmem/: the newest move of main find_lost looked at
MOVED_RETRIES = 5  # merges computed again when plain git moves main meanwhile


class RescueError(Exception):
    """A commit named to rescue is not one that was dropped."""


@dataclasses.dataclass(frozen=True)
class Dropped:
    """A gitmem commit that main's history no longer holds, kept under ``ref``."""

    commit: str
    time: int  # commit time, seconds since the epoch
    offset: int  # minutes east of UTC
    summary: str
    ref: str  # "" while it cannot be kept (a read-only repository)

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "time": format_date(self.time, self.offset),
                "summary": self.summary, "ref": self.ref}


@dataclasses.dataclass(frozen=True)
class Rescued:
    """A dropped commit merged back: the merge commit and the files it changed."""

    dropped: Dropped
    merge: str
    files: list[str]
    spots: list[Spot]
    kept: list[str]  # files left alone in the work tree: they hold an uncommitted hand edit

    def to_json(self) -> dict[str, Any]:
        return {**self.dropped.to_json(), "merge": self.merge, "files": self.files,
                "spots": [{"path": s.path, "line": s.line, "note": s.note} for s in self.spots],
                "kept": self.kept}


def find_lost(engine: GitEngine) -> list[Dropped]:
    """The dropped commits, newest first, each kept under ``refs/gitmem/rescue/``.

    Searches the newest entries of main's reflog (engine.REFLOG_SCAN) and the refs kept
    before; a kept ref whose commit main holds again (merged back, or restored by hand)
    is released. Only a move of main that gitmem did not make can drop a commit (each of
    gitmem's is a commit on top, a merge or a fast-forward): without one, and with no
    ref kept, nothing is walked. Moves an earlier call looked at are not looked at again
    (telling whether one kept main's history can cost a walk of all of it).
    """
    with engine.lock if engine.writable else contextlib.nullcontext():
        kept = engine.refs.rescue_refs()
        entries = engine.refs.reflog()
        unseen = _not_looked_at(engine, entries)
        rewrites = [entry for entry in unseen
                    if entry.old and not _made_by_gitmem(engine, entry)
                    and not _descends(engine, entry.new, entry.old)]
        if not kept and not rewrites:
            _looked_at(engine, unseen)
            return []
        # The tip each rewrite replaced, if gitmem made it, then every tip gitmem made.
        candidates = [*kept, *(e.old for e in rewrites if _committed_by_gitmem(engine, e.old)),
                      *(e.new for e in entries if e.new and _made_by_gitmem(engine, e))]
        dropped = engine.refs.dropped_tips(candidates, _let_go(engine))
        for commit in kept.keys() - set(dropped) if engine.writable else ():
            engine.refs.release_rescued(commit)
        found = []
        for commit in dropped:
            ref = kept.get(commit)
            if ref is None:  # a read-only repository is only looked at
                ref = engine.refs.keep_for_rescue(commit) if engine.writable else ""
                log.warning("main no longer holds gitmem commit %s (a history rewrite by hand?): "
                            "kept as %s; `gitmem rescue` merges it back", commit[:10], ref)
            info = engine.commit_info(commit)
            found.append(Dropped(commit, info.time, info.offset, info.summary, ref))
        if all(d.ref for d in found):  # each kept: later calls find it from its ref
            _looked_at(engine, unseen)
    return sorted(found, key=lambda d: d.time, reverse=True)


def let_go(engine: GitEngine, commits: Iterable[str]) -> list[Dropped]:
    """Stop keeping the dropped commits named by ``commits`` (ids or unique prefixes):
    their refs are released and they (and their history) are listed no more."""
    with engine.lock:
        named = chosen(find_lost(engine), commits)
        with open(engine.private_dir / LET_GO_FILE, "a", encoding="ascii", opener=_private) as file:
            file.writelines(f"{d.commit}\n" for d in named)
        for d in named:
            engine.refs.release_rescued(d.commit)
    return named


def _let_go(engine: GitEngine) -> list[str]:
    try:
        return (engine.private_dir / LET_GO_FILE).read_text(encoding="ascii").split()
    except FileNotFoundError:
        return []


def _not_looked_at(engine: GitEngine, entries: list[ReflogEntry]) -> list[ReflogEntry]:
    """``entries`` (newest first) newer than the one :func:`_looked_at` noted; all of them
    when none is (none noted yet, or the reflog was expired or rewritten)."""
    try:
        noted = (engine.private_dir / LOOKED_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return entries
    for count, entry in enumerate(entries):
        if _entry_key(entry) == noted:
            return entries[:count]
    return entries


def _looked_at(engine: GitEngine, unseen: list[ReflogEntry]) -> None:
    """Note the newest of ``unseen`` (the moves not looked at before) as looked at."""
    if unseen and engine.writable:
        with contextlib.suppress(OSError):  # the next call looks again
            write_private(engine.private_dir / LOOKED_FILE, f"{_entry_key(unseen[0])}\n".encode("ascii"))


def _entry_key(entry: ReflogEntry) -> str:
    return f"{entry.old or '-'} {entry.new or '-'} {entry.time}"


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


def _made_by_gitmem(engine: GitEngine, entry: ReflogEntry) -> bool:
    """True for a reflog entry of gitmem's: a commit by its identity, or a move it made."""
    return entry.message.startswith("gitmem: ") or Identity(entry.name, entry.email) == engine.identity


def _committed_by_gitmem(engine: GitEngine, commit: str) -> bool:
    try:
        return engine.refs.committer_of(commit) == engine.identity
    except EngineError:  # gone (pruned)
        return False


def _descends(engine: GitEngine, commit: str | None, ancestor: str) -> bool:
    try:
        return commit is not None and engine.is_ancestor(ancestor, commit)
    except EngineError:  # one of them is gone: nothing to tell
        return False


def rescue(mem: Gitmem, commits: Iterable[str] | None = None) -> list[Rescued]:
    """Merge the dropped commits (``commits``: ids or unique prefixes of some of them;
    None: all) back into ``main``, one merge commit each, oldest first.

    Pending hand edits are committed first, as before a sync. Raises RescueError for a
    commit that is not a dropped one.
    """
    engine = mem.engine
    with engine.lock:
        dropped = chosen(find_lost(engine), commits)
        HandEdits.of(engine).commit_pending()
        return [_merge_back(engine, d) for d in reversed(dropped)]


def chosen(dropped: list[Dropped], commits: Iterable[str] | None) -> list[Dropped]:
    """The commits of ``dropped`` that ``commits`` (ids or unique prefixes; None: all)
    name; raises RescueError for a name that matches none or more than one."""
    if commits is None:
        return dropped
    named = []
    for name in commits:
        matches = [d for d in dropped if d.commit.startswith(name.lower())] if name else []
        if len(matches) != 1:
            what = "no" if not matches else "more than one"
            raise RescueError(f"{what} dropped commit matches {name!r} (see `gitmem rescue --list`)")
        if matches[0] not in named:
            named.append(matches[0])
    return [d for d in dropped if d in named]


def _merge_back(engine: GitEngine, dropped: Dropped) -> Rescued:
    """One merge commit of ``main`` and the dropped commit (we hold the writers' lock, so
    only plain git can move main meanwhile: then the merge is computed again)."""
    for _ in range(MOVED_RETRIES):
        head = engine.head()
        if head is None:
            raise EngineError("main has no commit to merge into")
        base = engine.merge_base(head, dropped.commit)
        merged = merge_changes(engine.changed_files(base, head),
                               engine.changed_files(base, dropped.commit), engine.read_blob)
        try:
            commit, kept = engine.commit_merge(head, dropped.commit, merged.changes,
                                               _message(dropped, merged.spots),
                                               {"Gitmem-Op": OP, "Gitmem-Rescued": dropped.commit})
        except EngineError:
            if engine.head() != head:
                continue
            raise
        engine.refs.release_rescued(dropped.commit)
        log.info("merged dropped commit %s back as %s", dropped.commit[:10], commit[:10])
        return Rescued(dropped, commit, sorted(merged.changes), merged.spots, kept)
    raise EngineError("main kept moving while merging back; run `gitmem rescue` again")


def _message(dropped: Dropped, spots: list[Spot]) -> str:
    message = (f"rescue: merge back {dropped.commit[:10]} ({dropped.summary})\n\n"
               "A history rewrite by hand took it off main.\n")
    if spots:
        message += ("\nBoth sides changed the same lines at these places; both versions "
                    "were kept\n(ours, a blank line, theirs). Tidy them in an editor:\n")
        message += "".join(f"- {spot}\n" for spot in spots)
    return message
