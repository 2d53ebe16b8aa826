"""``gitmem mcp``: the repository as an MCP server on stdin/stdout, for Claude Code,
Cursor, Codex, nui's agents and any other MCP client.

The SDK is imported by :mod:`gitmem.faces.mcp.tools` and :mod:`gitmem.faces.mcp.stdio`
only. What a start costs is the interpreter and the SDK; the repository is opened at the
first call that needs it (a missing one is that call's error, and the next call tries
again), or :data:`OPEN_AFTER` seconds after the start, whichever comes first; the vectors
of search by meaning are then built in the background (:mod:`gitmem.upkeep.vectors`);
opening, the log, the background work and the shutdown are :mod:`gitmem.faces.served`'s.
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
from typing import TYPE_CHECKING, TypeVar

import anyio

from gitmem import __version__
from gitmem.faces.mcp.stdio import stdio_streams
from gitmem.faces.mcp.tools import Services, build_server
from gitmem.faces.served import Served

if TYPE_CHECKING:
    from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.mcp")

OPEN_AFTER = 2.0  # seconds after the start the repository is opened without a call
T = TypeVar("T")


class OpenOnFirstUse:
    """The repository and the services built on it, opened by the first call that asks
    (and again by the next one, while opening fails), with its background work."""

    def __init__(self, served: Served, repo: str | os.PathLike | None):
        self.served, self.repo = served, repo
        self.services: Services | None = None
        self.lock = threading.Lock()

    def __call__(self) -> Services:
        with self.lock:
            if self.served.stopping:
                raise RuntimeError("the server is stopping")
            if self.services is None:
                mem = self.served.open(self.repo)
                log.info("serving %s over MCP (pid %d)", mem.engine.workdir, os.getpid())
                self.services = services_of(mem)
                self.served.start_background()
            return self.services

    def open_quietly(self) -> None:
        """Open the repository, if no call has (a failure is the next call's to say)."""
        try:
            self()
        except Exception as exc:  # noqa: BLE001 - a missing repository, say: a call tells why
            log.debug("the repository was not opened: %s", exc)


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
    served = Served(log_file=log_file, log_level=log_level)
    if served.log_file:  # at once: what happens before the repository is opened is logged too
        served.start_log(served.log_file)
    services = OpenOnFirstUse(served, repo)
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
        served.close()
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
