"""The git index kept in step with HEAD, and crash recovery.

Before main moves to a commit, the changed paths' entries are written into the index
(:meth:`Index.stage`, no stat data), so a plain ``git commit``, racing the write or
after a crash, never undoes it; a background thread (:class:`IndexRefresher`) adds their stat data
once writes settle, so ``git status`` stays clean. :class:`Recovery` finishes what a
killed writer left: its git locks, temp files and work-tree updates.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple, cast
from pathlib import Path

import pygit2

from gitmem.git.base import REF, Changes, EngineError, fsync_path, unlink
from gitmem.git.files import IN_FLIGHT_FILE, write_private
from gitmem.git.lock import FileLock
from gitmem.git.log import tree_changes
from gitmem.git.snapshot import Reader, Snapshot
from gitmem.git.worktree import WorkTree

log = logging.getLogger("gitmem.engine")

INDEX_IDLE = 0.3  # seconds without writes before the index is refreshed
STAT_ON_WRITE = 1 << 20  # bytes: a write of a file up to this size stages it with its stat data
INDEX_MAX_DELAY = 1.0  # refresh at the latest this long after the first pending write
STALE_GIT_LOCK_AGE = 10.0  # a ref/index .lock older than this, while we hold our lock, is stale
INDEX_LOCK_WAIT = 0.5  # seconds a write waits at most for a git command holding index.lock
INDEX_LOCK_FRESH = 0.5  # seconds; a git command holding index.lock longer is waited for no more
INDEX_LOCK_POLL = 0.002  # seconds between looks at index.lock
IN_STEP_FILE = "index-in-step"  # in .git/gitmem/: a tip, and the index file found holding its tree


class Index:
    """The index of ``repo``, for the work tree ``worktree``, changed under the writers'
    ``lock`` (when ``writable``) since the refresher thread shares it."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, private_dir: Path, *, lock: FileLock,
                 writable: bool, reader: Reader, worktree: WorkTree, durability: str):
        self._repo = repo
        self._gitdir = gitdir
        self._in_step_file = private_dir / IN_STEP_FILE
        # (tip, the index file's stat data) while the index is known to hold tip's tree: found
        # so at opening, then carried through each of our own index writes
        self._in_step: tuple[pygit2.Oid, tuple[int, ...]] | None = None
        self._written: tuple[int, ...] | None = None  # the index file's stat data after our last write
        self._lock = lock
        self._writable = writable
        self._reader = reader
        self._worktree = worktree
        self._durability = durability
        self.refresher = IndexRefresher(self.refresh)

    def stage(self, changes: Changes, tree: pygit2.Tree, moved: tuple[pygit2.Oid | None, pygit2.Oid | None]) -> None:
        """Make the index hold ``tree``'s version of the changed paths now (no stat data:
        the background refresher adds it), so that ``git status`` and ``git commit`` never
        see an answered write as undone. One index write (measured in ``gitmem bench``); a
        file of up to STAT_ON_WRITE bytes just written is staged with its stat data, so the
        refresher (which takes the writers' lock for an index write of its own) has
        nothing left to do for it.

        The engine calls it before moving main to ``tree``'s commit. A git command holding
        ``index.lock`` is waited for a moment (INDEX_LOCK_WAIT), never while it has held it
        for longer (a ``git commit`` with its editor open): then the refresher does it
        later. When a git command rewrote the index since our last write (a ``git commit``
        writes back the index it read before taking the lock), the paths of gitmem's writes
        not refreshed yet are staged again too. ``moved``: main's tip before and after the
        commit of ``changes``."""
        waited = 0.0
        while True:
            before = self._file_stat()
            lagging = list(changes)  # what the refresher is left to give stat data
            try:
                index = self._repo.index
                index.read(force=False)  # reads the file again only if someone changed it
                again = []
                if self._written is not None and before != self._written:
                    again = [path for path in self.refresher.pending() if path not in changes]
                lagging = []
                for path in [*changes, *again]:
                    data = changes.get(path)
                    try:
                        entry = tree[path]
                    except KeyError:
                        entry = None
                    if entry is None or entry.type_str != "blob":
                        if path in index:
                            index.remove(path)
                    elif data is not None and len(data) <= STAT_ON_WRITE and self._with_stat(index, path, entry):
                        pass
                    else:
                        if path not in index or index[path].id != entry.id:
                            index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))
                        lagging.append(path)
                index.write()
                self._written = self._file_stat()
                self._carry_in_step(moved[0], before, moved[1])
                break
            except (pygit2.GitError, OSError) as exc:
                self._in_step = None
                lagging = list(changes)
                pause = self._lock_pause(waited)
                if pause is None:
                    log.warning("index not updated now (the refresher tries again): %s", exc)
                    break
                time.sleep(pause)
                waited += pause
        if lagging:
            self.refresher.mark(lagging)

    def _with_stat(self, index: pygit2.Index, path: str, entry: pygit2.Object) -> bool:
        """Stage the work-tree file at ``path`` with its stat data when it holds ``entry``'s
        blob (just written there): the refresher, which takes the writers' lock for an
        index write of its own, then has nothing to do. False when it holds anything else."""
        on_disk = self._worktree.workdir / path
        try:
            if os.path.islink(on_disk) or not on_disk.is_file():
                return False
            index.add(path)  # hashes the file and records its stat data
        except (OSError, pygit2.GitError):
            return False
        if index[path].id == entry.id:
            return True
        index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))  # a save just now: not staged
        return False

    def _lock_pause(self, waited: float) -> float | None:
        """How long to wait before trying the index again, None for not at all: only while
        a git command took ``index.lock`` just now, and for INDEX_LOCK_WAIT at most."""
        try:
            age = time.time() - os.stat(self._gitdir / "index.lock").st_mtime
        except OSError:
            return None
        if age > INDEX_LOCK_FRESH or waited >= INDEX_LOCK_WAIT:
            return None
        return INDEX_LOCK_POLL

    def refresh(self, paths: list[str] | None = None) -> None:
        """Make the index agree with HEAD for ``paths`` (all of HEAD when None).

        A path whose work-tree file differs from HEAD (a hand edit not yet committed)
        gets HEAD's blob id without stat data, so git still reports it as modified.
        """
        with self._lock:
            if not self._worktree.is_main():  # the index is the checked-out commit's
                return
            before = self._file_stat()
            index = self._repo.index
            index.read(force=True)
            tip = self._reader.tip()
            head = self._reader.snapshot(tip)
            whole = paths is None
            if paths is None:
                index.read_tree(head.tree) if head.tree is not None else index.clear()
                paths = [e.path for e in index]
            for path in paths:
                self._refresh_entry(index, head, path)
            index.write()
            self._written = self._file_stat()
            if whole and tip is not None:
                self._in_step = (tip, self._file_stat())
            else:
                self._carry_in_step(tip, before, tip)
            if self._durability == "fsync":  # libgit2 does not fsync the index itself
                fsync_path(self._gitdir / "index")
                fsync_path(self._gitdir)

    def _refresh_entry(self, index: pygit2.Index, head: Snapshot, path: str) -> None:
        entry = head.entry(path)
        if entry is None or entry.type_str != "blob":
            if path in index:
                index.remove(path)
            return
        on_disk = self._worktree.workdir / path
        try:
            if not os.path.islink(on_disk) and on_disk.is_file():
                index.add(path)  # hashes the file and records its stat data
                if index[path].id == entry.id:
                    return
        except (OSError, pygit2.GitError):
            pass
        index.add(pygit2.IndexEntry(path, entry.id, entry.filemode))

    # -- the index known to hold HEAD's tree, so that opening need not compare them --

    def known_in_step(self, tip: pygit2.Oid) -> bool:
        """True when the index file is the one a process before left holding ``tip``'s tree."""
        try:
            noted = self._in_step_file.read_text(encoding="ascii").split()
        except (OSError, UnicodeDecodeError):
            return False
        stat = self._file_stat()
        if noted != [str(tip), *map(str, stat)]:
            return False
        self._in_step = (tip, stat)
        return True

    def note_in_step(self, tip: pygit2.Oid) -> None:
        """The index was just found to hold ``tip``'s tree."""
        self._in_step = (tip, self._file_stat())

    def save_in_step(self, tip: pygit2.Oid | None) -> None:
        """Note for the next process that the index holds ``tip``'s tree, if it is known to."""
        if tip is None or self._in_step != (tip, self._file_stat()):
            with contextlib.suppress(OSError):
                self._in_step_file.unlink()
            return
        with contextlib.suppress(OSError):  # the next opening compares them again
            write_private(self._in_step_file, " ".join([str(tip), *map(str, self._in_step[1])]).encode("ascii"))

    def _carry_in_step(self, old_tip: pygit2.Oid | None, stat_before: tuple[int, ...],
                       new_tip: pygit2.Oid | None) -> None:
        """After an index write that makes an index holding ``old_tip``'s tree hold ``new_tip``'s."""
        if self._in_step is not None and self._in_step == (old_tip, stat_before) and new_tip is not None:
            self._in_step = (new_tip, self._file_stat())
        else:
            self._in_step = None

    def _file_stat(self) -> tuple[int, ...]:
        try:
            found = os.stat(self._gitdir / "index")
        except FileNotFoundError:
            return ()
        return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns

    def contains(self, path: str) -> bool:
        """True when the index has an entry for ``path``."""
        # the index refresher thread shares the repository's index
        with self._lock if self._writable else contextlib.nullcontext():
            index = self._repo.index
            index.read(force=False)
            return path in index

    def in_step(self) -> bool:
        """True when the index holds exactly HEAD's tree."""
        index = self._repo.index
        index.read(force=True)
        tip = self._reader.tip()
        if tip is None:
            return len(index) == 0
        return index.write_tree() == self._repo[tip].peel(pygit2.Tree).id

    def suspects(self, folders: tuple[str, ...] | list[str]) -> list[str]:
        """Paths under ``folders`` whose work-tree file may differ from HEAD: new, changed or gone.

        One ``git status`` on the index's stat data, so a large repository is not read.
        """
        prefixes = tuple(f"{folder}/" for folder in folders)
        # the index refresher thread shares the repository's index (none when read-only)
        with self._lock if self._writable else contextlib.nullcontext():
            status = self._repo.status(untracked_files="all", ignored=True)
        found = []
        for path, flags in status.items():
            if path.startswith(prefixes) and flags != pygit2.enums.FileStatus.CURRENT:
                found.extend(self._worktree.files(path.rstrip("/")) if path.endswith("/") else [path])
        return sorted(found)


