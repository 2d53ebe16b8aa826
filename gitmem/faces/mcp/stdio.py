"""The MCP wire on this process's stdin and stdout: one JSON-RPC message a line.

The SDK's own stdio reader drops a line it cannot read without a word, and its client
then waits for an answer that never comes. Here every line that is not a message gets
the answer JSON-RPC gives it: -32700 for a line that is not JSON (or not UTF-8), -32600
for one that is not a request (``[]``, ``{"id": 1}``), and -32602, with the request's
id, for a request holding a lone surrogate escape (``"a\\ud800b"``, what
``JSON.stringify`` makes of a JavaScript string cut inside a surrogate pair): that is
not Unicode text, and nothing gitmem stores can hold it. Such a notification is only
logged: it has no one to answer.

Lines are read by the event loop from a pipe, a socket or a terminal, so that a SIGTERM
ends the server at once (the SDK's reader blocks in a thread until the client writes
again); a regular file (``gitmem mcp < requests``) or a device (``</dev/null``) is read
in a thread, and ends by itself. While serving, fd 0 reads the null device and fd 1
writes to stderr, so a child process (git) or a stray print never touches the wire.

    async with stdio_streams() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
from mcp import types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

log = logging.getLogger("gitmem.mcp")

MAX_LINE = 256 << 20  # bytes of one request line at most (a memory of that size is written whole)
_SURROGATE = re.compile("[\ud800-\udfff]")
_KINDS = {list: "an array (MCP sends one message a line)", str: "a string", int: "a number",
          float: "a number", bool: "true or false", type(None): "null"}


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The server's read and write streams on this process's stdin and stdout; fd 0 and
    fd 1 are given back at the end."""
    wire_in, wire_out = _claim(0), _claim(1)
    to_server, read_stream = anyio.create_memory_object_stream[SessionMessage](0)
    write_stream, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    out = anyio.wrap_file(os.fdopen(wire_out[0], "wb"))
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, wire_in[0], to_server, write_stream.clone())
            tasks.start_soon(_write, from_server, out)
            yield read_stream, write_stream
    finally:
        with contextlib.suppress(OSError):
            await out.aclose()
        for fd, saved in (wire_in, wire_out):
            os.dup2(saved, fd)
            os.close(saved)


def _claim(fd: int) -> tuple[int, int]:
    """A private copy of ``fd`` (0 or 1) for the wire, and a second one to give ``fd`` back
    with; ``fd`` itself then points at the null device (stdin) or at stderr (stdout)."""
    wire, saved = os.dup(fd), os.dup(fd)
    if fd == 1:
        os.dup2(2, 1)
    else:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, fd)
        os.close(null)
    return wire, saved


async def _read(fd: int, to_server, answers) -> None:
    """Each line a message for the server, or the error it is answered with."""
    async with to_server, answers:
        async for line in _lines(fd):
            if not line.strip():
                continue
            message, refusal = _parsed(line)
            if message is not None:
                await to_server.send(SessionMessage(message))
            elif refusal is not None:
                await answers.send(SessionMessage(refusal))


async def _write(from_server, out) -> None:
    async with from_server:
        async for outgoing in from_server:
            await out.write(_encoded(outgoing.message))
            await out.flush()


def _encoded(message) -> bytes:
    """The message's line; an answer that cannot be written as JSON becomes an error saying so."""
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    except ValueError as error:  # pydantic's serialization error: text that is not Unicode
        log.error("an answer could not be written as JSON: %s", error)
        failed = types.JSONRPCError(jsonrpc="2.0", id=getattr(message, "id", None), error=types.ErrorData(
            code=types.INTERNAL_ERROR, message="the answer could not be written as JSON"))
        return failed.model_dump_json(by_alias=True).encode() + b"\n"


