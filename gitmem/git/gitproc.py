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
    git_date("last friday")   # 1795813866.0: a date as git reads it, None if it reads none

:func:`stream` runs one the same way and hands its output over as it comes (a long
``git log`` read while git still writes it).
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Generator, Iterator, Mapping
from typing import Any, cast

from gitmem.errors import GitmemError
from gitmem.git.pipes import widen_pipe

STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a group
# Variables that would point git at another repository (set when gitmem runs in a hook).
LOCATION_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_PREFIX"}
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()
_stopped = False  # after stop_all(final=True) no git starts any more


class GitMissing(GitmemError):
    """The ``git`` command is not installed."""


class GitTimeout(GitmemError):
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


def git_date(text: str, *, timeout: float = 10.0) -> float | None:
    """Seconds since the epoch for ``text`` read as git reads a date ("last friday",
    "noon yesterday", "Dec 1", "3.days.ago"); None when git finds no date in it (git's
    careful reading, as for ``gc.pruneExpire``, not ``--since``'s, which takes any word
    for now). "never" is no time: None; "now" is now. About 2 ms (one git process)."""
    done = run(["config", "--file", os.devnull, "--type=expiry-date", "--default", text,
                "--get", "gitmem.when"], cwd=os.path.abspath(os.sep), timeout=timeout)
    try:
        seconds = int(done.stdout.strip()) if done.returncode == 0 else 0
    except ValueError:
        return None
    if seconds <= 0:
        return None
    return time.time() if seconds >= 2 ** 63 - 1 else float(seconds)  # git's "now" is its end of time


def stream(args: list[str], *, cwd: str | os.PathLike, timeout: float, input: bytes | None = None,
           chunk: int = 1 << 16) -> Iterator[bytes]:
    """Run ``git ARGS`` in ``cwd`` as :func:`run` does and yield its standard output in
    pieces of up to ``chunk`` bytes while it runs (``input``: its standard input, else
    none). Raises GitTimeout when git is not done within ``timeout`` seconds,
    subprocess.CalledProcessError (its stderr in ``stderr``) when it fails. Leaving the
    loop early ends git."""
    import tempfile  # here: a log or a read that runs no git does not load it (~1 ms)
    errors = tempfile.TemporaryFile()  # never a full pipe while stdout is read
    given = None
    if input is not None:  # a file, read at git's pace: no pipe to keep fed beside stdout
        given = tempfile.TemporaryFile()
        given.write(input)
        given.seek(0)
    try:
        proc = subprocess.Popen(["git", *args], cwd=cwd, env=environment(),
                                stdin=subprocess.DEVNULL if given is None else given,
                                stdout=subprocess.PIPE, stderr=errors, start_new_session=True)
    except FileNotFoundError:
        errors.close()
        raise GitMissing("the `git` command is not installed") from None
    finally:
        if given is not None:
            given.close()  # git reads its own copy
    with _running_lock:
        _running.add(proc)
        stopping = _stopped
    if stopping:
        _kill_group(proc, signal.SIGKILL)
    stdout = cast(io.BufferedReader, proc.stdout)  # stdout=PIPE, buffered: never None
    widen_pipe(stdout.fileno())  # git runs further ahead of a reader busy between reads
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(proc, signal.SIGKILL)

    deadline = threading.Timer(timeout, expire)
    deadline.daemon = True
    deadline.start()
    restore = _forward_signals(proc)
    try:
        while data := stdout.read1(chunk):
            yield data
        proc.wait()
        if expired.is_set():
            raise GitTimeout(f"git {_verb(args)} gave no answer within {timeout:g} s")
        if proc.returncode != 0:
            errors.seek(0)
            raise subprocess.CalledProcessError(proc.returncode, proc.args,
                                                stderr=errors.read().decode(errors="replace"))
    finally:
        deadline.cancel()
        restore()
        with _running_lock:
            _running.discard(proc)
        if proc.poll() is None:  # left early, or interrupted
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
        stdout.close()
        errors.close()


def read_objects(gitdir: str | os.PathLike, names: list[str], *,
                 timeout: float) -> Generator[tuple[str, bytes], None, None]:
    """``(object id, bytes)`` of each of ``names`` (object ids, or ``<commit>:<path>``), in
    order, read by one ``git cat-file --batch`` (whose delta cache makes a run of one
    file's versions cheap); ``("", b"")`` for a name that names no blob. Raises as
    :func:`stream`; ValueError when git's answer is not what was asked."""
    if any("\n" in name for name in names):
        raise ValueError("an object name holds a line break")
    buffer, answered = bytearray(), 0
    # Objects as they are, as pygit2 reads them: no `git replace` swapped in.
    for data in stream(["--no-replace-objects", "--git-dir", os.fspath(gitdir), "cat-file", "--batch"],
                       cwd=gitdir, timeout=timeout, input="".join(f"{name}\n" for name in names).encode()):
        buffer += data
        while (end := buffer.find(b"\n")) >= 0:
            fields = bytes(buffer[:end]).split(b" ")
            if len(fields) != 3:  # "<name> missing" (or "ambiguous")
                del buffer[:end + 1]
                answered += 1
                yield "", b""
                continue
            size = int(fields[2])
            if len(buffer) < end + 1 + size + 1:
                break
            blob = bytes(buffer[end + 1:end + 1 + size])
            del buffer[:end + 1 + size + 1]
            answered += 1
            yield (fields[0].decode(), blob) if fields[1] == b"blob" else ("", b"")
    if buffer or answered != len(names):
        raise ValueError("git cat-file's answer does not match what was asked")


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
    previous: dict[int, Any] = {}  # signal: the handler signal.signal gave back

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
