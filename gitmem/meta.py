"""Record metadata files (``meta.json`` of sessions and threads): how they are read and written.

A small JSON object, indented for people and diffs, UTF-8 (a lone surrogate from an id is
escaped instead). Used by the stores, the hand-edit checks and the sync merge alike.

    meta_bytes({"agentId": "a", "createdAt": now_iso()})   # b'{\n  "agentId": "a", ...}\n'
    parse_meta(b'{"agentId": "a"}')                          # {"agentId": "a"}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from gitmem import strictjson


def now_iso() -> str:
    """The current time as RFC 3339 in UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_meta(data: bytes) -> dict[str, Any]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("metadata is not a JSON object")
    return value


def meta_bytes(meta: Mapping[str, Any]) -> bytes:
    text = strictjson.dumps(meta, ensure_ascii=False, indent=2) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the file stays UTF-8
        return (strictjson.dumps(meta, indent=2) + "\n").encode("ascii")
