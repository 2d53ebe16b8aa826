"""gitmem's own files in ``.git/gitmem/`` (caches, states): replaced whole, atomically, and
read only when they are regular files. No pygit2.

    write_private(private_dir / "thread-listing.json", data)
"""

from __future__ import annotations

import os
import stat
from _thread import get_ident  # threading.get_ident, without importing threading (1 ms a warm search)
from pathlib import Path

BRANCH = "main"
REF = f"refs/heads/{BRANCH}"
GITMEM_DIR = "gitmem"  # inside .git/: gitmem's own files
LOCK_FILE = "lock"  # in .git/gitmem/: the writers' lock (see opened_by_gitmem)
IN_FLIGHT_FILE = "in-flight"  # in .git/gitmem/: the commit whose files are being written, before main moves
FILE_MODE = 0o600


def opened_by_gitmem(gitdir: str | os.PathLike) -> bool:
    """Whether gitmem has opened, and so accepted, the repository whose git folder is
    ``gitdir``: the first open makes the writers' lock file. A ``.git/gitmem/`` folder
    alone does not say so (a refused start of an older gitmem left its log there)."""
    return os.path.isfile(os.path.join(gitdir, GITMEM_DIR, LOCK_FILE))


def write_private(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` atomically (a temporary file beside it, then a
    rename), as a 0600 file; raises OSError (a read-only repository, a full disk) with
    nothing left behind."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def read_regular(file: str | os.PathLike) -> tuple[bytes, os.stat_result] | None:
    """The bytes of regular file ``file`` and its stat data as they were after the read; None
    for no file, a symlink (never followed) or anything else that is not a regular file."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:  # no file, or a symlink (ELOOP)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        # One read of the size fstat gives, and one more that finds the end: a file object
        # around the descriptor cost 20 µs a file (12 ms of a quick read of 623 chunks).
        parts = [os.read(fd, st.st_size + 1)]
        while parts[-1]:  # to the end, grown meanwhile or read short
            parts.append(os.read(fd, 1 << 20))
        return b"".join(parts) if len(parts) > 2 else parts[0], os.fstat(fd)
    finally:
        os.close(fd)


def may_write(gitdir: Path) -> bool:
    """Whether this process may write the repository (its .git/gitmem/ when there is one)."""
    private = gitdir / GITMEM_DIR
    return os.access(private if private.is_dir() else gitdir, os.W_OK)
