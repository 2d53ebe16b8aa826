"""The git engine: the only package that imports pygit2.

One module per concept, the lower ones first:

- ``base``: names (``BRANCH``, ``REF``), errors, :class:`Identity`, :class:`CommitInfo`,
  path checks, commit messages with trailers;
- ``lock`` (the writers' lock), ``statcache`` (what stat data vouches for), ``journal``
  (what each work-tree file held), ``gitproc`` (the one runner of the ``git`` command):
  no pygit2;
- ``objects``: each object checked before libgit2 reads it (damaged loose objects);
- ``snapshot``: :class:`Snapshot` and the :class:`~gitmem.git.snapshot.Reader` of
  revisions, trees and cached blobs;
- ``worktree``: atomic work-tree writes that never overwrite a person's save;
- ``index``: the index kept in step with HEAD, and crash recovery;
- ``log``: history and diffs; ``remote``: fetch and push; ``refs``: the reflog, rescue
  and backup refs; ``pack``: packing and fsck; ``facts``: a repository looked at before
  it is opened;
- ``engine``: :class:`GitEngine`, which commits (compare-and-swap on ``main``), merges
  and moves ``main``, made of the pieces above; the stores and edges use it alone.

The names below are imported from their modules on first use, so ``import gitmem.git``
costs nothing until one is used.
"""

from __future__ import annotations

import importlib

_HOMES = {
    "base": ("BRANCH", "REF", "GITMEM_DIR", "DURABILITIES", "Changes", "EngineError", "UnsafePath",
             "BranchMoved", "DiskFull", "DamagedObject", "Identity", "CommitInfo", "check_path",
             "with_trailers"),
    "engine": ("GitEngine", "RecordGuard", "BackgroundPacker"),
    "snapshot": ("Snapshot",),
    "log": ("FileDiff",),
    "refs": ("ReflogEntry", "REFLOG_SCAN", "RESCUE_REFS", "BACKUP_REFS"),
    "remote": ("scrub_credentials", "NETWORK_TIMEOUT"),
    "facts": ("RepositoryFacts", "inspect_repository"),
    "index": ("INDEX_IDLE",),
    "lock": ("FileLock", "LockTimeout"),
    "statcache": ("git_blob_id",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_HOME_OF)


def __getattr__(name: str):
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
