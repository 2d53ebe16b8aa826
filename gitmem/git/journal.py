"""The work-tree journal: which versions each work-tree file held lately, and which files
gitmem could not write.

A work-tree file that differs from HEAD is either gitmem's own (an older version it wrote,
left behind by a write that failed or was cut short) or a person's save, made from one of
the versions the file held before: those gitmem wrote there and the person's own earlier
saves, newest first (:meth:`Journal.states`). Files gitmem could not write (disk full, a
read-only folder, a folder that is a symlink) are recorded with the reason
(:meth:`Journal.failures`) until a later write succeeds; nothing is ever committed from
them.

Both live in ``.git/gitmem/``. A version is one line appended to ``worktree-journal``
(a write of a few dozen bytes, no fsync, atomic between processes), so a killed
process loses none; the file is read only when a work-tree file differs from HEAD,
and compacted when it grows. Losing it costs a fallback on history, never data (see
:mod:`gitmem.edits.handedits`).

    journal = Journal(Path(".git/gitmem"))
    journal.wrote("memory/user.md", blob_id)       # after a work-tree write, or a save seen
    journal.failed("sessions/x/y/meta.json", "No space left on device")
    journal.states("memory/user.md")               # [blob_id, older blob ids...]
    journal.close()
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from gitmem.git.files import FILE_MODE, write_private

log = logging.getLogger("gitmem.journal")

STATES_FILE = "worktree-journal"
FAILED_FILE = "worktree-failed.json"
MAX_STATES = 16  # versions kept per path
COMPACT_BYTES = 4 << 20  # the file is compacted at close beyond this size
KEEP_PATHS = 20_000  # the newest, when compacting


class Journal:
    """Thread-safe and shared between processes."""

    def __init__(self, folder: Path):
        self._states_file = folder / STATES_FILE
        self._failed_file = folder / FAILED_FILE
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._loaded: tuple[tuple[int, int, int], tuple] | None = None  # (stat key, _load())

    def wrote(self, path: str, blob_id: str | None, *, saved: bool = False) -> None:
        """Record that the work tree now holds ``blob_id`` at ``path`` (None: no file): gitmem
        wrote it, or (``saved``) it is a person's save gitmem has read."""
        entry = [path, blob_id, 1] if saved else [path, blob_id]
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self._states_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
                os.write(self._fd, line)
            except OSError as exc:  # a full disk: the fallback on history takes over
                log.debug("work-tree journal not written: %s", exc)
            if self._failed_file.exists():  # rare: read afresh, as other processes change it
                failures = self._failures()
                if failures.pop(path, None) is not None:
                    self._save_failures(failures)

    def states(self, path: str) -> list[str | None]:
        """The versions the work tree held at ``path``, newest first (blob ids; None: no file)."""
        with self._lock:
            return list(self._load()[0].get(path, ()))

    def saved_last(self, path: str) -> bool:
        """True when the newest state of ``path`` is a person's save (not a gitmem write)."""
        with self._lock:
            return path in self._load()[1]

    def failed(self, path: str, reason: str) -> bool:
        """Record that the work-tree file at ``path`` could not be brought to HEAD; True when new."""
        with self._lock:
            failures = self._failures()
            if failures.get(path) == reason:
                return False
            failures[path] = reason
            self._save_failures(failures)
            return True

    def failures(self) -> dict[str, str]:
        """``{path: reason}`` of the work-tree files gitmem could not write."""
        with self._lock:
            return dict(self._failures())

    def close(self) -> None:
        """Close the file, compacting it first when it has grown past :data:`COMPACT_BYTES`."""
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            try:
                if self._states_file.stat().st_size > COMPACT_BYTES:
                    self._compact()
            except FileNotFoundError:  # none written, or the repository is gone
                pass
            except OSError as exc:
                log.warning("work-tree journal not compacted: %s", exc)

    def _load(self) -> tuple[OrderedDict[str, tuple[str | None, ...]], set[str]]:
        """Every path's states, newest path last, and the paths whose newest state is a
        person's save, from the file (parsed again only when it changed)."""
        try:
            st = os.stat(self._states_file)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if self._loaded is not None and self._loaded[0] == key:
                return self._loaded[1]
            data = self._states_file.read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            return OrderedDict(), set()
        states: OrderedDict[str, tuple[str | None, ...]] = OrderedDict()
        saves: set[str] = set()
        for line in data.split("\n"):
            try:
                path, blob_id, *saved = json.loads(line)
            except (ValueError, TypeError):
                continue  # a line cut short by a crash, or the empty last one
            old = states.pop(path, ())
            if not old or old[0] != blob_id:  # gitmem writing a save as it is keeps it a save
                old = (blob_id, *(s for s in old if s != blob_id))[:MAX_STATES]
                saves.discard(path)
            if saved:
                saves.add(path)
            states[path] = old
        self._loaded = (key, (states, saves))
        return states, saves

    def _compact(self) -> None:
        states, saves = self._load()
        kept = list(states.items())[-KEEP_PATHS:]
        lines = "".join(json.dumps([path, blob_id, *([1] if path in saves and n == 0 else [])],
                                   ensure_ascii=False) + "\n"
                        for path, blobs in kept for n, blob_id in reversed(list(enumerate(blobs))))
        write_private(self._states_file, lines.encode("utf-8", "surrogateescape"))

    def _failures(self) -> dict[str, str]:
        try:
            loaded = json.loads(self._failed_file.read_bytes())
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in loaded.items() if isinstance(v, str)} if isinstance(loaded, dict) else {}

    def _save_failures(self, failures: dict[str, str]) -> None:
        try:
            if failures:
                write_private(self._failed_file, json.dumps(failures, indent=1).encode())
            else:
                self._failed_file.unlink(missing_ok=True)
        except OSError as exc:  # a full disk: the process still knows, the next one may not
            log.warning("could not save the list of work-tree files out of step: %s", exc)
