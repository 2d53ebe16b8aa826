"""The record index's parts: each record's lines kept together, so that a record's
versions are read without the rest of the index.

The record index (:mod:`gitmem.history.record_index`) is a log that only grows: finding
a record in it means reading all of it, a megabyte every 15,000 commits or so. Its parts
file, ``.git/gitmem/record-index-parts`` (never committed), holds what the log held up to
one of its check lines, record by record::

    gitmem record index parts 1
    <covered> <check> <tip> <entries> <moments>
    <entries> directory entries of 20 bytes: the CRC-32 of a record path, the offset and
        length of its part in this file, the CRC-32 of that part (big-endian)
    <moments> entries of 40 bytes, one a commit, by commit time: the time, then the
        generation, time and id of the newest commit (by topology) made at or before it
    the parts, each "<record path>\\n" then "<commit id> <commit time> <generation>\\n"
        for each commit that changed the record

``covered`` is the length of the log it was made from, which ended with the check line
``#<check>``, and ``tip`` its last commit. The directory is sorted by its first field and
searched by halves: a record's versions are a few reads of the directory, its part, and
the lines of the log past ``covered`` (its tail), whatever the history's length; so is
the newest commit at a date (``gitmem show --at DATE``), from the moments. The log's
check line at ``covered`` vouches that the log still starts with what the parts were made
from (it is the CRC-32 of every byte before it), and the tail's check lines are verified
on from there. When the tail has grown past :data:`TAIL_LIMIT` the parts are made again
from the whole log (a temporary file, then a rename). A missing or damaged parts file
is as if the parts were empty: the whole log is the tail.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from bisect import bisect_left, bisect_right
from collections import namedtuple
from pathlib import Path
from typing import Literal

MAGIC = b"gitmem record index parts 1\n"
TAIL_LIMIT = 64 * 1024  # bytes of the log past the parts before they are made again
FILE_MODE = 0o600
_ENTRY = struct.Struct(">IQII")  # key, offset, length, check
_MOMENT = struct.Struct(">qIq20s")  # a commit time; the newest commit by then: generation, time, id
_HEAD_MAX = 256  # bytes: the magic line and the head line fit
_HEAD = re.compile(rb"(\d+) ([0-9a-f]{8}) ([0-9a-f]{40}) (\d+) (\d+)\n")
_CHECK = re.compile(rb"#([0-9a-f]{8})\n")


def key(path: str) -> int:
    """A record path's place in the directory."""
    return zlib.crc32(path.encode())


class Reads:
    """Bytes read from the index's files, for tests and the bench: what a look costs."""

    __slots__ = ("bytes",)

    def __init__(self, bytes: int = 0):
        self.bytes = bytes

    def read(self, fd: int, size: int, offset: int) -> bytes:
        data = os.pread(fd, size, offset)
        self.bytes += len(data)
        return data


class View(namedtuple("View", "head covered entries moments tail tip")):
    """The index as read without most of it: the parts file's head (None: no parts) and
    the checked lines of the log past them. ``head`` is the parts file's first two lines,
    as read; ``covered`` the bytes of the log the parts hold; ``entries`` and ``moments``
    the counts of the parts' directory; ``tail`` the log's checked lines past ``covered``;
    ``tip`` the last commit the index holds."""

    __slots__ = ()

    def part(self, path: Path, record: str, reads: Reads) -> list[bytes] | None:
        """The lines ``<id> <time> <generation>`` of ``record`` in the parts file; None
        when the file is no longer the one this view read, or is damaged."""
        if self.head is None:
            return []
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            if reads.read(fd, len(self.head), 0) != self.head:
                return None
            start = len(self.head)
            wanted = key(record)
            entries = _Directory(fd, start, self.entries, reads)
            at = bisect_left(entries, wanted)
            found = []
            while at < self.entries and (entry := entries.entry(at))[0] == wanted:
                _, offset, length, check = entry
                block = reads.read(fd, length, offset)
                if len(block) != length or zlib.crc32(block) != check:
                    return None
                name, _, lines = block.partition(b"\n")
                if name == record.encode():
                    found.extend(lines.splitlines())
                at += 1
            return found
        except (OSError, struct.error):
            return None
        finally:
            os.close(fd)


    def newest_at(self, path: Path, when: float, reads: Reads) -> tuple[int, int, str] | None | Literal[False]:
        """``(generation, time, id)`` of the newest commit (by topology) the parts hold
        made at or before ``when``: None for none; False when the file is no longer the
        one this view read."""
        if self.head is None:
            return None
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return False
        try:
            if reads.read(fd, len(self.head), 0) != self.head:
                return False
            moments = _Moments(fd, len(self.head) + self.entries * _ENTRY.size, self.moments, reads)
            at = bisect_right(moments, when) - 1
            if at < 0:
                return None
            _, generation, time, commit = moments.entry(at)
            return generation, time, commit.hex()
        except (OSError, struct.error):
            return False
        finally:
            os.close(fd)


class _Moments:
    """The parts file's moments as a sorted sequence of commit times, read an entry at a time."""

    def __init__(self, fd: int, start: int, count: int, reads: Reads):
        self.fd, self.start, self.count, self.reads = fd, start, count, reads

    def entry(self, i: int) -> tuple[int, int, int, bytes]:
        return _MOMENT.unpack(self.reads.read(self.fd, _MOMENT.size, self.start + i * _MOMENT.size))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        return self.entry(i)[0]


