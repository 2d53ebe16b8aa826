"""Moving ``main``: a compare-and-swap on the ref, waiting its turn behind plain git.

    branch = Branch(repo, gitdir, tip=reader.tip)
    branch.move(expected, new_commit, "memory: append to user memory")   # False: moved meanwhile
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitmem.git.base import REF, EngineError

REF_LOCK_WAIT = 0.005  # seconds between tries while a git command holds main's lock
REF_LOCK_DEADLINE = 5.0  # seconds a write waits at most for main's lock


class Branch:
    """``main`` of one repository, moved only from the commit its mover expects."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, *, tip: Callable[[], pygit2.Oid | None]):
        self._repo = repo
        self._gitdir = gitdir
        self._tip = tip

    def move_waiting(self, base: pygit2.Oid | None, commit_id: pygit2.Oid, message: str) -> bool:
        """Move ``main`` from ``base`` to ``commit_id``; False when another writer moved it
        first. While plain git holds main's lock (a moment, on each of its moves) it waits
        its turn, REF_LOCK_DEADLINE at most."""
        deadline = time.monotonic() + REF_LOCK_DEADLINE
        while True:
            try:
                return self.move(base, commit_id, message)
            except pygit2.GitError as exc:
                # libgit2 says "failed to lock file ... main.lock" (or "... exists"); the
                # lock may be gone by the time we look
                if not (os.path.exists(self._gitdir / f"{REF}.lock") or "lock" in str(exc)
                        or "exists" in str(exc)):
                    if self._tip() != base:
                        return False
                    raise
                if time.monotonic() >= deadline:
                    raise EngineError(f"main stayed locked by another git process for "
                                      f"{REF_LOCK_DEADLINE:g} s: {exc}") from None
            time.sleep(REF_LOCK_WAIT)
            if self._tip() != base:  # that git process moved it
                return False

    def move(self, expected: pygit2.Oid | None, new: pygit2.Oid, message: str) -> bool:
        """Move ``main`` from ``expected`` to ``new`` under the ref's lock; False when it is elsewhere."""
        summary = message.split("\n", 1)[0]
        with self._repo.transaction() as txn:
            txn.lock_ref(REF)
            if self._tip() != expected:
                return False
            txn.set_target(REF, new, message=f"gitmem: {summary}")
        return True
