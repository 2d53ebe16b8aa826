"""The watcher: commits what a person saves in the work tree once the edits settle.

A change under the layout folders is committed (by :mod:`gitmem.edits.handedits`, as the
user) when no further change has come for ``debounce`` seconds, and at the latest
``max_delay`` seconds after the first one, even while edits go on. At start it
commits the edits made while nothing was watching. gitmem's own writes come back as
file events too, but their files equal HEAD, so they never make a commit.

    watcher = Watcher(mem).start()    # a thread, as inside `gitmem serve`
    ...
    watcher.stop()                    # commits what is still pending

``gitmem watch`` runs it in the foreground until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from watchfiles._rust_notify import RustNotify  # watchfiles' documented low-level watcher

from gitmem.edits.handedits import HandEdits, is_watched
from gitmem.git.engine import GitEngine
from gitmem.records import layout

log = logging.getLogger("gitmem.edits.watch")

DEBOUNCE = 1.0  # seconds without a change before the edits are committed
MAX_DELAY = 10.0  # seconds after the first change when they are committed anyway
_GROUP_MS = 100  # while events keep coming, they are handed over at least this often
_STEP_MS = 20  # quiet time that ends a group of events
_POLL_MS = 500  # between scans when the system cannot notify (too many folders to watch)
_ROOTS_CHECK_MS = 500  # how often to look whether a layout folder came or went


class Watcher:
    """Watches one repository's work tree and commits hand edits as they settle.

    ``target`` is a :class:`~gitmem.repository.Gitmem` or a
    :class:`~gitmem.git.engine.GitEngine`; the watcher shares the hand-edit part its engine
    was opened with (else makes one of its own), so reads and writes see the same edits.
    """

    def __init__(self, target, *, debounce: float = DEBOUNCE, max_delay: float = MAX_DELAY):
        self.engine: GitEngine = getattr(target, "engine", target)
        self.hand_edits = HandEdits.of(self.engine)
        self.debounce = debounce
        self.max_delay = max_delay
        self._prefix = str(self.engine.workdir) + os.sep
        self._stopping = threading.Event()
        self._watching = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        # The run thread's changes not committed yet, and when the first and last came.
        self._pending: set[str] = set()
        self._first = self._last = 0.0

    def start(self, *, wait: bool = True) -> Watcher:
        """Watch in a background thread; returns once watching has begun (and the edits
        made while nothing watched are committed), or at once with ``wait=False``."""
        self._thread = threading.Thread(target=self._run_in_thread, name="gitmem-watch", daemon=True)
        self._thread.start()
        if not wait:
            return self
        self._watching.wait()
        if self._failure is not None:
            raise self._failure
        return self

    def stop(self) -> None:
        """Stop watching, after committing the edits still pending."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def watch_until(self, stopping: threading.Event) -> None:
        """Go on watching (after :meth:`start`) until ``stopping`` is set or the watcher
        fails, then stop; raises the watcher's failure (``gitmem watch``)."""
        while not stopping.wait(_ROOTS_CHECK_MS / 1000) and self._thread is not None and self._thread.is_alive():
            pass
        self.stop()  # commits what is still pending
        if self._failure is not None:
            raise self._failure

    def run(self) -> None:
        """Watch until :meth:`stop` (or Ctrl-C in the main thread), then commit what is pending."""
        roots = self._roots()
        while not self._stopping.is_set():
            with self._notifier(roots) as notify:
                if not self._watching.is_set():
                    self._commit(None)  # edits made while nothing was watching
                    self._watching.set()
                while roots == self._roots():
                    timeout = _ROOTS_CHECK_MS
                    if self._pending:
                        timeout = max(1, min(timeout, int((self._due() - time.monotonic()) * 1000) + 1))
                    events = notify.watch(_GROUP_MS, _STEP_MS, timeout, self._stopping)
                    if events in ("stop", "signal"):
                        self._stopping.set()
                        break
                    self._note(self._relevant(events) if isinstance(events, set) else set())
            if not self._stopping.is_set():  # a layout folder came or went: look it over whole
                roots = self._roots()
                self._note(set(layout.TOP_FOLDERS))
        if self._pending:
            self._commit(self._pending)

    def _due(self) -> float:
        """When the pending changes are to be committed (time.monotonic())."""
        return min(self._last + self.debounce, self._first + self.max_delay)

    def _note(self, changed: set[str]) -> None:
        """Add ``changed`` to the pending changes, and commit them once due."""
        now = time.monotonic()
        if changed:
            if not self._pending:
                self._first = now
            self._last = now
            self._pending |= changed
        if self._pending and now >= self._due():
            if self._commit(self._pending):
                self._pending = set()
            else:  # try again a debounce later
                self._first = self._last = now

    def _run_in_thread(self) -> None:
        try:
            self.run()
        except BaseException as exc:
            self._failure = exc
            log.exception("the watcher stopped")
        finally:
            self._watching.set()

    def _roots(self) -> list[str]:
        """The layout folders the work tree has now: the watched ones. Watching the whole work
        tree would wake the notifier for every object and ref git writes under .git/."""
        return [str(self.engine.workdir / folder) for folder in layout.TOP_FOLDERS
                if os.path.isdir(self.engine.workdir / folder)]

    def _notifier(self, roots: list[str]):
        if not roots:
            return _Nothing()
        try:
            return RustNotify(roots, False, False, _POLL_MS, True, True)
        except OSError as exc:  # e.g. the system's limit of watched folders
            log.warning("cannot watch %s (%s); scanning it every %d ms instead",
                        self.engine.workdir, exc, _POLL_MS)
            return RustNotify(roots, False, True, _POLL_MS, True, True)

    def _relevant(self, events: set[tuple[int, str]]) -> set[str]:
        """The repository paths (files or folders) under the layout folders among ``events``."""
        found = set()
        for _change, path in events:
            if path.startswith(self._prefix):
                relative = path[len(self._prefix):].replace(os.sep, "/")
                if is_watched(relative):
                    found.add(relative)
        return found

    def _commit(self, scopes: set[str] | None) -> bool:
        """Commit the edits under ``scopes`` (None: everywhere); False when it failed."""
        try:
            self.hand_edits.commit_pending(None if scopes is None else sorted(scopes))
        except Exception:  # a lock held too long, a file system error: the watcher goes on
            log.exception("could not commit hand edits; trying again later")
            return False
        return True


class _Nothing:
    """Stands in for the notifier while no layout folder exists: waits, reports no change."""

    def __enter__(self) -> _Nothing:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def watch(self, _group_ms: int, _step_ms: int, timeout_ms: int, stop) -> str:
        return "stop" if stop.wait(timeout_ms / 1000) else "timeout"


def start_watching(mem) -> Watcher | None:
    """A started :class:`Watcher` on ``mem``, or None when it cannot start (logged: serving
    goes on without it).

    Serving does not wait for it: setting up the watches and looking over every file
    takes time that grows with the repository, and an edit saved meanwhile is seen by
    the watcher's first look, or committed first by the read or write of its record.
    """
    try:
        return Watcher(mem).start(wait=False)
    except Exception:
        log.exception("not watching for hand edits")
        return None
