"""The MCP face: gitmem's memory as the tools and resources of a Model Context Protocol
server, on the official MCP SDK (``mcp``, imported only here and by ``gitmem mcp``).

Each tool is a thin call into the services the CLI uses, handed in as :class:`Services`
by whoever starts the server (:mod:`gitmem.faces.mcp.server`). A tool's failure (a bad record
name, an unknown mode or argument, a time before the record existed, a missing
repository, an empty query; any other failure too, logged) is a tool result with
``isError`` and one line saying what to do, a resource's the request's JSON-RPC error;
the server keeps serving. Ids are taken as the CLI takes them, kept inside the
repository by the stores' escaping. A record that is not UTF-8
comes back with U+FFFD for the bytes that are not, and a note saying so. Every write
names the client (``clientInfo``) in a ``Gitmem-Client`` trailer of its commit; a
server that knows more about who calls (``gitmem web``'s tokens) says so through
``identify``, whose :class:`Caller` may also be read-only.

    server = build_server(open_services, version=gitmem.__version__)
    await server.run(read_stream, write_stream, server.create_initialization_options())
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from gitmem.records.layout import BadRecordName, parse_record

if TYPE_CHECKING:  # handed in by whoever starts the server
    from gitmem.stores import MemoryStore, SessionStore, ThreadStore

log = logging.getLogger("gitmem.mcp")

WRITE_MODES = ("append", "replace")
MAX_LIMIT = 1000
RESOURCE_PREFIX = "gitmem://memory/"
AGENT_RESOURCES = RESOURCE_PREFIX + "agent/"
READABLE = "user, agent:<id>, session:<agentType>/<sessionId> or thread:<threadId>"
WRITABLE = "user or agent:<id>"
INSTRUCTIONS = ("Memory kept in a git repository: `user` (about the person) and `agent:<id>` "
                "(one agent's notes). Read them with memory_read before you start; save what is "
                "worth keeping with memory_write (append, a short block). Every write is a git "
                "commit: history and memory_show look back, search finds words.")


@dataclasses.dataclass(frozen=True)
class Services:
    """What the tools call: the stores and the history calls the CLI uses.

    ``log(record, limit=)`` gives entries with ``to_json()`` (:func:`gitmem.history.versions.log`),
    ``show(record, at)`` one with ``.value``/``.exists``/``.commit``, ``memories()`` the
    memory records with ``to_json()``, ``search(query, history=, limit=)`` hits with
    ``as_json()``.
    """

    memory: MemoryStore
    sessions: SessionStore
    threads: ThreadStore
    memories: Callable[[], list]
    log: Callable[..., list]
    show: Callable[[str, str], Any]
    search: Callable[..., list]


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who makes a request: ``name`` for the log, the trailers its writes carry, and
    whether it may write at all."""

    name: str
    trailers: dict[str, str]
    may_write: bool = True


WRITING_TOOLS = frozenset({"memory_write"})


class ToolError(Exception):
    """A call the model can correct: its message is the one line the result holds."""


def _record(name: str) -> dict:
    return {"type": "string", "description": f"the record: {name}"}


_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20}


def _tool(name: str, description: str, properties: dict, *required: str) -> types.Tool:
    """A tool whose arguments are ``properties``, ``required`` among them, and no others."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return types.Tool(name=name, description=description, input_schema=schema)


TOOLS = (
    _tool("memory_read",
          "Read a memory (user, agent:<id>) as markdown; sessions and threads come back as JSON.",
          {"record": _record(READABLE)}, "record"),
    _tool("memory_write",
          "Save to a memory (user or agent:<id>): append adds a block after a blank line (the "
          "default), replace rewrites it. One git commit.",
          {"record": _record(WRITABLE),
           "content": {"type": "string", "description": "markdown to save"},
           "mode": {"type": "string", "enum": list(WRITE_MODES), "default": "append"}},
          "record", "content"),
    _tool("memory_list",
          "List every memory record with its size in bytes and its last change.", {}),
    _tool("history",
          "A record's commits, newest first: commit id, date, author and a summary of what "
          "each changed.",
          {"record": _record(READABLE), "limit": _LIMIT}, "record"),
    _tool("memory_show",
          "A record as it was at a time: @ (its newest version), @~2 (two changes back), a "
          "commit id, or a date such as 2026-11-01 or '3 days ago'.",
          {"record": _record(READABLE),
           "at": {"type": "string", "description": "@~N, a commit, or a date"}},
          "record", "at"),
    _tool("search",
          "Search the memories, sessions and threads for words; with history true, also what "
          "was written and removed in earlier commits.",
          {"query": {"type": "string", "description": "the words to look for"},
           "history": {"type": "boolean", "default": False}, "limit": _LIMIT},
          "query"),
)


def client_info(ctx) -> str:
    """The client a request's session says it is (``clientInfo``), on one line."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return "unknown"
    return " ".join(f"{info.name} {info.version}".split())[:120]  # one trailer line


