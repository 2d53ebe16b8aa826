"""What stands between the network and ``gitmem web``'s pages: an ASGI middleware.

- **Host.** A request whose ``Host`` is not one of the server's own names (the loopback
  names, and the address it was told to listen on; listening on every address, this
  machine's names and any IP address) is refused with 421: a page of another site
  whose name was pointed at 127.0.0.1 (DNS rebinding) reads nothing.
- **Origin.** A request carrying an ``Origin`` (or ``Sec-Fetch-Site: cross-site``) from
  anywhere but the server itself is refused with 403: another site's form cannot post here.
- **The start's token.** Each start makes a random token, printed in the URL. The first
  visit with ``?token=`` sets it as a cookie (HttpOnly, SameSite=Strict, named after
  the port) and redirects to the same page without it; a request with neither a good
  token nor the cookie gets 401. Tokens are compared in constant time.
- **Writes** are POSTs whose form holds the token too (:func:`check_form`): a page's
  forms carry it, another site's cannot.

``/mcp`` passes the cookie check: its bearer tokens are checked there
(:mod:`gitmem.faces.web.mcp_http`); Host and Origin are checked for it as for the pages.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import socket
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("gitmem.web")

TOKEN_PARAM = "token"  # in the printed URL's query, and in every form that writes
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MCP_PATH = "/mcp"


class WriteRefused(Exception):
    """A POST without the start's token in its form: nothing is written."""


def same(a: str | None, b: str) -> bool:
    """``a == b`` in constant time (None is never equal)."""
    return a is not None and hmac.compare_digest(a.encode("utf-8", "surrogateescape"), b.encode())


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (``localhost`` counts)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_every_address(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def own_names(host: str, port: int) -> set[str]:
    """The ``Host`` values the server answers: the loopback names and, when it listens on
    another address, that address (and, on every address, this machine's names)."""
    names = set(LOOPBACK_NAMES)
    if not is_loopback(host):
        if is_every_address(host):
            names |= {socket.gethostname(), socket.getfqdn()}
        else:
            names.add(f"[{host}]" if ":" in host else host)
    return {f"{name}:{port}".lower() for name in names if name}


def is_address(host: str, port: int) -> bool:
    """True for a ``Host`` that is an IP address and ``port``: no name another site
    could point here (rebinding needs a name)."""
    name, _, given = host.rpartition(":")
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return given == str(port)


class Guard:
    """The checks of the module's docstring, around ``app``."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: Iterable[str], port: int,
                 any_address: bool = False):
        self.app = app
        self.token = token
        self.hosts = set(hosts)
        self.port = port
        self.any_address = any_address  # listening on every address: any IP is one of ours
        self.cookie = f"gitmem_web_{port}"

    def _ours(self, host: str) -> bool:
        return host in self.hosts or (self.any_address and is_address(host, self.port))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(headers)
        if refusal is not None:
            log.warning("refused %s %s: %s", scope["method"], scope["path"], refusal[1])
            await PlainTextResponse(refusal[1] + "\n", refusal[0])(scope, receive, send)
            return
        path = scope["path"]
        if path == MCP_PATH or path.startswith(MCP_PATH + "/"):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        given = [value for key, value in query if key == TOKEN_PARAM]
        if given and scope["method"] == "GET":
            if not same(given[-1], self.token):
                await _unauthorized(scope, receive, send)
                return
            # the token becomes a cookie, and leaves the address bar and the history
            rest = urlencode([(k, v) for k, v in query if k != TOKEN_PARAM])
            answer = RedirectResponse(path + (f"?{rest}" if rest else ""), 303)
            answer.set_cookie(self.cookie, self.token, httponly=True, samesite="strict", path="/")
            await answer(scope, receive, send)
            return
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # noqa: BLE001 - a cookie header that does not parse holds no token
            cookie = SimpleCookie()
        held = cookie.get(self.cookie)
        if not same(held.value if held is not None else None, self.token):
            await _unauthorized(scope, receive, send)
            return
        scope.setdefault("state", {})["write_token"] = self.token
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "").lower()
        if not self._ours(host):
            return 421, f"Host {host or '(none)'!r} is not this server's: open the address gitmem web printed"
        origin = headers.get("origin")
        if origin is not None and not (origin.lower().startswith("http://") and self._ours(origin.lower()[7:])):
            return 403, f"a request from {origin!r} (another site) is refused"
        if headers.get("sec-fetch-site") == "cross-site":
            return 403, "a cross-site request is refused"
        return None


async def check_form(request: Request) -> dict[str, str]:
    """The form of a POST that writes, once its token is checked (:class:`WriteRefused`
    when it lacks the start's token)."""
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    if request.method != "POST" or not same(fields.get(TOKEN_PARAM), request.state.write_token):
        raise WriteRefused("a write needs a POST holding the page's token")
    return fields


async def _unauthorized(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse(
        "gitmem web: open the address that `gitmem web` printed when it started (it holds the "
        "access token; each start makes a new one)\n", 401)(scope, receive, send)