async def _lines(fd: int) -> AsyncIterator[bytes]:
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        async with anyio.wrap_file(os.fdopen(fd, "rb")) as lines:  # a file or a device
            async for line in lines:
                yield line
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than MAX_LINE: its rest is answered as not JSON
                log.warning("a request line of more than %d bytes was dropped", MAX_LINE)
                continue
            if not line:
                return
            yield line
    finally:
        transport.close()


def _parsed(line: bytes) -> tuple[Any, types.JSONRPCError | None]:
    """The message on ``line``, or the error answering it (neither: a line that nobody can
    be answered for, logged)."""
    try:
        value = msgspec.json.decode(line)  # a fifth of the SDK's parse of a 20 MB memory_write
    except msgspec.DecodeError:
        try:
            value = json.loads(line)  # which takes a lone surrogate, to say where it is
        except UnicodeDecodeError as error:
            return None, _error(None, types.PARSE_ERROR, f"not JSON: not UTF-8 (byte "
                                f"0x{error.object[error.start]:02x} at {error.start})")
        except ValueError as error:
            return None, _error(None, types.PARSE_ERROR, f"not JSON: {error}")
        found = _lone_surrogate(value)
        if found is not None:
            return None, _not_text(value, *found)
    try:
        return types.jsonrpc_message_adapter.validate_python(value, by_name=False), None
    except ValidationError:
        return None, _not_a_request(value, line)


def _not_text(value: Any, where: str, text: str, at: int) -> types.JSONRPCError | None:
    message = (f"{where} holds a lone surrogate (\\u{ord(text[at]):04x}) at character {at}: that is "
               "not Unicode text (a JavaScript string cut inside a surrogate pair?)")
    request_id = _answerable_id(value)
    if request_id is None or "method" not in value:  # a notification, or the client's answer
        log.warning("a message was dropped: %s", message)
        return None
    return _error(request_id, types.INVALID_PARAMS, message, {"path": where})


def _not_a_request(value: Any, line: bytes) -> types.JSONRPCError | None:
    if not isinstance(value, dict):
        return _error(None, types.INVALID_REQUEST,
                      f"not a JSON-RPC request: {_KINDS.get(type(value), 'not an object')}")
    request_id = _answerable_id(value)
    if "method" not in value and ("result" in value or "error" in value):
        log.warning("an answer from the client could not be read: %.200r", line)  # nobody to tell
        return None
    if "method" not in value:
        return _error(request_id, types.INVALID_REQUEST, 'not a JSON-RPC request: no "method"')
    if "id" not in value:
        log.warning("a notification could not be read: %.200r", line)
        return None
    wrong = ('"jsonrpc" must be "2.0"' if value.get("jsonrpc") != "2.0" else
             '"method" must be a string' if not isinstance(value["method"], str) else
             '"params" must be an object' if not isinstance(value.get("params", {}), dict) else
             '"id" must be a string or a whole number' if request_id is None else
             "its members are not those of a request")
    return _error(request_id, types.INVALID_REQUEST, f"not a JSON-RPC request: {wrong}")


def _answerable_id(value: Any) -> int | str | None:
    """The message's id, if an answer can carry it back."""
    request_id = value.get("id") if isinstance(value, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)) or _SURROGATE.search(str(request_id)):
        return None
    return request_id


def _lone_surrogate(value: Any, where: str = "") -> tuple[str, str, int] | None:
    """The first string in ``value`` holding a lone surrogate: its path, itself, and where in it."""
    if isinstance(value, str):
        hit = _SURROGATE.search(value)
        return (where, value, hit.start()) if hit else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        path = f"{where}.{key}" if where else str(key)
        found = _lone_surrogate(key, path) if isinstance(key, str) else None
        found = found or _lone_surrogate(item, path)
        if found:
            return found
    return None


def _error(request_id, code: int, message: str, data: Any = None) -> types.JSONRPCError:
    error = types.ErrorData(code=code, message=message, data=data) if data is not None else \
        types.ErrorData(code=code, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