def build_server(open_services: Callable[[], Services], *, version: str,
                 run_blocking: Callable[[Callable[[], Any], Callable[[], bool]], Awaitable[Any]],
                 name: str = "gitmem", identify: Callable[[Any], Caller] | None = None) -> Server:
    """The MCP server: :data:`TOOLS` and the memory resources on the services that
    ``open_services`` gives (called for each request; it raises when the repository
    cannot be opened, which the request's answer then says). ``identify(ctx)`` says who
    makes a request (default: the client it says it is, who may write).

    What a tool or a resource does with the services is handed to ``run_blocking(call,
    cancelled)``, which runs ``call()`` off the event loop and returns its result, so that
    the server answers a ping, or takes a cancel, while a big write runs
    (:class:`gitmem.faces.mcp.server.Worker`). ``cancelled()`` is true once the client
    sent ``notifications/cancelled`` for the call: a write not committed by then is
    stopped, and the log says which it was (MCP sends no answer).
    """
    in_flight: dict[str, threading.Event] = {}  # a tool call's request id -> set when cancelled

    def caller_of(ctx) -> Caller:
        if identify is not None:
            return identify(ctx)
        client = client_info(ctx)
        return Caller(client, {"Gitmem-Client": client})

    async def list_tools(ctx, params) -> types.ListToolsResult:
        may_write = caller_of(ctx).may_write
        return types.ListToolsResult(tools=[t for t in TOOLS if may_write or t.name not in WRITING_TOOLS])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = caller_of(ctx)
        client = caller.name
        args = params.arguments or {}
        tool = _TOOL_CALLS.get(params.name)
        cancel = in_flight[str(ctx.request_id)] = threading.Event()
        try:
            if tool is None:
                raise ToolError(f"no tool {params.name!r}: use one of "
                                f"{', '.join(t.name for t in TOOLS)}")
            if params.name in WRITING_TOOLS and not caller.may_write:
                raise ToolError(f"{params.name} refused: this caller's token is read-only "
                                "(a read-write one is made by `gitmem web token add NAME`)")
            _known_arguments(params.name, args)
            text = await run_blocking(functools.partial(_run_tool, tool, open_services, args, caller),
                                      cancel.is_set)
        except Exception as error:  # noqa: BLE001 - every failure is an answer; serving goes on
            line = _unicode(_one_line(error))[0]
            if cancel.is_set():
                log.info("%s: %s %s: %s", client, params.name, _ids_of(args), line)
            elif isinstance(error, (ToolError, ValueError)):
                log.info("%s: %s refused: %s", client, params.name, line)
            else:
                log.exception("%s: %s failed", client, params.name)
            return types.CallToolResult(content=[types.TextContent(text=line)], is_error=True)
        finally:
            in_flight.pop(str(ctx.request_id), None)
        log.info("%s: %s %s%s", client, params.name, _ids_of(args),
                 ": cancelled when it was done already (a write stands whole)" if cancel.is_set() else "")
        text, note = _unicode(text)
        content = [types.TextContent(text=text)]
        if note:
            log.warning("%s: %s %s: %s", client, params.name, _ids_of(args), note)
            content.append(types.TextContent(text=f"note: {note}"))
        return types.CallToolResult(content=content)

    async def cancelled(ctx, params: types.CancelledNotificationParams) -> None:
        cancel = in_flight.get(str(params.request_id))
        if cancel is not None:
            cancel.set()

    @_answered
    async def list_resources(ctx, params) -> types.ListResourcesResult:
        agents = await run_blocking(lambda: sorted(_or_mcp_error(open_services).memory.agents()), _never)
        found = [types.Resource(uri=RESOURCE_PREFIX + "user", name="user",
                                description="the user's memory", mime_type="text/markdown")]
        found += [types.Resource(uri=AGENT_RESOURCES + quote(agent, safe=""), name=f"agent:{agent}",
                                 description=f"the memory of agent {agent}",
                                 mime_type="text/markdown")
                  for agent in agents]
        return types.ListResourcesResult(resources=found)

    @_answered
    async def list_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            uri_template=AGENT_RESOURCES + "{id}", name="agent memory",
            description="the memory of one agent", mime_type="text/markdown")])

    @_answered
    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri == RESOURCE_PREFIX + "user":
            agent = None
        elif uri.startswith(AGENT_RESOURCES) and uri != AGENT_RESOURCES:
            agent = unquote(uri[len(AGENT_RESOURCES):])
        else:
            raise MCPError(types.INVALID_PARAMS, f"no resource {uri}: use {RESOURCE_PREFIX}user "
                           f"or {AGENT_RESOURCES}<id>")

        def read() -> str:
            services = _or_mcp_error(open_services)
            return _or_mcp_error(lambda: services.memory.read(_agent_id(parse_record(
                "user" if agent is None else f"agent:{agent}"))))

        text = await run_blocking(read, _never)
        text, note = _unicode(text)
        if note:
            log.warning("%s: %s", uri, note)
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=uri, mime_type="text/markdown", text=text)])

    server = Server(name, version=version, instructions=INSTRUCTIONS,
                    on_list_tools=list_tools, on_call_tool=call_tool,
                    on_list_resources=list_resources, on_list_resource_templates=list_templates,
                    on_read_resource=read_resource)
    server.add_notification_handler("notifications/cancelled", types.CancelledNotificationParams, cancelled)
    return server


