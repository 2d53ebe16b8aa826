"""LangGraph's long-term memory store (``langgraph.store.base.BaseStore``) kept in git: each
item is a file ``store/<namespace part>/.../<key>.json`` of a gitmem repository
(:mod:`gitmem.stores.items`), and each batch that puts or deletes is one commit, which
``gitmem log store:<namespace>/<key>`` lists and ``gitmem restore`` undoes.

``search`` filters by the value's fields as LangGraph's ``InMemoryStore`` does (a value,
a nested object, or ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``); a ``query``
ranks the items by gitmem's search (words, stems, BM25: :mod:`gitmem.search`), those it
finds first with their ``score``, then the others, newest first, with none. Without a query
the newest come first. TTL is not kept (``supports_ttl`` is False: a ``ttl`` is refused, as
``BaseStore`` refuses it for such a store); a commit per read that refreshed it would bury
the history. The calls of ``abatch`` run in a worker thread.

    from gitmem.langgraph import Store

    store = Store(repo="~/gitmem")
    store.put(("users", "alice"), "prefs", {"theme": "dark"})
    store.get(("users", "alice"), "prefs").value     # {'theme': 'dark'}
    store.search(("users",), query="dark theme")
"""

from __future__ import annotations

import asyncio
import copy
import os
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op,
                                  PutOp, Result, SearchItem, SearchOp, validate_op_namespace)

from gitmem.records import layout
from gitmem.records.items import StoredItem
from gitmem.repository import Gitmem
from gitmem.stores.items import Write

HANDLER = "gitmem-langgraph"  # the Gitmem-Handler trailer of its commits


class Store(BaseStore):
    """The items under ``store/`` of the repository at ``repo`` (None: the default one,
    created when missing), or of an open ``mem``. After :meth:`close` every call raises
    RuntimeError."""

    __slots__ = ("mem", "items", "_owned", "_closed", "_lock", "_trailers")
    supports_ttl = False

    def __init__(self, repo: str | os.PathLike | None = None, *, mem: Gitmem | None = None):
        self.mem = mem if mem is not None else Gitmem.open(repo)
        self.items = self.mem.items
        self._owned = mem is None
        self._closed = False
        self._lock = threading.Lock()  # one batch at a time from this store
        self._trailers = {"Gitmem-Handler": HANDLER}

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order: the reads see the store as it was before the batch (as in
        LangGraph's InMemoryStore), and its puts and deletes are one commit, made last (the
        last one of an item counting; none when they change nothing)."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp) and op.ttl is not None:
                raise NotImplementedError("TTL is not supported by gitmem's Store: every refresh "
                                          "would be a commit; put with ttl=None")
            if not isinstance(op, (GetOp, SearchOp, ListNamespacesOp, PutOp)):
                raise ValueError(f"Unknown operation type: {type(op)}")
        with self._lock:
            self._check_open()
            head = self.items.snapshot()
            results: list[Result] = []
            writes: list[Write] = []
            for op in ops:
                if isinstance(op, GetOp):
                    found = self.items.get(op.namespace, op.key, snapshot=head)
                    results.append(_item(found) if found is not None else None)
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, head))
                elif isinstance(op, ListNamespacesOp):
                    results.append(_namespaces(op, self.items.namespaces(snapshot=head)))
                else:
                    writes.append(Write(op.namespace, op.key, op.value, op.index))
                    results.append(None)
            if writes:
                self.items.write(writes, trailers=self._trailers)
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread, so that the event loop goes on while git works."""
        ops = list(ops)
        self._check_open()
        return await asyncio.to_thread(self.batch, ops)

    def close(self) -> None:
        """Close the store, and the repository when this store opened it (again: no-op)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._owned:
                    self.mem.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Store is closed")

    def _search(self, op: SearchOp, head) -> list[SearchItem]:
        found = [item for item in self.items.items(op.namespace_prefix, snapshot=head)
                 if not op.filter or all(_matches(item.value.get(name), wanted)
                                         for name, wanted in op.filter.items())]
        found.sort(key=lambda item: item.updated_at, reverse=True)  # the newest first
        scores = self._scores(op.query) if op.query and found else {}
        if scores:  # those search finds first, best first; the others after them, as they were
            found.sort(key=lambda item: -scores.get(_path(item), float("-inf")))
        return [_search_item(item, scores.get(_path(item)))
                for item in found[op.offset:op.offset + op.limit]]

    def _scores(self, query: str) -> dict[str, float]:
        """{item file: score} of every store item gitmem's search finds for ``query``."""
        limit = 100
        while True:
            hits = self.mem.search(query, kind="store", limit=limit)
            if len(hits) < limit:
                return {hit.path: hit.score for hit in hits}
            limit *= 4


def _path(item: StoredItem) -> str:
    return layout.item_path(item.namespace, item.key)


def _times(found: StoredItem) -> dict[str, datetime]:
    return dict(created_at=datetime.fromisoformat(found.created_at),
                updated_at=datetime.fromisoformat(found.updated_at))


def _item(found: StoredItem) -> Item:
    """The LangGraph item of ``found``, its value a copy: changing it changes nothing stored."""
    return Item(value=copy.deepcopy(found.value), key=found.key, namespace=found.namespace,
                **_times(found))


def _search_item(found: StoredItem, score: float | None) -> SearchItem:
    return SearchItem(found.namespace, found.key, copy.deepcopy(found.value), score=score,
                      **_times(found))


def _namespaces(op: ListNamespacesOp, namespaces: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The namespaces ``op`` asks for among ``namespaces``, sorted, cut to its ``max_depth``."""
    found = [namespace for namespace in namespaces
             if all(_holds(condition, namespace) for condition in op.match_conditions or ())]
    if op.max_depth is not None:
        found = sorted({namespace[:op.max_depth] for namespace in found})
    return sorted(found)[op.offset:op.offset + op.limit]


def _holds(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with the condition's
    path, ``*`` matching any one part."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        parts = namespace[:len(path)]
    elif condition.match_type == "suffix":
        parts = namespace[len(namespace) - len(path):]
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(wanted == "*" or part == wanted for part, wanted in zip(parts, path, strict=True))


def _matches(value: Any, wanted: Any) -> bool:
    """Whether a field's ``value`` meets the filter's ``wanted``: an object of operators
    (``$eq`` ...), an object whose fields each match, a list matching element by element,
    or a value equal to it."""
    if isinstance(wanted, dict):
        if any(name.startswith("$") for name in wanted):
            return all(_compare(value, operator, operand) for operator, operand in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(name), inner)
                                               for name, inner in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(wanted)
                and all(_matches(one, other) for one, other in zip(value, wanted, strict=True)))
    return value == wanted


def _compare(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return value == operand
    if operator == "$ne":
        return value != operand
    if operator in _ORDER:  # numbers, as InMemoryStore compares them; a field without one never matches
        try:
            return _ORDER[operator](float(value), float(operand))
        except (TypeError, ValueError):
            return False
    raise ValueError(f"Unsupported operator: {operator}")


_ORDER = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
