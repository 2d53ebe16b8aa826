"""What stat data vouches for: the blob ids of work-tree files, kept from one process to the next.

A write must not overwrite a hand edit, and a read must see one, so gitmem checks work-tree
files against HEAD often. Reading and hashing a file answers that; stat data answers it
without reading, as git's index does: an entry says "the file with this inode, size, mtime
and ctime holds blob B". Writing to a file changes its ctime (which no program can set),
so an entry can go stale but never lies. The entries of big files are saved in ``.git/gitmem/``
for the next process, so a just-started ``gitmem serve`` reads a thread's chunks once and
hashes none.

    cache = StatCache(Path(".git/gitmem/stat-cache"))
    cache.note("memory/user.md", os.lstat(file), blob_id)   # after hashing or writing it
    cache.lookup("memory/user.md", os.lstat(file))          # blob_id, while the file is unchanged
    cache.save()
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path

from gitmem.git.files import read_regular, write_private

log = logging.getLogger("gitmem.statcache")

MAX_ENTRIES = 100_000
SAVE_MIN_BYTES = 32 * 1024  # smaller files cost less to hash again than their entry costs to load
MAX_SAVED = 20_000  # the newest; loading one costs about 1 µs, and every process loads them all

StatKey = tuple[int, int, int]


def stat_key(st: os.stat_result) -> StatKey:
    """What stat data says of a file's content: its inode, size and mtime."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def git_blob_id(data: bytes) -> str:
    """git's blob id of ``data``: SHA-1 of a header and the bytes. (hashlib's SHA-1 is about
    three times libgit2's collision-detecting one; no attacker picks these files.)"""
    digest = hashlib.sha1(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


class StatCache:
    """Blob ids of work-tree files by path, vouched for by stat data; loaded from ``file``
    when first used, written back by :meth:`save`."""

    def __init__(self, file: os.PathLike):
        self.file = file
        self._entries: dict[str, tuple[StatKey, int, str]] | None = None
        self._changed = False
        self._load_lock = threading.Lock()

    def __contains__(self, path: str) -> bool:
        return path in self.entries

    @property
    def entries(self) -> dict[str, tuple[StatKey, int, str]]:
        if self._entries is None:
            with self._load_lock:
                if self._entries is None:
                    self._entries = self._load()
        return self._entries

    def lookup(self, path: str, st: os.stat_result, *, moved: bool = False) -> str | None:
        """The blob id the file with stat data ``st`` holds at ``path``, if an entry vouches for it.

        ``moved``: the file was just renamed, which changed its ctime but not its content.
        """
        known = self.entries.get(path)
        if known is None or known[0] != stat_key(st) or not (moved or known[1] == st.st_ctime_ns):
            return None
        return known[2]

    def note(self, path: str, st: os.stat_result, blob_id: str) -> None:
        """Remember that the file with stat data ``st`` at ``path`` holds ``blob_id``.
        The caller knows it is so and that ``st`` is not racy (see :func:`gitmem.git.stamp.racy`)."""
        entries = self.entries
        if len(entries) >= MAX_ENTRIES:
            entries.clear()
        entries[path] = (stat_key(st), st.st_ctime_ns, blob_id)
        self._changed = True

    def read(self, path: str, file: str | os.PathLike, blob_id: str) -> bytes | None:
        """The bytes of ``file`` (the work-tree file of ``path``) when an entry vouches that it
        holds ``blob_id`` before and after the read; else None. Never follows a symlink."""
        known = self.entries.get(path)
        if known is None or known[2] != blob_id:
            return None
        found = read_regular(file)
        if found is None:
            return None
        data, st = found
        if (stat_key(st), st.st_ctime_ns) != known[:2] or len(data) != st.st_size:
            return None
        return data

    def save(self) -> None:
        """Write the entries of files of at least :data:`SAVE_MIN_BYTES` to the file (atomically,
        the newest :data:`MAX_SAVED`), when any entry was noted since loading."""
        if not self._changed:
            return
        lines = [f"{blob} {key[0]} {key[1]} {key[2]} {ctime} {path}\n"
                 for path, (key, ctime, blob) in list(self.entries.items())
                 if key[1] >= SAVE_MIN_BYTES and "\n" not in path][-MAX_SAVED:]
        try:
            write_private(Path(self.file), "".join(lines).encode("utf-8", "surrogateescape"))
            self._changed = False
        except OSError:
            log.warning("could not save the stat cache to %s", self.file, exc_info=True)

    def _load(self) -> dict[str, tuple[StatKey, int, str]]:
        entries = {}
        try:
            with open(self.file, encoding="utf-8", errors="surrogateescape") as saved:
                for line in saved:
                    fields = line.rstrip("\n").split(" ", 5)
                    try:
                        blob, ino, size, mtime, ctime, path = fields
                        entries[path] = ((int(ino), int(size), int(mtime)), int(ctime), blob)
                    except ValueError:  # a damaged line: that file gets hashed again
                        continue
        except OSError:  # none yet, or unreadable: every file gets hashed once
            pass
        return entries
