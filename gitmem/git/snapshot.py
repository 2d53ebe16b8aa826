"""Reading committed state: revisions, checked trees, blobs cached by id, and snapshots.

A :class:`Snapshot` is a read-only view of one commit's tree; a :class:`Reader` gives
them their objects: it resolves revisions, checks every tree and blob for damage
before libgit2 reads it (:mod:`gitmem.git.objects`), and keeps parsed content by
blob id, so a record read twice is inflated and parsed once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast, overload

import pygit2

from gitmem.git.base import BRANCH, REF, DamagedObject, EngineError, T, is_hex
from gitmem.git.objects import ObjectCheck
from gitmem.git.statcache import StatCache, git_blob_id


class Reader:
    """Reads the objects of ``repo``: checked with ``objects``, cached up to ``cache_bytes``.

    A blob whose work-tree file ``stat_cache`` vouches for (under ``workdir``) is read
    from the file instead: a copy from the page cache, where inflating costs 3 ms a MB.
    """

    def __init__(self, repo: pygit2.Repository, objects: ObjectCheck, stat_cache: StatCache,
                 workdir: Path, cache_bytes: int):
        self._repo = repo
        self._objects = objects
        self._stat_cache = stat_cache
        self._workdir = workdir
        self._cache: OrderedDict[tuple[Any, Any], tuple[Any, int]] = OrderedDict()
        self._cache_bytes = cache_bytes  # bounded by the size of the blobs behind the entries
        self._cached_bytes = 0
        self._cache_lock = threading.Lock()

    def tip(self) -> pygit2.Oid | None:
        """The commit at the tip of ``main``, or None before the first commit."""
        ref = self._repo.references.get(REF)
        return cast(pygit2.Oid, ref.target) if ref is not None else None  # a branch: a direct ref

    def snapshot(self, commit_id: pygit2.Oid | None) -> Snapshot:
        return Snapshot(self, commit_id)

    def resolve(self, rev: str) -> pygit2.Oid:
        """The commit id of ``rev``; its history is checked (see :mod:`gitmem.git.objects`)."""
        known = self._plain_id(rev)
        try:
            # revparse reads objects: what "HEAD~2" or a date may reach is checked first
            self._objects.make_walkable([known] if known is not None else [self.tip()])
            found = self._repo.revparse_single(str(known) if known else rev).peel(pygit2.Commit).id
        except DamagedObject:
            raise
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
            raise EngineError(f"unknown revision {rev!r}") from exc
        self._objects.make_walkable([found])
        return found

    def _plain_id(self, rev: str) -> pygit2.Oid | None:
        """The object ``rev`` names when it is an object id or a ref, found without
        reading an object; else None."""
        if len(rev) == 40 and is_hex(rev):
            return pygit2.Oid(hex=rev)
        if rev in ("HEAD", BRANCH):
            return self.tip()
        try:
            ref = self._repo.references.get(rev)
            return cast(pygit2.Oid, ref.resolve().target) if ref is not None else None
        except (ValueError, KeyError, pygit2.GitError, pygit2.InvalidSpecError):
            return None

    def commit(self, rev: str) -> pygit2.Commit:
        """The commit ``rev`` names, checked; its history is not (see :meth:`resolve`)."""
        oid = self._plain_id(rev) or self.resolve(rev)
        return self._objects.load(oid, "a commit").peel(pygit2.Commit)

    @overload
    def tree_of(self, commit: str | pygit2.Oid, scope: str | None = None) -> pygit2.Tree: ...

    @overload
    def tree_of(self, commit: str | pygit2.Oid | None, scope: str | None = None) -> pygit2.Tree | None: ...

    def tree_of(self, commit: str | pygit2.Oid | None, scope: str | None = None) -> pygit2.Tree | None:
        """The root tree of a commit, every tree under it checked (with ``scope``, a path:
        only the folders on the way to it and under it, for reading that path alone)."""
        if commit is None:
            return None
        oid = commit if isinstance(commit, pygit2.Oid) else self.resolve(commit)
        tree_id = self._objects.load(oid, "a commit").peel(pygit2.Commit).tree_id
        if scope:
            self._objects.make_path_sound(tree_id, scope)
        else:
            self._objects.make_sound(tree_id, keep=oid == self.tip())
        return self._objects.load(tree_id, "folder /")

    def tree(self, tree_id: pygit2.Oid) -> pygit2.Tree:
        """A tree under a checked root tree."""
        return cast(pygit2.Tree, self._repo[tree_id])

    def blob(self, oid: pygit2.Oid) -> bytes:
        """The bytes of blob ``oid`` (cached like every read)."""
        return self.parsed(oid, None)

    @overload
    def parsed(self, oid: pygit2.Oid, parse: None, path: str | None = None) -> bytes: ...

    @overload
    def parsed(self, oid: pygit2.Oid, parse: Callable[[bytes], T], path: str | None = None) -> T: ...

    def parsed(self, oid: pygit2.Oid, parse: Callable[[bytes], T] | None, path: str | None = None) -> T | bytes:
        """``parse`` of a blob (its bytes when ``parse`` is None), inflated once and cached;
        read from the work-tree file of ``path`` when the stat cache vouches for it."""
        key = (oid, parse)
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key][0]
            raw = self._cache.get((oid, None))  # e.g. read from the work tree, proven equal
        data = raw[0] if raw is not None else None
        if data is None and path is not None:
            data = self._stat_cache.read(path, f"{self._workdir}/{path}", str(oid))
        if data is None:  # a loose blob checked just now comes inflated: not read twice
            data = self._objects.check(oid, path) or self._objects.read(oid, path)
        value = data if parse is None else parse(data)
        self._remember(key, value, len(data))
        return value

    def keep(self, blob_id: str, data: bytes) -> None:
        """Cache ``data`` as the bytes of blob ``blob_id`` (read by git, which checked them)."""
        self._remember((pygit2.Oid(hex=blob_id), None), data, len(data))

    def content_id(self, data: bytes) -> str:
        """The blob id of work-tree content ``data``, kept in the cache under that id: when
        it is HEAD's version, reading HEAD then inflates nothing."""
        blob_id = git_blob_id(data)
        self._remember((pygit2.Oid(hex=blob_id), None), data, len(data))
        return blob_id

    def _remember(self, key: tuple[Any, Any], value: Any, size: int) -> None:
        with self._cache_lock:
            if key in self._cache:
                return
            self._cache[key] = (value, size)
            self._cached_bytes += size
            while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
                _, (_, dropped) = self._cache.popitem(last=False)
                self._cached_bytes -= dropped


