"""Request lines read off a server's input as they come, each with the time it came.

What a request is judged by (nui's late window, :func:`gitmem.faces.rpc.arrival`) is when
it arrived, not when the loop got to it behind other requests.

    lines = RequestLines(sys.stdin.buffer, max_line=64 << 20)
    lines.start()
    line, too_long, arrived = lines.next()   # b"" at the end of the input
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from typing import BinaryIO

PIPE_CHUNK = 1 << 20  # bytes read off the input at a time (a widened pipe's size)
MAX_READ_AHEAD = 256 * 1024 * 1024


class RequestLines(threading.Thread):
    """Reads request lines off ``stdin``'s file descriptor as they come, each with the time
    it came, up to MAX_READ_AHEAD bytes ahead of the loop; ``next()`` gives them in order.
    A line longer than ``max_line`` is cut after ``max_line + 1`` bytes (the rest skipped
    unread) and marked too long. ``stop()`` ends the thread (it never reads the descriptor
    again: the caller may close it). An input without a descriptor (a BytesIO) is read
    by ``next()`` itself."""

    def __init__(self, stdin: BinaryIO, max_line: int):
        super().__init__(name="gitmem-rpc-input", daemon=True)
        self._stdin = stdin
        self._max_line = max_line
        try:
            self._fd: int | None = stdin.fileno()
        except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
            self._fd = None
        self._lines: deque[tuple[bytes, bool, float]] = deque()
        self._ahead = 0  # bytes of the lines read and not taken yet
        self._changed = threading.Condition()
        self._stopped = False
        self._wake_read, self._wake_write = os.pipe()  # wakes the thread from its select()

    def start(self) -> None:
        if self._fd is not None:
            super().start()

    def stop(self) -> None:
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
        os.write(self._wake_write, b"x")
        if self.is_alive():
            self.join()
        os.close(self._wake_read)
        os.close(self._wake_write)

    def run(self) -> None:
        fd = self._fd
        assert fd is not None  # started only with one
        pending, skipping = bytearray(), False
        while not self._stopped:
            with self._changed:
                while self._ahead > MAX_READ_AHEAD and not self._stopped:
                    self._changed.wait()
            try:
                select.select([fd, self._wake_read], [], [])
                if self._stopped:
                    return
                chunk = os.read(fd, PIPE_CHUNK)
            except OSError:  # the input is gone: as its end
                chunk = b""
            if chunk:
                lines, skipping = self._lines_in(pending, chunk, skipping)
            else:  # the end, after a last line without its newline
                lines = [(bytes(pending), False)] if pending and not skipping else []
                lines.append((b"", False))
            if lines:
                arrived = time.monotonic()
                with self._changed:
                    for line, too_long in lines:
                        self._lines.append((line, too_long, arrived))
                        self._ahead += len(line)
                    self._changed.notify_all()
            if not chunk:
                return

    def _lines_in(self, pending: bytearray, chunk: bytes,
                  skipping: bool) -> tuple[list[tuple[bytes, bool]], bool]:
        """The lines ``chunk`` ends, with the start of the first in ``pending`` (left
        holding the start of the next), each with whether it was too long; and whether
        the rest of a too long line is being skipped."""
        lines = []
        start, searched = 0, len(pending)  # what came before holds no newline
        pending += chunk
        with memoryview(pending) as view:
            while True:
                newline = pending.find(b"\n", max(start, searched))
                if skipping:
                    if newline < 0:
                        break
                    skipping, start = False, newline + 1
                elif newline >= 0 and newline - start <= self._max_line:
                    lines.append((bytes(view[start:newline + 1]), False))
                    start = newline + 1
                elif len(pending) - start > self._max_line:
                    lines.append((bytes(view[start:start + self._max_line + 1]), True))
                    skipping, start = True, start + self._max_line + 1
                else:
                    break
        del pending[:len(pending) if skipping else start]
        return lines, skipping

    def next(self) -> tuple[bytes, bool, float]:
        """The next line (b"" at end of input), whether it was too long, and when it came."""
        if self._fd is None:
            line = self._stdin.readline(self._max_line + 1)
            too_long = len(line) > self._max_line and not line.endswith(b"\n")
            if too_long:
                skip_rest_of_line(self._stdin)
            return line, too_long, time.monotonic()
        with self._changed:
            while not self._lines:
                self._changed.wait()
            item = self._lines.popleft()
            self._ahead -= len(item[0])
            self._changed.notify_all()
            return item


def skip_rest_of_line(stdin: BinaryIO) -> None:
    while True:
        chunk = stdin.readline(1 << 20)
        if not chunk or chunk.endswith(b"\n"):
            return
