"""Images out of the logs: base64 data stored once per content hash, put back on read.

A message can carry megabytes of base64 (nui's ``images[].data``, AG-UI's binary
content, ``data:`` URLs). Kept inline, every chunk holding one is a megabyte blob
that no diff or grep can use. Instead, each such string is decoded and stored as a
file named by the SHA-256 of its bytes in the log's ``blobs/`` folder, and the JSON
holds a short reference; a read puts the exact string back:

    sessions/claude-code/<id>/messages/000000.jsonl
        {"id":"m1","images":[{"id":"i1","mediaType":"image/png","data":"gitmem:blob:9f86d0....png"}]}
    sessions/claude-code/<id>/messages/blobs/9f86d0....png     (the PNG itself)

The folder belongs to one log (``<log>/blobs/``) so that a record stays
self-contained: deleting, restoring or diffing a session takes its images along,
and a replace that drops the last reference to an image drops its file. The same
image in two logs is two names for one git object, so it costs nothing twice.

What is taken out (at least :data:`MIN_CHARS` characters, and canonical base64, so
that encoding the bytes again gives the very same string):

- a string under the key ``data`` that is base64;
- any string that is a ``data:<type>;base64,<payload>`` URL.

References are ``gitmem:blob:<sha256><.ext>`` (``|<data-url header>,`` appended for a
data URL). Any other string that starts with ``gitmem:`` is stored with a
``gitmem:text:`` prefix, so no value a caller writes can be mistaken for a reference;
except a reference to a blob the log already holds, which a caller brings back after a
read that left images as references (a nui session over 4 MiB): it stays that image.

    values, files = extract([message])        # files: {"9f86...png": b"\\x89PNG..."}
    restore(values, read=files.get) == [message]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence, Set
from typing import Any

from gitmem.errors import GitmemError
from gitmem.git.snapshot import Snapshot
from gitmem.records.layout import NAMESPACE
from gitmem.records.strictjson import same_json

FOLDER = "blobs"
MIN_CHARS = 1024
REF = "gitmem:blob:"
TEXT = "gitmem:text:"
MARK = '"' + NAMESPACE
"""How a reference or an escaped string starts inside a JSON line: lines without it
need no restoring."""
MARK_BYTES = MARK.encode()

MEDIA_TYPE_KEYS = ("mediaType", "mimeType", "media_type", "mime_type", "contentType", "content_type")
_NAME = re.compile(r"[0-9a-f]{64}\.[a-z0-9]{1,10}")
_EXT = re.compile(r"\.[a-z0-9]{1,10}")
_CACHE_BYTES = 64 << 20
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')  # outside strings JSON has no quotes
_QUOTED_REF = '"' + REF
_REFERENCE = re.compile(re.escape(_QUOTED_REF) + f"({_NAME.pattern})\"")
_QUOTED_TEXT = '"' + TEXT


class MissingBlob(GitmemError, ValueError):
    """A reference whose file is not in the log's blob folder."""


def extract(value: Any, known: Set[str] = frozenset()) -> tuple[Any, dict[str, bytes]]:
    """``value`` with base64 payloads replaced by references, and ``{file name: bytes}``;
    a reference to one of the ``known`` file names is kept as it is.

    Parts of ``value`` that change are copied; the rest is shared, never modified.
    """
    files: dict[str, bytes] = {}
    return _extract(value, None, None, files, known), files


def restore(value: Any, read: Callable[[str], bytes | None]) -> Any:
    """``value`` with every reference replaced by its original string; ``read(name)``
    gives a blob file's bytes (None when missing, which raises :class:`MissingBlob`)."""
    if isinstance(value, str):
        if value.startswith(REF):
            return _resolve(value, read)
        return value[len(TEXT):] if value.startswith(TEXT) else value
    if isinstance(value, list):
        return [restore(item, read) for item in value]
    if isinstance(value, dict):
        return {key: restore(item, read) for key, item in value.items()}
    return value


