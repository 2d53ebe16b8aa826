"""``/mcp``: the MCP face (:mod:`gitmem.faces.mcp.tools`) over the SDK's streamable HTTP
transport, for agents on other machines, behind the bearer tokens of
:mod:`gitmem.faces.web.tokens`.

A request without ``Authorization: Bearer <a kept token>`` gets 401 and nothing else.
Each request is checked on its own (a session's id is no credential), and the tools see
who asks: the log names the token, a write carries ``Gitmem-Token: <name>`` beside
``Gitmem-Client``, and a read-only token is offered no writing tool and refused one.
"""

from __future__ import annotations

import json
import logging

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from gitmem import __version__
from gitmem.faces.mcp.server import Worker
from gitmem.faces.mcp.tools import Caller, Services, build_server, client_info
from gitmem.faces.web.tokens import Token, Tokens

log = logging.getLogger("gitmem.web")

TOKEN_KEY = "gitmem.token"  # where the request's scope holds its Token


class McpEndpoint:
    """The ASGI app at ``/mcp``; :meth:`run` is entered for the server's lifetime."""

    def __init__(self, services: Services, tokens: Tokens):
        self.tokens = tokens
        server = build_server(lambda: services, version=__version__, identify=identify,
                              run_blocking=Worker())  # the tools off the event loop, one at a time
        # Host and Origin are checked in front of every path (gitmem.faces.web.guard)
        self.manager = StreamableHTTPSessionManager(app=server, json_response=True)

    def run(self):
        return self.manager.run()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = self._token(scope)
        if token is None:
            body = json.dumps({"error": "invalid_token", "error_description":
                               "a bearer token made by `gitmem web token add NAME` is needed"}).encode()
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="gitmem", error="invalid_token"')]})
            await send({"type": "http.response.body", "body": body})
            return
        scope[TOKEN_KEY] = token
        await self.manager.handle_request(scope, receive, send)

    def _token(self, scope: Scope) -> Token | None:
        for key, value in scope["headers"]:
            if key == b"authorization":
                kind, _, secret = value.decode("latin-1").partition(" ")
                if kind.lower() == "bearer" and secret.strip():
                    return self.tokens.check(secret.strip())
        return None


def identify(ctx) -> Caller:
    """Who makes an MCP request: its token, and the client it says it is."""
    request = ctx.request
    token: Token | None = request.scope.get(TOKEN_KEY) if request is not None else None
    client = client_info(ctx)
    if token is None:  # not an HTTP request: cannot happen behind McpEndpoint; reads only
        return Caller(client, {"Gitmem-Client": client}, may_write=False, writer=id(ctx.session))
    return Caller(f"{client} (token {token.name})", {"Gitmem-Client": client, "Gitmem-Token": token.name},
                  may_write=not token.read_only, writer=id(ctx.session))
