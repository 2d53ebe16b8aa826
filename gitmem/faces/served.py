"""The one composition root of a long-running face: ``gitmem serve``, ``gitmem mcp`` and
``gitmem web`` open their repository, start their log and their background work, read
the environment and stop, all through :class:`Served`.

    served = Served(log_file=None, log_level="INFO")
    mem = served.open(repo)                      # packed in the background; the log in it
    served.start_background(watch_edits=True)    # vectors, and the watcher, sync, index asked for
    ...
    served.finish()                              # before a last answer: everything but the log
    served.close()                               # finish(), then the log

:meth:`Served.finish` stops in one order, the one that ends a repack under way quietly:
packing is told to stop before its git process is ended, so that git's end is no
failure ("background packing ended by the shutdown" in the log, never an ERROR).
Nothing here is imported before it is used: ``gitmem mcp`` answers ``initialize``
without the git engine.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from gitmem.faces import logfile

if TYPE_CHECKING:
    from gitmem.edits.watch import Watcher
    from gitmem.repository import Gitmem
    from gitmem.sync.exchange import BackgroundSync
    from gitmem.upkeep.maintenance import Maintenance
    from gitmem.upkeep.vectors import VectorBuild

log = logging.getLogger("gitmem.faces.served")

MAINTENANCE_GRACE = 10.0  # seconds the packing thread may take to finish at exit (its git is ended)
SYNC_GRACE = 3.0  # seconds a background sync under way may take to finish at exit
INDEX_GRACE = 2.0  # seconds the record index's catching up may take to end at exit


class Served:
    """A repository served by a long-running face, its log and its background work.

    ``log_file`` is where the log goes (default: ``.git/gitmem/serve.log`` in the
    repository, once it is open). Thread-safe: a face may open from one thread (the first
    call), start the background work from a timer and finish from a signal's handler.
    """

    def __init__(self, *, log_file: str | os.PathLike | None = None, log_level: str = "INFO"):
        os.umask(0o077)  # every file a server makes is private
        self.log_file = Path(log_file) if log_file else None
        self.log_level = log_level
        self.environ: Mapping[str, str] = os.environ  # what the faces read of the environment
        self.mem: Gitmem | None = None
        self.log_writer: logfile.LogWriter | None = None
        self._lock = threading.Lock()
        self._started = self._finished = False
        self._watcher: Watcher | None = None
        self._syncer: BackgroundSync | None = None
        self._indexer: threading.Thread | None = None
        self._vectors: VectorBuild | None = None

    @property
    def stopping(self) -> bool:
        """True once :meth:`finish` has begun: nothing is opened or started any more."""
        return self._finished

    def open(self, repo: str | os.PathLike | None, *, create: bool = False,
             durability: str | None = None) -> Gitmem:
        """The repository ``repo`` names (as :func:`~gitmem.records.location.locate_repo`
        reads it), opened once with background packing, its HEAD checked (a damaged commit
        or folder is said now), then the log started. Raises what opening raises, and
        RuntimeError once the server is stopping."""
        from gitmem.opening.location import locate_repo  # the git engine: not before a face needs it
        from gitmem.repository import Gitmem
        from gitmem.upkeep.maintenance import Maintenance
        with self._lock:
            if self._finished:
                raise RuntimeError("the server is stopping")
            if self.mem is None:
                mem = Gitmem.open(locate_repo(repo)[0], create=create, durability=durability,
                                  packer=Maintenance)
                try:
                    mem.engine.snapshot()
                except BaseException:
                    mem.close()
                    raise
                self.mem = mem
            mem = self.mem
        self.start_log(self.log_file or mem.engine.private_dir / logfile.SERVE_LOG)
        return mem

    def start_log(self, path: Path, *, warn: bool = True) -> str | None:
        """Send every log record to the file at ``path`` (once: a log started stays where
        it is). When the file cannot be written (a read-only repository) the log stays on
        stderr: the reason is returned, and said there unless not ``warn``."""
        if self.log_writer is not None:
            return None
        try:
            self.log_writer = logfile.start(path, self.log_level)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            if warn:
                log.warning("not logging to %s: %s", path, reason)
            return reason
        return None

    def start_background(self, *, watch_edits: bool = False, sync_interval: float | None = None,
                         sync_remote: str | None = None, catch_up_index: bool = False) -> None:
        """Start the background work, once: the vectors of search by meaning (when the
        repository asks for them), and as asked the hand-edit watcher, a sync with
        ``sync_remote`` every ``sync_interval`` seconds and the record index's catching
        up. Nothing on a repository that is not open or cannot be written (it is only
        read: nothing to commit or sync), nor once stopping."""
        with self._lock:
            mem = self.mem
            if self._started or self._finished or mem is None or not mem.engine.writable:
                return
            self._started = True
            from gitmem.edits import watch  # not before: a first answer waits for no watcher
            from gitmem.sync.exchange import BackgroundSync
            from gitmem.upkeep.vectors import VectorBuild
            self._watcher = watch.start_watching(mem) if watch_edits else None
            self._syncer = BackgroundSync(mem, sync_interval, sync_remote).start() if sync_interval else None
            if catch_up_index:
                indexer = threading.Thread(target=_catch_up_index, args=(mem,), name="record-index", daemon=True)
                indexer.start()
                self._indexer = indexer
            self._vectors = VectorBuild(mem.engine).start()

    def finish(self) -> None:
        """Commit pending hand edits, stop the background work and every git process, and
        close the repository; the log stays. Once: later calls do nothing.

        The order matters: packing is told to stop before its git is ended (the repack
        that ends is then no failure), and given :data:`MAINTENANCE_GRACE` to wind down.
        """
        with self._lock:
            if self._finished:
                return
            self._finished = True
            mem = self.mem
        if mem is None:
            return
        from gitmem.git import gitproc
        log.info("finishing: pending hand edits, background work")
        maintenance = cast("Maintenance", mem.engine.packer)  # as open() wired it
        if self._vectors is not None:
            self._vectors.request_stop()  # before its git is ended below
        if self._syncer is not None:
            self._syncer.stop(timeout=SYNC_GRACE)
        if self._watcher is not None:
            self._watcher.stop()
        maintenance.stop()  # first: the repack ended next is no failure
        gitproc.stop_all(final=True)  # a stuck fetch, a repack: no git process outlives us
        if self._indexer is not None and self._indexer.is_alive():  # its git just ended
            self._indexer.join(INDEX_GRACE)
        if self._vectors is not None:  # between two batches
            self._vectors.stop()
        maintenance.close(timeout=MAINTENANCE_GRACE)
        mem.close()

    def close(self) -> None:
        """:meth:`finish`, then write out the log and stop it."""
        self.finish()
        log.info("stopped")
        if self.log_writer is not None:
            self.log_writer.stop()
            self.log_writer = None


def _catch_up_index(mem: Gitmem) -> None:
    """Bring the record index up to date in a thread of its own (a history from a clone,
    a fetch or an older gitmem), so that the first history command finds it ready."""
    from gitmem.history.record_index import RecordIndex
    try:
        RecordIndex(mem.engine).catch_up()
    except Exception as exc:  # noqa: BLE001 - stopped, or a damaged history: the command says it
        log.debug("the record index did not catch up: %s", exc)
