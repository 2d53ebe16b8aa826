"""What every part of the git engine shares: names, errors, identities, commit info, paths.

Nothing here opens a repository; the small file helpers (``make_folder``, ``unlink``,
``fsync_path``) are the engine's own way of touching files.
"""

from __future__ import annotations

import os
import socket
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import pygit2

from gitmem.errors import GitmemError
from gitmem.git.files import BRANCH, FILE_MODE, GITMEM_DIR, REF  # noqa: F401 - named here with the other names and modes

DIR_MODE = 0o700
DURABILITIES = ("fast", "fsync")  # fsync: on disk before a write is answered (power loss)

Changes = Mapping[str, "bytes | None"]
T = TypeVar("T")


class EngineError(GitmemError):
    """A storage operation could not be carried out."""


class MissingRepository(EngineError):
    """No repository where one was to be opened, and none was to be made."""


class UnsafePath(EngineError):
    """A path would leave the repository or step into .git."""


class BranchMoved(EngineError):
    """``main`` is no longer where a merge or fast-forward started from."""


class Closed(EngineError, RuntimeError):
    """A write was asked of a repository already closed; nothing was committed."""


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


class Identity(namedtuple("Identity", "name email")):
    """Who a commit is by: ``name`` and ``email``."""

    __slots__ = ()

    def signature(self) -> pygit2.Signature:
        return pygit2.Signature(self.name, self.email)


class CommitInfo(namedtuple("CommitInfo", "id parents author email time offset message")):
    """One commit, as history listings show it: its ``id``, its ``parents``' ids (a tuple),
    the ``author``'s name and ``email``, its ``time`` (seconds since the epoch) and
    ``offset`` (minutes east of UTC), and its ``message``."""

    __slots__ = ()

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

    @classmethod
    def of(cls, commit: pygit2.Commit) -> CommitInfo:
        """The info of a pygit2 commit."""
        return cls(
            id=str(commit.id), parents=tuple(str(p) for p in commit.parent_ids),
            author=commit.author.name, email=commit.author.email,
            time=commit.commit_time, offset=commit.commit_time_offset,
            message=commit.message,
        )


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
    name = config_get(config, "gitmem.name") or f"gitmem ({host})"
    email = config_get(config, "gitmem.email") or f"gitmem@{host}"
    return Identity(name, email)


def user_identity(config: pygit2.Config) -> Identity:
    """The person's git identity (``user.name``/``user.email``), else ``$USER@host``."""
    host = socket.gethostname() or "localhost"
    user = os.environ.get("USER") or os.environ.get("LOGNAME") or "user"
    name = config_get(config, "user.name") or user
    email = config_get(config, "user.email") or f"{user}@{host}"
    return Identity(name, email)


def config_get(config: pygit2.Config, key: str) -> str | None:
    """The value of ``key`` in ``config``, or None when it is not set."""
    try:
        return config[key]
    except (KeyError, pygit2.GitError):
        return None


def with_trailers(message: str, trailers: Mapping[str, str] | None) -> str:
    """``message`` ending in one line per trailer (``Key: value``), as a commit message."""
    message = message.rstrip("\n") + "\n"
    if trailers:
        lines = [f"{key}: {_one_line(value)}" for key, value in trailers.items()]
        message += "\n" + "\n".join(lines) + "\n"
    # A commit message is a C string of UTF-8: a NUL would cut it short (losing the
    # trailers), a lone surrogate (from an id) cannot be encoded.
    return message.replace("\0", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")


def _one_line(value: str) -> str:
    return value.replace("\r", "\\r").replace("\n", "\\n").replace("\0", "\\0")


def entry_id(tree: pygit2.Tree, path: str) -> pygit2.Oid | None:
    """The id of the entry at ``path`` in ``tree``, or None."""
    try:
        return tree[path].id
    except KeyError:
        return None


def join(folder: str, name: str) -> str:
    """Repository path ``name`` inside ``folder`` ("" is the root)."""
    return f"{folder}/{name}" if folder else name


def is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def reason(exc: BaseException) -> str:
    """An OSError's cause in words ("No space left on device"), else the exception's text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def make_folder(path: Path | str, mode: int = DIR_MODE) -> None:
    """Make folder ``path`` and each missing folder above it with ``mode`` exactly, whatever
    the umask (``mkdir(parents=True)`` gives the parents the umask's mode: 0777 under umask 0).
    Folders already there are left as they are."""
    missing = []
    current = Path(path)
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:  # made meanwhile by another process: its mode is its own
            continue
        os.chmod(folder, mode)  # mkdir is subject to the umask; chmod is not


def unlink(path: Path) -> None:
    """Remove file ``path``; one that is gone already is fine."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def fsync_path(path: Path) -> None:
    """fsync a file or folder; one that is gone (pruned, replaced) is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
