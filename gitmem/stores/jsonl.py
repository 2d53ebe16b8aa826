"""Chunked JSONL: a log of JSON values split into numbered files of bounded size.

git stores whole blobs, so one ever-growing file would be rewritten (and stored
again) on every append. A chunked log keeps files at most :data:`MAX_LINES` lines or
:data:`MAX_BYTES` bytes: an append touches only the last chunk (or starts a new one),
and a replace rewrites only the chunks whose lines changed.

    log = ChunkedJsonl("threads/t1/events")
    changes = log.append(engine.snapshot(), [{"type": "RUN_STARTED"}])
    engine.commit(changes, "threads: append 1 event to t1")
    log.read(engine.snapshot())   # [{"type": "RUN_STARTED"}]
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from gitmem.errors import InvalidInput
from gitmem.git.base import T
from gitmem.git.snapshot import Snapshot
from gitmem.records import strictjson
from gitmem.records.jsontexts import (BrokenLine, JsonTexts, checked_run, checked_values, json_array,
                                      sound_run)
from gitmem.records.layout import JSONL_SUFFIX as SUFFIX, chunk_files
from gitmem.records.strictjson import same_json
from gitmem.stores import blobs as blob_refs

log = logging.getLogger("gitmem.jsonl")

MAX_LINES = 1000
MAX_BYTES = 64 * 1024


class Chunk(NamedTuple):
    """One chunk file as stored: its readable lines (without newlines), their parsed values,
    and the lines that are not one JSON value (plain git let them in), kept aside."""

    lines: tuple[str, ...]
    values: list[Any]  # internal: compared against, never handed out
    broken: tuple[BrokenLine, ...] = ()

    def written(self, lines: Sequence[str] | None = None) -> list[str]:
        """``lines`` (by default the chunk's readable ones) with the broken lines put back
        where they were: a log's writes never take a line out that a person must fix."""
        found = list(self.lines if lines is None else lines)
        for line in reversed(self.broken):  # the last first: the places before it stay put
            found.insert(min(line.after, len(found)), line.text)
        return found


def objects(name: str, values: Sequence[Any] | None) -> list[Any]:
    """``values`` as a list, each a JSON object (a dict); else :class:`~gitmem.errors.InvalidInput`
    naming the caller's parameter ``name`` and the item, as the wire refuses it."""
    if values is not None and (isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence)):
        raise InvalidInput(f"{name} must be a list of JSON objects, not {type(values).__name__}")
    found = list(values or [])
    for i, value in enumerate(found):
        if not isinstance(value, Mapping):
            raise InvalidInput(f"{name}[{i}] must be a JSON object, not {type(value).__name__}")
    return found


def dumps(value: Any) -> str:
    """One JSONL line for ``value``: compact, UTF-8 readable, escaped only where it must be.
    NaN and Infinity are refused (:class:`~gitmem.records.strictjson.NonFiniteNumber`)."""
    line = strictjson.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate cannot be written as UTF-8
        line = strictjson.dumps(value, separators=(",", ":"))
    return line


def chunk_lines(data: bytes) -> tuple[str, ...]:
    """A chunk file's lines, not parsed (blank lines left out; bytes that are not UTF-8
    kept as they are, to be written back as they were)."""
    return tuple(line for line in data.decode("utf-8", "surrogateescape").split("\n") if line.strip())


def read_chunk(data: bytes) -> Chunk:
    """A chunk file, parsed; a line that is not one JSON value (NaN and Infinity are not)
    goes to :attr:`Chunk.broken`, with its line number and why."""
    try:
        lines = tuple(line for line in data.decode("utf-8").split("\n") if line.strip())
        values = strictjson.loads("[" + ",".join(lines) + "]")
        if len(values) == len(lines):  # a line like `1,2` parses into two values when joined
            return Chunk(lines, values)
    except ValueError:  # UnicodeDecodeError too: a byte that is not UTF-8
        pass
    texts, broken = checked_values(data)  # line by line: which lines do not parse, and why
    return Chunk(tuple(text.decode("utf-8") for text in texts), [strictjson.loads(text) for text in texts],
                 broken)


def parse_chunk(data: bytes) -> Chunk:
    """Parse a chunk file; raises ``ValueError`` naming the first line that does not parse."""
    chunk = read_chunk(data)
    if chunk.broken:
        first = chunk.broken[0]
        raise ValueError(f"line {first.number}: {first.reason}")
    return chunk


_GO_ESCAPES = tuple((char.encode(), f"\\u{ord(char):04x}".encode()) for char in "<>&\u2028\u2029")


