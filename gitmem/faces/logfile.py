"""The log file of ``gitmem serve``: every record, size-bounded, written off the serving thread.

nui throws an extension's stderr away, so the log file is where a user finds what
happened. The serving thread only sets records aside; a thread of its own writes them
out at most :data:`FLUSH_EVERY` seconds after the first of a batch (warnings and errors
at once), rotating the file at :data:`MAX_BYTES` and keeping :data:`BACKUPS`. A write
that fails (a full disk, EIO) costs the lines of that batch at most: what the file's
buffer holds is written once more as the file is closed, else dropped; stderr gets one
line, the log a note of the gap once it can be written again, and logging goes on.

    writer = logfile.start(Path(".git/gitmem/serve.log"), "INFO")
    ...
    logging.getLogger().handlers[0].flush()   # on disk now (before a last answer)
    writer.stop()   # writes out what is set aside
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import stat
import sys
import threading
from collections.abc import Callable
from pathlib import Path

SERVE_LOG = "serve.log"  # in .git/gitmem/: where `gitmem serve` and `gitmem mcp` log
MAX_BYTES = 2 * 1024 * 1024
BACKUPS = 2
FLUSH_EVERY = 0.25  # seconds a log line may wait in memory (warnings and errors: none)


def start(path: Path, level: str) -> LogWriter:
    """Send every log record to a size-bounded file at ``path``, written by a thread of its
    own; stop the returned writer to write out the rest."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    handler = RotatingLog(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    writer = LogWriter(handler)
    root = logging.getLogger()
    root.handlers[:] = [writer.pending]
    root.setLevel(level)
    logging.captureWarnings(True)
    writer.start()
    return writer


class PendingRecords(logging.Handler):
    """Sets records aside for the writer thread, waking it for the first of a batch and
    for every warning or error: per record, the serving thread pays a list append.
    :meth:`flush` writes them out at once, on the calling thread."""

    def __init__(self, wake: threading.Event, write_out: Callable[[], None]):
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.urgent = False
        self.wake = wake
        self.write_out = write_out

    def emit(self, record: logging.LogRecord) -> None:  # called under self.lock
        try:
            record.msg, record.args = record.getMessage(), None  # the arguments as they are now
        except Exception:
            self.handleError(record)
            return
        self.urgent = self.urgent or record.levelno >= logging.WARNING
        if not self.records or self.urgent:
            self.wake.set()
        self.records.append(record)

    def flush(self) -> None:
        """Write every record set aside to the file before returning (nui kills the process
        right after the answer to its shutdown call)."""
        self.write_out()

    def take(self) -> list[logging.LogRecord]:
        """The records set aside; none are left, and none is urgent any more."""
        assert self.lock is not None  # made by logging.Handler's __init__
        with self.lock:
            records = self.records
            self.records, self.urgent = [], False
        return records


class LogWriter(threading.Thread):
    """Writes the records set aside to the file, at most :data:`FLUSH_EVERY` seconds after
    the first of a batch. A write to a file waits for the file system's journal, as gitmem's
    commits do: one per request slowed them down by up to 0.9 ms when the disk was busy, and
    waking this thread for every request cost the serving thread a tenth of a write."""

    def __init__(self, handler: RotatingLog):
        super().__init__(name="gitmem-log", daemon=True)
        self.handler = handler
        self.wake = threading.Event()
        self.pending = PendingRecords(self.wake, self.write_out)
        self.stopping = False
        self.writing = threading.Lock()  # the thread and a flush: one batch after the other
        self.failure: OSError | None = None  # of the last write, while writes fail

    def run(self) -> None:
        while not self.stopping:
            self.wake.wait()
            self.wake.clear()
            if not (self.pending.urgent or self.stopping):  # let the batch gather
                self.wake.wait(FLUSH_EVERY)
                self.wake.clear()
            self.write_out()
        self.write_out()

    def write_out(self) -> None:
        """Write the records set aside to the file, in order."""
        with self.writing:
            records = self.pending.take()
            if not records:
                return
            if self.failure is not None:  # say where lines may be missing, before the next ones
                records.insert(0, logging.makeLogRecord({
                    "name": __name__, "levelno": logging.WARNING, "levelname": "WARNING",
                    "msg": f"could not write to this log ({_reason(self.failure)}): lines "
                           "before this one may be missing"}))
            try:
                for record in records:
                    self.handler.handle(record)
                self.handler.write_out()
            except OSError as failure:
                self.handler.close_stream()
                if self.failure is None:
                    print(f"gitmem: could not write to {self.handler.baseFilename} "
                          f"({_reason(failure)}): log lines may be missing; logging goes on",
                          file=sys.stderr, flush=True)
                self.failure = failure
            else:
                self.failure = None

    def stop(self) -> None:
        """Write out what is set aside and end the thread."""
        self.stopping = True
        self.wake.set()
        self.join()


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler that formats each record once, writes through its buffer only
    on :meth:`write_out`, and counts what it writes instead of asking the file system (two
    stats and a seek per record) whether to roll over."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the file's buffer; OSError (the file cannot be written) is the
        writer's to handle."""
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        if self.stream is None:
            self.stream = self._open()
        if self._rotates and self._size + len(line) >= self.maxBytes:
            self.doRollover()
        self.stream.write(line)
        self._size += len(line)  # characters: bytes, give or take

    def _open(self):
        stream = super()._open()
        st = os.fstat(stream.fileno())
        self._size = st.st_size
        self._rotates = stat.S_ISREG(st.st_mode)  # as the base class: never /dev/null or a pipe
        return stream

    def flush(self) -> None:
        """Nothing: the writer thread calls :meth:`write_out` (StreamHandler flushes per record)."""

    def write_out(self) -> None:
        super().flush()

    def close_stream(self) -> None:
        """Close the file after a failed write: what its buffer holds is written once more,
        else dropped; the next record opens it again."""
        stream, self.stream = self.stream, None
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
