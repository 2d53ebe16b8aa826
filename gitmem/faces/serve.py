"""``gitmem serve``: the storage extension process that nui (or the kaboo adapter) starts.

It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout (``storage.*``,
``threads.*``, ``extension.*``) until end of input, ``storage.shutdown`` or
SIGTERM, then finishes pending work and exits 0. nui throws stderr away, so
everything worth reading goes to a log file, by default ``.git/gitmem/serve.log``
in the repository.

    python3 -m gitmem serve --repo ~/gitmem --handlers storage-handlers.yaml
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from gitmem import __version__
from gitmem.errors import one_line
from gitmem.faces import logfile, rpc
from gitmem.faces.kaboo.threads import thread_methods
from gitmem.faces.nui.handlers import HandlerConfigError, HandlerTable, find_handlers_file, load_handlers
from gitmem.faces.nui.storage import LATE_WINDOW, storage_methods
from gitmem.faces.served import Served
from gitmem.git.base import GITMEM_DIR, DamagedObject, MissingRepository
from gitmem.git.files import opened_by_gitmem
from gitmem.git.pipes import widen_pipe
from gitmem.opening.location import default_repo_path
from gitmem.opening.policy import ForeignRepository, NotAFolderOfItsOwn
from gitmem.repository import Gitmem
from gitmem.sync import rescue

log = logging.getLogger("gitmem.faces.serve")

LOG_NAME = logfile.SERVE_LOG
LATE_WINDOW_ENV = "GITMEM_LATE_WINDOW"
EXTENSION_NAME_ENV = "NUI_EXTENSION_NAME"  # the name nui gave this extension
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt() parameters, from glibc's malloc.h
SHUTDOWN_METHODS = ("storage.shutdown", "extension.shutdown")  # answered even when not serving
# The watcher's first look (a status of every file) and the first sync hold the
# interpreter for a time that grows with the repository: they start this long after the
# first answer, once nui's burst of start-up calls is answered, or without any request.
AFTER_FIRST_ANSWER = 0.5  # seconds (the record index catches up then too)
WITHOUT_A_REQUEST = 2.0  # seconds


def run(repo: str | os.PathLike | None = None, *,
        handlers_path: str | os.PathLike | None = None,
        log_file: str | os.PathLike | None = None, log_level: str = "INFO",
        durability: str | None = None, max_response: int = rpc.MAX_RESPONSE,
        late_window: float = LATE_WINDOW, watch_edits: bool = True,
        sync_interval: float | None = None, sync_remote: str | None = None,
        create: bool = False) -> int:
    """``gitmem serve``: serve ``repo`` on this process's stdin and stdout until end of
    input, a shutdown call or SIGTERM; returns the exit status (1: the repository could
    not be served, and every request was answered with an error saying why).

    ``handlers_path`` is the storage-handlers.yaml (default: as :func:`find_handlers_file`).
    A repository missing at ``repo`` is made only when ``create`` (``--create``), and said
    on stderr and in the log; without it, every request is answered with an error naming
    the nearest gitmem repository (a typo in ``--repo`` shows there). ``max_response`` 0
    lifts the answer cap; ``watch_edits`` commits hand edits as they
    are saved; ``sync_interval`` (seconds) syncs with ``sync_remote`` in the background.
    """
    protocol_out = _claim_stdout()
    _keep_big_buffers_in_the_heap()
    served = Served(log_file=log_file, log_level=log_level)
    try:
        made = repo is not None and not (Path(repo).expanduser() / ".git").exists()
        mem = served.open(repo, create=create, durability=durability)
    except Exception as exc:  # noqa: BLE001 - whatever it is, nui must be told, not see us die
        return _serve_unavailable(served, repo, exc, protocol_out)
    if made:  # never behind the person's back
        said = f"made a new gitmem repository at {mem.engine.workdir}: nothing was there"
        log.warning("%s", said)
        if served.log_writer is not None:
            print(f"gitmem: {said}", file=sys.stderr, flush=True)
    # An invalid handler list stops us before serving, with a one-line error the CLI
    # prints; nui drops stderr, so it goes to the log too.
    try:
        handlers_file = find_handlers_file(handlers_path, served.environ)
        handlers = load_handlers(handlers_file) if handlers_file else HandlerTable()
    except HandlerConfigError as error:
        log.error("not serving: %s", error)
        served.close()
        raise
    log.info("serving %s (pid %d, handlers: %s)", mem.engine.workdir, os.getpid(),
             handlers_file or "any")
    try:  # keep commits a history rewrite took off main before anything else happens
        rescue.find_lost(mem.engine)
    except Exception:  # noqa: BLE001 - serving goes on; `gitmem status` tries again
        log.exception("looking for commits taken off main failed")
    # The hand-edit watcher, the periodic sync, the record index and the vectors (see
    # AFTER_FIRST_ANSWER). An edit saved before is committed by the watcher's first look,
    # or by the read or write of its record, whichever comes first.
    start_background = functools.partial(served.start_background, watch_edits=watch_edits,
                                         sync_interval=sync_interval, sync_remote=sync_remote,
                                         catch_up_index=True)
    timers = [_timer(WITHOUT_A_REQUEST, start_background)]
    try:
        serve(mem, handlers, _protocol_in(), protocol_out,
              name=served.environ.get(EXTENSION_NAME_ENV) or "gitmem",
              max_response=max_response or sys.maxsize, on_shutdown=served.finish, late_window=late_window,
              after_first_answer=lambda: timers.append(_timer(AFTER_FIRST_ANSWER, start_background)))
    finally:
        for timer in timers:
            timer.cancel()
        served.close()
    return 0


def serve(mem: Gitmem, handlers: HandlerTable, stdin: BinaryIO, stdout: BinaryIO, *,
          name: str = "gitmem", max_response: int = rpc.MAX_RESPONSE,
          on_shutdown: Callable[[], None] = lambda: None,
          late_window: float = LATE_WINDOW,
          after_first_answer: Callable[[], None] | None = None) -> None:
    """Answer requests until end of input, a shutdown call or SIGTERM.

    ``on_shutdown`` runs before ``storage.shutdown``/``extension.shutdown`` is answered
    (and the log is flushed after it, before the answer: nui kills the process at once).
    ``name`` is the extension's, as nui gave it (``$NUI_EXTENSION_NAME``).
    """
    methods = _ThenOnFirstUse(thread_methods(mem.threads, version=__version__), lambda: storage_methods(
        mem.sessions, mem.memory, handlers, version=__version__, name=name, on_shutdown=on_shutdown,
        max_response=max_response, late_window=late_window))
    rpc.serve(methods, stdin, stdout, log=log, log_context=_ids_of, max_response=max_response,
              stop_signals=(signal.SIGTERM, signal.SIGINT), after_first_answer=after_first_answer)


def _timer(seconds: float, call: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, call)
    timer.daemon = True
    timer.start()
    return timer


def _serve_unavailable(served: Served, repo, problem: Exception, protocol_out: BinaryIO) -> int:
    """Stay up and answer every request with an error saying why the repository cannot be
    served and what to do (nui logs it; a process that exited would only be "gone"). The
    reason goes to the log file first. Returns 1 at end of input, SIGTERM or shutdown."""
    repo = (Path(repo).expanduser() if repo else default_repo_path()).absolute()
    message = f"gitmem cannot serve {repo}: {one_line(problem)}; {_fix_for(problem, repo)}"
    log_path = served.log_file or repo / ".git" / GITMEM_DIR / LOG_NAME
    unlogged = None
    # Nothing is written into a repository gitmem has not opened before (one it refused
    # stays as it was), and no folder is made for a log.
    if not served.log_file and not opened_by_gitmem(repo / ".git"):
        unlogged = f" (not in {log_path}: " + ("there is no repository)" if not (repo / ".git").exists()
                                               else "gitmem writes nothing into a repository it has not opened)")
    else:
        reason = served.start_log(log_path, warn=False)  # none: stderr is all there is
        unlogged = f" (not in {log_path}: {reason})" if reason else None
    log.error("not serving: %s%s", message, unlogged or "")  # stderr, when there is no log file
    if served.log_writer is not None:
        print(f"gitmem: {message}", file=sys.stderr)

    def unavailable(params: dict):
        raise rpc.RpcError(rpc.INTERNAL_ERROR, message)

    def shutdown(params: dict):
        raise rpc.Shutdown({"ok": True})

    methods = _EveryMethod(unavailable, {name: shutdown for name in SHUTDOWN_METHODS})
    try:
        rpc.serve(methods, _protocol_in(), protocol_out, log=log,
                  stop_signals=(signal.SIGTERM, signal.SIGINT))
    finally:
        served.close()
    return 1


class _EveryMethod(dict):
    """A method table answering every name with one method, but for those it holds."""

    def __init__(self, fallback: Callable[[dict], object], own: dict):
        super().__init__(own)
        self._fallback = fallback

    def get(self, name, default=None):
        return super().get(name, self._fallback)


class _ThenOnFirstUse(dict):
    """A method table that adds ``more()`` (nui's table) when first asked for a name it does
    not hold, so that kaboo's first ``threads.*`` answer does not wait for it."""

    def __init__(self, own: dict, more: Callable[[], dict]):
        super().__init__(own)
        self._more: Callable[[], dict] | None = more

    def get(self, name, default=None):
        if self._more is not None and isinstance(name, str) and name not in self:
            more, self._more = self._more, None
            self.update(more())
        return super().get(name, default)


def _fix_for(problem: Exception, repo: Path) -> str:
    """What a person can do about ``problem``, in a few words."""
    if isinstance(problem, MissingRepository):  # its message names the nearest repository
        return _file_in_the_way(repo) or "or let gitmem serve create it: --create (the kaboo store: create: true)"
    if isinstance(problem, (ForeignRepository, NotAFolderOfItsOwn)):  # its message says what to do
        return "then restart gitmem"
    if isinstance(problem, DamagedObject):
        return (f"run `gitmem fsck --repo {repo}`, then restore the object from a clone, a "
                "remote (`git fetch`) or a backup")
    if isinstance(problem, OSError) and not repo.exists():
        return _fix_for_a_folder_not_made(repo, problem)
    if isinstance(problem, PermissionError):
        return f"make {repo} readable and writable by this user (or start gitmem as its owner)"
    if isinstance(problem, OSError) and problem.errno == errno.ENOSPC:
        return "free some disk space, then restart gitmem"
    return f"run `gitmem fsck --repo {repo}` to see what is wrong, then restart gitmem"


def _fix_for_a_folder_not_made(repo: Path, problem: OSError) -> str:
    """What to do when ``repo`` does not exist and could not be created: said of the
    nearest folder above it that exists (there is nothing to fsck yet)."""
    there = next(folder for folder in repo.parents if folder.exists())
    return _file_in_the_way(repo) or (f"{repo} cannot be created in {there} ({problem.strerror or problem}): choose a path "
            f"in a folder this user can write, or create {repo} and make it writable by this user")


def _file_in_the_way(repo: Path) -> str | None:
    """The advice when a file stands where a folder above ``repo`` would be, else None."""
    there = next(folder for folder in repo.parents if folder.exists())
    return None if there.is_dir() else f"{there} is a file, not a folder: choose a repository path outside it"


def _claim_stdout() -> BinaryIO:
    """Keep fd 1 for protocol lines only: anything else printing to stdout goes to stderr."""
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    widen_pipe(protocol_out.fileno())
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return protocol_out


def _protocol_in() -> BinaryIO:
    """stdin as a pipe widened for large pieces (a request of a long session is one line of
    megabytes); rpc.serve reads its descriptor itself."""
    widen_pipe(sys.stdin.fileno())
    return os.fdopen(os.dup(sys.stdin.fileno()), "rb", buffering=0)


def _keep_big_buffers_in_the_heap() -> None:
    """Let glibc serve buffers of up to 32 MB (a big answer and the pieces it is made of)
    from its heap, reused from one request to the next. By default each buffer over 128 KB
    is a fresh mapping whose page faults cost more than filling it (measured: 0.9 ms of a
    1 MB readEvents in a just-started server)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 64 << 20)
    except (OSError, AttributeError):  # not glibc: its defaults stay
        pass


def _ids_of(params: dict) -> str:
    """The ids of a request, for the log (never content)."""
    keys = ("handlerId", "agentType", "sessionId", "agentId", "threadId")
    return " ".join(f"{k}={params[k]!r:.80}" for k in keys if isinstance(params.get(k), str))