def _run_tool(tool: Callable[[Services, dict, Caller], str], open_services: Callable[[], Services],
              args: dict, caller: Caller) -> str:
    try:
        services = open_services()
    except Exception as error:  # noqa: BLE001 - a missing repository: said, then tried again
        raise ToolError(_one_line(error)) from None
    return tool(services, args, caller)


def _never() -> bool:
    return False


# -- the tools: (services, arguments, caller) -> the result's text ------------------


def memory_read(services: Services, args: dict, caller: Caller) -> str:
    record = _parse(_string(args, "record"), READABLE)
    if record.kind in ("user", "agent"):
        return services.memory.read(_agent_id(record))
    if record.kind == "session":
        messages, agent_session_id = services.sessions.read(*record.ids)
        return _json({"messages": messages, "agentSessionId": agent_session_id})
    thread_id = record.ids[0]
    return _json({"events": services.threads.read_events(thread_id),
                  "messages": services.threads.read_messages(thread_id)})


def memory_write(services: Services, args: dict, caller: Caller) -> str:
    record = _parse(_string(args, "record"), WRITABLE)
    if record.kind not in ("user", "agent"):
        raise ToolError(f"{record.name} cannot be written here: write {WRITABLE}")
    content = _string(args, "content")  # a memory is emptied by hand, not by a model's slip
    mode = args.get("mode", "append")
    if mode not in WRITE_MODES:
        raise ToolError(f'mode must be "append" or "replace", not {mode!r}')
    commit = services.memory.write(content, _agent_id(record), mode,
                                   trailers=caller.trailers)
    if commit is None:
        return f"{record.name} already held that: nothing to commit"
    return f"{'appended to' if mode == 'append' else 'replaced'} {record.name} in commit {commit[:10]}"


def memory_list(services: Services, args: dict, caller: Caller) -> str:
    return _json([listed.to_json() for listed in services.memories()])


def history(services: Services, args: dict, caller: Caller) -> str:
    record = _parse(_string(args, "record"), READABLE)
    return _json([entry.to_json() for entry in services.log(record.name, limit=_limit(args))])


