"""The work tree: gitmem's files written atomically, never over a person's save.

Every file is written to a private temp file in ``.git/gitmem/tmp`` first, then renamed
into place (0600 files, 0700 folders, never through a symlink). A person may save a file
in the work tree at any moment, and a write must never overwrite what they saved. So a
write replaces a file only while it still holds the version the commit started from:
the new file is swapped in atomically (renameat2 RENAME_EXCHANGE) and the file it
displaced is checked, and put back when a save got in first. What a write leaves alone
is an uncommitted hand edit, for gitmem.edits.handedits to commit. The file a write displaces
is kept a moment (:mod:`gitmem.git.displaced`): bytes a writer that had it open still
puts there are merged as a hand edit. Stat data vouches for a
file's content once the file is older than the file system's timestamp granularity
(git's "racy" rule). What each file was left holding goes into the journal
(:mod:`gitmem.git.journal`).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Literal

from gitmem.git.base import (BRANCH, FILE_MODE, REF, Changes, UnsafePath, check_path,
                             fsync_path, make_folder, process_alive, reason, unlink)
from gitmem.git.displaced import DisplacedFiles
from gitmem.git.files import read_regular
from gitmem.git.journal import Journal
from gitmem.git.snapshot import Snapshot
from gitmem.git.stamp import racy
from gitmem.git.statcache import StatCache, git_blob_id, stat_key

log = logging.getLogger("gitmem.engine")

_HEAD_ON_MAIN = f"ref: {REF}".encode()
OWN_WRITE_AGE_NS = 3_000_000_000  # how far back gitmem dates the mtime of a file it writes
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class WorkTree:
    """The work tree at ``workdir`` of the repository at ``gitdir``.

    ``tmp_dir`` holds files being written; ``journal`` records what each file was left
    holding; ``stat_cache`` vouches for files by their stat data; ``content_id(data)``
    hashes content read from a file (and may keep it, as the reader's cache does);
    ``durability`` "fsync" puts each write on disk before it returns; ``displaced``
    keeps the files a write replaced or deleted for a moment (None: removed at once).
    """

    def __init__(self, workdir: Path, gitdir: Path, tmp_dir: Path, *, journal: Journal,
                 stat_cache: StatCache, content_id: Callable[[bytes], str], durability: str,
                 displaced: DisplacedFiles | None = None):
        self.workdir = workdir
        self._gitdir = gitdir
        self._tmp_dir = tmp_dir
        self.journal = journal
        self._stat_cache = stat_cache
        self._content_id = content_id
        self._durability = durability
        self._displaced = displaced

    def write(self, changes: Changes, expected: Snapshot | Mapping[str, str | None] | None = None,
              blob_ids: Mapping[str, str] | None = None) -> None:
        """Make the work tree hold ``changes``: atomic replace, 0600 files, 0700 folders.

        With ``expected`` (the snapshot the changes were made from, or ``{path: blob id or
        None}``), a file that no longer holds its expected version is a person's edit and
        is left alone (see the module doc). A path that cannot be written (a symlink
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
                if self.journal.failed(path, reason(exc)):
                    log.warning("left %s out of the work tree (gitmem status lists it; the next "
                                "access tries again): %s", path, reason(exc))
        if self._durability == "fsync":
            self._fsync_folders(changes)

    def _write_file(self, path: str, data: bytes | None, blob_id: str | None) -> None:
        """Write ``data`` to ``path`` whatever the work tree holds there (None: delete it)."""
        target = self._safe_target(path, create_parents=data is not None)
        if data is None:
            if target is not None:
                unlink(target)
                self._prune_empty_dirs(target.parent)
        else:
            assert target is not None  # its folders made: never None
            self._note_written(path, target, data, self._replace_file(target, data), blob_id)
        self.journal.wrote(path, blob_id)

    def is_main(self) -> bool:
        """True when the work tree is ``main``'s: HEAD is the branch, not a detached commit
        or another branch a person checked out. Otherwise gitmem still commits to ``main``
        but leaves the work tree and the index to the person."""
        try:
            with open(self._gitdir / "HEAD", "rb") as file:
                return file.read(64).strip() == _HEAD_ON_MAIN
        except OSError:
            return False

    def checked_out(self) -> str:
        """What the work tree holds, for a person: "main", "branch NAME" or "commit ID"."""
        try:
            head = (self._gitdir / "HEAD").read_text().strip()
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
            fsync_path(self.workdir / folder)

    def path(self, path: str) -> Path:
        """The absolute work-tree path of repository path ``path``."""
        return self.workdir / check_path(path)

    def hidden_by(self, path: str) -> str | None:
        """The folder on the way to ``path`` that gitmem cannot see into: a symlink (never
        followed), a file, or one it may not read; None when there is none (a folder that
        is missing hides nothing: what was under it is gone)."""
        parts = check_path(path).split("/")
        current = str(self.workdir)
        for depth, part in enumerate(parts[:-1]):
            current = f"{current}/{part}"
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                return None
            except OSError:
                return "/".join(parts[:depth + 1])
            if not stat.S_ISDIR(st.st_mode) or not os.access(current, os.R_OK | os.X_OK):
                return "/".join(parts[:depth + 1])
        return None

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
                make_folder(current)
                continue
            except PermissionError:  # a folder on the way that may not be read
                if create_parents:
                    raise
                return None
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
            if self._durability == "fsync":
                os.fsync(fd)
            st = os.fstat(fd)
        except BaseException:  # a full disk: what was written of it must not fill it further
            os.close(fd)
            unlink(tmp)
            raise
        os.close(fd)
        return tmp, stat_key(st)

    def _replace_file(self, target: Path, data: bytes) -> tuple[int, int, int]:
        tmp, written = self._write_tmp(data)
        try:
            if os.path.isdir(target) and not os.path.islink(target):
                raise UnsafePath(f"{target} is a folder; refusing to replace it with a file")
            os.replace(tmp, target)  # replaces a symlink itself, never what it points to
        except BaseException:
            unlink(tmp)
            raise
        return written

    def _prune_empty_dirs(self, folder: Path) -> None:
        while folder != self.workdir and self.workdir in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def clean_tmp(self) -> None:
        """Remove the temp files of processes that are gone."""
        for leftover in self._tmp_dir.iterdir():
            pid = leftover.name.split("-", 1)[0]
            if not pid.isdigit() or not process_alive(int(pid)):
                unlink(leftover)

    def file_id(self, path: str) -> str | None:
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

    def read(self, path: str) -> tuple[bytes, str] | None:
        """``(bytes, blob id)`` of the regular file at ``path`` in the work tree, or None.

        Never follows a symlink, so nothing outside the repository is read.
        """
        target = self._safe_target(path, create_parents=False)
        found = read_regular(target) if target is not None else None
        if found is None:
            return None
        return found[0], self._content_id(found[0])

    def files(self, folder: str) -> list[str]:
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

    def _file_id(self, path: str, file: Path, *, moved: bool = False) -> str | None:
        """The blob id of regular ``file``: the work-tree file of ``path``, or (``moved``)
        what a write just displaced from there, whose ctime the move changed."""
        return self._checked_id(path, file, moved=moved)[0]

    def _checked_id(self, path: str, file: Path, *, moved: bool = False) -> tuple[str | None, tuple[int, int]]:
        """:meth:`_file_id`, and the (size, mtime_ns) that ``file`` had for that answer."""
        checked_at = time.time_ns()
        try:
            st = os.lstat(file)
        except OSError:
            return None, (-1, -1)
        if not stat.S_ISREG(st.st_mode):
            return None, (-1, -1)
        known = self._stat_cache.lookup(path, st, moved=moved)
        if known is not None:
            return known, (st.st_size, st.st_mtime_ns)
        found = read_regular(file)
        if found is None:
            return None, (-1, -1)
        blob_id = self._content_id(found[0])
        if not moved and not racy(st, checked_at):
            self._stat_cache.note(path, st, blob_id)
        return blob_id, (len(found[0]), found[1].st_mtime_ns)

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
        tmp: Path | None
        tmp, written = self._write_tmp(data)
        displaced = None  # (file, blob id, (size, mtime)): what the write took out of the work tree
        try:
            if base_id is None:
                _rename_noreplace(tmp, target)
            elif not _renameat2(tmp, target, _RENAME_EXCHANGE):  # cannot swap here: check, replace
                displaced = self._replace_checked(path, tmp, target, base_id)
            else:
                on_disk, key = self._checked_id(path, tmp, moved=True)
                if on_disk != base_id:
                    _renameat2(tmp, target, _RENAME_EXCHANGE)  # a save got in first: put it back
                    self._hold(path, tmp, blob_id or git_blob_id(data), written[1:])  # ours, briefly there
                    tmp = None
                    raise FileExistsError(target)
                displaced = (tmp, base_id, key)
                tmp = None
            self._note_written(path, target, data, written, blob_id)
            self.journal.wrote(path, blob_id)
        except (FileExistsError, FileNotFoundError):
            log.info("left %s alone: it holds an uncommitted hand edit", path)
        finally:
            if tmp is not None:
                unlink(tmp)
            if displaced is not None:
                self._hold(path, *displaced)

    def _replace_checked(self, path: str, tmp: Path, target: Path,
                         base_id: str) -> tuple[Path, str, tuple[int, int]] | None:
        """Where the file system cannot swap: replace ``target`` by ``tmp`` if it holds
        ``base_id`` (FileExistsError if not), and return the displaced file kept under a
        second name (None where the file system has no hard links)."""
        kept: Path | None
        kept = self._tmp_path()
        try:
            os.link(target, kept, follow_symlinks=False)
        except OSError:
            kept = None
        try:
            on_disk, key = self._checked_id(path, kept or target, moved=kept is not None)
            if on_disk != base_id:
                raise FileExistsError(target)
            os.replace(tmp, target)
        except BaseException:
            if kept is not None:
                unlink(kept)
            raise
        return (kept, base_id, key) if kept is not None else None

    def _hold(self, path: str, file: Path, blob_id: str, key: tuple[int, int]) -> None:
        """Keep ``file``, just taken out of the work tree holding ``blob_id``, for late bytes."""
        if self._displaced is None:
            unlink(file)
        else:
            self._displaced.hold(path, file, blob_id, key)

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
        on_disk, key = self._checked_id(path, hold, moved=True)
        if on_disk == base_id:
            self._hold(path, hold, base_id, key)
            self._prune_empty_dirs(target.parent)
            return True
        try:
            _rename_noreplace(hold, target)  # an edit: put it back
        except FileExistsError:
            log.warning("%s was saved twice while gitmem deleted it; kept the newer save", path)
            unlink(hold)
        return False


def _load_renameat2() -> Callable[..., int] | None:
    import ctypes  # here: ~2 ms, and only a write to the work tree renames
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # not Linux with glibc >= 2.28
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_libc_renameat2: Callable[..., int] | None | Literal[False] = False  # not loaded yet; None: the system has none


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """``renameat2(2)`` with ``flags``; False where the system or file system cannot do it."""
    global _libc_renameat2
    if _libc_renameat2 is False:
        _libc_renameat2 = _load_renameat2()
    if _libc_renameat2 is None:
        return False
    if _libc_renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags) == 0:
        return True
    import ctypes
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
