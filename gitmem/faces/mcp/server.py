"""``gitmem mcp``: the repository as an MCP server on stdin/stdout, for Claude Code,
Cursor, Codex, nui's agents and any other MCP client.

The SDK is imported by :mod:`gitmem.faces.mcp.tools` and :mod:`gitmem.faces.mcp.stdio`
only. What a start costs is the interpreter and the SDK; the repository is opened at the
first call that needs it (a missing one is that call's error, and the next call tries
again), or :data:`OPEN_AFTER` seconds after the start, whichever comes first; the vectors
of search by meaning are then built in the background (:mod:`gitmem.upkeep.vectors`).
The calls run in a worker thread (:class:`Worker`), so the event loop answers a ping or
takes a cancel meanwhile. Logs go to the file ``gitmem serve`` writes
(``.git/gitmem/serve.log``), each line naming the client.

    python3 -m gitmem mcp --repo ~/gitmem
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

import anyio

from gitmem import __version__
from gitmem.faces import logfile
from gitmem.faces.mcp.stdio import stdio_streams
from gitmem.faces.mcp.tools import Services, build_server

if TYPE_CHECKING:
    from gitmem.repository import Gitmem
    from gitmem.upkeep.maintenance import Maintenance
    from gitmem.upkeep.vectors import VectorBuild

log = logging.getLogger("gitmem.mcp")

MAINTENANCE_GRACE = 10.0  # seconds the packing thread may take to finish at exit
OPEN_AFTER = 2.0  # seconds after the start the repository is opened without a call
T = TypeVar("T")


class OpenOnFirstUse:
    """The repository and the services built on it, opened by the first call that asks
    (and again by the next one, while opening fails)."""

    def __init__(self, repo: str | os.PathLike | None, log_file: str | os.PathLike | None,
                 log_level: str):
        self.repo, self.log_file, self.log_level = repo, log_file, log_level
        self.mem: Gitmem | None = None
        self.services: Services | None = None
        self.log_writer: logfile.LogWriter | None = None
        self.vectors: VectorBuild | None = None  # once the repository is open
        self.closed = False
        self.lock = threading.Lock()

    def __call__(self) -> Services:
        with self.lock:
            if self.closed:
                raise RuntimeError("the server is stopping")
            if self.services is None:
                # Imported here, not at the top: the git engine (pygit2) stays out of the
                # start, which the SDK's import already makes long (see gitmem.bench.mcp).
                from gitmem.records.location import locate_repo
                from gitmem.upkeep.maintenance import Maintenance
                from gitmem.upkeep.vectors import VectorBuild
                from gitmem.repository import Gitmem
                mem = Gitmem.open(locate_repo(self.repo)[0], create=False, packer=Maintenance)
                self.mem = mem
                self.start_log(Path(self.log_file) if self.log_file
                                else mem.engine.private_dir / logfile.SERVE_LOG)
                log.info("serving %s over MCP (pid %d)", mem.engine.workdir, os.getpid())
                self.services = services_of(mem)
                self.vectors = VectorBuild(mem.engine).start()
            return self.services

    def open_quietly(self) -> None:
        """Open the repository, if no call has (a failure is the next call's to say)."""
        try:
            self()
        except Exception as exc:  # noqa: BLE001 - a missing repository, say: a call tells why
            log.debug("the repository was not opened: %s", exc)

    def start_log(self, path: Path) -> None:
        if self.log_writer is None:
            try:
                self.log_writer = logfile.start(path, self.log_level)
            except OSError as exc:  # a read-only repository: stderr it is
                log.warning("not logging to %s: %s", path, exc.strerror or exc)

    def close(self) -> None:
        """Let the packing thread finish, close the repository, write out the log."""
        with self.lock:
            self.closed = True
            if self.vectors is not None:
                self.vectors.request_stop()  # before its git is ended below
            if self.mem is not None:
                from gitmem.git import gitproc
                gitproc.stop_all(final=True)  # a repack under way: no git outlives us
                if self.vectors is not None:
                    self.vectors.stop()
                cast("Maintenance", self.mem.engine.packer).close(timeout=MAINTENANCE_GRACE)  # opened with it
                self.mem.close()
                log.info("stopped")
            if self.log_writer is not None:
                self.log_writer.stop()


def services_of(mem: Gitmem) -> Services:
    """What the tools call, on an open repository (``gitmem web``'s /mcp uses it too)."""
    from gitmem.history import versions as history
    return Services(memory=mem.memory, sessions=mem.sessions, threads=mem.threads,
                    memories=lambda: history.memories(mem), log=mem.changes, show=mem.show,
                    search=lambda query, **options: mem.search(query, **options),
                    read_unit=mem.read_unit, tree=mem.memory_tree, restore=mem.restore,
                    recent=mem.recent)


def run(repo: str | os.PathLike | None = None, *, log_file: str | os.PathLike | None = None,
        log_level: str = "INFO") -> int:
    """Serve MCP on this process's stdin and stdout until end of input or SIGTERM."""
    os.umask(0o077)
    services = OpenOnFirstUse(repo, log_file, log_level)
    if log_file:
        services.start_log(Path(log_file))
    server = build_server(services, version=__version__, run_blocking=Worker())
    opener = threading.Timer(OPEN_AFTER, services.open_quietly)
    opener.daemon = True

    async def serve() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            async with stdio_streams() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            tasks.cancel_scope.cancel()

    try:
        opener.start()
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    finally:
        opener.cancel()
        services.close()
    return 0


class Worker:
    """Runs the tools' and resources' blocking calls in one thread off the event loop, in
    the order they came: the repository serves one call at a time, as before, while the
    loop answers pings and takes cancels."""

    def __init__(self):
        self.limiter = anyio.CapacityLimiter(1)

    async def __call__(self, call: Callable[[], T], cancelled: Callable[[], bool]) -> T:
        def work() -> T:
            from gitmem.git.cancel import cancellable, stop_if_cancelled  # pygit2 stays out of the start
            with cancellable(cancelled):
                stop_if_cancelled()  # cancelled while it waited for its turn
                return call()

        # Shielded: a call cancelled by the client still ends here, and says how it ended.
        with anyio.CancelScope(shield=True):  # never cancelled itself: it swallows nothing
            result = await anyio.to_thread.run_sync(work, limiter=self.limiter)
        return result


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return
