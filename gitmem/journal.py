"""The work-tree journal: which versions each work-tree file held lately, and which files
gitmem could not write.

A work-tree file that differs from HEAD is either gitmem's own (an older version it wrote,
left behind by a write that failed or was cut short) or a person's save, made from one of
the versions the file held before: those gitmem wrote there and the person's own earlier
saves, newest first (:meth:`Journal.states`). Files gitmem could not write (disk full, a
read-only folder, a folder that is a symlink) are recorded with the reason
(:meth:`Journal.failures`) until a later write succeeds; nothing is ever committed from
them. Saved in ``.git/gitmem/`` (the states at close, failures at once) for the next
process; losing it costs only a fallback on history, never data (see :mod:`gitmem.handedits`).

    journal = Journal(Path(".git/gitmem"))
    journal.wrote("memory/user.md", blob_id)       # after a work-tree write, or a save seen
    journal.failed("sessions/x/y/meta.json", "No space left on device")
    journal.written("memory/user.md")              # blob_id (UNKNOWN when never recorded)
    journal.states("memory/user.md")               # [blob_id, older blob ids...]
    journal.save()
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

log = logging.getLogger("gitmem.journal")

WRITTEN_FILE = "worktree-journal"
FAILED_FILE = "worktree-failed.json"
MAX_ENTRIES = 50_000  # paths, the newest; an entry costs about 1 µs to load
MAX_STATES = 16  # versions kept per path
FILE_MODE = 0o600
UNKNOWN = "?"  # written(): no record of that path
ABSENT = ""  # in the saved file: gitmem removed the file there


class Journal:
    """Thread-safe; loaded on first use."""

    def __init__(self, folder: Path):
        self._written_file = folder / WRITTEN_FILE
        self._failed_file = folder / FAILED_FILE
        self._lock = threading.Lock()
        self._states: OrderedDict[str, tuple[str | None, ...]] | None = None
        self._failed: dict[str, str] | None = None
        self._dirty = False

    def written(self, path: str) -> str | None:
        """The blob id the work tree last held at ``path`` as far as gitmem knows (None: no
        file), or :data:`UNKNOWN`."""
        with self._lock:
            return self._all_states().get(path, (UNKNOWN,))[0]

    def states(self, path: str) -> list[str | None]:
        """The versions the work tree held at ``path``, newest first (blob ids; None: no file)."""
        with self._lock:
            return list(self._all_states().get(path, ()))

    def wrote(self, path: str, blob_id: str | None) -> None:
        """Record that the work tree now holds ``blob_id`` at ``path`` (None: no file): gitmem
        wrote it, or it is a person's save gitmem has read."""
        with self._lock:
            states = self._all_states()
            old = states.get(path, ())
            if not old or old[0] != blob_id:
                states[path] = (blob_id, *(s for s in old if s != blob_id))[:MAX_STATES]
                states.move_to_end(path)
                self._dirty = True
                while len(states) > MAX_ENTRIES:
                    states.popitem(last=False)
            if path in self._failures():
                del self._failed[path]
                self._save_failures()

    def failed(self, path: str, reason: str) -> bool:
        """Record that the work-tree file at ``path`` could not be brought to HEAD; True when new."""
        with self._lock:
            failures = self._failures()
            if failures.get(path) == reason:
                return False
            failures[path] = reason
            self._save_failures()
            return True

    def failures(self) -> dict[str, str]:
        """``{path: reason}`` of the work-tree files gitmem could not write."""
        with self._lock:
            return dict(self._failures())

    def save(self) -> None:
        """Save the states for the next process (only when something changed)."""
        with self._lock:
            if not self._dirty or self._states is None:
                return
            lines = "".join(f"{path}\0{','.join(blob or ABSENT for blob in blobs)}\n"
                            for path, blobs in self._states.items())
            try:
                _write_private(self._written_file, lines.encode("utf-8", "surrogateescape"))
            except OSError as exc:  # the next process falls back on history (see the module doc)
                log.warning("could not save the work-tree journal: %s", exc)
                return
            self._dirty = False

    def _all_states(self) -> OrderedDict[str, tuple[str | None, ...]]:
        if self._states is None:
            self._states = OrderedDict()
            try:
                data = self._written_file.read_bytes().decode("utf-8", "surrogateescape")
            except OSError:
                data = ""
            for line in data.split("\n"):
                path, sep, blobs = line.partition("\0")
                if sep and path:
                    self._states[path] = tuple(blob or None for blob in blobs.split(","))
        return self._states

    def _failures(self) -> dict[str, str]:
        if self._failed is None:
            try:
                loaded = json.loads(self._failed_file.read_bytes())
            except (OSError, ValueError):
                loaded = {}
            self._failed = {k: v for k, v in loaded.items() if isinstance(v, str)} \
                if isinstance(loaded, dict) else {}
        return self._failed

    def _save_failures(self) -> None:
        try:
            if self._failed:
                _write_private(self._failed_file, json.dumps(self._failed, indent=1).encode())
            else:
                self._failed_file.unlink(missing_ok=True)
        except OSError as exc:  # a full disk: the process still knows, the next one may not
            log.warning("could not save the list of work-tree files out of step: %s", exc)


def _write_private(target: Path, data: bytes) -> None:
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}")
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
