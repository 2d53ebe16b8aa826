"""The log file of ``gitmem serve``: every record, size-bounded, written off the serving thread.

nui throws an extension's stderr away, so the log file is where a user finds what
happened. Records are queued by the serving thread and written by a thread of their
own, which flushes the file at most every :data:`FLUSH_EVERY` seconds (warnings and
errors at once); the file is rotated at :data:`MAX_BYTES`, keeping :data:`BACKUPS`.

    writer = logfile.start(Path(".git/gitmem/serve.log"), "INFO")
    ...
    writer.stop()   # writes out what is queued
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import queue
import stat
import threading
import time
from pathlib import Path

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
    records: queue.SimpleQueue = queue.SimpleQueue()
    root = logging.getLogger()
    root.handlers[:] = [logging.handlers.QueueHandler(records)]
    root.setLevel(level)
    logging.captureWarnings(True)
    writer = LogWriter(records, handler)
    writer.start()
    return writer


_END = object()  # queued by LogWriter.stop


class LogWriter(threading.Thread):
    """Writes the queued log records to the file, flushing it at most every
    :data:`FLUSH_EVERY` seconds (warnings and errors at once). A write to a file waits
    for the file system's journal, as gitmem's commits do: one per request slowed them
    down by up to 0.9 ms when the disk was busy."""

    def __init__(self, records: queue.SimpleQueue, handler: RotatingLog):
        super().__init__(name="gitmem-log", daemon=True)
        self.records = records
        self.handler = handler

    def run(self) -> None:
        unflushed_since = None
        while True:
            wait = None if unflushed_since is None else max(
                0.0, unflushed_since + FLUSH_EVERY - time.monotonic())
            try:
                record = self.records.get(timeout=wait)
            except queue.Empty:
                record = None
            if record is not None and record is not _END:
                self.handler.handle(record)
                unflushed_since = unflushed_since or time.monotonic()
            if unflushed_since is not None and (
                    record is None or record is _END or record.levelno >= logging.WARNING
                    or time.monotonic() >= unflushed_since + FLUSH_EVERY):
                self.handler.write_out()
                unflushed_since = None
            if record is _END:
                return

    def stop(self) -> None:
        """Write out what is queued and end the thread."""
        self.records.put(_END)
        self.join()


class RotatingLog(logging.handlers.RotatingFileHandler):
    """A RotatingFileHandler that formats each record once, writes through its buffer only
    on :meth:`write_out`, and counts what it writes instead of asking the file system (two
    stats and a seek per record) whether to roll over."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            if self.stream is None:
                self.stream = self._open()
            if self._rotates and self._size + len(line) >= self.maxBytes:
                self.doRollover()
            self.stream.write(line)
            self._size += len(line)  # characters: bytes, give or take
        except Exception:
            self.handleError(record)

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
