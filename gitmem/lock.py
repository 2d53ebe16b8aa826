"""The writers' lock: one gitmem writer at a time per repository, across processes.

It is an ``flock`` on a file inside ``.git/gitmem/``, so the kernel releases it when
its holder dies (a killed process never blocks the next one), and waiting for it is
bounded: after ``timeout`` seconds it raises :class:`LockTimeout`.

    lock = FileLock(".git/gitmem/lock", timeout=10)
    with lock:
        ...  # write
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path


class LockTimeout(Exception):
    """The lock could not be taken within its timeout."""


class FileLock:
    """A re-entrant lock shared by the threads of a process and across processes."""

    def __init__(self, path: str | os.PathLike, timeout: float = 10.0):
        self.path = Path(path)
        self.timeout = timeout
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise self._timeout()
        try:
            if self._depth == 0:
                self._take_file_lock(deadline)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread_lock.release()

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _take_file_lock(self, deadline: float) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._fd = fd
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise self._timeout() from None
                time.sleep(delay)
                delay = min(delay * 2, 0.02)

    def _timeout(self) -> LockTimeout:
        return LockTimeout(f"another gitmem writer held {self.path} for more than "
                           f"{self.timeout:g} s")
