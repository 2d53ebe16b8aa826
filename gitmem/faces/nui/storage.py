"""nui's ``storage.*`` methods (and the programmatic ``extension.*`` ones) on the stores.

Each method takes the params nui sends and answers what the nui host expects (see
``shared/reference/nui-host-behaviour.md``): reads answer ``{messages,
agentSessionId}`` or ``{content}``, writes and deletes ``{"ok": true}`` once their
commit exists. Every call is checked against the handler table first.

nui sends every write from a goroutine of its own, so two writes made back to back
arrive in either order (and an append is a read, a join and such a replace): within
:data:`LATE_WINDOW` seconds of a write, a session snapshot older than the stored one is
not applied, and a memory replace is made from the read it extends (see
gitmem.stores.bases), each judged by when its request arrived (``rpc.arrival()``). A session read answers within ``max_response`` (nui's 4 MiB line limit):
nui takes an error for an empty session, which its next write would store.

    methods = storage_methods(mem.sessions, mem.memory, HandlerTable(),  # no list: any handler id
                              version=gitmem.__version__, name="gitmem")
    rpc.serve(methods, stdin, stdout)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gitmem.faces.nui.handlers import HandlerTable
from gitmem.records.jsontexts import JsonTexts
from gitmem.faces.rpc import (MAX_RESPONSE, InvalidParams, RawJSON, Shutdown, arrival, id_param,
                              json_texts, object_texts, param, parse_json)

if TYPE_CHECKING:  # the stores are handed in by whoever builds the table
    from gitmem.stores import MemoryStore, SessionStore

OK = {"ok": True}
WRITE_MODES = ("replace", "append")
LATE_WINDOW = 5.0
"""Seconds after a write in which an older write of the same record may still arrive.
nui's writes queue on one mutex, each in a goroutine, so the spread is the length of
that queue times a write's time: a burst of 50 snapshots is through in well under a
second; 5 s leaves room for a loaded machine and long sessions, while a truncation or
an undo made by hand comes later than that."""
NUI = "nui"
"""The writer of every memory read and write of this connection (see gitmem.stores.bases):
nui has one connection to its extension's process."""
ANSWER_ROOM = 64 * 1024
"""Bytes of an answer kept for all but a session's messages (envelope, id, agentSessionId)."""


def storage_methods(sessions: SessionStore, memory: MemoryStore, handlers: HandlerTable, *,
                    version: str, name: str = "gitmem",
                    on_shutdown: Callable[[], None] = lambda: None,
                    max_response: int = MAX_RESPONSE,
                    late_window: float = LATE_WINDOW) -> dict[str, Callable[[dict], Any]]:
    """The method table for ``gitmem serve``: ``storage.*`` and ``extension.*`` on the
    session and memory stores given.

    ``version`` is the one ``storage.info`` and ``extension.initialize`` answer;
    ``max_response`` is the longest answer line the server writes (a session read
    fits in it); ``late_window`` is :data:`LATE_WINDOW` unless told otherwise.
    """

    def handler(params: dict, kind: str, agent_type: str | None = None) -> dict[str, str]:
        handler_id = param(params, "handlerId")
        handlers.check(handler_id, kind, agent_type)
        return {"Gitmem-Handler": handler_id}

    def write_mode(params: dict) -> str:
        mode = param(params, "writeMode", default="replace")
        if mode not in WRITE_MODES:
            raise InvalidParams(f'param "writeMode" must be "replace" or "append", not {mode!r}',
                                {"param": "writeMode"})
        return mode

    def content(params: dict) -> str:
        text = param(params, "content", default="")
        try:  # markdown is stored as UTF-8 (a lone surrogate from a "\ud800" escape is not text)
            text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as error:
            raise InvalidParams(f'param "content" holds a lone surrogate at character {error.start}',
                                {"param": "content"}) from None
        return text

    def info(params: dict) -> dict:
        return {"id": name, "name": "gitmem", "version": version}

    def session_read(params: dict) -> dict:
        agent_type, session_id = id_param(params, "agentType"), id_param(params, "sessionId")
        param(params, "workingDir", default="")
        handler(params, "sessionHistory", agent_type)
        messages, agent_session_id = sessions.read_json_within(
            agent_type, session_id, max(max_response - ANSWER_ROOM, 2))
        return {"messages": RawJSON(messages), "agentSessionId": agent_session_id}

    @json_texts("messages")  # nui sends the whole session on every write
    def session_write(params: dict) -> dict:
        agent_type, session_id = id_param(params, "agentType"), id_param(params, "sessionId")
        messages = object_texts(params, "messages", default=[])  # a message is an object
        agent_session_id = param(params, "agentSessionId", default="")
        working_dir = param(params, "workingDir", default="")
        trailers = handler(params, "sessionHistory", agent_type)
        sessions.write(agent_type, session_id, JsonTexts(messages, parse_json), agent_session_id,
                           working_dir, trailers=trailers, late_window=late_window, arrived=arrival())
        return OK

    def session_delete(params: dict) -> dict:
        agent_type, session_id = id_param(params, "agentType"), id_param(params, "sessionId")
        trailers = handler(params, "sessionHistory", agent_type)
        sessions.delete(agent_type, session_id, trailers=trailers)
        return OK

    def agent_memory_read(params: dict) -> dict:
        agent_id = id_param(params, "agentId")
        handler(params, "agentMemory", agent_id)
        return {"content": memory.read(agent_id, writer=NUI)}

    def agent_memory_write(params: dict) -> dict:
        agent_id, text = id_param(params, "agentId"), content(params)
        mode = write_mode(params)
        trailers = handler(params, "agentMemory", agent_id)
        memory.write(text, agent_id, mode, trailers=trailers, writer=NUI, late_window=late_window, arrived=arrival())
        return OK

    def agent_memory_delete(params: dict) -> dict:
        agent_id = id_param(params, "agentId")
        trailers = handler(params, "agentMemory", agent_id)
        memory.delete(agent_id, trailers=trailers, writer=NUI, arrived=arrival())
        return OK

    def user_memory_read(params: dict) -> dict:
        handler(params, "userMemory")
        return {"content": memory.read(writer=NUI)}

    def user_memory_write(params: dict) -> dict:
        text, mode = content(params), write_mode(params)
        trailers = handler(params, "userMemory")
        memory.write(text, None, mode, trailers=trailers, writer=NUI, late_window=late_window, arrived=arrival())
        return OK

    def user_memory_delete(params: dict) -> dict:
        trailers = handler(params, "userMemory")
        memory.delete(None, trailers=trailers, writer=NUI, arrived=arrival())
        return OK

    def shutdown(params: dict) -> dict:
        on_shutdown()
        raise Shutdown(OK)

    def extension_initialize(params: dict) -> dict:
        return {"name": name, "version": version, "storageHandlers": [h.to_json() for h in handlers.handlers or ()]}

    def extension_shutdown(params: dict) -> dict:
        on_shutdown()
        raise Shutdown(OK)

    return {
        "storage.info": info,
        "storage.session.read": session_read,
        "storage.session.write": session_write,
        "storage.session.delete": session_delete,
        "storage.agentMemory.read": agent_memory_read,
        "storage.agentMemory.write": agent_memory_write,
        "storage.agentMemory.delete": agent_memory_delete,
        "storage.userMemory.read": user_memory_read,
        "storage.userMemory.write": user_memory_write,
        "storage.userMemory.delete": user_memory_delete,
        "storage.shutdown": shutdown,
        "extension.initialize": extension_initialize,
        "extension.shutdown": extension_shutdown,
    }
