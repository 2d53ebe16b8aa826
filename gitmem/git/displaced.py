"""Files a work-tree write displaced, kept a moment for bytes that reach them late.

gitmem replaces a work-tree file by a rename once it has checked that the file holds
the version the commit started from (:mod:`gitmem.git.worktree`). A person's writer
may have opened that file just before: ``date >> memory/agents/x.md`` opens it, then
starts the command, which writes a moment later. Those bytes land in the displaced
file, which nobody reads again. So each displaced file is kept (under its temp name in
``.git/gitmem/tmp``) for :data:`GRACE` seconds, then its size and mtime are compared
with what they were when it was checked; if they changed, ``on_edit(path, base_id,
data)`` gets what it holds now: a hand edit made from the version checked. A thread of
its own does that, so a write never waits for it; :meth:`DisplacedFiles.close` checks
what is left at once.

    displaced = DisplacedFiles(on_edit)
    displaced.hold("memory/user.md", tmp_file, base_id, (size, mtime_ns))
    displaced.close()
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from gitmem.git.base import unlink
from gitmem.git.files import read_regular
from gitmem.git.statcache import git_blob_id

log = logging.getLogger("gitmem.engine")

GRACE = 1.0  # seconds a writer may still be writing to a file gitmem replaced
MAX_HELD = 1024  # displaced files kept at most; past that the oldest is checked early
LOOK_EVERY = 0.1  # seconds between the thread's looks at most (a look per write cost the writer)

OnEdit = Callable[[str, str, bytes], None]


class _Held:
    """One displaced file: its repository path, where it is kept, the blob id it was
    checked to hold with the (size, mtime) it had then, and when to look at it."""

    __slots__ = ("path", "file", "base_id", "key", "due")

    def __init__(self, path: str, file: Path, base_id: str, key: tuple[int, int], due: float):
        self.path, self.file, self.base_id, self.key, self.due = path, file, base_id, key, due


class DisplacedFiles:
    """Displaced work-tree files, each looked at once its grace period is over."""

    def __init__(self, on_edit: OnEdit, *, grace: float = GRACE):
        self._on_edit = on_edit
        self._grace = grace
        self._held: deque[_Held] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def hold(self, path: str, file: Path, base_id: str, key: tuple[int, int]) -> None:
        """Take over ``file``, which held ``base_id`` (for repository path ``path``) when it
        had (size, mtime_ns) ``key``; it is looked at later and then removed."""
        with self._cond:
            if not self._stopping:
                self._held.append(_Held(path, file, base_id, key, time.monotonic() + self._grace))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="gitmem-displaced", daemon=True)
                    self._thread.start()
                elif len(self._held) == 1 or len(self._held) > MAX_HELD:
                    self._cond.notify()
                return
        self._look(_Held(path, file, base_id, key, 0.0))  # closing (a merge close() made): look now

    def close(self) -> None:
        """Look at every file still held, now, and stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        while self._held:
            self._look(self._held.popleft())

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and (not self._held or (
                        len(self._held) <= MAX_HELD and self._held[0].due > time.monotonic())):
                    wait = self._held[0].due - time.monotonic() if self._held else None
                    self._cond.wait(None if wait is None else max(wait, LOOK_EVERY))
                if self._stopping:
                    return
                now, due = time.monotonic(), []
                while self._held and (self._held[0].due <= now or len(self._held) > MAX_HELD):
                    due.append(self._held.popleft())
            for held in due:
                self._look(held)

    def _look(self, held: _Held) -> None:
        """Hand what reached ``held`` since its check to ``on_edit``, then remove it."""
        try:
            st = os.lstat(held.file)
            if (st.st_size, st.st_mtime_ns) != held.key:
                found = read_regular(held.file)
                if found is not None and git_blob_id(found[0]) != held.base_id:
                    log.info("%s was written to after gitmem replaced it: merging what arrived "
                             "as a hand edit", held.path)
                    self._on_edit(held.path, held.base_id, found[0])
        except OSError:
            pass  # gone: nothing to keep
        except Exception:
            log.exception("could not merge what reached the replaced %s (kept in %s)", held.path, held.file)
            return
        unlink(held.file)