def restore_json(text: str, read: Callable[[str], bytes | None] | None) -> str:
    """:func:`restore` on JSON text, without decoding it: each string that is a
    reference becomes the JSON of the original string, the rest is left as it is, so
    the result is the very text the original value encodes to. ``read=None`` leaves the
    references in (and undoes only the ``gitmem:text:`` prefixes)."""
    if MARK not in text:
        return text

    def put_back(match: re.Match) -> str:
        string = match[0]
        if string.startswith(_QUOTED_TEXT):
            return '"' + string[len(_QUOTED_TEXT):]
        if string.startswith(_QUOTED_REF) and read is not None:
            # base64 and the data URL header need no escaping beyond what the header has
            return '"' + _resolve(string[1:-1], read) + '"'
        return string

    return _JSON_STRING.sub(put_back, text)


def references(value: Any) -> set[str]:
    """The blob file names that ``value`` (as stored) refers to."""
    found: set[str] = set()
    _collect(value, found)
    return found


def named_in(text: str) -> set[str]:
    """The blob file names a line's text refers to, read from the text alone (a line that
    does not parse has no values to walk)."""
    return {match[1] for match in _REFERENCE.finditer(text)}


def is_blob_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def verify(name: str, data: bytes) -> bool:
    """True when ``data`` is what the file name ``name`` promises (its SHA-256)."""
    return hashlib.sha256(data).hexdigest() == name.split(".", 1)[0]


class Blobs:
    """The blob folder of one chunked log, as :class:`~gitmem.stores.jsonl.ChunkedJsonl` uses it."""

    def __init__(self, folder: str):
        self.folder = folder

    def names(self, snapshot: Snapshot) -> list[str]:
        return [name for name in snapshot.list(self.folder) if is_blob_name(name)]

    def prepare(self, snapshot: Snapshot, values: Sequence[Any],
                stored: Sequence[tuple[Sequence[str], Sequence[Any]]] = (), *,
                prune: bool = False, keep: Set[str] = frozenset()) -> tuple[list[Any], dict[str, bytes | None]]:
        """``values`` as they are stored, and the blob file changes that go with them.

        ``stored`` holds the log's current chunks as ``(lines, values)``. Values equal to
        the stored ones at their position, whose lines hold no reference, are taken as
        they are without being walked; a whole such chunk is checked with one list
        comparison. With ``prune``, files no value refers to any more are removed (a
        replace), but those named in ``keep``; without it (an append) files are only added.
        """
        out: list[Any] = []
        files: dict[str, bytes] = {}
        referenced: set[str] = set()
        present = set(self.names(snapshot))

        def take(value: Any) -> None:
            value = _extract(value, None, None, files, present)
            if prune:
                _collect(value, referenced)
            out.append(value)

        pos = 0
        for lines, stored_values in stored:
            part = list(values[pos:pos + len(stored_values)])
            pos += len(part)
            # Equal values are taken as stored, so the caller's comparison of chunks
            # meets the very same objects and does not compare them deeply again.
            if MARK not in "\n".join(lines) and same_json(part, stored_values):
                out.extend(stored_values)
                continue
            for line, stored_value, value in zip(lines, stored_values, part, strict=False):
                if MARK not in line and same_json(value, stored_value):
                    out.append(stored_value)
                else:
                    take(value)
        for value in values[pos:]:
            take(value)
        changes: dict[str, bytes | None] = {
            f"{self.folder}/{name}": data for name, data in files.items() if name not in present}
        if prune:
            changes.update({f"{self.folder}/{name}": None for name in present - referenced - keep})
        return out, changes

    def restore_json(self, snapshot: Snapshot, text: str, *, keep_references: bool = False) -> str:
        """JSON text with its references put back (see :func:`restore_json`)."""
        if MARK not in text:
            return text
        return restore_json(text, None if keep_references else
                            lambda name: snapshot.read(f"{self.folder}/{name}"))

    def delete(self, snapshot: Snapshot) -> dict[str, None]:
        return {f"{self.folder}/{name}": None for name in snapshot.list(self.folder)}


