"""The git engine: the only module that imports pygit2.

One operation matters: apply a set of path changes to branch ``main`` as one commit,
atomically, serialised across processes, with a compare-and-swap on the ref. The
work tree is kept in step with each commit, and the index is refreshed in the
background so that ``git status`` stays clean.

    engine = GitEngine.open("/path/to/repo")
    engine.commit({"memory/user.md": b"likes tea\\n"}, "memory: replace user memory")
    engine.snapshot().read("memory/user.md")   # b"likes tea\\n"
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import hashlib
import logging
import os
import re
import socket
import stat
import subprocess
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import pygit2

from gitmem.journal import Journal
from gitmem import gitproc
from gitmem.lock import FileLock
from gitmem.statcache import StatCache, git_blob_id, racy, read_regular, stat_key

log = logging.getLogger("gitmem.engine")

BRANCH = "main"
REF = f"refs/heads/{BRANCH}"
_HEAD_ON_MAIN = f"ref: {REF}".encode()
GITMEM_DIR = "gitmem"  # inside .git/
FILE_MODE = 0o600
DIR_MODE = 0o700
INDEX_IDLE = 0.3  # seconds without writes before the index is refreshed
INDEX_MAX_DELAY = 1.0  # refresh at the latest this long after the first pending write
MAX_CAS_RETRIES = 20
REF_LOCK_WAIT = 0.05  # seconds to wait, per attempt, while a git command holds main's lock
OBJECT_WRITE_RETRIES = 3  # object writes that may fail while a packer removes empty folders
DURABILITIES = ("fast", "fsync")  # fsync: on disk before a write is answered (power loss)
RECOVERY_DEPTH = 1000  # commits searched for the versions a killed writer may have left
STALE_GIT_LOCK_AGE = 10.0  # a ref/index .lock older than this, while we hold our lock, is stale
TREE_CACHE_LIMIT = 64 << 20  # bytes: the largest tree libgit2 keeps parsed (see GitEngine)

Changes = Mapping[str, "bytes | None"]
T = TypeVar("T")


class EngineError(Exception):
    """A storage operation could not be carried out."""


class UnsafePath(EngineError):
    """A path would leave the repository or step into .git."""


@dataclasses.dataclass(frozen=True)
class Identity:
    """Who a commit is by."""

    name: str
    email: str

    def signature(self) -> pygit2.Signature:
        return pygit2.Signature(self.name, self.email)


@dataclasses.dataclass(frozen=True)
class CommitInfo:
    """One commit, as history listings show it."""

    id: str
    parents: tuple[str, ...]
    author: str
    email: str
    time: int  # seconds since the epoch
    offset: int  # minutes east of UTC
    message: str

    @property
    def summary(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def trailers(self) -> dict[str, str]:
        found = {}
        for line in self.message.rstrip("\n").rsplit("\n\n", 1)[-1].splitlines():
            key, sep, value = line.partition(": ")
            if sep and key.startswith("Gitmem-"):
                found[key] = value
        return found


def check_path(path: str) -> str:
    """Return ``path`` if it is a safe relative path inside the work tree, else raise."""
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", "..") or "\0" in part or "\\" in part:
            raise UnsafePath(f"unsafe path {path!r}")
    if parts[0].lower() == ".git":
        raise UnsafePath(f"path inside .git: {path!r}")
    return path


def default_identity(config: pygit2.Config) -> Identity:
    """gitmem's own identity: ``gitmem.name``/``gitmem.email`` from git config, else gitmem@host."""
    host = socket.gethostname() or "localhost"
    name = _config_get(config, "gitmem.name") or f"gitmem ({host})"
    email = _config_get(config, "gitmem.email") or f"gitmem@{host}"
    return Identity(name, email)


def user_identity(config: pygit2.Config) -> Identity:
    """The person's git identity (``user.name``/``user.email``), else ``$USER@host``."""
    host = socket.gethostname() or "localhost"
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    name = _config_get(config, "user.name") or user
    email = _config_get(config, "user.email") or f"{user}@{host}"
    return Identity(name, email)


def _config_get(config: pygit2.Config, key: str) -> str | None:
    try:
        return config[key]
    except (KeyError, pygit2.GitError):
        return None


class Snapshot:
    """A read-only view of the tree of one commit (or of the empty tree before the first one)."""

    def __init__(self, engine: GitEngine, commit_id: pygit2.Oid | None):
        self._engine = engine
        self.commit_id = commit_id
        self._tree = engine._tree_of(commit_id) if commit_id else None

    @property
    def id(self) -> str | None:
        return str(self.commit_id) if self.commit_id else None

    def blob_id(self, path: str) -> str | None:
        """The blob id at ``path``, or None when there is no file there."""
        entry = self._entry(path)
        return str(entry.id) if entry is not None and entry.type_str == "blob" else None

    def tree_id(self, path: str) -> str | None:
        """The tree id of folder ``path`` ("" is the root), or None when there is none."""
        if not path:
            return str(self._tree.id) if self._tree is not None else None
        entry = self._entry(path)
        return str(entry.id) if entry is not None and entry.type_str == "tree" else None

    def read(self, path: str) -> bytes | None:
        """The bytes of the file at ``path``, or None."""
        entry = self._entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return self._engine._parsed(entry.id, None, path)

    def read_parsed(self, path: str, parse: Callable[[bytes], T]) -> T | None:
        """``parse(bytes)`` of the file at ``path``, cached by blob id; None when there is no file."""
        entry = self._entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return self._engine._parsed(entry.id, parse, path)

    def exists(self, path: str) -> bool:
        return self._entry(path) is not None

    def list(self, path: str = "") -> list[str]:
        """Names in folder ``path`` (sorted as git sorts them); [] when there is no such folder."""
        tree = self._tree
        if tree is None:
            return []
        if path:
            entry = self._entry(path)
            if entry is None or entry.type_str != "tree":
                return []
            tree = self._engine._repo[entry.id]
        return [e.name for e in tree]

    def files(self, path: str = "") -> Iterator[str]:
        """Every file path under folder ``path``, recursively."""
        for name in self.list(path):
            child = f"{path}/{name}" if path else name
            entry = self._entry(child)
            if entry.type_str == "tree":
                yield from self.files(child)
            else:
                yield child

    def _entry(self, path: str):
        if self._tree is None:
            return None
        try:
            return self._tree[path]
        except KeyError:
            return None


