"""Rescue: gitmem's commits that a history rewrite by hand took off ``main``.

``git commit --amend`` or ``git reset`` can move ``main`` to a commit whose history
lacks writes gitmem acknowledged. Every move of ``main`` is in its reflog: a former
tip that gitmem made (its reflog entry is gitmem's) and that main's history no longer
holds is *dropped*. :func:`gitmem.edits.rewrites.find_lost` keeps each one under
``refs/gitmem/rescue/<commit id>`` (only the newest of each dropped line: its history
comes along), so neither ``git gc`` nor a reflog expiry can delete it, and
``gitmem status`` lists it. (What a person's ``git commit`` dropped of gitmem's files
by accident is put back by itself: :func:`gitmem.edits.rewrites.put_back`.) :func:`rescue` merges it back with the sync merge rules
(:func:`gitmem.records.merge.merge_changes`; base: the common ancestor) as one merge commit
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

import logging
import os
from collections import namedtuple
from collections.abc import Iterable
from typing import Any

from gitmem.edits.handedits import HandEdits
from gitmem.edits.rewrites import LET_GO_FILE, Dropped, find_lost
from gitmem.errors import GitmemError
from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.records.merge import Spot, merge_changes, spots_paragraph
from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.sync.rescue")

OP = "rescue"  # the Gitmem-Op trailer of the merge commits
MOVED_RETRIES = 5  # merges computed again when plain git moves main meanwhile


class RescueError(GitmemError):
    """A commit named to rescue is not one that was dropped."""


class Rescued(namedtuple("Rescued", "dropped merge files spots kept")):
    """A :class:`Dropped` commit merged back: the ``merge`` commit, the ``files`` it changed,
    the ``spots`` where both versions were kept, and the files ``kept`` as they were in the
    work tree (they hold an uncommitted hand edit)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {**self.dropped.to_json(), "merge": self.merge, "files": self.files,
                "spots": [{"path": s.path, "line": s.line, "note": s.note} for s in self.spots],
                "kept": self.kept}


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


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)


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
        base = engine.log.merge_base(head, dropped.commit)
        merged = merge_changes(engine.log.changed_files(base, head),
                               engine.log.changed_files(base, dropped.commit), engine.read_blob)
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
    return (f"rescue: merge back {dropped.commit[:10]} ({dropped.summary})\n\n"
            "A history rewrite by hand took it off main.\n" + spots_paragraph(spots))
