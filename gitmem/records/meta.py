"""Record metadata: the ``meta.json`` files of sessions and threads, and the trailers that
name the record in each commit of a write.

A metadata file is a small JSON object, indented for people and diffs, UTF-8 (a lone
surrogate from an id is escaped instead). Used by the stores, the hand-edit checks and
the sync merge alike.

    meta_bytes({"agentId": "a", "createdAt": now_iso()})   # b'{\n  "agentId": "a", ...}\n'
    parse_meta(b'{"agentId": "a"}')                          # {"agentId": "a"}
    read_meta(snapshot, "threads/t1")                        # threads/t1/meta.json, or None
    record_trailers("threads.append", "thread:t1", {"Gitmem-Handler": "h"})
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from gitmem.errors import BrokenFile
from gitmem.records import layout, strictjson
from gitmem.records.ids import printable

if TYPE_CHECKING:
    from gitmem.git.snapshot import Snapshot


def now_iso() -> str:
    """The current time as RFC 3339 in UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_meta(data: bytes) -> dict[str, Any]:
    """The metadata object in ``data``; raises ``ValueError`` when it is not a JSON object."""
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("metadata is not a JSON object")
    return value


def meta_bytes(meta: Mapping[str, Any]) -> bytes:
    """The bytes of a metadata file holding ``meta``."""
    text = strictjson.dumps(meta, ensure_ascii=False, indent=2) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the file stays UTF-8
        return (strictjson.dumps(meta, indent=2) + "\n").encode("ascii")


def read_meta(snapshot: Snapshot, folder: str) -> dict[str, Any] | None:
    """The metadata of the record in ``folder`` (a fresh dict); None when it has none.
    Raises :class:`~gitmem.errors.BrokenFile` naming the file and line when it does not parse."""
    path = f"{folder}/{layout.META}"
    try:
        meta = snapshot.read_parsed(path, parse_meta)
    except ValueError as exc:
        raise broken_meta(path, exc) from None
    return dict(meta) if meta is not None else None


def broken_meta(path: str, error: ValueError) -> BrokenFile:
    """:class:`~gitmem.errors.BrokenFile` for metadata file ``path``, which :func:`parse_meta`
    refused with ``error``."""
    if isinstance(error, json.JSONDecodeError):
        return BrokenFile(path, error.lineno, f"{error.msg} (column {error.colno})")
    if isinstance(error, UnicodeDecodeError):
        return BrokenFile(path, error.object.count(b"\n", 0, error.start) + 1, "not UTF-8")
    return BrokenFile(path, None, str(error))


def record_trailers(op: str, record: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The trailers of a store's commit: ``Gitmem-Op``, the caller's ``extra`` (a handler
    id), and ``Gitmem-Id`` naming the record (``"session:pi/s1"``; None: no single one)."""
    found = {"Gitmem-Op": op, **(extra or {})}
    if record is not None:
        found["Gitmem-Id"] = printable(record)  # one line, no escape sequence: as listings show it
    return found