# -- the walk -----------------------------------------------------------------------


def _extract(value: Any, key: str | None, media_type: str | None, files: dict[str, bytes],
             known: Set[str]) -> Any:
    if isinstance(value, str):
        return _extract_string(value, key, media_type, files, known)
    if isinstance(value, list):
        new = [_extract(item, None, None, files, known) for item in value]
        return new if any(a is not b for a, b in zip(new, value, strict=True)) else value
    if isinstance(value, dict):
        sibling_type = next((value[k] for k in MEDIA_TYPE_KEYS if isinstance(value.get(k), str)), None)
        new_dict = {k: _extract(v, k, sibling_type, files, known) for k, v in value.items()}
        return new_dict if any(new_dict[k] is not v for k, v in value.items()) else value
    return value


def _extract_string(text: str, key: str | None, media_type: str | None,
                    files: dict[str, bytes], known: Set[str]) -> str:
    if len(text) >= MIN_CHARS:
        header, payload = "", text
        if text.startswith("data:"):
            head, comma, rest = text.partition(",")
            if comma and head.endswith(";base64"):
                header, payload = head + ",", rest
                media_type = head[5:].split(";", 1)[0] or media_type
        if header or key == "data":
            found = _blob_of(payload, media_type)
            if found is not None:
                name, data = found
                files[name] = data
                return f"{REF}{name}|{header}" if header else f"{REF}{name}"
    if not text.startswith(NAMESPACE):
        return text
    if text.startswith(REF) and text[len(REF):].partition("|")[0] in known:
        return text  # a reference handed out by a read, coming back
    return TEXT + text


def _blob_of(payload: str, media_type: str | None) -> tuple[str, bytes] | None:
    """``(file name, bytes)`` of canonical base64 ``payload``, else None (kept inline)."""
    cached = _cache.get(payload, media_type)
    if cached is not None:
        return cached
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if base64.b64encode(data) != payload.encode("ascii"):
        return None  # would not come back as the same string
    found = (hashlib.sha256(data).hexdigest() + _extension(media_type), data)
    _cache.put(payload, media_type, found)
    return found


def _extension(media_type: str | None) -> str:
    ext = None
    if media_type:
        ext = mimetypes.guess_extension(media_type.split(";", 1)[0].strip().lower(), strict=False)
    return ext if ext and _EXT.fullmatch(ext) else ".bin"


def _resolve(ref: str, read: Callable[[str], bytes | None]) -> str:
    name, _, header = ref[len(REF):].partition("|")
    data = read(name) if is_blob_name(name) else None
    if data is None:
        raise MissingBlob(f"blob {name!r} is missing from the log's {FOLDER}/ folder")
    return header + base64.b64encode(data).decode("ascii")


def _collect(value: Any, found: set[str]) -> None:
    if isinstance(value, str):
        if value.startswith(REF):
            found.add(value[len(REF):].partition("|")[0])
    elif isinstance(value, list):
        for item in value:
            _collect(item, found)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, found)


class _ExtractCache:
    """Recently seen payloads and their blobs, so that nui's full-list rewrites do not
    decode and hash the same images on every write (bounded by the bytes held)."""

    def __init__(self, max_bytes: int):
        self._max = max_bytes
        self._size = 0
        self._entries: OrderedDict[tuple[str, str | None], tuple[str, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, payload: str, media_type: str | None) -> tuple[str, bytes] | None:
        with self._lock:
            found = self._entries.get((payload, media_type))
            if found is not None:
                self._entries.move_to_end((payload, media_type))
            return found

    def put(self, payload: str, media_type: str | None, found: tuple[str, bytes]) -> None:
        size = len(payload) + len(found[1])
        if size > self._max // 4:
            return
        with self._lock:
            if (payload, media_type) in self._entries:
                return
            self._entries[(payload, media_type)] = found
            self._size += size
            while self._size > self._max:
                (old, _), (_, data) = self._entries.popitem(last=False)
                self._size -= len(old) + len(data)


_cache = _ExtractCache(_CACHE_BYTES)
