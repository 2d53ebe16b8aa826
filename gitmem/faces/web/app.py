"""``gitmem web``: the site over one repository, and MCP over HTTP at ``/mcp``.

:func:`run` opens the repository, listens (on loopback unless told otherwise), prints
one line when it is ready, the address with the start's access token, and serves until
interrupted (Ctrl-C, SIGTERM). Logs go where ``gitmem serve`` logs
(``.git/gitmem/serve.log``); opening, the log and the shutdown are
:mod:`gitmem.faces.served`'s.

    python3 -m gitmem web --repo ~/gitmem --port 7420
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import webbrowser
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gitmem.errors import GitmemError
from gitmem.faces.mcp.server import services_of
from gitmem.faces.served import Served
from gitmem.faces.web.guard import Guard, is_every_address, is_loopback, own_names
from gitmem.faces.web.mcp_http import McpEndpoint
from gitmem.faces.web.pages import Pages
from gitmem.faces.web.tokens import Tokens
from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.web")

DEFAULT_PORT = 7420
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; img-src 'self' data:; style-src 'self'; "
                                 b"script-src 'self'; object-src 'none'; frame-ancestors 'none'; "
                                 b"base-uri 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"), (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin")]  # no-referrer would send "Origin: null" with a form


class NotLoopback(GitmemError, ValueError):
    """An address other machines can reach, asked for without ``allow_remote``."""


def exposure(host: str, port: int) -> str:
    """What listening on ``host`` lets others do (said on stderr when it is not loopback)."""
    return (f"gitmem web: listening on {host}:{port}, which other machines can reach. Whoever "
            "holds the printed address (its token) can read every memory, session and thread "
            "and their history, and edit and restore memories; /mcp answers every token of "
            "`gitmem web token list` (read-write ones can write). The traffic is plain HTTP: "
            "put TLS in front of it (a reverse proxy or an SSH tunnel) on any network you do "
            "not trust.")


def build_app(mem: Gitmem, *, token: str, hosts: set[str], port: int, any_address: bool = False) -> Guard:
    """The site and ``/mcp`` on ``mem``, behind :class:`Guard`."""
    pages = Pages(mem)
    endpoint = McpEndpoint(services_of(mem), Tokens(mem.engine.private_dir))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with endpoint.run():
            yield

    static = Path(__file__).with_name("static")
    app = Starlette(routes=[*pages.routes(),
                            Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"]),
                            Mount("/static", StaticFiles(directory=static), name="static")],
                    lifespan=lifespan)
    return Guard(_with_headers(app), token=token, hosts=hosts, port=port, any_address=any_address)


class _Server(uvicorn.Server):
    """uvicorn's server, ended by SIGINT or SIGTERM without raising the signal again once
    it has stopped (uvicorn's way): the repository is closed, and the exit status is 0."""

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _with_headers(app):
    """``app`` with :data:`SECURITY_HEADERS` on every answer."""
    async def answer(scope, receive, send):
        async def sending(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)
        await app(scope, receive, sending)
    return answer


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: any free port), listening.

    Made with ``IPPROTO_TCP`` named: asyncio sets ``TCP_NODELAY`` on an accepted connection
    only then, and without it the last piece of each answer waited for the client's delayed
    ACK (about 40 ms a call on a kept-alive connection)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def run(repo: str | os.PathLike | None = None, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
        open_browser: bool = False, allow_remote: bool = False, log_level: str = "INFO") -> int:
    """Serve until interrupted; returns the exit status."""
    if not is_loopback(host) and not allow_remote:
        raise NotLoopback(f"{host} is not a loopback address: other machines could reach the "
                          "site; add --allow-remote to listen there anyway")
    served = Served(log_level=log_level)
    sock = listen(host, port)
    try:
        mem = served.open(repo)
        port = sock.getsockname()[1]
        if not is_loopback(host):
            print(exposure(host, port), file=sys.stderr)
        token = secrets.token_urlsafe(24)
        shown = "127.0.0.1" if is_loopback(host) or is_every_address(host) else host
        url = f"http://{'[' + shown + ']' if ':' in shown else shown}:{port}/?token={token}"
        app = build_app(mem, token=token, hosts=own_names(host, port), port=port,
                        any_address=is_every_address(host))
        server = _Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                               lifespan="on", timeout_graceful_shutdown=5))
        log.info("serving %s on %s:%d (pid %d)", mem.engine.workdir, host, port, os.getpid())
        asyncio.run(_serve(server, sock, url, open_browser))
    finally:
        sock.close()
        served.close()
    return 0


async def _serve(server: _Server, sock: socket.socket, url: str, open_browser: bool) -> None:
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(url, flush=True)
        if open_browser:
            webbrowser.open(url)
    await serving
