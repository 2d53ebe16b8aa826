"""Running the ``git`` command: one environment policy, a deadline, no child left behind.

Every git subprocess of gitmem (fetch, push, repack, prune, fsck) runs through
:func:`run` (or :func:`stream`, for output read while git runs): in a process group of its own (git's helpers, ``git-remote-http`` and
``ssh``, go into it too), with English messages, without the ``GIT_DIR``-style
variables a git hook may have set, and with a deadline after which the whole group is
killed. :func:`stop_all` ends every group still running; ``gitmem serve`` calls it on
the way out, and a SIGTERM, SIGINT or SIGHUP arriving while the main thread waits
for git ends git's group before the signal takes its usual course.

    done = gitproc.run(["fetch", "origin"], cwd=workdir, timeout=30)
    done.returncode, done.stdout, done.stderr
    with gitproc.stream(["log", "-p"], cwd=workdir, timeout=600) as log:   # read as it comes
        for line in log.stdout: ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from typing import IO

STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a group
# Variables that would point git at another repository (set when gitmem runs in a hook).
LOCATION_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX"}
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()
_stopped = False  # after stop_all(final=True) no git starts any more


class GitMissing(Exception):
    """The ``git`` command is not installed."""


class GitTimeout(Exception):
    """git gave no answer within its deadline; its process group was killed."""


def environment(updates: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: ours without the location variables, in English."""
    env = {key: value for key, value in os.environ.items() if key not in LOCATION_VARS}
    env.update(LC_ALL="C", LANGUAGE="C")
    env.update(updates or {})
    return env


def run(args: list[str], *, cwd: str | os.PathLike, timeout: float,
        env: Mapping[str, str] | None = None, nice: bool = False) -> subprocess.CompletedProcess:
    """Run ``git ARGS`` in ``cwd`` (text output, stdin closed) and wait at most ``timeout``
    seconds; ``env`` adds variables; ``nice`` lowers its priority (background work)."""
    command = ["git", *args]
    if nice and shutil.which("nice"):
        command = ["nice", "-n", "10", *command]
    try:
        proc = subprocess.Popen(command, cwd=cwd, env=environment(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)
    except FileNotFoundError:
        raise GitMissing("the `git` command is not installed") from None
    with _running_lock:
        _running.add(proc)
        stopping = _stopped
    if stopping:  # started while gitmem was ending: ended at once
        _kill_group(proc, signal.SIGKILL)
    restore = _forward_signals(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc, signal.SIGKILL)
        try:
            proc.communicate(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:  # a helper that left the group holds the pipes
            pass
        raise GitTimeout(f"git {_verb(args)} gave no answer within {timeout:g} s") from None
    finally:
        restore()
        with _running_lock:
            _running.discard(proc)
        if proc.poll() is None:  # interrupted (KeyboardInterrupt): never left running
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


class Streamed:
    """A git process whose output is read while it runs: ``stdout`` (bytes); after the
    ``with`` block, ``returncode`` and ``stderr``."""

    def __init__(self, proc: subprocess.Popen, errors: IO[bytes]):
        self.stdout = proc.stdout
        self.returncode: int | None = None
        self.stderr = ""
        self._proc = proc
        self._errors = errors


@contextlib.contextmanager
def stream(args: list[str], *, cwd: str | os.PathLike, timeout: float) -> Iterator[Streamed]:
    """Run ``git ARGS`` in ``cwd`` and hand its stdout over as it comes, as :func:`run`
    does everything else (a process group of its own, killed at the deadline, at
    :func:`stop_all` and when the block is left early)."""
    errors = tempfile.TemporaryFile()  # read at the end: a pipe could fill and stall git
    try:
        proc = subprocess.Popen(["git", *args], cwd=cwd, env=environment(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
    except FileNotFoundError:
        errors.close()
        raise GitMissing("the `git` command is not installed") from None
    with _running_lock:
        _running.add(proc)
        stopping = _stopped
    if stopping:
        _kill_group(proc, signal.SIGKILL)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(proc, signal.SIGKILL)

    deadline = threading.Timer(timeout, expire)
    deadline.daemon = True
    deadline.start()
    restore = _forward_signals(proc)
    streamed = Streamed(proc, errors)
    try:
        yield streamed
    finally:
        restore()
        deadline.cancel()
        if proc.poll() is None:  # left before the end of its output: never left running
            _kill_group(proc, signal.SIGKILL)
        proc.stdout.close()
        proc.wait()
        with _running_lock:
            _running.discard(proc)
        errors.seek(0)
        streamed.stderr = errors.read().decode(errors="replace")
        errors.close()
        streamed.returncode = proc.returncode
        if expired.is_set():
            raise GitTimeout(f"git {_verb(args)} gave no answer within {timeout:g} s")


def stop_all(grace: float = STOP_GRACE, *, final: bool = False) -> None:
    """End every git process group still running: SIGTERM, then SIGKILL after ``grace`` s.
    ``final``: and end any started later (the process is exiting)."""
    global _stopped
    with _running_lock:
        _stopped = _stopped or final
        procs = [proc for proc in _running if proc.poll() is None]
    for proc in procs:
        _kill_group(proc, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(proc, signal.SIGKILL)  # its helpers too, even when git itself is gone


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _forward_signals(proc: subprocess.Popen):
    """While the main thread waits for ``proc``: a terminating signal first kills its group.
    Returns the function that puts the previous handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = {}

    def handle(signum, frame):
        _kill_group(proc, signal.SIGKILL)
        handler = previous.get(signum, signal.SIG_DFL)
        signal.signal(signum, handler)
        if callable(handler):
            handler(signum, frame)
        elif handler == signal.SIG_DFL:
            os.kill(os.getpid(), signum)

    for sig in _FORWARDED:
        try:
            previous[sig] = signal.signal(sig, handle)
        except (ValueError, OSError):  # not settable here
            pass

    def restore() -> None:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is handle:
                signal.signal(sig, handler)

    return restore


def _verb(args: list[str]) -> str:
    """The git subcommand in ``args`` (after any ``-c key=value`` and ``-C dir``)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "command"
