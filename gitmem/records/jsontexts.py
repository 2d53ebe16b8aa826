"""JSON values carried as their texts: the fast path of log reads and writes.

A read of a log splices the stored JSONL lines into one JSON array without decoding
and encoding them again: committed chunks hold one valid JSON value per non-blank
line (gitmem writes them so, and the hand-edit check commits no other). A write of
values received as JSON hands the store their texts (:class:`JsonTexts`), parsed only
where they differ from what is stored. Both the stores and the protocol import this
module; it imports neither.

    jsonl_run(b'{"a":1}\\n{"b":2}\\n')            # b'{"a":1},{"b":2}'
    b"".join(json_array([b'{"a":1},{"b":2}', b"3"]))  # b'[{"a":1},{"b":2},3]'
    JsonTexts([b'{"role":"user"}'], json.loads)   # what gitmem serve hands SessionStore.write
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_VALUE_START = frozenset(b'[{"-0123456789tfn')
_ODD_LINE = re.compile(rb'\n[^\[{"\-0-9tfn]')  # starts with a literal: a quick scan


def _written_lines(data: bytes) -> bytes | None:
    """``data`` without its last newline when its lines are as gitmem writes them (each a
    value with nothing before it, no carriage return, no blank line); else None."""
    body = data.rstrip(b"\n")
    if not body or (body[0] in _VALUE_START and b"\r" not in body and _ODD_LINE.search(body) is None):
        return body
    return None


def jsonl_values(data: bytes) -> list[bytes]:
    """The texts of the values in a committed JSONL text, in order: blank lines (whitespace
    of any kind) left out, the JSON whitespace around each value (a CR of CRLF) cut off."""
    body = _written_lines(data)
    if body is not None:
        return body.split(b"\n") if body else []
    return [line.strip(" \t\r").encode() for line in data.decode("utf-8").split("\n") if line.strip()]


def jsonl_run(data: bytes) -> bytes:
    """The values of a committed JSONL text joined by commas (see :func:`jsonl_values`):
    one run for :func:`json_array`, made without decoding the text."""
    run = written_run(data)
    return run if run is not None else b",".join(jsonl_values(data))


def written_run(data: bytes, known: bool = False) -> bytes | None:
    """What :func:`jsonl_run` gives of ``data`` when its lines are as gitmem writes them,
    else None. ``known``: a call before said so of these very bytes (a reader remembers it
    by blob id), so the lines are not looked at again; the run is then a copy, no more."""
    body = data.rstrip(b"\n") if known else _written_lines(data)
    return body.replace(b"\n", b",") if body is not None else None


def json_array(runs: Iterable[bytes]) -> list[bytes]:
    """The pieces of the JSON array of ``runs`` (each the texts of one or more values joined
    by commas; an empty one adds none), to ``b"".join`` or hand to an answer as they are,
    which then copies each run once."""
    pieces = [b"["]
    for run in runs:
        if run:
            pieces += (run, b",")
    if len(pieces) > 1:
        pieces.pop()  # the last comma
    pieces.append(b"]")
    return pieces


class JsonTexts:
    """Values given as their JSON texts (bytes-like, one value each), parsed only where needed.

    A caller that received the values as JSON (``gitmem serve`` gets a session's whole
    message list on every write) passes the texts: a store keeps a stored chunk whose
    lines are these very texts (as gitmem or as Go writes them) as it is, without parsing
    them or comparing values, and parses the others with ``parse``.

        sessions.write("pi", "s1", JsonTexts([b'{"role":"user"}', b'{"role":"assistant"}']))
    """

    def __init__(self, texts: Sequence[Any], parse: Callable[[Any], Any] = json.loads):
        self.texts = texts
        self.parse = parse

    def __len__(self) -> int:
        return len(self.texts)

    def values(self, chunks: Sequence[tuple[Any, tuple[bytes, bytes]]]) -> list[Any]:
        """The values, lined up with ``chunks`` (each a parsed chunk with its ``lines`` and
        ``values``, and its two stored forms, ``jsonl.chunk_texts``) as a log's replace lines
        them up: a chunk whose lines are the texts at its place gives its stored values."""
        values: list[Any] = []
        pos = 0
        for chunk, stored_texts in chunks:
            part = self.texts[pos:pos + len(chunk.lines)]
            pos += len(part)
            if len(part) == len(chunk.lines) and b"\n".join(part) in stored_texts:  # either form
                values.extend(chunk.values)
            else:
                values.extend(map(self.parse, part))
        values.extend(map(self.parse, self.texts[pos:]))
        return values
