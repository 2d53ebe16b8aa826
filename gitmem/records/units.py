"""What a record is made of, as search sees it: a memory's blocks, a log's messages and events.

A memory is cut into blocks (what ``append`` joins with a blank line), a session into
its messages, a thread into its events and messages; a store item is one unit. Each
unit's text is what a person would search for (a JSON line's strings, less ids, types
and image data).

    units_of("block", b"Prefers short answers.\n\nChecks types first.\n")
    # ['Prefers short answers.', 'Checks types first.']
    unit_text("message", '{"role": "user", "content": "hi"}')   # 'hi'
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator

from gitmem.records import layout

try:  # hashlib's blake2b is _blake2's, and importing hashlib loads OpenSSL: 3 ms a warm search
    from _blake2 import blake2b
except ImportError:  # an interpreter without it
    from hashlib import blake2b

BLANK_LINES = re.compile(r"\n(?:[ \t]*\n)+")  # between two blocks of a memory
# characters at most in a unit search ranks, and in a text FTS5 makes a snippet of: its
# snippet() costs the square of its text's length (a 2 MB block: 20 s a search)
PART_CHARS = 4096


def blocks(content: str) -> list[str]:
    """The paragraphs of a markdown memory, as ``append`` separates them."""
    content = content.strip("\n")
    return [block.rstrip() for block in BLANK_LINES.split(content)] if content.strip() else []


def parts(text: str, size: int = PART_CHARS) -> list[str]:
    """``text`` cut into parts of at most ``size`` characters, after a line's end where
    one lies in reach, else after a space, else anywhere; ``[text]`` when it fits."""
    if len(text) <= size:
        return [text]
    found, start = [], 0
    while len(text) - start > size:
        end = start + size
        cut = text.rfind("\n", start + 1, end) + 1 or text.rfind(" ", start + 1, end) + 1 or end
        found.append(text[start:cut])
        start = cut
    found.append(text[start:])
    return [part for part in found if part.strip()]


def search_blocks(content: str) -> list[str]:
    """The units search makes of a memory: its :func:`blocks`, one longer than
    PART_CHARS (a text pasted without blank lines) cut into :func:`parts`."""
    return [part for block in blocks(content) for part in parts(block)]


_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
LONG_RUN = 200  # characters of base64 without a break: image data, not words
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{%d,}={0,2}" % LONG_RUN)
_STRUCTURE_KEYS = {"type", "role", "id", "timestamp", "createdAt", "updatedAt", "mediaType",
                   "mimeType"}


def unit_kind(path: str) -> tuple[str, str] | None:
    """(record path, unit) for a file whose text the index holds; None for others
    (metadata, images)."""
    record = layout.record_path(path)
    if record is None:
        return None
    if record == path:  # a memory (user, an agent's, or a note, whatever its name) or an item
        return record, "item" if record.startswith(layout.STORE + "/") else "block"
    rest = path[len(record) + 1:].split("/")
    if len(rest) != 2 or not rest[1].endswith(layout.JSONL_SUFFIX):
        return None
    if rest[0] == layout.MESSAGES:
        return record, "message"
    if rest[0] == layout.EVENTS and record.startswith(layout.THREADS + "/"):
        return record, "event"
    return None


def record_kind(record: str) -> str:
    return "memory" if record.startswith(layout.MEMORY + "/") else \
        "session" if record.startswith(layout.SESSIONS + "/") else \
        "store" if record.startswith(layout.STORE + "/") else "thread"


def scrub(text: str) -> str:
    """``text`` without image data: ``data:`` URLs and long base64 runs."""
    if "base64," in text:
        text = _DATA_URL.sub("", text)
    if len(max(text.split(), key=len, default="")) >= LONG_RUN:
        text = _BASE64_RUN.sub("", text)
    return text


def line_text(line: str) -> str:
    """The text of one JSONL line (a message or event): its strings, less ids, types
    and image data."""
    try:
        value = json.loads(line)
    except ValueError:
        return scrub(line)
    return value_text(value)


def value_text(value: object) -> str:
    """The text of a message or event as JSON gives it (:func:`line_text`)."""
    return scrub("\n".join(_strings(value, None)))


def item_text(data: str | bytes) -> str:
    """What search finds a store item by, in its file content ``data`` (see
    :mod:`gitmem.records.items`); the file's own text, less image data, when it is not an
    item's file."""
    from gitmem.records.items import parse_item  # only a store item needs it (and typing): not every search
    try:
        item = parse_item(data)
    except ValueError:
        return value_text(data if isinstance(data, str) else data.decode("utf-8", "replace"))
    return indexed_text(item.value, item.index)


