"""Trees built in memory for the paths a commit changes, and their blobs written.

    trees = TreeWriter(repo, objects)
    tree_id = trees.build(base_tree, {"memory/user.md": b"likes tea\\n", "old.md": None})
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pygit2

from gitmem.git.base import Changes, DiskFull, UnsafePath
from gitmem.git.objects import ObjectCheck

FULL_DISK_MARGIN = 1 << 20  # bytes: a write failing with less free than its data and this is "disk full"


class TreeWriter:
    """Writes the trees and blobs of a commit: only the touched folders are rebuilt."""

    def __init__(self, repo: pygit2.Repository, objects: ObjectCheck):
        self._repo = repo
        self._objects = objects

    def build(self, base: pygit2.Tree | None, changes: Changes) -> pygit2.Oid:
        """The tree of ``base`` with ``changes`` ({path: bytes, or None to delete}) applied."""
        return self._build(base, nest(changes)) or self._repo.TreeBuilder().write()

    def _build(self, base: pygit2.Tree | None, nested: dict) -> pygit2.Oid | None:
        builder = self._repo.TreeBuilder(base) if base is not None else self._repo.TreeBuilder()
        for name, change in nested.items():
            existing = base[name] if base is not None and name in base else None
            if isinstance(change, dict):
                sub = cast(pygit2.Tree, self._repo[existing.id]) \
                    if existing is not None and existing.type_str == "tree" else None
                oid = self._build(sub, change)
                if oid is None:
                    if existing is not None:
                        builder.remove(name)
                else:
                    builder.insert(name, oid, pygit2.enums.FileMode.TREE)
            elif change is None:
                if existing is not None:
                    builder.remove(name)
            else:
                blob_id = self._repo.create_blob(change)
                self._objects.remember(self._objects.checked, blob_id)
                builder.insert(name, blob_id, pygit2.enums.FileMode.BLOB)
        if len(builder) == 0:
            return None
        return builder.write()


def nest(changes: Changes) -> dict:
    """``{"a/b": x}`` as ``{"a": {"b": x}}``; UnsafePath for a path that is a file and a folder at once."""
    nested: dict = {}
    for path, data in changes.items():
        *folders, name = path.split("/")
        node = nested
        for folder in folders:
            node = node.setdefault(folder, {})
            if not isinstance(node, dict):
                raise UnsafePath(f"{path!r} needs {folder!r} to be a folder and a file at once")
        if isinstance(node.get(name), dict):
            raise UnsafePath(f"{path!r} is both a file and a folder in one change")
        node[name] = data
    return nested


def disk_full(gitdir: Path, changes: Changes) -> DiskFull | None:
    """The error to raise for a failed object write when the disk is (about) full. On
    ENOSPC libgit2 may report a stale message ("the path 'x' does not exist in the
    given tree", "no error"), so the free space says what happened."""
    try:
        st = os.statvfs(gitdir)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    needed = sum(len(data) for data in changes.values() if data is not None) + FULL_DISK_MARGIN
    if free >= needed:
        return None
    return DiskFull(f"the disk holding {gitdir} is full ({free // 1024} KB free): "
                    "nothing was committed; free some space and write again")
