"""The writers' lock: one gitmem writer at a time per repository, across processes.

It is an ``flock`` on a file inside ``.git/gitmem/``, so the kernel releases it when
its holder dies (a killed process never blocks the next one), and waiting for it is
bounded: after ``timeout`` seconds it raises :class:`LockTimeout`. Its holder leaves
its pid in the file until it lets go, so the next holder knows when one died holding
it, and ``on_abandoned`` can clean up what that one left half done.

    lock = FileLock(".git/gitmem/lock", timeout=10)
    with lock:
        ...  # write
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gitmem.errors import GitmemError


# The lock file holds the holder's pid, padded to a fixed width; letting go overwrites it
# with spaces (cheaper than truncating the file).
_RELEASED = b" " * 20 + b"\n"


class LockTimeout(GitmemError):
    """The lock could not be taken within its timeout."""


class NotWritable(GitmemError):
    """The lock file cannot be opened for writing: this process cannot write the repository."""


class FileLock:
    """A re-entrant lock shared by the threads of a process and across processes."""

    def __init__(self, path: str | os.PathLike, timeout: float = 10.0,
                 on_abandoned: Callable[[float], None] | None = None):
        self.path = Path(path)
        self.timeout = timeout
        # Called holding the lock, with the time the last holder took it, when that
        # holder died holding it.
        self.on_abandoned = on_abandoned
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def acquire(self) -> None:
        deadline = time.monotonic() + self.timeout
        if not self._thread_lock.acquire(timeout=self.timeout):
            raise self._timeout()
        abandoned_at = None
        try:
            if self._depth == 0:
                abandoned_at = self._take_file_lock(deadline)
            self._depth += 1
        except BaseException:
            self._thread_lock.release()
            raise
        if abandoned_at is not None and self.on_abandoned is not None:
            try:
                self.on_abandoned(abandoned_at)
            except BaseException:
                self.release()
                raise

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fd = self._fd
            assert fd is not None  # opened by the acquire that took the depth from 0
            os.pwrite(fd, _RELEASED, 0)  # let go cleanly: no pid left behind
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._fd = None
        self._thread_lock.release()

    def died_holding(self) -> float | None:
        """When the last holder took the lock, if it died holding it (its pid is still in
        the file and nobody holds the lock); None otherwise. Looks without taking the lock."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            if not os.pread(fd, len(_RELEASED), 0).strip():
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # a live holder
                return None
            return os.fstat(fd).st_mtime
        finally:
            os.close(fd)  # lets go of the shared lock

    def __enter__(self) -> FileLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _take_file_lock(self, deadline: float) -> float | None:
        """Take the file lock and leave our pid in it; return when the last holder took it
        if that one died holding it (its pid is still there), else None."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise NotWritable(f"cannot write here: {exc.strerror or exc} ({self.path}); "
                              "reading works, writing needs a writable repository") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not _flock_within(fd, deadline - time.monotonic()):
                raise self._timeout() from None
        self._fd = fd
        taken_at = os.fstat(fd).st_mtime  # when the last holder wrote its pid
        abandoned = os.pread(fd, len(_RELEASED), 0).strip() != b""
        os.pwrite(fd, f"{os.getpid():<{len(_RELEASED) - 1}}\n".encode(), 0)
        return taken_at if abandoned else None

    def _timeout(self) -> LockTimeout:
        return LockTimeout(f"another gitmem writer held {self.path} for more than "
                           f"{self.timeout:g} s")


def _flock_within(fd: int, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for ``flock(fd, LOCK_EX)``; False (and ``fd`` closed) if not.

    A blocked ``flock`` is woken by the kernel when the holder lets go, so waiters get
    their turn even against a process writing in a loop (polling with ``LOCK_NB`` lost
    every race and starved them). ``flock`` has no timeout, so it blocks in a helper
    thread; a helper that gets the lock after the caller gave up releases it at once.
    """
    if timeout <= 0:
        os.close(fd)
        return False
    guard = threading.Lock()
    state: list[str] = []  # "taken" or "abandoned", whichever happens first
    taken = threading.Event()

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        else:
            with guard:
                if not state:
                    state.append("taken")
                    taken.set()
                    return
        os.close(fd)  # the only descriptor of this open file: closing it drops the lock

    threading.Thread(target=wait, name="gitmem-lock-wait", daemon=True).start()
    taken.wait(timeout)
    with guard:
        if not state:
            state.append("abandoned")
        return state[0] == "taken"