def indexed_text(value: dict, index: bool | list[str] | None) -> str:
    """What search reads of an item's ``value`` by its ``index``: every string (None), none
    (False), or the strings at those field paths."""
    from gitmem.records.items import values_at
    if not isinstance(index, list):
        return "" if index is False else value_text(value)
    return "\n".join(text for path in index for found in values_at(value, path)
                     if (text := value_text(found)))


def unit_date(value: object) -> str | None:
    """A message's or event's own date: its createdAt, else its timestamp (text as it
    is, RFC 3339 say; a number as milliseconds since the epoch, in UTC). None: none."""
    if not isinstance(value, dict):
        return None
    for key in ("createdAt", "timestamp"):
        found = value.get(key)
        if isinstance(found, str) and found:
            return found
        if isinstance(found, (int, float)) and not isinstance(found, bool):
            from datetime import datetime, timezone  # only a number needs it
            try:
                return datetime.fromtimestamp(found / 1000, timezone.utc).isoformat(timespec="seconds")
            except (OverflowError, OSError, ValueError):
                return None
    return None


def _strings(value: object, key: str | None) -> Iterator[str]:
    if isinstance(value, str):
        if key in _STRUCTURE_KEYS or (key or "").endswith("Id") or value.startswith("gitmem:"):
            return
        if key == "data" and _BASE64.fullmatch(value) is not None:
            return
        yield value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)


def units_of(unit: str, data: bytes) -> list[str]:
    """The units (texts) of file content ``data`` holding units of kind ``unit``."""
    return [unit_text(unit, piece) for piece in pieces(unit, data)]


def pieces(unit: str, data: bytes) -> list[str]:
    """The pieces of file content ``data`` that hold one unit each: a memory's blocks
    (:func:`search_blocks`), a log's lines, a store item's whole file (:func:`unit_text`
    makes a piece a unit)."""
    text = data.decode("utf-8", "replace")
    if unit == "block":
        return search_blocks(text)
    if unit == "item":
        return [text] if text.strip() else []
    return [line for line in text.splitlines() if line.strip()]


def unit_text(unit: str, piece: str) -> str:
    """The text of a unit of kind ``unit`` held in ``piece`` (:func:`pieces`)."""
    if unit == "item":
        return item_text(piece)
    return scrub(piece) if unit == "block" else line_text(piece)


def unit_changes(unit: str, old: bytes | None, new: bytes | None) -> tuple[list[str], list[str]]:
    """(removed, added) unit texts from file content ``old`` to ``new``. An append
    (``new`` starts with ``old``) is cut after the last unit ``old`` surely completes."""
    old, new = old or b"", new or b""
    cut = 0
    if old and new.startswith(old) and unit != "item":  # an item's file is one unit
        cut = max(old.rfind(b"\n\n"), 0) if unit == "block" else old.rfind(b"\n") + 1
    gone, came = units_of(unit, old[cut:]), units_of(unit, new[cut:])
    added = came[len(gone):]
    distinct = set(added)
    if came[:len(gone)] == gone and len(distinct) == len(added) and distinct.isdisjoint(gone):
        return [], added  # new texts after the old ones: what the counts below give, sooner
    gone_counts, came_counts = Counter(gone), Counter(came)
    return list((gone_counts - came_counts).elements()), list((came_counts - gone_counts).elements())


def befores_and_dates(unit: str, data: bytes, added: list[str]) -> list[tuple[str, str | None]]:
    """For each text of ``added`` (units of file content ``data``, as :func:`unit_changes`
    gives them), the text of the unit before it in ``data`` ("" for the file's first) and
    its own date (:func:`unit_date`): of a log's messages and events; ("", None) for blocks
    and items, which stand alone. Read from the end, so an append's new lines cost only those."""
    if unit not in ("message", "event") or not added:
        return [("", None)] * len(added)
    wanted = Counter(added)
    lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    found: dict[str, list[tuple[str, str | None]]] = {}  # text: of its wanted occurrences, last first
    text = unit_text(unit, lines[-1]) if lines else ""
    for i in range(len(lines) - 1, -1, -1):
        before = unit_text(unit, lines[i - 1]) if i else ""
        if wanted[text]:
            wanted[text] -= 1
            found.setdefault(text, []).append((before, _line_date(lines[i])))
            if not +wanted:
                break
        text = before
    return [found[text].pop() if found.get(text) else ("", None) for text in added]


def _line_date(line: str) -> str | None:
    try:
        return unit_date(json.loads(line))
    except ValueError:
        return None


def unit_key(unit: str, text: str) -> int:
    """A unit's text as a number, to find it again among a file's units."""
    digest = blake2b(f"{unit}\0{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)
