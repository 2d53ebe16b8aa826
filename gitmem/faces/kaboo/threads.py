"""kaboo's ``threads.*`` methods: the ThreadStore contract on the JSON-RPC line loop.

Params and results use the contract's names (``threadId``, ``agentId``, ``ownerId``);
writes answer ``{"ok": true}`` once their commit exists, reads splice the stored JSON
into the answer without decoding it. A missing or wrong param is -32602 naming it.
No answer is capped by ``max_response`` (only nui's reader needs the cap, and nui never
calls ``threads.*``). ``threads.info`` gives the version, for the adapter's handshake.
A write with a ``requestKey`` that a recent commit holds is answered without writing it
again (a retry after the answer was lost; see :mod:`gitmem.stores.request_keys`).

    rpc.serve(thread_methods(mem.threads, version=gitmem.__version__), sys.stdin.buffer, sys.stdout.buffer)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gitmem.errors import InvalidInput
from gitmem.records.jsontexts import JsonTexts
from gitmem.faces.rpc import (InvalidParams, RawJSON, id_param, json_texts, not_an_object,
                              object_texts, param, parse_json, uncapped)
from gitmem.stores.request_keys import checked_key

if TYPE_CHECKING:  # the store is handed in by whoever builds the table
    from gitmem.stores import ThreadStore

OK = {"ok": True}


def thread_methods(store: ThreadStore, *, version: str) -> dict[str, Callable[[dict], Any]]:
    """The method table: ``threads.info`` (``{name, version}``: ``version`` is gitmem's),
    ``appendEvents``, ``readEvents``, ``readState``, ``saveMessages``, ``readMessages``,
    ``list`` and ``clear``."""

    def info(params: dict) -> dict:
        return {"name": "gitmem", "version": version}

    def append_events(params: dict) -> dict:
        thread_id, agent_id = id_param(params, "threadId"), id_param(params, "agentId")
        events = _objects(params, "events")
        store.append_events(thread_id, agent_id, events, param(params, "ownerId", default=None),
                            request_key=_request_key(params))
        return OK

    @uncapped
    def read_events(params: dict) -> dict:
        return {"events": RawJSON(store.read_events_json(id_param(params, "threadId")))}

    @uncapped
    def read_state(params: dict) -> dict:
        return {"state": RawJSON(store.read_state_json(id_param(params, "threadId")))}

    @json_texts("messages")  # the runner saves the whole list after every run
    def save_messages(params: dict) -> dict:
        thread_id = id_param(params, "threadId")
        store.save_messages(thread_id, JsonTexts(object_texts(params, "messages"), parse_json),
                            request_key=_request_key(params))
        return OK

    @uncapped
    def read_messages(params: dict) -> dict:
        return {"messages": RawJSON(store.read_messages_json(id_param(params, "threadId")))}

    @uncapped
    def list_threads(params: dict) -> dict:
        filter_ = param(params, "filter", dict, default={})
        if "ownerId" not in filter_:
            return {"threads": store.list_threads()}
        owner_id = filter_["ownerId"]  # null: the threads that have no owner
        if owner_id is not None and not isinstance(owner_id, str):
            raise InvalidParams('param "filter.ownerId" must be a string or null',
                                {"param": "filter.ownerId"})
        return {"threads": store.list_threads(owner_id)}

    def clear(params: dict) -> dict:
        # Only an absent threadId clears everything; a null one is refused, not taken for it.
        store.clear(id_param(params, "threadId") if "threadId" in params else None,
                    request_key=_request_key(params))
        return OK

    return {
        "threads.info": info,
        "threads.appendEvents": append_events,
        "threads.readEvents": read_events,
        "threads.readState": read_state,
        "threads.saveMessages": save_messages,
        "threads.readMessages": read_messages,
        "threads.list": list_threads,
        "threads.clear": clear,
    }


def _request_key(params: dict) -> str | None:
    """``params["requestKey"]``, if given: the key of a write that may be sent again."""
    key = param(params, "requestKey", default=None)
    try:
        return key if key is None else checked_key(key)
    except InvalidInput as error:
        raise InvalidParams(f'param "requestKey": {error}', {"param": "requestKey"}) from None


def _objects(params: dict, name: str) -> list[Any]:
    """``params[name]``: an array of JSON objects."""
    values = param(params, name, list)
    for i, value in enumerate(values):
        if not isinstance(value, dict):
            raise not_an_object(name, i)
    return values
