"""A write's attempt at ``main``: what it put in the work tree and the index, and how it
is made again when plain git moved ``main`` first (see :meth:`GitEngine.update`)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping

from gitmem.git.base import Changes
from gitmem.git.snapshot import Snapshot


class Attempt(namedtuple("Attempt", "snapshot changes ids expected")):
    """A commit made for ``changes`` on ``snapshot`` whose files reached the work tree and
    the index, but not main: another writer (plain git) moved main first. ``ids`` is
    ``{path: its blob id in the commit}`` (None: deleted), ``expected`` ``{path: what the
    work-tree file held for the write to replace it}``."""

    __slots__ = ()

    def written(self) -> dict[str, str | None]:
        """``{path: blob id}`` of the work-tree files this attempt replaced (not those that
        held its version already: a person's save committed as it is)."""
        return {path: new_id for path, new_id in self.ids.items() if self.expected.get(path) != new_id}

    def onto(self, tip: Snapshot, make_changes: Callable[[Snapshot], Changes | None]) -> Changes | None:
        """The changes that make this write on main's new ``tip``. A person's commit may
        hold some of its files already (``git commit -a`` took them from the work tree, a
        plain commit from the index): those are not made again (an append would be
        doubled), the files it left as they were get this attempt's version, and the others
        are made again. None when ``tip`` holds the whole write."""
        carried, other = False, []
        changes: dict[str, bytes | None] = {}
        for path, new_id in self.ids.items():
            now = tip.blob_id(path)
            if now == new_id:
                carried = True
            elif now == self.snapshot.blob_id(path):
                changes[path] = self.changes[path]
            else:
                other.append(path)
        if not carried:
            return make_changes(tip)  # the usual retry: made again on the new tip
        if other:
            again = make_changes(tip) or {}
            changes.update({path: again[path] for path in other if path in again})
        return changes or None


def expected_files(snapshot: Snapshot, changes: Changes, before: Attempt | None,
              worktree_holds: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """What each work-tree file must hold for a write of ``changes`` made on ``snapshot`` to
    replace it: what the attempt ``before`` wrote there, else ``worktree_holds``' version
    (a change made from what the work tree holds), else the snapshot's."""
    written = before.written() if before is not None else {}
    holds = worktree_holds or {}
    return {path: written[path] if path in written else holds[path] if path in holds
            else snapshot.blob_id(path) for path in changes}
