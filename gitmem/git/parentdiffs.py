"""The files each of many commits changed from each of its parents, from one ``git diff-tree``.

What sync's secret scan (:mod:`gitmem.sync.secrets`) reads before a push: git diffs the trees
(skipping the folders that are the same by id, which libgit2's tree diff walks) and
reads no blob; its output is read as it comes (:func:`gitmem.git.gitproc.stream`), so
the caller reads the blobs it wants while git goes on.

    for commit in changes_from_parents(gitdir, commits):
        commit.id, commit.parents, commit.diffs   # diffs: [{path: (old blob, new blob)}, ...]
"""

from __future__ import annotations

import os
import subprocess
from collections import namedtuple
from collections.abc import Generator, Iterator

from gitmem.git import gitproc
from gitmem.git.base import EngineError, is_hex
from gitmem.git.rawlog import raw_log

TIMEOUT = 600.0  # seconds: hundreds of thousands of changed files take a few
READ_SIZE = 1 << 20
_NO_BLOB = b"0" * 40


class ParentDiffs(namedtuple("ParentDiffs", "id parents diffs")):
    """One commit and what it changed from those of its parents it differs from: its ``id``,
    its ``parents``' ids, and ``diffs``, a tuple of ``{path: (blob id in the parent, blob id
    in the commit)}`` (None: no file) for each parent the commit differs from, in parent
    order (the root commit: one, from nothing)."""

    __slots__ = ()

    def changed_from_every_parent(self) -> bool:
        """True when the commit differs from each of its parents (a merge may not)."""
        return len(self.diffs) == max(len(self.parents), 1)


def changes_from_parents(gitdir: str | os.PathLike, commits: list[str], *,
                         timeout: float = TIMEOUT) -> Generator[ParentDiffs, None, None]:
    """The :class:`ParentDiffs` of each of ``commits`` (commit ids) in that order, but for
    the commits that change nothing. Raises EngineError when git fails."""
    if not all(len(c) == 40 and is_hex(c) for c in commits):
        raise EngineError("not a commit id")
    if not commits:
        return
    listed = "".join(f"{c}\n" for c in dict.fromkeys(commits)).encode()  # each once: a commit's diffs come together
    args = ["--git-dir", str(gitdir), "diff-tree", "--stdin", "-r",
            "-m", "--root", "--no-renames", "--no-abbrev", "--no-color", "-z", "--format=%H %P"]
    head: list[bytes] | None = None  # the commit and parents of the diffs being read
    diffs: list[dict[str, tuple[str | None, str | None]]] = []
    try:
        for header, changes in raw_log(gitproc.stream(args, cwd=gitdir, timeout=timeout,
                                                      input=listed, chunk=READ_SIZE)):
            fields = (header or b"").split(b" ")  # "commit parent...": a diff of it, or of the next
            if head is not None and fields != head:
                yield from _parent_diffs(head, diffs)
                diffs = []
            head = fields
            diff: dict[str, tuple[str | None, str | None]] = {}
            diffs.append(diff)
            for entry, path in changes:
                old, new = (None if blob == _NO_BLOB else blob.decode() for blob in entry[2:4])
                if old != new:  # a change of mode alone is no change
                    diff[path.decode("utf-8", "surrogateescape")] = (old, new)
    except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
        raise EngineError(f"cannot diff the commits: {exc}") from None
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines()
        raise EngineError("cannot diff the commits: "
                          + (lines[-1] if lines else "git diff-tree failed")) from None
    if head is not None:
        yield from _parent_diffs(head, diffs)


def _parent_diffs(head: list[bytes], diffs: list[dict[str, tuple[str | None, str | None]]]) \
        -> Iterator[ParentDiffs]:
    """The commit's :class:`ParentDiffs`, if it changed a file (not a mode alone)."""
    if any(diffs):
        commit, *parents = (field.decode() for field in head if field)
        yield ParentDiffs(commit, tuple(parents), tuple(d for d in diffs if d))