class IndexRefresher:
    """Calls ``refresh(paths)`` off the write path for the paths marked: after writes
    settle, and at close."""

    def __init__(self, refresh: Callable[[list[str]], None]):
        self._refresh = refresh
        self._pending: set[str] = set()
        self._first_mark = 0.0
        self._last_mark = 0.0
        self._cond = threading.Condition()
        self._flushing = threading.Lock()  # held across a refresh: flush() returns after one in flight
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

    def pending(self) -> set[str]:
        """The paths marked and not refreshed yet."""
        with self._cond:
            return set(self._pending)

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
        """Refresh the paths marked so far, now; returns once they are refreshed (also
        when the thread had taken them just before)."""
        with self._flushing:
            self._flush()

    def _flush(self) -> None:
        with self._cond:
            paths, self._pending = sorted(self._pending), set()
        if paths:
            try:
                self._refresh(paths)
            except Exception:  # the next write or close() tries again
                log.exception("index refresh failed")
                with self._cond:
                    self._pending.update(paths)
                    self._first_mark = self._last_mark = time.monotonic()  # not again at once


class GitLock(NamedTuple):
    """A lock file of git's: its path (``.git/index.lock``), its age in seconds, whether a
    gitmem writer that was killed left it, and whether this process removed it."""

    path: str
    age: float
    left_by_killed_writer: bool
    removed: bool = False


