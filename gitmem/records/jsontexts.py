"""JSON values carried as their texts: the fast path of log reads and writes.

A read of a log splices the stored JSONL lines into one JSON array without decoding
and encoding them again: gitmem writes one valid JSON value per line, and the hand-edit
check commits no other, but plain git commits anything, so the lines are checked at
once by msgspec (cached by blob id) and a line that is not one value is left out
(:class:`BrokenLine`: the stores keep it in the file for a person to fix). A write of
values received as JSON hands the store their texts (:class:`JsonTexts`), parsed only
where they differ from what is stored. Both the stores and the protocol import this
module; it imports neither.

    checked_run(b'{"a":1}\\n{broken\\n')         # (b'{"a":1}', (BrokenLine(2, 1, ...),))
    b"".join(json_array([b'{"a":1},{"b":2}', b"3"]))  # b'[{"a":1},{"b":2},3]'
    JsonTexts([b'{"role":"user"}'], json.loads)   # what gitmem serve hands SessionStore.write
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, NamedTuple, overload

_VALUE_START = frozenset(b'[{"-0123456789tfn')
_ODD_LINE = re.compile(rb'\n[^\[{"\-0-9tfn]')  # starts with a literal: a quick scan


def _written_lines(data: bytes) -> bytes | None:
    """``data`` without its last newline when its lines are as gitmem writes them (each a
    value with nothing before it, no carriage return, no blank line); else None."""
    body = data.rstrip(b"\n")
    if not body or (body[0] in _VALUE_START and b"\r" not in body and _ODD_LINE.search(body) is None):
        return body
    return None


@overload
def written_run(data: bytes, known: Literal[True]) -> bytes: ...


@overload
def written_run(data: bytes, known: bool = False) -> bytes | None: ...


def written_run(data: bytes, known: bool = False) -> bytes | None:
    """What :func:`checked_run` gives of ``data`` when its lines are as gitmem writes them
    (and hold one JSON value each: checked by the caller), else None. ``known``: a call before said so of these very bytes (a reader remembers it
    by blob id), so the lines are not looked at again; the run is then a copy, no more."""
    body = data.rstrip(b"\n") if known else _written_lines(data)
    return body.replace(b"\n", b",") if body is not None else None


class BrokenLine(NamedTuple):
    """A line of a committed JSONL text that is not one JSON value (plain git let it in):
    reads leave it out, and a log's writes keep it where it is, for a person to fix."""

    number: int  # the line's number in the file, as an editor numbers them
    after: int  # how many readable lines come before it
    text: str
    reason: str


class CheckedLines(NamedTuple):
    """The texts of the values in a committed JSONL text, and its lines that are not one."""

    texts: list[bytes]
    broken: tuple[BrokenLine, ...] = ()


def checked_values(data: bytes) -> CheckedLines:
    """The texts of the values in a committed JSONL text, in order (blank lines left out,
    the JSON whitespace around each value cut off), less the lines that are not one JSON
    value in UTF-8 (see :class:`BrokenLine`). The lines are checked at once by msgspec (about the cost of
    splitting them); only a text it refuses is read line by line, by the json module, which
    also takes what msgspec refuses and JSON allows (a lone surrogate's escape)."""
    body = _written_lines(data)
    if body is not None:
        texts = body.split(b"\n") if body else []
        if sound_run(body.replace(b"\n", b","), len(texts)):
            return CheckedLines(texts)
    return _sorted_lines(data)


def checked_run(data: bytes) -> tuple[bytes, tuple[BrokenLine, ...]]:
    """The texts of :func:`checked_values` joined by commas (one run for :func:`json_array`,
    made without decoding a text as gitmem writes them), and the broken lines."""
    body = _written_lines(data)
    if body is not None:
        run = body.replace(b"\n", b",")
        if sound_run(run, body.count(b"\n") + 1 if body else 0):
            return run, ()
    texts, broken = checked_values(data)
    return b",".join(texts), broken


def sound_run(run: bytes, lines: int) -> bool:
    """True when ``run``, ``lines`` lines joined by commas, is one JSON value a line, in
    UTF-8. False may be wrong (msgspec refuses a lone surrogate's escape, which JSON
    allows): :func:`checked_values` then reads the lines one by one."""
    global _raw_values
    if _raw_values is None:
        import msgspec  # only a log's read loads it
        _raw_values = msgspec.json.Decoder(list[msgspec.Raw]).decode
    try:
        run.decode("utf-8")
        return len(_raw_values(b"[" + run + b"]")) == lines
    except ValueError:  # msgspec.DecodeError and UnicodeDecodeError are ValueErrors
        return False


_raw_values: Callable[[bytes], list[Any]] | None = None


def _sorted_lines(data: bytes) -> CheckedLines:
    """:func:`checked_values` line by line: blank lines (whitespace of any kind) left out,
    the JSON whitespace around each value (a CR of CRLF) cut off."""
    from gitmem.records import strictjson  # the slow path only
    texts: list[bytes] = []
    broken: list[BrokenLine] = []
    # undecodable bytes kept as they are: a broken line is written back as it was
    for number, line in enumerate(data.decode("utf-8", "surrogateescape").split("\n"), 1):
        if not line.strip():
            continue
        text = line.strip(" \t\r")
        try:
            encoded = text.encode("utf-8")
            strictjson.loads(text)
        except UnicodeEncodeError:
            reason = "not UTF-8"
        except ValueError as exc:
            reason = f"{exc.msg} (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else str(exc)
        else:
            texts.append(encoded)
            continue
        broken.append(BrokenLine(number, len(texts), line, reason))
    return CheckedLines(texts, tuple(broken))


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