class Snapshot:
    """A read-only view of the tree of one commit (or of the empty tree before the first one).
    With ``scope`` (a path), only that path is checked for damage, and only it may be read."""

    def __init__(self, reader: Reader, commit_id: pygit2.Oid | None, scope: str | None = None):
        self._reader = reader
        self.commit_id = commit_id
        self._tree = reader.tree_of(commit_id, scope) if commit_id else None

    @property
    def id(self) -> str | None:
        return str(self.commit_id) if self.commit_id else None

    @property
    def tree(self) -> pygit2.Tree | None:
        """The commit's root tree (None before the first commit)."""
        return self._tree

    def blob_id(self, path: str) -> str | None:
        """The blob id at ``path``, or None when there is no file there."""
        entry = self.entry(path)
        return str(entry.id) if entry is not None and entry.type_str == "blob" else None

    def tree_id(self, path: str) -> str | None:
        """The tree id of folder ``path`` ("" is the root), or None when there is none."""
        if not path:
            return str(self._tree.id) if self._tree is not None else None
        entry = self.entry(path)
        return str(entry.id) if entry is not None and entry.type_str == "tree" else None

    def read(self, path: str) -> bytes | None:
        """The bytes of the file at ``path``, or None."""
        entry = self.entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return self._reader.parsed(entry.id, None, path)

    def read_parsed(self, path: str, parse: Callable[[bytes], T]) -> T | None:
        """``parse(bytes)`` of the file at ``path``, cached by blob id; None when there is no file."""
        entry = self.entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return self._reader.parsed(entry.id, parse, path)

    def exists(self, path: str) -> bool:
        return self.entry(path) is not None

    def list(self, path: str = "") -> list[str]:
        """Names in folder ``path`` (sorted as git sorts them); [] when there is no such folder."""
        tree = self._tree
        if tree is None:
            return []
        if path:
            entry = self.entry(path)
            if entry is None or entry.type_str != "tree":
                return []
            tree = self._reader.tree(entry.id)
        # pygit2 types a tree entry's name optional; it is never None
        return [e.name for e in tree]  # type: ignore[misc]

    def files(self, path: str = "") -> Iterator[str]:
        """Every file path under folder ``path``, recursively."""
        for name in self.list(path):
            child = f"{path}/{name}" if path else name
            entry = self.entry(child)
            assert entry is not None  # listed from this snapshot's tree just now
            if entry.type_str == "tree":
                yield from self.files(child)
            else:
                yield child

    def entry(self, path: str) -> pygit2.Object | None:
        """The tree entry at ``path`` (a pygit2 object), or None."""
        if self._tree is None:
            return None
        try:
            return self._tree[path]
        except KeyError:
            return None