def memory_show(services: Services, args: dict, caller: Caller) -> str:
    record = _parse(_string(args, "record"), READABLE)
    shown = services.show(record.name, _string(args, "at"))
    if not shown.exists:
        at = shown.commit[:10] if shown.commit else "that time (before the first commit)"
        raise ToolError(f"{record.name} did not exist at {at}")
    if "content" in shown.value:
        return shown.value["content"]
    return _json(shown.value)


def search(services: Services, args: dict, caller: Caller) -> str:
    query = _string(args, "query")
    with_history = args.get("history", False)
    if not isinstance(with_history, bool):
        raise ToolError('"history" must be true or false')
    limit = _limit(args)
    try:
        hits = services.search(query, history=with_history, limit=limit)
    except ValueError as error:  # a query the index cannot take: say which, and why
        raise ToolError(f"cannot search for {query!r}: {_one_line(error)}") from None
    return _json([hit.as_json() for hit in hits])


_TOOL_CALLS: dict[str, Callable[[Services, dict, Caller], str]] = {
    "memory_read": memory_read, "memory_write": memory_write, "memory_list": memory_list,
    "history": history, "memory_show": memory_show, "search": search}


# -- arguments ---------------------------------------------------------------------------


def _string(args: dict, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f'"{name}" is required, as a string')
    if not value.strip():
        raise ToolError(f'"{name}" is empty: give {name} a value')
    try:  # stored as UTF-8: a lone surrogate is not text
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolError(f'"{name}" holds a lone surrogate at character {error.start}') from None
    return value


def _known_arguments(tool: str, args: dict) -> None:
    """Arguments the tool's schema does not name are refused, not ignored: a misspelt
    ``mode`` would otherwise append where the model meant to replace."""
    schema = next(t.input_schema for t in TOOLS if t.name == tool)
    unknown = sorted(set(args) - set(schema["properties"]))
    if unknown:
        known = ", ".join(schema["properties"]) or "none"
        raise ToolError(f"{tool} takes no argument {', '.join(map(repr, unknown))} "
                        f"(its arguments: {known})")


def _limit(args: dict) -> int:
    limit = args.get("limit", 20)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f'"limit" must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}')
    return limit


def _parse(name: str, allowed: str):
    """The record ``name`` names. Its ids are taken as the CLI and nui's wire take them: the
    stores keep any id inside the repository, escaped (``../x`` is ``%2e.%2fx``)."""
    try:
        return parse_record(name)
    except BadRecordName:
        raise ToolError(f"{name!r} is not a record: use {allowed}") from None


def _agent_id(record) -> str | None:
    return record.ids[0] if record.kind == "agent" else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    text = " ".join(str(error).split())
    return text or type(error).__name__


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(text: str) -> tuple[str, str | None]:
    """``text`` as Unicode an answer can carry, and a note when it was not: a file that
    is not UTF-8 (a Latin-1 hand edit) is read with each undecodable byte a lone
    surrogate, which no JSON line can hold; those become U+FFFD."""
    found = _SURROGATE.search(text)
    if found is None:
        return text, None
    return _SURROGATE.sub("\ufffd", text), (
        f"the record is not all UTF-8 (the first byte that is not is at character "
        f"{found.start()}): such bytes are shown as U+FFFD; `gitmem memory read` gives "
        "them as they are")


def _answered(handler):
    """``handler`` with any failure its JSON-RPC error, one line, logged (an exception
    the SDK met itself would be answered without a word in the log)."""
    @functools.wraps(handler)
    async def answer(ctx, params):
        try:
            return await handler(ctx, params)
        except MCPError as error:
            log.info("%s refused: %s", handler.__name__, error)
            raise
        except Exception as error:  # noqa: BLE001 - every failure is an answer; serving goes on
            log.exception("%s failed", handler.__name__)
            raise MCPError(-32603, _one_line(error)) from None
    return answer


def _or_mcp_error(call: Callable[[], Any]) -> Any:
    """``call()``, a failure turned into the request's JSON-RPC error (resources have no
    error results)."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - answered, never raised through the SDK
        raise MCPError(types.INVALID_PARAMS if isinstance(error, ValueError) else -32603,
                       _one_line(error)) from None


def _ids_of(args: dict) -> str:
    """The arguments for the log, never content."""
    return " ".join(f"{k}={args[k]!r:.80}" for k in ("record", "mode", "at", "limit", "history")
                    if k in args)
