"""A stamp that vouches, by stat data alone, that main and the work tree are as they were.

A process that has just found every file of the folders it looked at holding HEAD's
version takes a stamp of them. A later process checks the stamp with ``lstat`` calls and
a few small file reads, without git or pygit2: HEAD still on main, main at the same
commit, no write noted in flight since (gitmem notes each commit before main moves to it,
``.git/gitmem/in-flight``), the same work-tree folder (not a clone's with a stamp copied
in), and no entry under those folders changed, added or removed (nothing there but files
and folders: no link, pipe or device). Each of those changes sets a ctime, which no
program can set back (:func:`racy`, git's rule), so a stamp can go stale but never lies.

    stamp = take(gitdir, workdir, head, ["memory", "sessions"], started_ns)
    keep(gitdir, "", stamp)                  # for the next process
    holds(gitdir, workdir, kept(gitdir, ""))  # True while nothing moved
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections.abc import Iterable
from pathlib import Path

from gitmem.git.files import GITMEM_DIR, IN_FLIGHT_FILE, REF, read_regular, write_private

RACY_NS = 50_000_000  # well beyond the kernel's timestamp tick
COARSE_RACY_NS = 2_000_000_000  # file systems keeping milliseconds or less (FAT: 2 s)
FOLDER = "stamps"  # in .git/gitmem/: one file a scope
KEPT = 256  # stamp files at most; past that the older half goes


def racy(st: os.stat_result, checked_at_ns: int) -> bool:
    """True when a change right after ``checked_at_ns`` could leave ``st``'s timestamps unchanged."""
    window = COARSE_RACY_NS if st.st_ctime_ns % 1_000_000 == 0 else RACY_NS
    return st.st_ctime_ns >= checked_at_ns - window


def main_commit(gitdir: Path) -> str | None:
    """Main's commit id read from git's files, while HEAD is on main (None: HEAD elsewhere,
    no main, or refs kept in a way these files do not show)."""
    try:
        if (gitdir / "HEAD").read_bytes() != f"ref: {REF}\n".encode():
            return None
        found: str | None
        try:
            found = (gitdir / REF).read_bytes().strip().decode("ascii")
        except FileNotFoundError:
            found = _packed_ref(gitdir / "packed-refs")
    except (OSError, UnicodeDecodeError):
        return None
    return found if found and len(found) == 40 and all(c in "0123456789abcdef" for c in found) else None


def _packed_ref(packed: Path) -> str | None:
    for line in packed.read_bytes().decode("utf-8", "replace").splitlines():
        sha, _, name = line.partition(" ")
        if name == REF:
            return sha
    return None


def take(gitdir: Path, workdir: Path, head: str, folders: Iterable[str], started_ns: int,
         files: dict[str, str] | None = None) -> dict | None:
    """A stamp of ``folders`` of the work tree at main's commit ``head``, for a look at them
    that started at ``started_ns`` (``time.time_ns()``) and found every file there holding
    HEAD's version (``files``: HEAD's files there with their blob ids, kept with it); None
    when something there changed too close to the look to be vouched for."""
    in_flight = _in_flight(gitdir)
    if main_commit(gitdir) != head or in_flight is False:
        return None
    pending = [folder for folder in folders if os.path.lexists(workdir / folder)]
    if any(_behind_link(workdir, folder) for folder in pending):
        return None
    paths = sorted({"", *pending, *(folder.rsplit("/", n)[0] for folder in pending
                                     for n in range(1, folder.count("/") + 1))})
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(workdir / folder) as entries:
                for entry in entries:
                    # What lies behind a link is not the work tree's to vouch for, and a
                    # named pipe or a device would hold a quick reader opening it.
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(f"{folder}/{entry.name}")
                    elif not entry.is_file(follow_symlinks=False):
                        return None
                    paths.append(f"{folder}/{entry.name}")
        except NotADirectoryError:
            continue
    stamp = {"head": head, "in_flight": in_flight, "looked_ns": started_ns, "paths": paths,
             "files": files, "work_tree": _identity(workdir)}
    return stamp if _unchanged(workdir, stamp) else None


def _behind_link(workdir: Path, folder: str) -> bool:
    """True when ``folder`` or a folder on the way to it is a symbolic link."""
    parts = folder.split("/")
    return any(os.path.islink(workdir.joinpath(*parts[:n])) for n in range(1, len(parts) + 1))


def holds(gitdir: Path, workdir: Path, stamp: dict) -> bool:
    """True while nothing the stamp vouches for has moved (see the module's docstring)."""
    head = stamp.get("head")
    return (isinstance(head, str) and main_commit(gitdir) == head
            and _in_flight(gitdir) == stamp.get("in_flight")
            and stamp.get("work_tree") == _identity(workdir) and _unchanged(workdir, stamp))


def _identity(workdir: Path) -> list[int] | None:
    """The work tree's folder as the file system knows it (device, inode): a stamp copied
    from another repository, a clone at the same commit say, vouches for nothing here."""
    try:
        st = os.stat(workdir)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _in_flight(gitdir: Path) -> str | None | bool:
    """The commit last noted in flight (None: none ever; False: unreadable). The look a
    stamp follows came after the opening that judged it, so only a new note matters."""
    try:
        return (gitdir / GITMEM_DIR / IN_FLIGHT_FILE).read_bytes().decode("ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return False


def _unchanged(workdir: Path, stamp: dict) -> bool:
    """Every stamped entry still there, none changed since the look (:func:`racy`: a
    change sets a ctime later than a moment before it). A new or removed entry changes its
    folder's ctime; the work tree's own folder is stamped too."""
    looked = stamp.get("looked_ns")
    paths = stamp.get("paths")
    if not isinstance(looked, int) or not isinstance(paths, list) or looked > time.time_ns():
        return False
    root = os.fspath(workdir)
    lstat = os.lstat
    try:
        for path in paths:
            if racy(lstat(f"{root}/{path}" if path else root), looked):
                return False
    except (OSError, TypeError):
        return False
    return True


def keep(gitdir: Path, scope: str, stamp: dict) -> None:
    """Keep ``stamp`` as the one of ``scope`` (a name the caller chooses) for later
    processes; a repository that cannot be written to keeps none."""
    folder = gitdir / GITMEM_DIR / FOLDER
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        write_private(folder / _file_name(scope), json.dumps({**stamp, "scope": scope}).encode())
        held = list(folder.iterdir())
        if len(held) > KEPT:
            held.sort(key=lambda path: path.stat().st_mtime_ns)
            for old in held[:len(held) // 2]:
                old.unlink(missing_ok=True)
    except OSError:
        return


def kept(gitdir: Path, scope: str) -> dict | None:
    """The stamp kept for ``scope`` (None: none, or unreadable)."""
    read = read_regular(gitdir / GITMEM_DIR / FOLDER / _file_name(scope))  # no pipe waited on
    try:
        found = json.loads(read[0]) if read is not None else None
    except ValueError:
        return None
    return found if isinstance(found, dict) and found.get("scope") == scope else None


def _file_name(scope: str) -> str:
    return f"{zlib.crc32(scope.encode('utf-8', 'surrogateescape')):08x}.json"  # the scope is kept inside