class Recovery:
    """Finishes what a gitmem writer killed while holding the writers' lock left undone,
    in repository ``repo`` (git folder ``gitdir``). ``path_versions(path)`` lists the blob
    ids a path held on ``main``, newest first."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, *, reader: Reader,
                 worktree: WorkTree, index: Index, path_versions: Callable[[str], list[str]],
                 private_dir: Path):
        self._repo = repo
        self._gitdir = gitdir
        self._reader = reader
        self._worktree = worktree
        self._index = index
        self._path_versions = path_versions
        self._in_flight_file = private_dir / IN_FLIGHT_FILE
        self._in_flight_fd: int | None = None
        self.removed_locks: list[GitLock] = []  # git's lock files this process found stale

    def note_in_flight(self, commit: pygit2.Oid) -> None:
        """Say that the work tree and index are about to get ``commit``'s files, before main
        moves there: a writer killed in between leaves files no commit on main holds, which
        are then gitmem's to take back (:meth:`recover_worktree`), not a person's edit. One
        write of a few bytes over the last (no fsync)."""
        try:
            if self._in_flight_fd is None:
                self._in_flight_fd = os.open(self._in_flight_file, os.O_WRONLY | os.O_CREAT, 0o600)
            os.pwrite(self._in_flight_fd, str(commit).encode("ascii").ljust(64) + b"\n", 0)
        except OSError as exc:  # a full disk: recovery falls back on the file's history
            log.debug("in-flight commit not noted: %s", exc)

    def close(self) -> None:
        if self._in_flight_fd is not None:
            os.close(self._in_flight_fd)
            self._in_flight_fd = None

    def _take_back_in_flight(self, tip: pygit2.Oid) -> None:
        """Bring back to HEAD the work-tree files of a commit a killed writer was writing
        and never moved main to (see :meth:`note_in_flight`), where they still hold it."""
        try:
            noted = self._in_flight_file.read_text("ascii").strip()
            if noted == str(tip):  # the common case: it landed, and is main's tip
                return
            commit = cast(pygit2.Commit, self._repo[self._reader.resolve(noted)])  # a damaged object is not read
        except (OSError, ValueError, EngineError):
            return
        if self._repo.descendant_of(tip, commit.id) or self._main_was_at(commit.id):
            # it landed; a person's amend or reset since is gitmem.edits.rewrites' to handle.
            # Noted as looked at: the walk from main's tip back to it is not made again at
            # every opening (commits made with plain git or fast-import since it).
            self.note_in_flight(tip)
            return
        parent = commit.parents[0].tree if commit.parents else None
        head = self._reader.snapshot(tip)
        for path, (_, new_id) in tree_changes(parent, commit.tree).items():
            on_disk = self._worktree.file_id(path)
            head_id = head.blob_id(path)
            if head_id == new_id or on_disk != new_id or \
                    new_id is None and os.path.lexists(self._worktree.workdir / path):
                continue
            log.warning("taking back %s: a killed write left it holding a commit main never got", path)
            self._worktree.write({path: head.read(path) if head_id else None}, expected={path: on_disk})
        self.note_in_flight(tip)  # looked at: not again at the next opening

    def _main_was_at(self, commit: pygit2.Oid, depth: int = 1000) -> bool:
        """True when one of main's newest ``depth`` reflog entries moved it away from
        ``commit`` (an amend, a reset): it was there. An entry moving main *to* it proves
        nothing: a writer killed inside the ref update leaves that entry, main unmoved."""
        try:
            entries = self._repo.references[REF].log()
            return any(entry.oid_old == commit for entry in itertools.islice(entries, depth))
        except (KeyError, pygit2.GitError):
            return False

    def after_dead_writer(self, taken_at: float) -> None:
        """Clean up after a gitmem writer that died holding the writers' lock it took at
        ``taken_at``: its git locks and temp files, and the work tree it left behind."""
        log.warning("a gitmem writer died holding the writers' lock: recovering")
        try:
            self.remove_stale_locks(since=taken_at)
            self._worktree.clean_tmp()
            for leftover in (self._gitdir / "objects").glob("tmp_object_git2_*"):  # libgit2's
                if leftover.stat().st_mtime >= taken_at:
                    unlink(leftover)
            self.recover_worktree()
        except Exception:  # the next open tries again; writes go on meanwhile
            log.exception("recovery after a dead writer failed")

    def git_locks(self, dead_writer_took_at: float | None) -> list[GitLock]:
        """git's lock files that exist now (``index.lock``, main's and HEAD's): while one is
        there, a plain ``git commit`` is refused. ``dead_writer_took_at``: when a gitmem
        writer that died holding the writers' lock took it (those made since are its)."""
        found = []
        for lock in self._lock_files():
            try:
                mtime = lock.stat().st_mtime
            except FileNotFoundError:
                continue
            found.append(self._git_lock(lock, mtime, dead_writer_took_at is not None
                                        and mtime >= dead_writer_took_at))
        return found

    def _git_lock(self, lock: Path, mtime: float, left_by_killed_writer: bool,
                  removed: bool = False) -> GitLock:
        return GitLock(lock.relative_to(self._gitdir.parent).as_posix(), time.time() - mtime,
                       left_by_killed_writer, removed)

    def _lock_files(self) -> tuple[Path, ...]:
        return self._gitdir / "index.lock", self._gitdir / f"{REF}.lock", self._gitdir / "HEAD.lock"

    def remove_stale_locks(self, since: float | None = None) -> None:
        """Remove git lock files left by a killed gitmem writer (we hold the writers' lock):
        those made ``since`` a writer that then died took it, and ref locks older than
        STALE_GIT_LOCK_AGE (git holds one for milliseconds). ``index.lock`` only in the first
        case: a person's ``git commit`` holds it while their editor is open."""
        for lock in self._lock_files():
            try:
                mtime = lock.stat().st_mtime
            except FileNotFoundError:
                continue
            age = time.time() - mtime
            old_ref_lock = age > STALE_GIT_LOCK_AGE and lock.name != "index.lock"
            if old_ref_lock or (since is not None and mtime >= since):
                log.warning("removing stale lock %s (%.0f s old)", lock, age)
                unlink(lock)
                self.removed_locks.append(self._git_lock(lock, mtime, since is not None and mtime >= since,
                                                         removed=True))

    def recover_worktree(self) -> None:
        """Finish work-tree updates that a killed writer left undone.

        For each path where the index differs from HEAD (a write cut short before its
        index update, or a person's ``git add``): a work-tree file holding an older
        committed version of the path was gitmem's and gets HEAD's, as does a missing
        file the index does not know either (a new file not yet written); one equal to
        HEAD is fine; anything else is a hand edit (staged or not) and is left alone.
        Nothing is done while the work tree is not ``main``'s.
        """
        tip = self._reader.tip()
        if tip is None or not self._worktree.is_main():
            return
        self._take_back_in_flight(tip)
        if self._index.known_in_step(tip):
            return
        index = self._repo.index
        index.read(force=True)
        head = self._reader.snapshot(tip)
        lagging = [d.delta.new_file.path if d.delta.new_file.path else d.delta.old_file.path
                   for d in index.diff_to_tree(head.tree)]
        if not lagging:
            self._index.note_in_step(tip)
            return
        for path in lagging:
            on_disk = self._worktree.file_id(path)
            head_id = head.blob_id(path)
            if on_disk == head_id:
                continue
            if on_disk is None and path not in index and not os.path.lexists(self._worktree.workdir / path) \
                    or on_disk is not None and on_disk in self._path_versions(path):
                if self._reader.tip() != tip:  # plain git moved main meanwhile: HEAD read is stale
                    log.info("main moved during recovery: the next access looks again")
                    return
                log.warning("recovering %s from HEAD after an interrupted write", path)
                self._worktree.write({path: head.read(path) if head_id else None}, expected={path: on_disk})
            else:
                log.info("leaving %s alone: it holds an uncommitted hand edit", path)
        try:
            self._index.refresh(lagging)
        except pygit2.GitError as exc:  # a git command holds index.lock: refresh it later
            log.warning("index not refreshed after recovery: %s", exc)
            self._index.refresher.mark(lagging)

