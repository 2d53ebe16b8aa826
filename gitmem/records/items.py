"""A store item's file (``store/<namespace>/<key>.json``, :func:`gitmem.records.layout.item_path`):
one JSON object, indented for people and diffs, holding the item's namespace, key, value and
times (named as in gitmem's other files, so that a sync merges them as it merges a
``meta.json``: the earliest ``createdAt``, the value of the side updated later), and what
search reads of it
(:func:`gitmem.records.units.item_text`).

    {
      "namespace": ["users", "alice"],
      "key": "prefs",
      "value": {"theme": "dark"},
      "createdAt": "2026-12-01T09:30:00.123456+00:00",
      "updatedAt": "2026-12-02T10:00:00.654321+00:00",
      "index": ["theme"]                                  (only when the writer chose fields)
    }

``index`` says what search finds the item by: absent, every string of the value (less ids
and types, as in a message); ``false``, nothing; a list of field paths (``title``,
``meta.title``, ``tags[*]``, ``sections[0].text``, ``$`` the whole value), the strings there.

    item_bytes(("users", "alice"), "prefs", {"theme": "dark"}, created, updated)
    parse_item(data)     # StoredItem(namespace, key, value, created_at, updated_at, index)
"""

from __future__ import annotations

import json
import re
from collections import namedtuple
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

from gitmem.errors import InvalidInput
from gitmem.records import strictjson

_STEP = re.compile(r"([^.\[\]]+)|\[(\*|-?\d+)\]")


class StoredItem(namedtuple("StoredItem", "namespace key value created_at updated_at index")):
    """An item as its file holds it: ``namespace`` (a tuple), ``key``, ``value`` (a dict),
    ``created_at`` and ``updated_at`` (ISO 8601 texts: the file's ``createdAt`` and
    ``updatedAt``), ``index`` (None, False or a list)."""

    __slots__ = ()


def item_bytes(namespace: Sequence[str], key: str, value: Mapping[str, Any], created_at: str,
               updated_at: str, index: Literal[False] | list[str] | None = None) -> bytes:
    """The file of an item. Raises :class:`~gitmem.errors.InvalidInput` for a value JSON
    cannot hold (NaN, a set, an object whose keys are not strings)."""
    found: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": dict(value),
                             "createdAt": created_at, "updatedAt": updated_at}
    if index is not None:
        found["index"] = index
    try:
        text = strictjson.dumps(found, ensure_ascii=False, indent=2) + "\n"
    except TypeError as exc:
        raise InvalidInput(f"value must be JSON: {exc}") from None
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the file stays UTF-8
        return (strictjson.dumps(found, indent=2) + "\n").encode("ascii")


def parse_item(data: str | bytes) -> StoredItem:
    """The item in file content ``data``; ValueError when it is not an item's file."""
    found = json.loads(data)
    if not isinstance(found, dict) or not isinstance(found.get("value"), dict):
        raise ValueError("not a store item: a JSON object with a \"value\" object")
    namespace, key = found.get("namespace"), found.get("key")
    if not (isinstance(namespace, list) and namespace and all(isinstance(p, str) and p for p in namespace)):
        raise ValueError("its \"namespace\" is not a list of one or more strings")
    if not isinstance(key, str):
        raise ValueError("its \"key\" is not a string")
    created, updated = found.get("createdAt"), found.get("updatedAt")
    if not (isinstance(created, str) and isinstance(updated, str)):
        raise ValueError("its \"createdAt\" and \"updatedAt\" are not texts")
    index = found.get("index")
    if not (index is None or index is False or (isinstance(index, list)
                                                and all(isinstance(p, str) for p in index))):
        raise ValueError("its \"index\" is neither false nor a list of field paths")
    return StoredItem(tuple(namespace), key, found["value"], created, updated, index)


def values_at(value: Any, path: str) -> Iterator[Any]:
    """The values at field ``path`` of ``value``: ``a.b``, ``a[0]``, ``a[-1]``, ``a[*]`` (each
    element), ``$`` (the whole value); none where the path leads nowhere."""
    if path == "$":
        yield value
        return
    found = [value]
    for name, index in _STEP.findall(path):
        step = []
        for node in found:
            if name:
                if isinstance(node, dict) and name in node:
                    step.append(node[name])
            elif isinstance(node, list):
                if index == "*":
                    step.extend(node)
                elif -len(node) <= int(index) < len(node):
                    step.append(node[int(index)])
        found = step
    yield from found