def chunk_texts(data: bytes) -> tuple[bytes, bytes]:
    """A chunk file's lines as one text, as stored and as Go's encoder (nui's) writes them:
    with ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, which occur only inside strings."""
    lines = chunk_lines(data)
    try:
        text = "\n".join(lines).encode()
        sound = sound_run(text.replace(b"\n", b","), len(lines))
    except UnicodeEncodeError:
        sound = False
    if not sound:  # the readable lines only, as the stores line values up with them
        text = "\n".join(read_chunk(data).lines).encode()
    escaped = text
    for char, escape in _GO_ESCAPES:
        escaped = escaped.replace(char, escape)
    return text, escaped


class Fitted(NamedTuple):
    """A log read to fit a size: the JSON array's text, how many of the first values it
    leaves out, and how many of its values hold images as blob references."""

    text: bytes
    left_out: int
    references: int


_LINE_SEPARATORS = ("\u2028".encode(), "\u2029".encode())


def _wire_size(line: bytes) -> int:
    """The bytes ``line`` takes in an answer line, whose encoder escapes U+2028 and U+2029."""
    if b"\xe2\x80" not in line:
        return len(line)
    return len(line) + 3 * sum(line.count(separator) for separator in _LINE_SEPARATORS)


class ChunkedJsonl:
    """A JSONL log stored as ``<folder>/000000.jsonl``, ``000001.jsonl``, ...

    With ``blobs=True`` base64 images in the values are kept once per content hash in
    ``<folder>/blobs/`` and put back on read (see :mod:`gitmem.stores.blobs`).
    """

    def __init__(self, folder: str, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES,
                 blobs: bool = False):
        self.folder = folder
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.blobs = blob_refs.Blobs(f"{folder}/{blob_refs.FOLDER}") if blobs else None

    def chunk_paths(self, snapshot: Snapshot) -> list[str]:
        """The log's chunk files, in order (a folder that a person named like one is none)."""
        paths = chunk_files(self.folder, (f"{self.folder}/{name}" for name in snapshot.list(self.folder)))
        return [path for path in paths if snapshot.blob_id(path) is not None]

    def chunks(self, snapshot: Snapshot) -> list[tuple[str, Chunk]]:
        return [(path, _listed_chunk(snapshot, path, read_chunk)) for path in self.chunk_paths(snapshot)]

    def read(self, snapshot: Snapshot) -> list[Any]:
        """Every value in the log, in order (fresh objects the caller may change)."""
        return json.loads(b"".join(self.read_json(snapshot)))

    def read_json(self, snapshot: Snapshot) -> list[bytes]:
        """The log as one JSON array in UTF-8, spliced from the stored lines and left in
        pieces (``b"".join`` them): an answer then copies a megabyte once, and each fresh
        megabyte costs a just-started process page faults."""
        runs = []
        for path in self.chunk_paths(snapshot):
            run, broken = _listed_chunk(snapshot, path, checked_run)
            if broken:
                _say_broken(snapshot, path, broken)
            if self.blobs is not None and blob_refs.MARK_BYTES in run:  # only its values with images
                run = b",".join(self._restored(snapshot, _listed_chunk(snapshot, path, checked_values).texts))
            runs.append(run)
        return json_array(runs)

    def restore_json(self, snapshot: Snapshot, text: str) -> str:
        """JSON text taken from a chunk (a line, or a value from it encoded again) with its
        blob references put back; ``text`` itself when the log keeps no blobs."""
        return self.blobs.restore_json(snapshot, text) if self.blobs is not None else text

    def read_json_within(self, snapshot: Snapshot, max_bytes: int) -> Fitted:
        """The log as the UTF-8 text of one JSON array of at most ``max_bytes`` bytes as a
        JSON-RPC answer writes it (U+2028 and U+2029 escaped), losing nothing that the
        writer of the next full list would not give back:

        - the whole log, if it fits;
        - else with images left as their blob references (:mod:`gitmem.stores.blobs`),
          the newest ones put back as far as they fit;
        - else the newest values that fit, with references; ``left_out`` says how many
          of the first values are not in the text.
        """
        lines = self._value_texts(snapshot)
        whole = self._restored(snapshot, lines)
        sizes = list(map(_wire_size, whole))
        if sum(sizes) + max(len(lines) - 1, 0) + 2 <= max_bytes:
            return Fitted(_joined_array(whole), 0, 0)
        sent = self._restored(snapshot, lines, keep_references=True)
        sent_sizes = list(map(_wire_size, sent))
        total = sum(sent_sizes) + max(len(lines) - 1, 0) + 2
        if total <= max_bytes:
            for i in reversed(range(len(sent))):  # the newest images first, as far as they fit
                if sent[i] is not whole[i] and total + sizes[i] - sent_sizes[i] <= max_bytes:
                    total += sizes[i] - sent_sizes[i]
                    sent[i] = whole[i]
            return Fitted(_joined_array(sent), 0, sum(a is not b for a, b in zip(sent, whole, strict=True)))
        start, total = len(sent), 2
        while start and total + sent_sizes[start - 1] + (start < len(sent)) <= max_bytes:
            start -= 1
            total += sent_sizes[start] + (start < len(sent) - 1)
        kept = sent[start:]
        return Fitted(_joined_array(kept), start, sum(a is not b for a, b in zip(kept, whole[start:], strict=True)))

    def sent_lines(self, snapshot: Snapshot, start: int, stop: int) -> list[bytes]:
        """Lines ``start`` to ``stop`` as :meth:`read_json_within` hands them out with
        references left in: as written, images aside."""
        return self._restored(snapshot, self._value_texts(snapshot)[start:stop], keep_references=True)

    def page(self, snapshot: Snapshot, start: int, stop: int) -> tuple[list[bytes], int]:
        """Lines ``start`` to ``stop`` as :meth:`sent_lines` gives them, and how many lines
        the log holds: a page of a long log. No line is parsed, and only the page's own
        lines have their references looked at."""
        texts = self._value_texts(snapshot)
        return self._restored(snapshot, texts[start:stop], keep_references=True), len(texts)

    def _value_texts(self, snapshot: Snapshot) -> list[bytes]:
        """The texts of every value in the log, as stored (:func:`~gitmem.records.jsontexts.checked_values`)."""
        texts = []
        for path in self.chunk_paths(snapshot):
            found = _listed_chunk(snapshot, path, checked_values)
            if found.broken:
                _say_broken(snapshot, path, found.broken)
            texts += found.texts
        return texts

    def _restored(self, snapshot: Snapshot, texts: list[bytes], *,
                  keep_references: bool = False) -> list[bytes]:
        """``texts`` of values with their blob references put back (left
        in, with ``keep_references``); a text that holds none is the very object given."""
        if self.blobs is None:
            return texts
        return [text if blob_refs.MARK_BYTES not in text else self.blobs.restore_json(
                    snapshot, text.decode("utf-8"), keep_references=keep_references).encode("utf-8")
                for text in texts]

    def count(self, snapshot: Snapshot) -> int:
        return sum(len(chunk.lines) for _, chunk in self.chunks(snapshot))

    def starts_with(self, snapshot: Snapshot, values: Sequence[Any] | JsonTexts) -> bool:
        """True when the log's first ``len(values)`` values are ``values`` (the log holds at
        least that many). Texts are compared with the stored chunks (in either form that
        :func:`chunk_texts` gives) before any is parsed: only a text written differently
        (an image inline, another escape) is parsed and compared as a value."""
        pos, total = 0, len(values)
        for path, chunk in self.chunks(snapshot):
            if pos >= total:
                break
            count = min(len(chunk.lines), total - pos)
            if isinstance(values, JsonTexts):
                part = values.texts[pos:pos + count]
                joined = b"\n".join(part)
                forms = _listed_chunk(snapshot, path, chunk_texts)
                if count == len(chunk.lines) and joined in forms:
                    pos += count
                    continue
                if count < len(chunk.lines) and any(form.startswith(joined + b"\n") for form in forms):
                    pos += count
                    continue
                pairs = zip(part, *(form.split(b"\n") for form in forms), strict=False)
                for j, (text, *stored) in enumerate(pairs):
                    if bytes(text) not in stored and not self._same(
                            snapshot, values.parse(text), chunk.lines[j], chunk.values[j]):
                        return False
            else:
                for j, value in enumerate(values[pos:pos + count]):
                    if not self._same(snapshot, value, chunk.lines[j], chunk.values[j]):
                        return False
            pos += count
        return pos >= total

    def _same(self, snapshot: Snapshot, value: Any, line: str, stored: Any) -> bool:
        """True when ``value`` is stored as ``line`` (whose parsed value is ``stored``)."""
        if self.blobs is not None and blob_refs.MARK in line:
            value = blob_refs.extract(value, set(self.blobs.names(snapshot)))[0]
        return same_json(value, stored)

    def append(self, snapshot: Snapshot, values: Sequence[Any]) -> dict[str, bytes | None]:
        """The changes that add ``values`` after the last line; earlier chunks are not even read."""
        existing = self.chunk_paths(snapshot)
        files: dict[str, bytes | None] = {}
        if self.blobs is not None:
            values, files = self.blobs.prepare(snapshot, values)
        # The lines only: the last chunk is a new blob after every append, parsed afresh.
        start = list(_listed_chunk(snapshot, existing[-1], chunk_lines)) if existing else []
        packed = self._pack(start, [dumps(v) for v in values])
        paths = self._paths(existing[-1:], len(packed), existing)
        return {**files, **{path: _chunk_bytes(lines) for path, lines in zip(paths, packed, strict=True) if lines}}

    def replace(self, snapshot: Snapshot, values: Sequence[Any] | JsonTexts) -> dict[str, bytes | None]:
        """The changes that make the log hold exactly ``values``, touching only changed chunks.

        Lines keep their chunk: chunk i takes as many values as it held before, and the
        last chunk (then new ones) takes the rest, so extending a log by a few values
        rewrites only its last chunk. Values that are the stored ones (as JSON:
        :func:`~gitmem.records.strictjson.same_json`) are not encoded again; ``values`` may be :class:`JsonTexts`.
        """
        existing = self.chunks(snapshot)
        if isinstance(values, JsonTexts):
            values = values.values([(chunk, _listed_chunk(snapshot, path, chunk_texts))
                                    for path, chunk in existing])
        values = list(values)
        changes: dict[str, bytes | None] = {}
        if self.blobs is not None:
            values, changes = self.blobs.prepare(
                snapshot, values, [(chunk.lines, chunk.values) for _, chunk in existing], prune=True,
                keep={name for _, chunk in existing for line in chunk.broken
                      for name in blob_refs.named_in(line.text)})
        out: list[list[str]] = []
        pos = 0
        for _, chunk in existing[:-1]:
            part = values[pos:pos + len(chunk.values)]
            pos += len(part)
            out.append(chunk.written() if same_json(part, chunk.values)
                       else chunk.written([dumps(v) for v in part]))
        rest = values[pos:]
        start: list[str] = []
        if existing:
            last = existing[-1][1]
            if same_json(rest[:len(last.values)], last.values):
                start, rest = list(last.lines), rest[len(last.values):]
        packed = self._pack(start, [dumps(v) for v in rest])
        if existing:
            packed[0] = last.written(packed[0])
        out.extend(packed)
        old = dict(existing)
        paths = self._paths(list(old), len(out), list(old))
        for path, lines in zip(paths, out, strict=True):
            if not lines:
                if path in old:
                    changes[path] = None
            elif path not in old or old[path].written() != lines:
                changes[path] = _chunk_bytes(lines)
        for path in list(old)[len(out):]:
            changes[path] = None
        return changes

    def delete(self, snapshot: Snapshot) -> dict[str, None]:
        """The changes that remove every chunk (and the blob folder)."""
        changes = {path: None for path in self.chunk_paths(snapshot)}
        if self.blobs is not None:
            changes.update(self.blobs.delete(snapshot))
        return changes

    def _paths(self, reuse: list[str], count: int, existing: list[str]) -> list[str]:
        """``count`` chunk paths: those in ``reuse``, then new names after the last of ``existing``."""
        paths = reuse[:count]
        last = existing[-1].rsplit("/", 1)[1][:-len(SUFFIX)] if existing else ""
        following = int(last) + 1 if last.isdigit() else len(existing)
        while len(paths) < count:
            paths.append(f"{self.folder}/{following:06d}{SUFFIX}")
            following += 1
        return paths

    def _pack(self, first: list[str], new_lines: list[str]) -> list[list[str]]:
        """Fill ``first`` with ``new_lines`` up to the limits, then start new chunks."""
        packed = [first]
        size = sum(len(line) + 1 for line in first)
        for line in new_lines:
            current = packed[-1]
            if current and (len(current) >= self.max_lines or size + len(line) + 1 > self.max_bytes):
                current = []
                packed.append(current)
                size = 0
            current.append(line)
            size += len(line) + 1
        return packed


def _listed_chunk(snapshot: Snapshot, path: str, parse: Callable[[bytes], T]) -> T:
    """``snapshot.read_parsed`` of a chunk :meth:`ChunkedJsonl.chunk_paths` listed: it is there."""
    found = snapshot.read_parsed(path, parse)
    assert found is not None
    return found


def _joined_array(texts: Sequence[bytes]) -> bytes:
    return b"".join(json_array(texts))


def _chunk_bytes(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")


_said: set[tuple[str, str | None]] = set()  # (path, blob id) of the broken lines logged already


def _say_broken(snapshot: Snapshot, path: str, broken: Sequence[BrokenLine]) -> None:
    """Log each broken line of chunk ``path`` once per process: a read leaves it out."""
    key = (path, snapshot.blob_id(path))
    if key in _said:
        return
    _said.add(key)
    for line in broken:
        log.warning("%s line %d is not JSON (%s): left out of what gitmem reads, and kept in "
                    "the file: fix it there (`gitmem status` lists it)", path, line.number, line.reason)
