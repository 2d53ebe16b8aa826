"""Moving ``main``: a compare-and-swap on the ref, waiting its turn behind plain git.

With fsync durability, libgit2 syncs the ref's folder right after it renames
``main.lock`` into place; when that sync fails, ``main`` has moved but may not be on
disk: the folder is synced again, and the move fails (:class:`NotOnDisk`) if that fails too.

    branch = Branch(repo, gitdir, tip=reader.tip, durable=True)
    branch.move(expected, new_commit, "memory: append to user memory")   # False: moved meanwhile
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitmem.git.base import REF, EngineError, fsync_path

log = logging.getLogger("gitmem.engine")

REF_LOCK_WAIT = 0.005  # seconds between tries while a git command holds main's lock
REF_LOCK_DEADLINE = 5.0  # seconds a write waits at most for main's lock


class NotOnDisk(EngineError):
    """``main`` was moved, but the move could not be put on disk (fsync durability)."""


class Branch:
    """``main`` of one repository, moved only from the commit its mover expects; with
    ``durable``, a move returns only once it is on disk."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, *, tip: Callable[[], pygit2.Oid | None],
                 durable: bool = False):
        self._repo = repo
        self._gitdir = gitdir
        self._tip = tip
        self._durable = durable

    def move_waiting(self, base: pygit2.Oid | None, commit_id: pygit2.Oid, message: str) -> bool:
        """Move ``main`` from ``base`` to ``commit_id``; False when another writer moved it
        first. While plain git holds main's lock (a moment, on each of its moves) it waits
        its turn, REF_LOCK_DEADLINE at most."""
        deadline = time.monotonic() + REF_LOCK_DEADLINE
        while True:
            try:
                return self.move(base, commit_id, message)
            except pygit2.GitError as exc:
                if self._tip() == commit_id:  # moved: what failed came after the rename
                    self._sync_again(exc)
                    return True
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

    def _sync_again(self, failure: pygit2.GitError) -> None:
        """Put the ref's folder on disk after libgit2 moved main and then failed (syncing
        that folder is all it does after the rename); raise NotOnDisk if that fails too."""
        folder = (self._gitdir / REF).parent
        if not self._durable:
            log.warning("main moved, then libgit2 failed: %s", failure)
            return
        try:
            fsync_path(folder)
        except OSError as again:
            raise NotOnDisk(f"the write is committed but not on disk: syncing {folder} failed "
                            f"twice ({again.strerror or again}); it may not survive a power loss "
                            "(is the disk failing?)") from None
        log.warning("syncing %s failed after main moved (%s): synced again", folder, failure)

    def move(self, expected: pygit2.Oid | None, new: pygit2.Oid, message: str) -> bool:
        """Move ``main`` from ``expected`` to ``new`` under the ref's lock; False when it is elsewhere."""
        summary = message.split("\n", 1)[0]
        with self._repo.transaction() as txn:
            txn.lock_ref(REF)
            if self._tip() != expected:
                return False
            txn.set_target(REF, new, message=f"gitmem: {summary}")
        return True