class _Directory:
    """The parts file's directory as a sorted sequence of keys, read an entry at a time."""

    def __init__(self, fd: int, start: int, count: int, reads: Reads):
        self.fd, self.start, self.count, self.reads = fd, start, count, reads

    def entry(self, i: int) -> tuple[int, int, int, int]:
        return _ENTRY.unpack(self.reads.read(self.fd, _ENTRY.size, self.start + i * _ENTRY.size))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> int:
        return self.entry(i)[0]


def look(parts_path: Path, log_path: Path, header: bytes, reads: Reads) -> View | None:
    """What the parts file and the log's tail past it hold; None when the log is missing
    or damaged (a parts file that does not match the log counts as none)."""
    try:
        log = os.open(log_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        size = os.fstat(log).st_size
        found = _parts_head(parts_path, reads)
        head: bytes | None
        tip: str | None
        if found is not None:
            head, covered, check, tip, entries, moments = found
            line = b"#%08x\n" % check
            if size < covered or reads.read(log, len(line), covered - len(line)) != line:
                found = None
        if found is None:  # no parts: the whole log is the tail
            if reads.read(log, len(header), 0) != header:
                return None
            head, covered, tip, entries, moments, crc = None, len(header), None, 0, 0, zlib.crc32(header)
        else:
            crc = zlib.crc32(line, check)
        tail = _checked_tail(reads.read(log, size - covered, covered), crc)
        if tail is None:
            return None
        return View(head, covered, entries, moments, tail, _last_commit(tail) or tip)
    except OSError:
        return None
    finally:
        os.close(log)


def _parts_head(path: Path, reads: Reads) -> tuple[bytes, int, int, str, int, int] | None:
    """The parts file's head, covered length, check, tip, entry and moment counts; None
    when there is no parts file or it is not whole."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        start = reads.read(fd, _HEAD_MAX, 0)
        size = os.fstat(fd).st_size
    except OSError:
        return None
    finally:
        os.close(fd)
    match = _HEAD.match(start, len(MAGIC)) if start.startswith(MAGIC) else None
    if match is None:
        return None
    covered, check, tip, entries, moments = (int(match[1]), int(match[2], 16), match[3].decode(),
                                             int(match[4]), int(match[5]))
    if size < match.end() + entries * _ENTRY.size + moments * _MOMENT.size:
        return None
    return start[:match.end()], covered, check, tip, entries, moments


def _checked_tail(tail: bytes, crc: int) -> bytes | None:
    """The part of ``tail`` that its last complete check line vouches for, the CRC-32 of
    the log before it being ``crc``; None when that check fails."""
    end = len(tail)
    while (at := tail.rfind(b"#", 0, end)) >= 0:
        if at == 0 or tail[at - 1:at] == b"\n":
            match = _CHECK.match(tail, at)
            if match is not None:
                return tail[:match.end()] if int(match[1], 16) == zlib.crc32(tail[:at], crc) else None
        end = at  # a check line cut short, or a '#' in a record path: look further back
    return b""


def _last_commit(lines: bytes) -> str | None:
    end = lines.rfind(b"\n#")
    if end < 0:
        return None
    start = lines.rfind(b"\n", 0, end) + 1
    return lines[start:start + 40].decode()


def write(parts_path: Path, tmp_path: Path, log: bytes, header: bytes) -> None:
    """Make the parts file from ``log``, a whole checked record index that ends with a
    check line (a temporary file, then a rename)."""
    check = int(log[-9:-1], 16)
    parts: dict[str, list[bytes]] = {}
    commits = []
    for line in log[len(header):].splitlines():
        if line.startswith(b"#"):
            continue
        head, *records = line.split(b"\t")
        commit_id, time_text, generation_text = head.split(b" ")
        commits.append((int(time_text), int(generation_text), commit_id))
        for name in records:
            parts.setdefault(name.decode(), []).append(head)
    moments, newest = [], (0, 0, b"")
    for time, generation, commit in sorted(commits):
        newest = max(newest, (generation, time, commit))
        moments.append(_MOMENT.pack(time, newest[0], newest[1], bytes.fromhex(newest[2].decode())))
    tip = _last_commit(log)
    assert tip is not None  # the log ends with a check line
    ordered = sorted(parts, key=key)
    head_line = b"%d %08x %s %d %d\n" % (len(log), check, tip.encode(), len(ordered), len(moments))
    start = len(MAGIC) + len(head_line) + len(ordered) * _ENTRY.size + len(moments) * _MOMENT.size
    directory, blocks, offset = [], [], start
    for record in ordered:
        block = record.encode() + b"\n" + b"".join(line + b"\n" for line in reversed(parts[record]))
        directory.append(_ENTRY.pack(key(record), offset, len(block), zlib.crc32(block)))
        blocks.append(block)
        offset += len(block)
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "wb") as file:
        file.write(MAGIC + head_line)
        file.writelines(directory)
        file.writelines(moments)
        file.writelines(blocks)
    os.replace(tmp_path, parts_path)
