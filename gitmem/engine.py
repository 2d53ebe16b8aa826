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

import dataclasses
import logging
import os
import socket
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pygit2

from gitmem.lock import FileLock

log = logging.getLogger("gitmem.engine")

BRANCH = "main"
REF = f"refs/heads/{BRANCH}"
GITMEM_DIR = "gitmem"  # inside .git/
FILE_MODE = 0o600
DIR_MODE = 0o700
INDEX_IDLE = 0.3  # seconds without writes before the index is refreshed
INDEX_MAX_DELAY = 1.0  # refresh at the latest this long after the first pending write
MAX_CAS_RETRIES = 20
STALE_GIT_LOCK_AGE = 10.0  # a ref/index .lock older than this, while we hold our lock, is stale

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
        self._tree = engine._repo[commit_id].peel(pygit2.Tree) if commit_id else None

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
        return self._engine._blob(entry.id)

    def read_parsed(self, path: str, parse: Callable[[bytes], T]) -> T | None:
        """``parse(bytes)`` of the file at ``path``, cached by blob id; None when there is no file."""
        entry = self._entry(path)
        if entry is None or entry.type_str != "blob":
            return None
        return self._engine._parsed(entry.id, parse)

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
        self.private_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        self._tmp_dir = self.private_dir / "tmp"
        self._tmp_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        self.identity = identity or default_identity(repo.config)
        self.durability = durability
        if durability == "fsync":
            pygit2.settings.enable_fsync_gitdir = True
        self._lock = FileLock(self.private_dir / "lock", timeout=lock_timeout)
        self._cache: OrderedDict[tuple[Any, Any], tuple[Any, int]] = OrderedDict()
        self._cache_bytes = cache_bytes  # bounded by the size of the blobs behind the entries
        self._cached_bytes = 0
        self._cache_lock = threading.Lock()
        self._index_refresher = _IndexRefresher(self)
        self._closed = False
        # Called with a record's path (file or folder) before it is read from HEAD or
        # written; the hand-edit layer sets it to commit pending edits of that record.
        self.on_access: Callable[[str], None] | None = None
        with self._lock:
            self._remove_stale_locks()
            self._clean_tmp()
            self._recover_worktree()

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, **kwargs) -> GitEngine:
        """Open the repository at ``path``; create it (branch ``main``) when ``create`` and missing."""
        path = Path(path)
        found = pygit2.discover_repository(str(path)) if path.exists() else None
        if found and Path(found).resolve() == (path / ".git").resolve():
            repo = pygit2.Repository(str(path))
        elif create:
            path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            repo = pygit2.init_repository(str(path), initial_head=BRANCH)
        else:
            raise EngineError(f"no gitmem repository at {path} (run `gitmem init {path}`)")
        if repo.is_bare:
            raise EngineError(f"{path} is a bare repository; gitmem needs a work tree")
        return cls(repo, **kwargs)

    def close(self) -> None:
        """Bring the index in step with HEAD and stop the background thread."""
        if not self._closed:
            self._closed = True
            self._index_refresher.stop()

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
        try:
            return self._repo.revparse_single(rev).peel(pygit2.Commit).id
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError) as exc:
            raise EngineError(f"unknown revision {rev!r}") from exc

    def commit_info(self, rev: str) -> CommitInfo:
        return self._info(self._repo[self.resolve(rev)])

    def history(self, path: str | None = None, *, rev: str | None = None,
                limit: int | None = None) -> list[CommitInfo]:
        """Commits that changed ``path`` (a file or folder; None for all), newest first."""
        start = self.resolve(rev) if rev else self._tip()
        if start is None:
            return []
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
        for commit in self._repo.walk(tip, pygit2.enums.SortMode.TIME):
            if commit.commit_time <= when:
                return str(commit.id)
        return None

    def _touches(self, commit: pygit2.Commit, path: str) -> bool:
        mine = _entry_id(commit.tree, path)
        if not commit.parents:
            return mine is not None
        return all(_entry_id(p.tree, path) != mine for p in commit.parents)

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

    def _parsed(self, oid: pygit2.Oid, parse: Callable[[bytes], T] | None) -> T:
        """``parse`` of a blob (its bytes when ``parse`` is None), inflated once and cached."""
        key = (oid, parse)
        with self._cache_lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key][0]
        data = self._repo.odb.read(oid)[1]
        value = data if parse is None else parse(data)
        with self._cache_lock:
            self._cache[key] = (value, len(data))
            self._cached_bytes += len(data)
            while self._cached_bytes > self._cache_bytes and len(self._cache) > 1:
                _, (_, size) = self._cache.popitem(last=False)
                self._cached_bytes -= size
        return value

    # -- writing -----------------------------------------------------------------

    def commit(self, changes: Changes, message: str, trailers: Mapping[str, str] | None = None,
               *, author: Identity | None = None, scope: str | None = None) -> str | None:
        """Apply ``changes`` ({path: bytes, or None to delete}) as one commit on ``main``.

        Returns the new commit id, or None when the changes alter nothing (no empty commit).
        """
        return self.update(lambda _snapshot: changes, message, trailers, author=author, scope=scope)

    def update(self, make_changes: Callable[[Snapshot], Changes | None], message: str,
               trailers: Mapping[str, str] | None = None, *,
               author: Identity | None = None, scope: str | None = None) -> str | None:
        """Like :meth:`commit`, with changes computed from the tip under the writers' lock.

        ``make_changes(snapshot)`` may run more than once when another writer moves the
        branch in between; it returns the changes, or None for none. ``scope`` names the
        record being written (see :meth:`snapshot`).
        """
        full_message = _with_trailers(message, trailers)
        with self._lock:
            if scope is not None and self.on_access is not None:
                self.on_access(scope)
            for _ in range(MAX_CAS_RETRIES):
                base = self._tip()
                snapshot = Snapshot(self, base)
                changes = make_changes(snapshot)
                if not changes:
                    return None
                for path in changes:
                    check_path(path)
                base_tree = snapshot._tree
                tree_id = self._build_tree(base_tree, _nest(changes))
                if tree_id is None:
                    tree_id = self._repo.TreeBuilder().write()
                if base_tree is not None and tree_id == base_tree.id:
                    return None
                signature = (author or self.identity).signature()
                committer = self.identity.signature()
                parents = [base] if base else []
                commit_id = self._repo.create_commit(
                    None, signature, committer, full_message, tree_id, parents)
                if self._move_branch(base, commit_id, full_message):
                    self.write_worktree(changes)
                    self._index_refresher.mark(changes)
                    return str(commit_id)
            raise EngineError("the branch kept moving under us; gave up after "
                              f"{MAX_CAS_RETRIES} attempts")

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
                builder.insert(name, self._repo.create_blob(change), pygit2.enums.FileMode.BLOB)
        if len(builder) == 0:
            return None
        return builder.write()

    # -- the work tree -----------------------------------------------------------

    def write_worktree(self, changes: Changes) -> None:
        """Make the work tree hold ``changes``: atomic replace, 0600 files, 0700 folders."""
        for path, data in changes.items():
            target = self._safe_target(path, create_parents=data is not None)
            if data is None:
                if target is not None:
                    _unlink(target)
                    self._prune_empty_dirs(target.parent)
            else:
                self._replace_file(target, data)

    def worktree_path(self, path: str) -> Path:
        """The absolute work-tree path of repository path ``path``."""
        return self.workdir / check_path(path)

    def _safe_target(self, path: str, *, create_parents: bool) -> Path | None:
        """The work-tree path for ``path``, refusing to pass through symlinks or files."""
        parts = check_path(path).split("/")
        current = self.workdir
        for part in parts[:-1]:
            current = current / part
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
        return current / parts[-1]

    def _replace_file(self, target: Path, data: bytes) -> None:
        tmp = self._tmp_dir / f"{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durability == "fsync":
                os.fsync(fd)
        finally:
            os.close(fd)
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                raise UnsafePath(f"{target} is a folder; refusing to replace it with a file")
            os.replace(tmp, target)  # replaces a symlink itself, never what it points to
        except BaseException:
            _unlink(tmp)
            raise

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
            index = self._repo.index
            index.read(force=True)
            head = Snapshot(self, self._tip())
            if paths is None:
                index.read_tree(head._tree) if head._tree is not None else index.clear()
                paths = [e.path for e in index]
            for path in paths:
                self._refresh_entry(index, head, path)
            index.write()

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

    def index_in_step(self) -> bool:
        """True when the index holds exactly HEAD's tree."""
        index = self._repo.index
        index.read(force=True)
        tip = self._tip()
        if tip is None:
            return len(index) == 0
        return index.write_tree() == self._repo[tip].peel(pygit2.Tree).id

    # -- recovery ----------------------------------------------------------------

    def _remove_stale_locks(self) -> None:
        """Remove git lock files left by a killed process (we hold the writers' lock)."""
        for lock in (self.gitdir / "index.lock", self.gitdir / f"{REF}.lock", self.gitdir / "HEAD.lock"):
            try:
                age = time.time() - lock.stat().st_mtime
            except FileNotFoundError:
                continue
            if age > STALE_GIT_LOCK_AGE:
                log.warning("removing stale lock %s (%.0f s old)", lock, age)
                _unlink(lock)

    def _clean_tmp(self) -> None:
        for leftover in self._tmp_dir.iterdir():
            pid = leftover.name.split("-", 1)[0]
            if not pid.isdigit() or not _process_alive(int(pid)):
                _unlink(leftover)

    def _recover_worktree(self) -> None:
        """Finish work-tree updates that a killed writer left undone.

        The index records the last state known to agree between work tree and HEAD.
        For each path where the index lags HEAD: a work-tree file still equal to the
        index's version was never updated, so it gets HEAD's; one equal to HEAD is
        fine; anything else is a hand edit and is left alone.
        """
        tip = self._tip()
        if tip is None:
            return
        index = self._repo.index
        index.read(force=True)
        head = Snapshot(self, tip)
        lagging = [d.delta.new_file.path if d.delta.new_file.path else d.delta.old_file.path
                   for d in index.diff_to_tree(head._tree)]
        if not lagging:
            return
        for path in lagging:
            entry = head._entry(path)
            in_index = index[path].id if path in index else None
            on_disk = self._hash_worktree(path)
            head_id = entry.id if entry is not None else None
            if on_disk == head_id:
                continue
            if on_disk == in_index:
                log.warning("recovering %s from HEAD after an interrupted write", path)
                self.write_worktree({path: self._blob(head_id) if head_id else None})
            else:
                log.info("leaving %s alone: it holds an uncommitted hand edit", path)
        self.refresh_index(lagging)

    def _hash_worktree(self, path: str) -> pygit2.Oid | None:
        on_disk = self.workdir / path
        if os.path.islink(on_disk) or not on_disk.is_file():
            return None
        return pygit2.hashfile(str(on_disk))

    # -- plumbing for the layers above ------------------------------------------

    def hash_file(self, path: str) -> str | None:
        """The blob id the work-tree file at ``path`` would have, or None when there is none."""
        oid = self._hash_worktree(check_path(path))
        return str(oid) if oid else None

    def user_identity(self) -> Identity:
        return user_identity(self._repo.config)

    def config_get(self, key: str) -> str | None:
        return _config_get(self._repo.config, key)

    @property
    def lock(self) -> FileLock:
        """The writers' lock; hold it to keep other gitmem writers out."""
        return self._lock


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
            if not self._pending:
                self._first_mark = time.monotonic()
            self._pending.update(paths)
            self._last_mark = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gitmem-index", daemon=True)
                self._thread.start()
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        self._flush()

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
            self._flush()

    def _flush(self) -> None:
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
    return message


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


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