class GitEngine:
    """A git repository used as a store: one commit per write, on branch ``main``."""

    def __init__(self, repo: pygit2.Repository, *, lock_timeout: float = 10.0,
                 identity: Identity | None = None, durability: str = "fast",
                 cache_bytes: int = 256 << 20):
        self._repo = repo
        self.workdir = Path(repo.workdir).resolve()
        self.gitdir = Path(repo.path).resolve()
        self.private_dir = self.gitdir / GITMEM_DIR
        self._tmp_dir = self.private_dir / "tmp"
        # A repository this process cannot write (another user's, a read-only mount) is
        # still read: no lock, no recovery; a write fails at the lock with one line.
        self.writable = _writable(self.gitdir)
        if self.writable:
            self.private_dir.mkdir(mode=DIR_MODE, exist_ok=True)
            self._tmp_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        self.identity = identity or default_identity(repo.config)
        if durability not in DURABILITIES:
            raise EngineError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
        self.durability = durability
        if durability == "fsync":
            # Process-wide in libgit2: objects, refs, reflogs and the index, each with
            # its folder. (pygit2's settings.enable_fsync_gitdir is a method, not a property.)
            pygit2.option(pygit2.enums.Option.ENABLE_FSYNC_GITDIR, True)
        # libgit2 keeps parsed trees in its cache only up to 4 KB by default: a folder of
        # thousands of records (threads/, sessions/) was parsed again for every path
        # looked up in it (10,000 threads: 20 s to list, 30 ms with this).
        pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, TREE_CACHE_LIMIT)
        self._lock = FileLock(self.private_dir / "lock", timeout=lock_timeout,
                              on_abandoned=self._recover_abandoned)
        self._cache: OrderedDict[tuple[Any, Any], tuple[Any, int]] = OrderedDict()
        self._cache_bytes = cache_bytes  # bounded by the size of the blobs behind the entries
        self._cached_bytes = 0
        self._cache_lock = threading.Lock()
        self._index_refresher = _IndexRefresher(self)
        self._closed = False
        # Called with a record's path (file or folder) before it is read from HEAD or
        # written; the hand-edit layer sets it to commit pending edits of that record.
        self.on_access: Callable[[str], None] | None = None
        # Called after each commit this engine makes; gitmem serve sets it to note the
        # write for background packing.
        self.on_commit: Callable[[], None] | None = None
        self._stat_cache = StatCache(self.private_dir / STAT_CACHE_FILE)  # hand edits support
        self.journal = Journal(self.private_dir)  # what gitmem last put in each work-tree file
        self._objects = _ObjectCheck(self)  # damaged objects support
        if not self.writable:
            log.info("%s is read-only here: reading only", self.workdir)
            return
        with self._lock:
            self._remove_stale_locks()
            self._clean_tmp()
            try:
                self._recover_worktree()
            except DamagedObject as exc:  # reads say so; `gitmem fsck` can still run
                log.info("work tree not checked: %s", exc)

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, **kwargs) -> GitEngine:
        """Open the repository at ``path``; create it (branch ``main``) when ``create`` and missing."""
        path = Path(path)
        found = pygit2.discover_repository(str(path)) if path.exists() else None
        if found and Path(found).resolve() in ((path / ".git").resolve(), path.resolve()):
            repo = pygit2.Repository(str(path))
        elif create:
            path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            repo = pygit2.init_repository(str(path), initial_head=BRANCH)
        else:
            raise EngineError(f"no gitmem repository at {path} (run `gitmem init {path}`)")
        if repo.is_bare:
            raise EngineError(f"{path} is a bare repository; gitmem needs a work tree")
        return cls(repo, **kwargs)

    def flush_index(self) -> None:
        """Refresh the index now for the writes made so far (else within about a second)."""
        self._index_refresher.flush()

    def close(self) -> None:
        """Bring the index in step with HEAD, stop the background thread, save the stat cache."""
        if not self._closed:
            self._closed = True
            self._index_refresher.stop()
            if self.writable:
                self._stat_cache.save()
            self.journal.close()

    def __enter__(self) -> GitEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------

    def head(self) -> str | None:
        """The commit id at the tip of ``main``, or None before the first commit."""
        oid = self._tip()
        return str(oid) if oid else None

    def snapshot(self, rev: str | None = None, *, scope: str | None = None) -> Snapshot:
        """A view of HEAD, or of revision ``rev`` (anything ``git rev-parse`` takes).

        ``scope`` names the record about to be read, so that :attr:`on_access` can
        first commit a hand edit of it.
        """
        if rev is None:
            if scope is not None and self.on_access is not None:
                self.on_access(scope)
            return Snapshot(self, self._tip())
        return Snapshot(self, self.resolve(rev))

    def resolve(self, rev: str) -> pygit2.Oid:
        """The commit id of ``rev``; its history is checked (see "damaged objects support")."""
        known = self._plain_id(rev)
        try:
            # revparse reads objects: what "HEAD~2" or a date may reach is checked first
            self._objects.make_walkable([known] if known is not None else [self._tip()])
            found = self._repo.revparse_single(str(known) if known else rev).peel(pygit2.Commit).id
        except DamagedObject:
            raise
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
            raise EngineError(f"unknown revision {rev!r}") from exc
        self._objects.make_walkable([found])
        return found

    def commit_info(self, rev: str) -> CommitInfo:
        return self._info(self._repo[self.resolve(rev)])

    def history(self, path: str | None = None, *, rev: str | None = None,
                limit: int | None = None) -> list[CommitInfo]:
        """Commits that changed ``path`` (a file or folder; None for all), newest first."""
        start = self.resolve(rev) if rev else self._tip()
        if start is None:
            return []
        self._objects.make_walkable([start])
        found = []
        walker = self._repo.walk(start, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME)
        for commit in walker:
            if path is None or self._touches(commit, path):
                found.append(self._info(commit))
                if limit is not None and len(found) >= limit:
                    break
        return found

    def commit_at(self, when: float) -> str | None:
        """The newest commit on ``main`` made at or before ``when`` (seconds since the epoch)."""
        tip = self._tip()
        if tip is None:
            return None
        self._objects.make_walkable([tip])
        # TOPOLOGICAL too: commits made in the same second come child first
        for commit in self._repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME):
            if commit.commit_time <= when:
                return str(commit.id)
        return None

    def _touches(self, commit: pygit2.Commit, path: str) -> bool:
        mine = self._checked_entry_id(commit.tree_id, path)
        if not commit.parent_ids:
            return mine is not None
        return all(self._checked_entry_id(self._repo[p].tree_id, path) != mine
                   for p in commit.parent_ids)

    @staticmethod
    def _info(commit: pygit2.Commit) -> CommitInfo:
        return CommitInfo(
            id=str(commit.id), parents=tuple(str(p) for p in commit.parent_ids),
            author=commit.author.name, email=commit.author.email,
            time=commit.commit_time, offset=commit.commit_time_offset,
            message=commit.message,
        )

    def _tip(self) -> pygit2.Oid | None:
        ref = self._repo.references.get(REF)
        return ref.target if ref is not None else None

    def _blob(self, oid: pygit2.Oid) -> bytes:
        return self._parsed(oid, None)

    def _parsed(self, oid: pygit2.Oid, parse: Callable[[bytes], T] | None, path: str | None = None) -> T:
        """``parse`` of a blob (its bytes when ``parse`` is None), inflated once and cached.

        When the stat cache vouches that the work-tree file of ``path`` holds the blob, the
        file is read instead: a copy from the page cache, where inflating costs 3 ms a MB.
        """
        key = (oid, parse)
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key][0]
            raw = self._cache.get((oid, None))  # e.g. read from the work tree, proven equal
        data = raw[0] if raw is not None else None
        if data is None and path is not None:
            data = self._stat_cache.read(path, f"{self.workdir}/{path}", str(oid))
        if data is None:  # a loose blob checked just now comes inflated: not read twice
            data = self._objects.check(oid, path) or self._objects.read(oid, path)
        value = data if parse is None else parse(data)
        self._remember(key, value, len(data))
        return value

    def _remember(self, key: tuple[Any, Any], value: Any, size: int) -> None:
        with self._cache_lock:
            if key in self._cache:
                return
            self._cache[key] = (value, size)
            self._cached_bytes += size
            while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
                _, (_, dropped) = self._cache.popitem(last=False)
                self._cached_bytes -= dropped

    # -- writing -----------------------------------------------------------------

    def commit(self, changes: Changes, message: str, trailers: Mapping[str, str] | None = None,
               *, author: Identity | None = None, scope: str | None = None,
               worktree_holds: Mapping[str, str | None] | None = None) -> str | None:
        """Apply ``changes`` ({path: bytes, or None to delete}) as one commit on ``main``.

        Returns the new commit id, or None when the changes alter nothing (no empty commit).
        """
        return self.update(lambda _snapshot: changes, message, trailers, author=author,
                           scope=scope, worktree_holds=worktree_holds)

    def update(self, make_changes: Callable[[Snapshot], Changes | None], message: str,
               trailers: Mapping[str, str] | None = None, *,
               author: Identity | None = None, scope: str | None = None,
               worktree_holds: Mapping[str, str | None] | None = None) -> str | None:
        """Like :meth:`commit`, with changes computed from the tip under the writers' lock.

        ``make_changes(snapshot)`` may run more than once when another writer moves the
        branch in between; it returns the changes, or None for none. ``scope`` names the
        record being written (see :meth:`snapshot`). The work tree is brought to the new
        commit for the changed paths, each file only while it holds its version in the
        snapshot, or ``worktree_holds[path]`` (a blob id, None: no file) for a change made
        from what the work tree holds (a hand edit); and the index with it, before this
        returns, so that a plain ``git commit`` never undoes the write.
        """
        full_message = _with_trailers(message, trailers)
        with self._lock:
            if scope is not None and self.on_access is not None:
                self.on_access(scope)
            for attempt in range(MAX_CAS_RETRIES):
                base = self._tip()
                snapshot = Snapshot(self, base)
                changes = make_changes(snapshot)
                if not changes:
                    return None
                for path in changes:
                    check_path(path)
                base_tree = snapshot._tree
                try:
                    tree_id = self._build_tree(base_tree, _nest(changes))
                    if tree_id is None:
                        tree_id = self._repo.TreeBuilder().write()
                    if base_tree is not None and tree_id == base_tree.id:
                        return None
                    committer = self.identity.signature()
                    signature = author.signature() if author is not None else committer
                    commit_id = self._commit_on_branch(base, signature, committer, full_message, tree_id)
                except (OSError, pygit2.GitError) as exc:
                    full = self._disk_full(changes)
                    if full is not None:
                        raise full from None
                    # Background packing (git prune-packed) may remove an emptied
                    # objects/xx folder between libgit2's mkdir and its rename: write again.
                    if not isinstance(exc, OSError) or attempt >= OBJECT_WRITE_RETRIES:
                        raise
                    log.info("writing objects again after: %s", exc)
                    continue
                if commit_id is not None:
                    self._objects.wrote(commit_id, [base] if base else [], tree_id, base_tree)
                    if self.worktree_is_main():
                        tree = self._repo[tree_id]
                        self.write_worktree(changes, expected=worktree_holds or snapshot, blob_ids={
                            path: str(tree[path].id) for path, data in changes.items() if data is not None})
                        self._stage(changes, tree)
                    if self.on_commit is not None:
                        self.on_commit()
                    return str(commit_id)
            raise EngineError("the branch kept moving under us; gave up after "
                              f"{MAX_CAS_RETRIES} attempts")

    def _commit_on_branch(self, base: pygit2.Oid | None, author: pygit2.Signature,
                          committer: pygit2.Signature, message: str, tree_id: pygit2.Oid) -> pygit2.Oid | None:
        """Create the commit on ``base`` and move ``main`` to it if ``main`` still points to
        ``base``; None when another writer moved it first. libgit2 checks that under the
        ref's lock when it makes a commit on a branch, as cheaply as a bare commit."""
        if base is None:  # an unborn branch: create it only if nobody did meanwhile
            commit_id = self._repo.create_commit(None, author, committer, message, tree_id, [])
            return commit_id if self._move_branch(None, commit_id, message) else None
        try:
            return self._repo.create_commit(REF, author, committer, message, tree_id, [base])
        except pygit2.GitError:  # "current tip is not the first parent", or the ref's CAS
            if self._tip() != base:
                return None
            if os.path.exists(self.gitdir / f"{REF}.lock"):  # plain git moving main: its turn
                time.sleep(REF_LOCK_WAIT)
                return None
            raise

    def _move_branch(self, expected: pygit2.Oid | None, new: pygit2.Oid, message: str) -> bool:
        summary = message.split("\n", 1)[0]
        with self._repo.transaction() as txn:
            txn.lock_ref(REF)
            if self._tip() != expected:
                return False
            txn.set_target(REF, new, message=f"gitmem: {summary}")
        return True

    def _build_tree(self, base: pygit2.Tree | None, nested: dict) -> pygit2.Oid | None:
        builder = self._repo.TreeBuilder(base) if base is not None else self._repo.TreeBuilder()
        for name, change in nested.items():
            existing = base[name] if base is not None and name in base else None
            if isinstance(change, dict):
                sub = self._repo[existing.id] if existing is not None and existing.type_str == "tree" else None
                oid = self._build_tree(sub, change)
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

    # -- the work tree -----------------------------------------------------------

    def write_worktree(self, changes: Changes,
                       expected: Snapshot | Mapping[str, str | None] | None = None,
                       blob_ids: Mapping[str, str] | None = None) -> None:
        """Make the work tree hold ``changes``: atomic replace, 0600 files, 0700 folders.

        With ``expected`` (the snapshot the changes were made from, or ``{path: blob id or
        None}``), a file that no longer holds its expected version is a person's edit and
        is left alone (see "hand edits support"). A path that cannot be written (a symlink
        or a file where a folder belongs, a full disk, a read-only folder) is left as it is
        and recorded in the journal as out of step: the commit already holds the change,
        and raising here would make a caller retry a write that landed. ``blob_ids`` (path:
        the blob id of its new content), when the caller has them, spare hashing it again.
        """
        blob_ids = blob_ids or {}
        for path, data in changes.items():
            blob_id = blob_ids.get(path) or (git_blob_id(data) if data is not None else None)
            try:
                if expected is None:
                    self._write_file(path, data, blob_id)
                else:
                    base_id = expected.blob_id(path) if isinstance(expected, Snapshot) \
                        else expected.get(path)
                    self._write_unless_edited(path, data, base_id, blob_id)
            except (UnsafePath, OSError) as exc:
                if self.journal.failed(path, _reason(exc)):
                    log.warning("left %s out of the work tree (gitmem status lists it; the next "
                                "access tries again): %s", path, _reason(exc))
        if self.durability == "fsync":
            self._fsync_folders(changes)

    def _write_file(self, path: str, data: bytes | None, blob_id: str | None) -> None:
        """Write ``data`` to ``path`` whatever the work tree holds there (None: delete it)."""
        target = self._safe_target(path, create_parents=data is not None)
        if data is None:
            if target is not None:
                _unlink(target)
                self._prune_empty_dirs(target.parent)
        else:
            self._note_written(path, target, data, self._replace_file(target, data), blob_id)
        self.journal.wrote(path, blob_id)

    def _stage(self, changes: Changes, tree: pygit2.Tree) -> None:
        """Make the index hold ``tree``'s version of the changed paths now (no stat data:
        the background refresher adds it), so that ``git status`` and ``git commit`` after
        a crash never see an answered write as undone. One index write (measured in
        ``gitmem bench``); a git command holding ``index.lock`` leaves it to the refresher."""
        try:
            index = self._repo.index
            index.read(force=False)  # reads the file again only if someone changed it
            for path in changes:
                try:
                    entry = tree[path]
                except KeyError:
                    entry = None
                if entry is None or entry.type_str != "blob":
                    if path in index:
                        index.remove(path)
                elif path not in index or index[path].id != entry.id:
                    index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
            index.write()
        except (pygit2.GitError, OSError) as exc:
            log.warning("index not updated now (the refresher tries again): %s", exc)
        self._index_refresher.mark(changes)

    def worktree_is_main(self) -> bool:
        """True when the work tree is ``main``'s: HEAD is the branch, not a detached commit
        or another branch a person checked out. Otherwise gitmem still commits to ``main``
        but leaves the work tree and the index to the person."""
        try:
            with open(self.gitdir / "HEAD", "rb") as file:
                return file.read(64).strip() == _HEAD_ON_MAIN
        except OSError:
            return False

    def checked_out(self) -> str:
        """What the work tree holds, for a person: "main", "branch NAME" or "commit ID"."""
        try:
            head = (self.gitdir / "HEAD").read_text().strip()
        except OSError as exc:
            return f"unknown ({exc.strerror})"
        if head.startswith("ref: refs/heads/"):
            name = head[len("ref: refs/heads/"):]
            return BRANCH if name == BRANCH else f"branch {name}"
        return f"commit {head[:12]}"

    def _fsync_folders(self, paths) -> None:
        """fsync the work-tree folders that hold ``paths``, up to the root, so that renames,
        deletions and new folders are on disk before the write is answered."""
        for folder in {parent for path in paths for parent in PurePosixPath(path).parents}:
            _fsync_path(self.workdir / folder)

    def worktree_path(self, path: str) -> Path:
        """The absolute work-tree path of repository path ``path``."""
        return self.workdir / check_path(path)

    def _safe_target(self, path: str, *, create_parents: bool) -> Path | None:
        """The work-tree path for ``path``, refusing to pass through symlinks or files."""
        parts = check_path(path).split("/")
        current = str(self.workdir)  # strings: pathlib's joins cost more than the lstat calls
        for part in parts[:-1]:
            current = f"{current}/{part}"
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                if not create_parents:
                    return None
                os.mkdir(current, DIR_MODE)
                continue
            if not stat.S_ISDIR(st.st_mode):  # a symlink or a file where a folder belongs
                if create_parents:
                    raise UnsafePath(f"{current} is not a folder; refusing to write {path!r}")
                return None
        return Path(f"{current}/{parts[-1]}")

    def _tmp_path(self) -> Path:
        """A fresh name in the private temp folder (cleaned at open when its process is gone)."""
        return self._tmp_dir / f"{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"

    def _write_tmp(self, data: bytes) -> tuple[Path, tuple[int, int, int]]:
        """A new private file in the temp folder holding ``data``, and its (inode, size, mtime)."""
        tmp = self._tmp_path()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            now = time.time_ns()
            os.utime(fd, ns=(now, now - OWN_WRITE_AGE_NS))  # see _note_written
            if self.durability == "fsync":
                os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        return tmp, stat_key(st)

    def _replace_file(self, target: Path, data: bytes) -> tuple[int, int, int]:
        tmp, written = self._write_tmp(data)
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                raise UnsafePath(f"{target} is a folder; refusing to replace it with a file")
            os.replace(tmp, target)  # replaces a symlink itself, never what it points to
        except BaseException:
            _unlink(tmp)
            raise
        return written

    def _prune_empty_dirs(self, folder: Path) -> None:
        while folder != self.workdir and self.workdir in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    # -- the index ---------------------------------------------------------------

    def refresh_index(self, paths: list[str] | None = None) -> None:
        """Make the index agree with HEAD for ``paths`` (all of HEAD when None).

        A path whose work-tree file differs from HEAD (a hand edit not yet committed)
        gets HEAD's blob id without stat data, so git still reports it as modified.
        """
        with self._lock:
            if not self.worktree_is_main():  # the index is the checked-out commit's
                return
            index = self._repo.index
            index.read(force=True)
            head = Snapshot(self, self._tip())
            if paths is None:
                index.read_tree(head._tree) if head._tree is not None else index.clear()
                paths = [e.path for e in index]
            for path in paths:
                self._refresh_entry(index, head, path)
            index.write()
            if self.durability == "fsync":  # libgit2 does not fsync the index itself
                _fsync_path(self.gitdir / "index")
                _fsync_path(self.gitdir)

    def _refresh_entry(self, index: pygit2.Index, head: Snapshot, path: str) -> None:
        entry = head._entry(path)
        if entry is None or entry.type_str != "blob":
            if path in index:
                index.remove(path)
            return
        on_disk = self.workdir / path
        try:
            if not os.path.islink(on_disk) and on_disk.is_file():
                index.add(path)  # hashes the file and records its stat data
                if index[path].id == entry.id:
                    return
        except (OSError, pygit2.GitError):
            pass
        index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))

    def in_index(self, path: str) -> bool:
        """True when the index has an entry for ``path``."""
        # the index refresher thread shares the repository's index
        with self._lock if self.writable else contextlib.nullcontext():
            index = self._repo.index
            index.read(force=False)
            return path in index

    def index_in_step(self) -> bool:
        """True when the index holds exactly HEAD's tree."""
        index = self._repo.index
        index.read(force=True)
        tip = self._tip()
        if tip is None:
            return len(index) == 0
        return index.write_tree() == self._repo[tip].peel(pygit2.Tree).id

    # -- recovery ----------------------------------------------------------------

    def _recover_abandoned(self, taken_at: float) -> None:
        """Clean up after a gitmem writer that died holding the writers' lock it took at
        ``taken_at``: its git locks and temp files, and the work tree it left behind."""
        log.warning("a gitmem writer died holding the writers' lock: recovering")
        try:
            self._remove_stale_locks(since=taken_at)
            self._clean_tmp()
            for leftover in (self.gitdir / "objects").glob("tmp_object_git2_*"):  # libgit2's
                if leftover.stat().st_mtime >= taken_at:
                    _unlink(leftover)
            self._recover_worktree()
        except Exception:  # the next open tries again; writes go on meanwhile
            log.exception("recovery after a dead writer failed")

    def _remove_stale_locks(self, since: float | None = None) -> None:
        """Remove git lock files left by a killed gitmem writer (we hold the writers' lock):
        those made ``since`` a writer that then died took it, and ref locks older than
        STALE_GIT_LOCK_AGE (git holds one for milliseconds). ``index.lock`` only in the first
        case: a person's ``git commit`` holds it while their editor is open."""
        for lock in (self.gitdir / "index.lock", self.gitdir / f"{REF}.lock", self.gitdir / "HEAD.lock"):
            try:
                mtime = lock.stat().st_mtime
            except FileNotFoundError:
                continue
            age = time.time() - mtime
            old_ref_lock = age > STALE_GIT_LOCK_AGE and lock.name != "index.lock"
            if old_ref_lock or (since is not None and mtime >= since):
                log.warning("removing stale lock %s (%.0f s old)", lock, age)
                _unlink(lock)

    def _clean_tmp(self) -> None:
        for leftover in self._tmp_dir.iterdir():
            pid = leftover.name.split("-", 1)[0]
            if not pid.isdigit() or not _process_alive(int(pid)):
                _unlink(leftover)

    def _recover_worktree(self) -> None:
        """Finish work-tree updates that a killed writer left undone.

        For each path where the index differs from HEAD (a write cut short before its
        index update, or a person's ``git add``): a work-tree file holding an older
        committed version of the path was gitmem's and gets HEAD's, as does a missing
        file the index does not know either (a new file not yet written); one equal to
        HEAD is fine; anything else is a hand edit (staged or not) and is left alone.
        Nothing is done while the work tree is not ``main``'s.
        """
        tip = self._tip()
        if tip is None or not self.worktree_is_main():
            return
        index = self._repo.index
        index.read(force=True)
        head = Snapshot(self, tip)
        lagging = [d.delta.new_file.path if d.delta.new_file.path else d.delta.old_file.path
                   for d in index.diff_to_tree(head._tree)]
        if not lagging:
            return
        for path in lagging:
            on_disk = self.worktree_id(path)
            head_id = head.blob_id(path)
            if on_disk == head_id:
                continue
            if on_disk is None and path not in index and not os.path.lexists(self.workdir / path) \
                    or on_disk is not None and on_disk in self.path_versions(path):
                log.warning("recovering %s from HEAD after an interrupted write", path)
                self.write_worktree({path: head.read(path) if head_id else None}, expected={path: on_disk})
            else:
                log.info("leaving %s alone: it holds an uncommitted hand edit", path)
        try:
            self.refresh_index(lagging)
        except pygit2.GitError as exc:  # a git command holds index.lock: refresh it later
            log.warning("index not refreshed after recovery: %s", exc)
            self._index_refresher.mark(lagging)

    def path_versions(self, path: str, *, limit: int | None = None) -> list[str]:
        """The versions of file ``path`` on ``main`` (blob ids, each once), newest first, from
        the last RECOVERY_DEPTH commits; at most ``limit`` of them."""
        tip = self._tip()
        found: dict[str, None] = {}
        if tip is None:
            return []
        self._objects.make_walkable([tip])
        for depth, commit in enumerate(self._repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL)):
            if depth >= RECOVERY_DEPTH or (limit is not None and len(found) >= limit):
                break
            version = _entry_id(commit.tree, path)
            if version is not None:
                found.setdefault(str(version))
        return list(found)

    # -- plumbing for the layers above ------------------------------------------

    def user_identity(self) -> Identity:
        return user_identity(self._repo.config)

    def config_get(self, key: str) -> str | None:
        return _config_get(self._repo.config, key)

    @property
    def lock(self) -> FileLock:
        """The writers' lock; hold it to keep other gitmem writers out."""
        return self._lock

    # -- hand edits support ------------------------------------------------------
    # A person may save a file in the work tree at any moment, and a write must never
    # overwrite what they saved. So a write replaces a file only while it still holds
    # the version the commit started from: the new file is swapped in atomically
    # (renameat2 RENAME_EXCHANGE) and the file it displaced is checked, and put back
    # when a save got in first. What a write leaves alone is an uncommitted hand edit,
    # for gitmem.handedits to commit. Stat data vouches for a file's content once the
    # file is older than the file system's timestamp granularity (git's "racy" rule).

    def worktree_id(self, path: str) -> str | None:
        """The blob id of the regular file at ``path`` in the work tree; None when there is none.

        A file whose stat data matches an earlier hash (in this process or one before) is
        not read again.
        """
        if path in self._stat_cache:  # a match says "unchanged" without the per-folder symlink checks
            try:
                known = self._stat_cache.lookup(path, os.lstat(f"{self.workdir}/{path}"))
            except OSError:
                known = None
            if known is not None:
                return known
        target = self._safe_target(path, create_parents=False)
        return self._file_id(path, target) if target is not None else None

    def read_worktree(self, path: str) -> tuple[bytes, str] | None:
        """``(bytes, blob id)`` of the regular file at ``path`` in the work tree, or None.

        Never follows a symlink, so nothing outside the repository is read.
        """
        target = self._safe_target(path, create_parents=False)
        found = read_regular(target) if target is not None else None
        if found is None:
            return None
        return found[0], self._content_id(found[0])

    def worktree_files(self, folder: str) -> list[str]:
        """The paths of the regular files under work-tree ``folder``, not following symlinks."""
        target = self._safe_target(folder, create_parents=False)
        found: list[str] = []

        def walk(directory: str, prefix: str) -> None:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                return
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, f"{prefix}{entry.name}/")
                elif entry.is_file(follow_symlinks=False):
                    found.append(prefix + entry.name)

        if target is not None and os.path.isdir(target) and not os.path.islink(target):
            walk(str(target), f"{folder}/")
        return found

    def worktree_suspects(self, folders: tuple[str, ...] | list[str]) -> list[str]:
        """Paths under ``folders`` whose work-tree file may differ from HEAD: new, changed or gone.

        One ``git status`` on the index's stat data, so a large repository is not read.
        """
        prefixes = tuple(f"{folder}/" for folder in folders)
        # the index refresher thread shares the repository's index (none when read-only)
        with self._lock if self.writable else contextlib.nullcontext():
            status = self._repo.status(untracked_files="all", ignored=True)
        found = []
        for path, flags in status.items():
            if path.startswith(prefixes) and flags != pygit2.enums.FileStatus.CURRENT:
                found.extend(self.worktree_files(path.rstrip("/")) if path.endswith("/") else [path])
        return sorted(found)

    def _file_id(self, path: str, file: Path, *, moved: bool = False) -> str | None:
        """The blob id of regular ``file``: the work-tree file of ``path``, or (``moved``)
        what a write just displaced from there, whose ctime the move changed."""
        checked_at = time.time_ns()
        try:
            st = os.lstat(file)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        known = self._stat_cache.lookup(path, st, moved=moved)
        if known is not None:
            return known
        found = read_regular(file)
        if found is None:
            return None
        blob_id = self._content_id(found[0])
        if not moved and not racy(st, checked_at):
            self._stat_cache.note(path, st, blob_id)
        return blob_id

    def _note_written(self, path: str, target: Path, data: bytes, written: tuple[int, int, int],
                      blob_id: str | None) -> None:
        """Remember the blob id of the file gitmem just wrote at ``path`` (``written``: its
        inode, size and mtime; ``blob_id``: that of ``data``, if known), so the next write's
        checks need not read it back. Its mtime was set seconds back (_write_tmp): a save
        changes it even within the same timestamp tick, so the entry is not racy; and a
        save that got in before this look is no entry."""
        try:
            st = os.lstat(target)
        except OSError:
            return
        if stat_key(st) == written:
            self._stat_cache.note(path, st, blob_id or git_blob_id(data))

    def _content_id(self, data: bytes) -> str:
        """The blob id of work-tree content ``data``, kept in the cache under that id: when
        it is HEAD's version, reading HEAD then inflates nothing."""
        blob_id = git_blob_id(data)
        self._remember((pygit2.Oid(hex=blob_id), None), data, len(data))
        return blob_id

    def _write_unless_edited(self, path: str, data: bytes | None, base_id: str | None,
                             blob_id: str | None) -> None:
        """Write ``data`` (blob id ``blob_id``, if known) to ``path`` (None: delete it) only
        while the work tree holds ``base_id`` there (None: no file)."""
        if base_id == blob_id:  # it holds the new version already (a hand edit committed as saved)
            self.journal.wrote(path, blob_id)
            return
        target = self._safe_target(path, create_parents=data is not None)
        if target is None:
            if data is None:
                self.journal.wrote(path, None)
            return
        if os.path.islink(target):  # never an edit to keep: replaced itself, never followed
            self._write_file(path, data, blob_id)
            return
        if data is None:
            if self._delete_unless_edited(path, target, base_id):
                self.journal.wrote(path, None)
            return
        tmp, written = self._write_tmp(data)
        try:
            if base_id is None:
                _rename_noreplace(tmp, target)
            elif not _renameat2(tmp, target, _RENAME_EXCHANGE):  # cannot swap here: check, replace
                if self._file_id(path, target) != base_id:
                    raise FileExistsError(target)
                os.replace(tmp, target)
            elif self._file_id(path, tmp, moved=True) != base_id:
                _renameat2(tmp, target, _RENAME_EXCHANGE)  # a save got in first: put it back
                raise FileExistsError(target)
            self._note_written(path, target, data, written, blob_id)
            self.journal.wrote(path, blob_id)
        except (FileExistsError, FileNotFoundError):
            log.info("left %s alone: it holds an uncommitted hand edit", path)
        finally:
            _unlink(tmp)

    def _delete_unless_edited(self, path: str, target: Path, base_id: str | None) -> bool:
        """Delete the file at ``path`` if it holds ``base_id``; True when no file is left of
        gitmem's there (deleted, or none)."""
        try:
            if not stat.S_ISREG(os.lstat(target).st_mode):
                return False  # a symlink or folder is not ours to delete
        except FileNotFoundError:
            return True
        if base_id is None:
            return False  # no file in the base: whatever is there now is someone's
        hold = self._tmp_path()
        try:
            os.rename(target, hold)
        except FileNotFoundError:
            return True
        if self._file_id(path, hold, moved=True) == base_id:
            _unlink(hold)
            self._prune_empty_dirs(target.parent)
            return True
        try:
            _rename_noreplace(hold, target)  # an edit: put it back
        except FileExistsError:
            log.warning("%s was saved twice while gitmem deleted it; kept the newer save", path)
            _unlink(hold)
        return False

    # -- sync support ------------------------------------------------------------
    # For gitmem.sync. The network part runs `git fetch`/`git push` as subprocesses,
    # so the user's ssh agent, ~/.ssh/config and credential helpers apply; objects,
    # merges and the branch stay in pygit2. Git's words are scrubbed of URL
    # credentials before they reach an error message.

    def remotes(self) -> list[str]:
        """The names of the configured remotes."""
        return list(self._repo.remotes.names())

    def add_remote(self, name: str, url: str) -> None:
        """Configure remote ``name`` fetching from and pushing to ``url``, as ``git remote add``."""
        try:
            self._repo.remotes.create(name, url)
        except (ValueError, pygit2.GitError) as exc:
            raise EngineError(scrub_credentials(str(exc))) from None

    def remote_tip(self, remote: str) -> str | None:
        """The remote's ``main`` as last fetched or pushed (``refs/remotes/<remote>/main``)."""
        ref = self._repo.references.get(_tracking_ref(remote))
        return str(ref.target) if ref is not None else None

    def fetch(self, remote: str, *, interactive: bool = True,
              timeout: float | None = None) -> str | None:
        """Fetch the remote's ``main``; return its tip, or None when the remote has no ``main``.

        ``interactive=False`` (background syncs) forbids password prompts. Gives up after
        ``timeout`` seconds (default NETWORK_TIMEOUT). Raises EngineError with git's reason, credentials removed.
        """
        self._require_remote(remote)
        done = self._run_git(["fetch", "--quiet", "--no-tags", remote,
                              f"+{REF}:{_tracking_ref(remote)}"], interactive, timeout, remote)
        if done.returncode != 0:
            if "couldn't find remote ref" in done.stderr:
                stale = self._repo.references.get(_tracking_ref(remote))
                if stale is not None:
                    stale.delete()
                return None
            raise EngineError(f"git fetch {remote} failed: {_git_reason(done.stderr)}")
        return self.remote_tip(remote)

    def push(self, remote: str, commit: str, *, interactive: bool = True,
             timeout: float | None = None) -> bool:
        """Push ``commit`` to the remote's ``main``, never forced.

        True when it landed; False when the remote's ``main`` moved since our fetch
        (fetch, merge and push again); EngineError for any other failure.
        """
        self._require_remote(remote)
        done = self._run_git(["push", "--porcelain", remote, f"{commit}:{REF}"], interactive,
                             timeout, remote)
        if done.returncode == 0:
            self._repo.references.create(_tracking_ref(remote), pygit2.Oid(hex=commit), force=True)
            return True
        refused = [line for line in done.stdout.splitlines() if line.startswith("!\t")]
        if refused:
            reason = refused[0].split("\t")[-1]
            if any(word in reason for word in _REMOTE_MOVED):
                return False
            raise EngineError(f"git push {remote} refused: {scrub_credentials(reason)}")
        raise EngineError(f"git push {remote} failed: {_git_reason(done.stderr)}")

    def _require_remote(self, remote: str) -> None:
        if remote not in self.remotes():
            raise EngineError(f"no remote named {remote!r} (add one with `gitmem remote add "
                              "NAME URL` or `git remote add`)")

    def _run_git(self, args: list[str], interactive: bool, timeout: float | None,
                 remote: str) -> subprocess.CompletedProcess:
        """git with deadlines on the network: ssh's and http's own where the user set none,
        and ``timeout`` for the whole command."""
        timeout = timeout or NETWORK_TIMEOUT
        env = {}
        if not interactive:
            env["GIT_TERMINAL_PROMPT"] = "0"  # never wait on a prompt nobody sees
        if not ({"GIT_SSH", "GIT_SSH_COMMAND"} & os.environ.keys() or self.config_get("core.sshCommand")):
            env["GIT_SSH_COMMAND"] = " ".join(["ssh", *_SSH_OPTIONS, *([] if interactive else _SSH_BATCH)])
        limits = [arg for key, value in _HTTP_LIMITS.items() if self.config_get(key) is None
                  for arg in ("-c", f"{key}={value}")]
        try:
            return gitproc.run([*limits, *args], cwd=self.workdir, timeout=timeout, env=env)
        except gitproc.GitMissing:
            raise EngineError("syncing needs the `git` command, and it is not installed") from None
        except gitproc.GitTimeout:
            raise EngineError(f"git {args[0]} {remote} failed: no answer within {timeout:.2g} s "
                              "(for a longer bound: gitmem sync --timeout, or git config "
                              "gitmem.syncTimeout)") from None

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of commits ``a`` and ``b`` (None: unrelated histories)."""
        found = self._repo.merge_base(self.resolve(a), self.resolve(b))
        return str(found) if found else None

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        """True when ``ancestor`` is ``commit`` or in its history."""
        a, c = self.resolve(ancestor), self.resolve(commit)
        return a == c or self._repo.descendant_of(c, a)

    def new_commits(self, tip: str, known: list[str]) -> list[str]:
        """Commits in the history of ``tip`` and in none of ``known``, oldest first."""
        walker = self._repo.walk(self.resolve(tip),
                                 pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
        for commit in known:
            walker.hide(self.resolve(commit))
        return [str(commit.id) for commit in walker]

    def changed_files(self, old: str | None, new: str | None) -> dict[str, tuple[str | None, str | None]]:
        """``{path: (blob id in old, blob id in new)}`` for every file that differs between
        two commits (None: no commit, or no file there)."""
        return _changed_files(self._tree_of(old), self._tree_of(new))

    def store_blob(self, data: bytes) -> str:
        """Put ``data`` in the object database (no commit refers to it); returns its blob id."""
        return str(self._repo.create_blob(data))

    def has_blob(self, blob_id: str) -> bool:
        """True when the object database holds blob ``blob_id``."""
        return pygit2.Oid(hex=blob_id) in self._repo.odb

    def read_blob(self, blob_id: str) -> bytes:
        """The bytes of a blob (cached like every read)."""
        return self._blob(pygit2.Oid(hex=blob_id))

    def added_lines(self, commit: str) -> Iterator[tuple[str, int, bytes]]:
        """``(path, line number, line)`` for each line ``commit`` adds to a text file.

        For a merge, only lines that none of its parents has in that file, so what a
        merge brings in from either side does not count again.
        """
        target = self._repo[self.resolve(commit)]
        tree = self._tree_of(target.id)
        parents = [self._tree_of(p) for p in target.parent_ids]
        for parent in parents or [None]:  # the patches read these blobs
            for ids in _changed_files(parent, tree).values():
                for blob_id in filter(None, ids):
                    self._objects.check(pygit2.Oid(hex=blob_id))
        others = [{(path, line) for path, _, line in _added_lines(p, tree)} for p in parents[1:]]
        for path, number, line in _added_lines(parents[0] if parents else None, tree):
            if all((path, line) in other for other in others):
                yield path, number, line

    def commit_merge(self, ours: str, theirs: str, changes: Changes, message: str,
                     trailers: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
        """Commit ``ours`` plus ``changes`` with parents ``ours`` and ``theirs``, and move ``main``
        there from ``ours`` (EngineError when it is elsewhere).

        Returns the merge commit and the paths left alone in the work tree because they
        hold an uncommitted hand edit.
        """
        full_message = _with_trailers(message, trailers)
        for path in changes:
            check_path(path)
        with self._lock:
            base = self._repo[self.resolve(ours)]
            base_tree = self._tree_of(base.id)
            try:
                tree_id = self._build_tree(base_tree, _nest(changes)) or self._repo.TreeBuilder().write()
                commit_id = self._repo.create_commit(
                    None, self.identity.signature(), self.identity.signature(), full_message,
                    tree_id, [base.id, self.resolve(theirs)])
            except (OSError, pygit2.GitError):
                full = self._disk_full(changes)
                if full is not None:
                    raise full from None
                raise
            self._objects.wrote(commit_id, [base.id, self.resolve(theirs)], tree_id, base_tree)
            return str(commit_id), self._advance(base.id, commit_id, full_message)

    def fast_forward(self, expected: str | None, target: str) -> list[str]:
        """Move ``main`` from ``expected`` to its descendant ``target`` and the work tree with it.

        Returns the paths left alone because they hold an uncommitted hand edit.
        """
        if expected is not None and not self.is_ancestor(expected, target):
            raise EngineError(f"{target[:10]} does not descend from {expected[:10]}")
        with self._lock:
            old = self.resolve(expected) if expected else None
            return self._advance(old, self.resolve(target), f"fast-forward to {target[:10]}")

    def backup(self) -> str | None:
        """Save the tip of ``main`` as ``refs/gitmem/backup/<UTC time>``; return the ref's name.

        Call it before anything moves the branch other than a commit on top, a
        fast-forward or a merge.
        """
        tip = self._tip()
        if tip is None:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{BACKUP_REFS}/{stamp}.{time.time_ns() % 1_000_000_000:09d}Z"
        self._repo.references.create(name, tip)
        return name

    def _advance(self, old: pygit2.Oid | None, new: pygit2.Oid, message: str) -> list[str]:
        """Move ``main`` from ``old`` to ``new`` (under our lock) and update the work tree.

        A file that no longer holds its old version holds a hand edit: it is left alone
        (see "hand edits support") and returned.
        """
        changed = _changed_files(self._tree_of(old), self._tree_of(new))
        for path in changed:
            check_path(path)
        if not self._move_branch(old, new, message):
            raise BranchMoved("the branch moved while syncing; try again")
        if not self.worktree_is_main():
            return []
        writes = {path: self.read_blob(new_id) if new_id else None
                  for path, (_, new_id) in changed.items() if self.worktree_id(path) != new_id}
        self.write_worktree(writes, expected=Snapshot(self, old))
        self._stage(changed, self._repo[new].peel(pygit2.Tree))
        return [path for path in writes if self.worktree_id(path) != changed[path][1]]

    def _tree_of(self, commit: str | pygit2.Oid | None) -> pygit2.Tree | None:
        """The root tree of a commit, every tree under it checked (see "damaged objects support")."""
        if commit is None:
            return None
        oid = commit if isinstance(commit, pygit2.Oid) else self.resolve(commit)
        tree_id = self._objects.load(oid, "a commit").peel(pygit2.Commit).tree_id
        self._objects.make_sound(tree_id)
        return self._objects.load(tree_id, "folder /")

    # -- history and maintenance support -------------------------------------------

    def _plain_id(self, rev: str) -> pygit2.Oid | None:
        """The object ``rev`` names when it is an object id or a ref, found without
        reading an object; else None."""
        if len(rev) == 40 and _is_hex(rev):
            return pygit2.Oid(hex=rev)
        if rev in ("HEAD", BRANCH):
            return self._tip()
        try:
            ref = self._repo.references.get(rev)
            return ref.resolve().target if ref is not None else None
        except (ValueError, KeyError, pygit2.GitError, pygit2.InvalidSpecError):
            return None

    def _checked_entry_id(self, tree_id: pygit2.Oid, path: str) -> pygit2.Oid | None:
        """The id of the entry at ``path`` in tree ``tree_id``, each folder on the way checked."""
        parts = path.split("/")
        for depth, part in enumerate(parts):
            self._objects.check(tree_id, "a folder in the history")
            try:
                entry = self._repo[tree_id][part]
            except KeyError:
                return None
            if depth == len(parts) - 1:
                return entry.id
            if entry.type_str != "tree":
                return None
            tree_id = entry.id
        return None

    def _object_at(self, tree: pygit2.Tree, path: str):
        oid = _entry_id(tree, path)
        if oid is None:
            return None
        self._objects.check(oid, path)
        return self._repo[oid]

    def diff(self, path: str, old: str | None, new: str | None) -> list[FileDiff]:
        """The files at or under ``path`` ("" for all) that differ from revision ``old``
        to revision ``new`` (None: before the first commit), in path order.

        ``engine.diff("memory/user.md", "HEAD~1", "HEAD")[0].added`` is the lines added.
        """
        sides = []
        for rev in (old, new):
            tree = self._tree_of(rev)
            obj = tree if not path or tree is None else self._object_at(tree, path)
            sides.append(obj)
        old_tree, new_tree = [o if isinstance(o, pygit2.Tree) else None for o in sides]
        if new_tree is None:  # _changed_files diffs from nothing, not to nothing
            gone = _changed_files(None, old_tree).items()
            changed = {_join(path, rel): (new_id, old_id) for rel, (old_id, new_id) in gone}
        else:
            changed = {_join(path, rel): ids for rel, ids in _changed_files(old_tree, new_tree).items()}
        blobs = [str(o.id) if isinstance(o, pygit2.Blob) else None for o in sides]
        if blobs != [None, None] and blobs[0] != blobs[1]:
            changed[path] = (blobs[0], blobs[1])
        return [self._file_diff(file, old_id, new_id)
                for file, (old_id, new_id) in sorted(changed.items())]

    def _file_diff(self, path: str, old_id: str | None, new_id: str | None) -> FileDiff:
        for blob_id in filter(None, (old_id, new_id)):
            self._objects.check(pygit2.Oid(hex=blob_id), path)
        old_blob = self._repo[old_id] if old_id else None
        new_blob = self._repo[new_id] if new_id else None
        patch = pygit2.Patch.create_from(old_blob, new_blob, old_as_path=path, new_as_path=path)
        _, added, removed = patch.line_stats
        status = "added" if old_id is None else "deleted" if new_id is None else "modified"
        return FileDiff(path, status, added, removed, patch.delta.is_binary, patch.text or "")

    def loose_objects(self, *, sample: int = 256) -> int:
        """How many loose objects the object database holds (files counted, none read);
        with ``sample`` below 256, an estimate from that many of the 256 ``objects/xx``
        folders, as ``git gc --auto`` makes one (much cheaper in a big pile)."""
        objects = self.gitdir / "objects"
        count = 0
        for n in range(0, 256, 256 // sample):
            try:
                count += sum(1 for name in os.listdir(objects / f"{n:02x}") if len(name) == 38)
            except FileNotFoundError:
                pass
        return count * (256 // sample)

    def pack_files(self) -> list[Path]:
        """The ``.pack`` files of the object database."""
        return sorted((self.gitdir / "objects" / "pack").glob("*.pack"))

    def pack_loose_objects(self) -> int:
        """Put every loose object into one new pack with libgit2, then delete the loose
        copies; returns how many were packed. Needs no git CLI; a corrupt loose object is
        left where it is (``check_objects`` reports it)."""
        damaged = dict(self.damaged_loose_objects())
        loose = self._loose_object_files()
        _, builder = _pack_builder(self.gitdir)
        packed = []
        for oid, file in loose.items():
            if oid in damaged:
                log.warning("not packing damaged loose object %s: %s", oid, damaged[oid])
                continue
            try:
                builder.add(pygit2.Oid(hex=oid))
                packed.append(file)
            except pygit2.GitError as exc:
                log.warning("not packing loose object %s: %s", oid, exc)
        if not packed:
            return 0
        builder.write()  # the .pack and its .idx exist when this returns
        for file in packed:
            _unlink(file)
        return len(packed)

    def pack_all_objects(self) -> int:
        """Put every object into one new pack, then delete the packs and loose objects it
        replaces (packs with a ``.keep`` file stay); returns how many objects it holds."""
        old_packs = [p for p in self.pack_files() if not p.with_suffix(".keep").exists()]
        damaged = dict(self.damaged_loose_objects())
        if damaged:
            oid, problem = next(iter(damaged.items()))
            raise DamagedObject(oid, problem)
        loose = self._loose_object_files()
        repo, builder = _pack_builder(self.gitdir)
        for oid in repo.odb:
            builder.add(oid)
        builder.write()
        new_packs = set(self.pack_files()) - set(old_packs)
        for pack in old_packs:
            if pack not in new_packs:
                for suffix in (".pack", ".idx", ".rev", ".bitmap"):
                    _unlink(pack.with_suffix(suffix))
        for file in loose.values():
            _unlink(file)
        return builder.written_objects_count

    def check_objects(self) -> list[tuple[str, str]]:
        """Read every object (libgit2 checks each one's hash) and every object reachable
        from ``main``; returns ``[(object id, problem)]``, empty when all is well."""
        repo = pygit2.Repository(str(self.gitdir))  # its own: the index refresher shares ours
        problems: dict[str, str] = dict(self.damaged_loose_objects())
        for oid in repo.odb:
            if str(oid) in problems:
                continue  # reading it would hang
            try:
                repo.odb.read(oid)
            except (pygit2.GitError, KeyError, ValueError) as exc:
                problems[str(oid)] = f"corrupt: {exc}"
        tip = self._tip()
        if tip is None:
            return sorted(problems.items())
        seen: set[pygit2.Oid] = {pygit2.Oid(hex=oid) for oid in problems if len(oid) == 40}
        pending = [tip]
        try:
            while pending:  # by hand, not repo.walk: a damaged commit must not be read
                oid = pending.pop()
                if oid in seen:
                    continue
                seen.add(oid)
                commit = repo[oid]
                _check_tree(repo, commit.tree_id, seen, problems)
                pending.extend(commit.parent_ids)
        except (pygit2.GitError, KeyError) as exc:
            problems.setdefault("history", f"cannot walk the history: {exc}")
        return sorted(problems.items())

    def locate_objects(self, ids: set[str]) -> dict[str, str]:
        """Where at HEAD each of ``ids`` is: ``{id: "the commit", "the root folder" or a
        path}``, found without reading a damaged object."""
        tip = self._tip()
        found: dict[str, str] = {}
        if tip is None:
            return found
        if str(tip) in ids:
            found[str(tip)] = "the commit"
        try:
            self._objects.check(tip)
            root = self._repo[tip].peel(pygit2.Commit).tree_id
        except (DamagedObject, KeyError, pygit2.GitError):
            return found
        pending = [(root, "")]
        while pending:
            tree_id, folder = pending.pop()
            if str(tree_id) in ids:
                found[str(tree_id)] = f"folder {folder}" if folder else "the root folder"
            try:
                self._objects.check(tree_id)
                entries = list(self._repo[tree_id])
            except (DamagedObject, KeyError, pygit2.GitError):
                continue
            for entry in entries:
                path = _join(folder, entry.name)
                if entry.type_str == "tree":
                    pending.append((entry.id, path))
                elif str(entry.id) in ids:
                    found[str(entry.id)] = path
        return found

    def damaged_loose_objects(self) -> list[tuple[str, str]]:
        """``[(object id, problem)]`` for each loose object whose file does not inflate
        completely (libgit2 would hang on it); each file is read once."""
        found = []
        for oid, file in sorted(self._loose_object_files().items()):
            try:
                self._objects.check(pygit2.Oid(hex=oid))
            except DamagedObject as exc:
                found.append((oid, exc.problem))
        return found

    def _disk_full(self, changes: Changes) -> DiskFull | None:
        """The error to raise for a failed object write when the disk is (about) full. On
        ENOSPC libgit2 may report a stale message ("the path 'x' does not exist in the
        given tree", "no error"), so the free space says what happened."""
        try:
            st = os.statvfs(self.gitdir)
        except OSError:
            return None
        free = st.f_bavail * st.f_frsize
        needed = sum(len(data) for data in changes.values() if data is not None) + FULL_DISK_MARGIN
        if free >= needed:
            return None
        return DiskFull(f"the disk holding {self.gitdir} is full ({free // 1024} KB free): "
                        "nothing was committed; free some space and write again")

    def set_config_default(self, key: str, value: str) -> bool:
        """Set ``key`` in the repository's own config file unless that file sets it already.
        Safe from any thread (it does not touch the writers' repository object)."""
        config = pygit2.Config(str(self.gitdir / "config"))
        if _config_get(config, key) is not None:
            return False
        config[key] = value
        return True

    def _loose_object_files(self) -> dict[str, Path]:
        found = {}
        objects = self.gitdir / "objects"
        for folder in os.scandir(objects):
            if len(folder.name) == 2 and _is_hex(folder.name) and folder.is_dir():
                for entry in os.scandir(folder.path):
                    if len(entry.name) == 38 and _is_hex(entry.name):
                        found[folder.name + entry.name] = Path(entry.path)
        return found


class _IndexRefresher:
    """Refreshes the index off the write path: after writes settle, and at close."""

    def __init__(self, engine: GitEngine):
        self._engine = engine
        self._pending: set[str] = set()
        self._first_mark = 0.0
        self._last_mark = 0.0
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def mark(self, paths) -> None:
        with self._cond:
            self._last_mark = time.monotonic()
            first = not self._pending
            self._pending.update(paths)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gitmem-index", daemon=True)
                self._thread.start()
            if first:  # else the thread waits for a due time that later marks only postpone
                self._first_mark = self._last_mark
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self.flush()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                now = time.monotonic()
                due = min(self._last_mark + INDEX_IDLE, self._first_mark + INDEX_MAX_DELAY)
                if now < due:
                    self._cond.wait(due - now)
                    continue
            self.flush()

    def flush(self) -> None:
        with self._cond:
            paths, self._pending = sorted(self._pending), set()
        if paths:
            try:
                self._engine.refresh_index(paths)
            except Exception:  # the next write or close() tries again
                log.exception("index refresh failed")
                with self._cond:
                    self._pending.update(paths)


def _with_trailers(message: str, trailers: Mapping[str, str] | None) -> str:
    message = message.rstrip("\n") + "\n"
    if trailers:
        lines = [f"{key}: {_one_line(value)}" for key, value in trailers.items()]
        message += "\n" + "\n".join(lines) + "\n"
    # A commit message is a C string of UTF-8: a NUL would cut it short (losing the
    # trailers), a lone surrogate (from an id) cannot be encoded.
    return message.replace("\0", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")


def _one_line(value: str) -> str:
    return value.replace("\r", "\\r").replace("\n", "\\n").replace("\0", "\\0")


def _nest(changes: Changes) -> dict:
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


def _entry_id(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    try:
        return tree[path].id
    except KeyError:
        return None


def _reason(exc: BaseException) -> str:
    """An OSError's cause in words ("No space left on device"), else the exception's text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _fsync_path(path: Path) -> None:
    """fsync a file or folder; one that is gone (pruned, replaced) is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _writable(gitdir: Path) -> bool:
    """Whether this process may write the repository (its .git/gitmem/ when there is one)."""
    private = gitdir / GITMEM_DIR
    return os.access(private if private.is_dir() else gitdir, os.W_OK)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- sync support ----------------------------------------------------------------

NETWORK_TIMEOUT = 30.0  # seconds a fetch or push may take unless the caller says otherwise
_SSH_OPTIONS = ("-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
_SSH_BATCH = ("-o", "BatchMode=yes")  # no passphrase or host-key prompts in the background
_HTTP_LIMITS = {"http.lowSpeedLimit": "1000", "http.lowSpeedTime": "10"}  # bytes/s, seconds
# ssh's own reasons, which git follows with only "Could not read from remote repository."
_SSH_REASONS = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED",
                "Permission denied", "Could not resolve hostname", "Connection refused",
                "Connection timed out", "No route to host", "Connection closed by",
                "Too many authentication failures", "No such file or directory")
BACKUP_REFS = "refs/gitmem/backup"
# Words in `git push --porcelain` refusals meaning "the remote moved since we fetched".
_REMOTE_MOVED = ("fetch first", "non-fast-forward", "stale info", "cannot lock ref",
                 "failed to update ref", "incorrect old value")
_URL_CREDENTIALS = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s]*@")


class BranchMoved(EngineError):
    """``main`` is no longer where a merge or fast-forward started from."""


def scrub_credentials(text: str) -> str:
    """``text`` with the user and password of every ``scheme://user:secret@host`` URL hidden."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)


def _git_reason(stderr: str) -> str:
    """git's own explanation in one line: ssh's reason (a changed host key, a refused key,
    an unknown host), then git's fatal/error lines, else its last line."""
    lines = [line.strip().strip("@ ").strip() for line in stderr.splitlines() if line.strip()]
    ssh = [line for line in lines if any(reason in line for reason in _SSH_REASONS)
           and not line.startswith(("fatal:", "error:"))]
    reasons = ssh[:2] + [line for line in lines if line.startswith(("fatal:", "error:"))]
    return scrub_credentials("; ".join(reasons or lines[-1:]))[:500] or "no reason given"


def _tracking_ref(remote: str) -> str:
    return f"refs/remotes/{remote}/{BRANCH}"


def _changed_files(old: pygit2.Tree | None, new: pygit2.Tree | None) -> dict[str, tuple[str | None, str | None]]:
    if old is None and new is None:
        return {}
    diff = new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    changed = {}
    for delta in diff.deltas:
        old_id = None if delta.status_char() == "A" else str(delta.old_file.id)
        new_id = None if delta.status_char() == "D" else str(delta.new_file.id)
        if old_id != new_id:
            changed[delta.new_file.path or delta.old_file.path] = (old_id, new_id)
    return changed


def _added_lines(old: pygit2.Tree | None, new: pygit2.Tree) -> Iterator[tuple[str, int, bytes]]:
    diff = new.diff_to_tree(swap=True) if old is None else old.diff_to_tree(new)
    for patch in diff:
        if not patch.delta.is_binary:
            for hunk in patch.hunks:
                for line in hunk.lines:
                    if line.origin == "+":
                        yield patch.delta.new_file.path, line.new_lineno, line.raw_content


# -- history and maintenance support ------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FileDiff:
    """How one file changed between two revisions (see :meth:`GitEngine.diff`)."""

    path: str
    status: str  # "added", "deleted" or "modified"
    added: int  # lines
    removed: int
    binary: bool
    patch: str  # unified diff, with the full repository path in its headers


def _pack_builder(gitdir: Path) -> tuple[pygit2.Repository, pygit2.PackBuilder]:
    """A pack builder on a repository object of its own: packing runs on a background
    thread, and libgit2 repository objects are not to be shared between threads."""
    repo = pygit2.Repository(str(gitdir))
    builder = pygit2.PackBuilder(repo)
    builder.set_threads(1)  # and pack.windowMemory from the config bounds its memory
    return repo, builder


def _check_tree(repo: pygit2.Repository, oid: pygit2.Oid, seen: set, problems: dict[str, str]) -> None:
    if oid in seen:
        return
    seen.add(oid)
    try:
        tree = repo[oid]
    except (pygit2.GitError, KeyError, ValueError) as exc:
        problems.setdefault(str(oid), f"missing or corrupt tree: {exc}")
        return
    for entry in tree:
        if entry.type_str == "tree":
            _check_tree(repo, entry.id, seen, problems)
        elif entry.id not in seen:
            seen.add(entry.id)
            if entry.id not in repo.odb:
                problems.setdefault(str(entry.id), f"missing blob ({entry.name})")


def _join(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


# -- hand edits support ----------------------------------------------------------

STAT_CACHE_FILE = "stat-cache"  # in .git/gitmem/
OWN_WRITE_AGE_NS = 3_000_000_000  # how far back gitmem dates the mtime of a file it writes
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _load_renameat2():
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not Linux with glibc >= 2.28
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_libc_renameat2 = _load_renameat2()


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(2)`` with ``flags``; False where the system or file system cannot do it."""
    if _libc_renameat2 is None:
        return False
    if _libc_renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(target))


def _rename_noreplace(source: Path, target: Path) -> None:
    """Move ``source`` to ``target`` unless something is there (FileExistsError)."""
    if not _renameat2(source, target, _RENAME_NOREPLACE):
        if os.path.lexists(target):  # no atomic way here: a tiny window remains
            raise FileExistsError(target)
        os.replace(source, target)


# -- rescue support ----------------------------------------------------------------
# For gitmem.rescue: a commit a history rewrite by hand (`git commit --amend`, `git
# reset`) dropped from main stays reachable under refs/gitmem/rescue/<commit id> until
# it is merged back, so neither `git gc` nor a reflog expiry can delete it. The
# former tips of main come from its reflog, read from the end of the file: the
# reflog is never expired by gitmem and grows by one line a write.

RESCUE_REFS = "refs/gitmem/rescue"
REFLOG_SCAN = 1000  # the newest reflog entries of main searched for dropped tips
_REFLOG_BLOCK = 4096  # bytes read first from the end of the reflog (then twice as many, ...)
# <old> <new> <name> <<email>> <seconds> <zone>[\t<message>], as git and libgit2 write it
_REFLOG_LINE = re.compile(rb"([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (.*?) <(.*?)> (\d+) [-+]\d{4}(?:\t(.*))?",
                          re.DOTALL)


@dataclasses.dataclass(frozen=True)
class ReflogEntry:
    """One move of ``main``, as its reflog records it (ids None for "no commit")."""

    old: str | None
    new: str | None
    name: str  # who moved it
    email: str
    time: int  # seconds since the epoch
    message: str


def reflog(engine: GitEngine, limit: int = REFLOG_SCAN) -> list[ReflogEntry]:
    """The newest ``limit`` entries of main's reflog, newest first; [] when it has none.

    Reads only the end of the file, whatever the reflog's length.
    """
    path = engine.gitdir / "logs" / REF
    try:
        with open(path, "rb") as file:
            end = file.seek(0, os.SEEK_END)
            start, data, block = end, b"", _REFLOG_BLOCK
            while start > 0 and data.count(b"\n") <= limit:
                start, block = max(0, start - block), block * 2
                file.seek(start)
                data = file.read(end - start)
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")[1 if start > 0 else 0:]  # the first may be cut in the middle
    entries = []
    for line in reversed(lines):
        found = _REFLOG_LINE.fullmatch(line)
        if found is not None:
            entries.append(_reflog_entry(*found.groups()))
            if len(entries) == limit:
                break
    return entries


def _reflog_entry(old: bytes, new: bytes, name: bytes, email: bytes, seconds: bytes,
                  message: bytes) -> ReflogEntry:
    def commit(oid: bytes) -> str | None:
        return None if oid.strip(b"0") == b"" else oid.decode()

    return ReflogEntry(commit(old), commit(new), name.decode("utf-8", "replace"),
                       email.decode("utf-8", "replace"), int(seconds),
                       (message or b"").decode("utf-8", "replace"))


def dropped_tips(engine: GitEngine, candidates: list[str], settled: list[str] | None = None) -> list[str]:
    """The commits of ``candidates`` that main's history does not hold, leaving out any
    that another one it does not hold, or one of ``settled`` (let go on purpose), has in
    its own history (those come along), in the order given. Candidates that are no
    commits (gone, or never were) are skipped.

    One walk from the candidates, stopping where main's history begins.
    """
    wanted, done = _commit_ids(engine, candidates), set(_commit_ids(engine, settled or []))
    if not wanted:
        return []
    walker = engine._repo.walk(None, pygit2.enums.SortMode.TOPOLOGICAL)
    for oid in wanted.keys() | done:
        walker.push(oid)
    tip = engine._tip()
    if tip is not None:
        walker.hide(tip)
    covered: set[pygit2.Oid] = set()  # in the history of a dropped candidate or a settled one
    tips = set()
    for commit in walker:  # children before their parents
        if commit.id in wanted and commit.id not in covered and commit.id not in done:
            tips.add(commit.id)
        if commit.id in wanted or commit.id in covered or commit.id in done:
            covered.update(commit.parent_ids)
    return [commit for oid, commit in wanted.items() if oid in tips]


def _commit_ids(engine: GitEngine, commits: list[str]) -> dict[pygit2.Oid, str]:
    """``{oid: id}`` of those of ``commits`` that are commits here, in the order given."""
    found: dict[pygit2.Oid, str] = {}
    for commit in commits:
        try:
            oid = pygit2.Oid(hex=commit)
        except ValueError:
            continue
        if isinstance(engine._repo.get(oid), pygit2.Commit):
            found.setdefault(oid, commit)
    return found


def committer_of(engine: GitEngine, commit: str) -> Identity:
    """Who committed ``commit`` (EngineError when there is no such commit)."""
    signature = engine._repo[engine.resolve(commit)].committer
    return Identity(signature.name, signature.email)


def rescue_refs(engine: GitEngine) -> dict[str, str]:
    """``{commit id: ref name}`` of the commits kept under ``refs/gitmem/rescue/``."""
    prefix = f"{RESCUE_REFS}/"
    return {str(engine._repo.references[name].target): name
            for name in engine._repo.references if name.startswith(prefix)}


def keep_for_rescue(engine: GitEngine, commit: str) -> str:
    """Keep ``commit`` under ``refs/gitmem/rescue/<commit>``; returns the ref's name."""
    name = f"{RESCUE_REFS}/{commit}"
    engine._repo.references.create(name, pygit2.Oid(hex=commit), force=True)
    return name


def release_rescued(engine: GitEngine, commit: str) -> None:
    """Delete ``refs/gitmem/rescue/<commit>`` (it is fine when there is none)."""
    ref = engine._repo.references.get(f"{RESCUE_REFS}/{commit}")
    if ref is not None:
        try:
            ref.delete()
        except pygit2.GitError:  # deleted meanwhile by another process
            pass


# -- damaged objects support -------------------------------------------------------
# libgit2 spins forever on a loose object whose zlib stream was cut short (a crash
# of another tool, a full disk): every read of it, `git fsck` aside, hangs. So each
# object is checked with Python's zlib, which stops, before libgit2 first reads it.
# What is checked is remembered: objects gitmem writes itself are known good, trees
# whose whole content was checked are "sound" (libgit2 may walk them freely, as the
# index diffs and tree diffs do), commits whose whole ancestry was checked may be
# walked. The root tree last found sound is kept in .git/gitmem/, so a new process
# checks only the folders that changed since.

SOUND_TREE_FILE = "sound-tree"  # in .git/gitmem/
CHECKED_LIMIT = 2_000_000  # remembered object ids before the memory starts over
_LOOSE_KINDS = (b"commit", b"tree", b"blob", b"tag")
FULL_DISK_MARGIN = 1 << 20  # bytes: a write failing with less free than its data and this is "disk full"


class DiskFull(EngineError):
    """A write failed because the disk is full; nothing was committed."""


class DamagedObject(EngineError):
    """An object of the repository cannot be read: its loose file is truncated or corrupt."""

    def __init__(self, oid: str, problem: str, where: str | None = None):
        self.oid = oid
        self.problem = problem
        self.where = where
        place = f"{where} (object {oid})" if where else f"object {oid}"
        super().__init__(f"{place} is damaged: {problem} (run `gitmem fsck`)")


class LooseObjectDamaged(ValueError):
    """A loose object file that does not hold its object: truncated, corrupt or not its id's."""


def read_loose_object(path: str, oid: str) -> tuple[bytes, bytes]:
    """``(kind, content)`` of object ``oid`` from its loose object file at ``path``, inflated
    with Python's zlib and checked against the id. Raises FileNotFoundError when there is
    none, LooseObjectDamaged saying what is wrong with a damaged one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    finally:
        os.close(fd)
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data)
    except zlib.error as exc:
        raise LooseObjectDamaged(f"its zlib stream is corrupt ({exc})") from None
    if not inflater.eof:
        raise LooseObjectDamaged(f"its file {path} is truncated")
    header, sep, content = raw.partition(b"\0")
    kind, _, length = header.partition(b" ")
    if not sep or kind not in _LOOSE_KINDS or not length.isdigit() or int(length) != len(content):
        raise LooseObjectDamaged("it holds no git object (bad header or size)")
    if hashlib.sha1(raw).hexdigest() != oid:
        raise LooseObjectDamaged("its content does not match its id")
    return kind, content


class _ObjectCheck:
    """Which objects have been checked, and the checks (see "damaged objects support")."""

    def __init__(self, engine: GitEngine):
        self._engine = engine
        self._objects = str(engine.gitdir / "objects")
        self.checked: set[pygit2.Oid] = set()  # readable (loose and complete, or packed)
        self.sound: set[pygit2.Oid] = set()  # trees: themselves and every tree under them
        self.walkable: set[pygit2.Oid] = set()  # commits: themselves and all their ancestry
        self._trusted: pygit2.Oid | None | bool = False  # False: not read yet

    def check(self, oid: pygit2.Oid, where: str | None = None) -> bytes | None:
        """Raise DamagedObject unless ``oid`` can be read without hanging. Returns the content
        of a loose blob it has just inflated to check it (else None)."""
        if oid in self.checked:
            return None
        text = str(oid)
        path = f"{self._objects}/{text[:2]}/{text[2:]}"
        try:
            kind, content = read_loose_object(path, text)
        except FileNotFoundError:  # packed, or missing: libgit2 answers either at once
            kind, content = None, None
        except LooseObjectDamaged as exc:
            raise DamagedObject(text, str(exc), where) from None
        except OSError as exc:  # unreadable: libgit2 fails on it at once too
            log.debug("cannot check %s: %s", path, exc)
            return None
        self.remember(self.checked, oid)
        return content if kind == b"blob" else None

    def load(self, oid: pygit2.Oid, where: str | None):
        """The object ``oid``, checked first; DamagedObject when it is damaged or missing."""
        self.check(oid, where)
        try:
            return self._engine._repo[oid]
        except KeyError:
            raise DamagedObject(str(oid), "it is missing from the object database", where) from None
        except pygit2.GitError as exc:
            raise DamagedObject(str(oid), f"it cannot be read ({exc})", where) from None

    def read(self, oid: pygit2.Oid, where: str | None) -> bytes:
        """The content of blob ``oid`` from the object database (check it first)."""
        try:
            return self._engine._repo.odb.read(oid)[1]
        except KeyError:
            raise DamagedObject(str(oid), "it is missing from the object database", where) from None
        except pygit2.GitError as exc:
            raise DamagedObject(str(oid), f"it cannot be read ({exc})", where) from None

    def wrote(self, commit_id: pygit2.Oid, parents: list[pygit2.Oid], tree_id: pygit2.Oid,
              base_tree: pygit2.Tree | None) -> None:
        """Note a commit gitmem made on ``parents``, its tree built on ``base_tree``."""
        self.remember(self.checked, commit_id)
        if all(p in self.walkable for p in parents):
            self.remember(self.walkable, commit_id)
        if base_tree is None or base_tree.id in self.sound:  # every other tree in it is ours
            self.remember(self.sound, tree_id)

    def remember(self, known: set, oid: pygit2.Oid) -> None:
        if len(known) >= CHECKED_LIMIT:
            known.clear()
        known.add(oid)

    def make_sound(self, root_id: pygit2.Oid) -> None:
        """Check every tree under root tree ``root_id``, except the folders that are the
        same as in the root tree found sound last time (by this process or one before)."""
        if root_id in self.sound:
            return
        self._sound_below(root_id, self._trusted_root(), "")
        tip = self._engine._tip()
        if tip is not None and self._engine._repo[tip].tree_id == root_id:  # not an old tree
            self._save_trusted(root_id)  # of the history (a file write each, issue 19)

    def _sound_below(self, tree_id: pygit2.Oid, trusted_id: pygit2.Oid | None, where: str) -> None:
        if tree_id in self.sound:
            return
        if tree_id == trusted_id:
            self.remember(self.sound, tree_id)
            return
        repo = self._engine._repo
        tree = self.load(tree_id, f"folder {where or '/'}")
        trusted: dict[str, pygit2.Oid] = {}
        if trusted_id is not None:
            try:
                trusted = {e.name: e.id for e in repo[trusted_id] if e.type_str == "tree"}
            except (KeyError, pygit2.GitError):  # pruned since: check everything
                trusted = {}
        for entry in tree:
            if entry.type_str == "tree":
                self._sound_below(entry.id, trusted.get(entry.name), _join(where, entry.name))
        self.remember(self.sound, tree_id)

    def make_walkable(self, starts) -> None:
        """Check every commit in the history of ``starts`` before libgit2 walks it."""
        repo = self._engine._repo
        starts = [oid for oid in starts if oid is not None]
        pending = list(starts)
        seen: set[pygit2.Oid] = set()
        while pending:
            oid = pending.pop()
            if oid in self.walkable or oid in seen:
                continue
            seen.add(oid)
            if oid in starts:  # an unknown revision, not a damaged history: KeyError
                self.check(oid, "a commit in the history")
                commit = repo[oid]
            else:
                commit = self.load(oid, "a commit in the history")
            pending.extend(getattr(commit, "parent_ids", ()))
        for oid in seen:  # only once all of it is checked
            self.remember(self.walkable, oid)

    def _trusted_root(self) -> pygit2.Oid | None:
        if self._trusted is False:
            try:
                text = (self._engine.private_dir / SOUND_TREE_FILE).read_text("ascii").strip()
                self._trusted = pygit2.Oid(hex=text)
            except (OSError, ValueError):
                self._trusted = None
        return self._trusted

    def _save_trusted(self, tree_id: pygit2.Oid) -> None:
        self._trusted = tree_id
        target = self._engine.private_dir / SOUND_TREE_FILE
        tmp = target.with_name(f"{SOUND_TREE_FILE}.{os.getpid()}.{threading.get_ident()}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
            with os.fdopen(fd, "w") as out:
                out.write(f"{tree_id}\n")
            os.replace(tmp, target)
        except OSError:  # a read-only repository: the next process checks again
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# -- opening, clone, forget and remote support (gitmem.repository, gitmem.forget, CLI) --


@dataclasses.dataclass(frozen=True)
class RepositoryFacts:
    """What a git work tree holds, looked at before gitmem opens it (nothing is written)."""

    branch: str | None  # the branch HEAD names ("master"); None when HEAD is detached
    has_commits: bool  # whether HEAD's branch has a commit
    top_names: tuple[str, ...]  # the names at the top of HEAD's tree
    opened_by_gitmem: bool  # .git/gitmem/ exists: gitmem has opened it before


def inspect_repository(path: str | os.PathLike) -> RepositoryFacts | None:
    """The facts of the git work tree whose top is ``path``; None when ``path`` is not one
    (missing, a plain folder, a bare repository, or a folder inside a work tree)."""
    path = Path(path)
    found = pygit2.discover_repository(str(path)) if path.is_dir() else None
    if not found or Path(found).resolve() != (path / ".git").resolve():
        return None
    repo = pygit2.Repository(str(path))
    head = repo.references.get("HEAD")
    target = head.target if head is not None else None
    branch = target[len("refs/heads/"):] if isinstance(target, str) and \
        target.startswith("refs/heads/") else None
    opened = (Path(repo.path) / GITMEM_DIR).is_dir()
    names: tuple[str, ...] = ()
    if not opened and not repo.head_is_unborn:
        names = _top_names(repo)
    return RepositoryFacts(branch, not repo.head_is_unborn, names, opened)


def _top_names(repo: pygit2.Repository) -> tuple[str, ...]:
    """The names at the top of HEAD's tree; () when its commit or tree is damaged (libgit2
    would spin on a truncated loose object; opening the engine names the damage)."""
    objects = Path(repo.path) / "objects"
    oid = str(repo.head.target)
    for _ in range(2):  # the commit, then its tree
        try:
            kind, content = read_loose_object(str(objects / oid[:2] / oid[2:]), oid)
        except FileNotFoundError:  # packed: libgit2 checks those itself
            kind, content = None, None
        except LooseObjectDamaged:
            return ()
        if kind != b"commit":
            break
        oid = content.split(b"\n", 1)[0].split(b" ")[-1].decode()
    return tuple(entry.name for entry in repo.head.peel(pygit2.Commit).tree)


def point_head_at_main(engine: GitEngine) -> None:
    """Make HEAD name ``main`` (for a repository without commits on another branch)."""
    engine._repo.set_head(REF)


def remove_remote(engine: GitEngine, name: str) -> None:
    """Remove remote ``name`` and its remote-tracking refs, as ``git remote remove``."""
    engine._require_remote(name)
    engine._repo.remotes.delete(name)


def rewrite_commits(engine: GitEngine, commits: list[str], scope: str,
                    rewrite: Callable[[str, bytes], bytes], keep_ref: str,
                    message: str) -> tuple[str, list[str]]:
    """Make ``commits`` (oldest first, the last one ``main``'s tip) again with each file
    under ``scope`` (a file or folder) replaced by ``rewrite(path, data)``, keeping every
    author, date, message and other change; move ``main`` to the new tip and the work
    tree with it; keep the old tip as ``keep_ref``.

    Returns the new tip and the paths left alone because they hold a hand edit.
    EngineError when ``main`` is no longer at ``commits[-1]``.
    """
    repo = engine._repo
    with engine._lock:
        tip = engine._tip()
        if not commits or tip is None or str(tip) != commits[-1]:
            raise EngineError("the branch moved meanwhile; try again")
        made: dict[pygit2.Oid, pygit2.Oid] = {}
        for commit_id in commits:
            old = repo[pygit2.Oid(hex=commit_id)]
            snapshot = Snapshot(engine, old.id)
            paths = [scope] if snapshot.blob_id(scope) else list(snapshot.files(scope))
            changes = {}
            for path in paths:
                data = snapshot.read(path)
                new = rewrite(path, data)
                if new != data:
                    changes[path] = new
            tree_id = old.tree_id
            if changes:
                tree_id = engine._build_tree(old.tree, _nest(changes)) or repo.TreeBuilder().write()
            parents = [made.get(parent, parent) for parent in old.parent_ids]
            made[old.id] = repo.create_commit(None, old.author, old.committer, old.message,
                                              tree_id, parents)
        repo.references.create(keep_ref, tip, force=True)
        kept = engine._advance(tip, made[tip], message)
    return str(made[tip]), kept


def refs_under(engine: GitEngine, prefix: str) -> list[str]:
    """The names of the refs under ``prefix`` (``refs/gitmem/forgotten``), sorted."""
    return sorted(name for name in engine._repo.references if name.startswith(prefix + "/"))


def delete_ref(engine: GitEngine, name: str) -> None:
    """Delete ref ``name`` (nothing when it is not there)."""
    ref = engine._repo.references.get(name)
    if ref is not None:
        ref.delete()


# == record index and blame support (issue 19, branch work-index) ==========================
# What gitmem/record_index.py and gitmem/blame.py need from pygit2; the lead moves this
# block into the git package. Commit ids here come from main's history (the record
# index's), so their ancestry is not walked and checked first as resolve() does: each
# commit and tree read is checked on its own.


@dataclasses.dataclass(frozen=True)
class ChangedCommit:
    """A commit with the files that differ from its first parent (every file of a root commit)."""

    id: str
    parents: tuple[str, ...]
    time: int  # committer time, seconds since the epoch
    paths: tuple[str, ...]


def changed_commits(engine: GitEngine, tip: str, known: Callable[[str], bool]) -> list[ChangedCommit]:
    """The commits in the history of ``tip`` for which ``known(id)`` is false, parents
    first, each with the files it changed; the walk stops at known commits."""
    objects, found, order = engine._objects, {}, []
    pending: list[tuple[pygit2.Oid, bool]] = [(pygit2.Oid(hex=tip), False)]
    while pending:
        oid, parents_done = pending.pop()
        if parents_done:
            order.append(found[oid])
            continue
        if oid in found or known(str(oid)):
            continue
        commit = objects.load(oid, "a commit in the history")
        found[oid] = commit
        pending.append((oid, True))
        pending.extend((p, False) for p in commit.parent_ids if p not in found)
    result = []
    for commit in order:
        parent = objects.load(commit.parent_ids[0], "a commit in the history") if commit.parent_ids else None
        try:
            tree = commit.tree
            diff = parent.tree.diff_to_tree(tree) if parent is not None else tree.diff_to_tree(swap=True)
            paths = tuple(d.new_file.path or d.old_file.path for d in diff.deltas)
        except pygit2.GitError as exc:
            raise DamagedObject(str(commit.id), f"its files cannot be read ({exc})", "a commit in the history") from None
        result.append(ChangedCommit(str(commit.id), tuple(str(p) for p in commit.parent_ids),
                                    commit.commit_time, paths))
    return result


def entry_ids(engine: GitEngine, commit: str, paths) -> dict[str, str | None]:
    """The id of the file or folder at each of ``paths`` in ``commit`` (None: nothing there)."""
    tree = engine._objects.load(pygit2.Oid(hex=commit), "a commit in the history").tree
    found = {}
    for path in paths:
        oid = _entry_id(tree, path)
        found[path] = str(oid) if oid is not None else None
    return found


def descends_from(engine: GitEngine, commit: str, ancestor: str) -> bool:
    """True when ``ancestor`` is ``commit`` or in its history (False when either is gone)."""
    if commit == ancestor:
        return True
    try:
        return engine._repo.descendant_of(pygit2.Oid(hex=commit), pygit2.Oid(hex=ancestor))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def commit_exists(engine: GitEngine, commit: str) -> bool:
    """True when the object database holds commit ``commit``."""
    try:
        return engine._repo[pygit2.Oid(hex=commit)].type == pygit2.enums.ObjectType.COMMIT
    except (KeyError, ValueError, pygit2.GitError):
        return False


def commit_infos(engine: GitEngine, commits: list[str]) -> list[CommitInfo]:
    """The :class:`CommitInfo` of each of ``commits``."""
    return [engine._info(engine._objects.load(pygit2.Oid(hex=c), "a commit in the history").peel(pygit2.Commit))
            for c in commits]


def snapshot_of(engine: GitEngine, commit: str | None) -> Snapshot:
    """The snapshot of commit ``commit`` (an empty one for None: before the first commit)."""
    return Snapshot(engine, pygit2.Oid(hex=commit) if commit else None)


def diff_commits(engine: GitEngine, path: str, old: str | None, new: str | None) -> list[FileDiff]:
    """:meth:`GitEngine.diff` of two commit ids."""
    return engine.diff(path, *(pygit2.Oid(hex=c) if c else None for c in (old, new)))
