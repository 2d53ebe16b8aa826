"""Which write put this into a record: ``gitmem blame RECORD``.

A memory is cut into blocks (paragraphs: what ``append`` joins with a blank line), a
session into its messages, a thread into its events and messages. Each gets the commit
that introduced it: walking the record's versions oldest first (from the record index),
a block or message that the previous version already held keeps that version's commit,
matched as a sequence (difflib, between the blocks both versions begin and end with), so
moving or editing one block leaves the others alone. A memory of many versions is
followed through the lines each version changed, as git diffs them (:class:`_Lines`), so
its blame costs what its changes cost; without git, its versions are read whole.

    for item in mem.blame("agent:reviewer"):
        print(item.commit.id[:10], item.op, item.value)
"""

from __future__ import annotations

import bisect
import difflib
import json
import logging
import subprocess
from collections import namedtuple
from typing import Any, cast

from gitmem.git import gitproc
from gitmem.git.hunks import version_hunks
from gitmem.history.versions import Records, read_record
from gitmem.records import layout
from gitmem.records.dates import format_date
from gitmem.records.units import BLANK_LINES

READ_AHEAD_FROM = 16  # versions of a memory: more are diffed (or read) by one git process
log = logging.getLogger(__name__)


class Blamed(namedtuple("Blamed", "kind index value commit")):
    """One block, message or event of a record (``kind``: "block", "message" or "event"),
    with the commit that introduced it: its ``index`` among the record's blocks, messages
    or events, its ``value`` (the block's text, or the message / event as stored), and
    the ``commit`` (a :class:`CommitInfo`)."""

    __slots__ = ()

    @property
    def op(self) -> str | None:
        """The commit's ``Gitmem-Op`` (None: a commit gitmem did not make)."""
        return self.commit.trailers.get("Gitmem-Op")

    @property
    def handler(self) -> str | None:
        return self.commit.trailers.get("Gitmem-Handler")

    def to_json(self) -> dict[str, Any]:
        c = self.commit
        return {"kind": self.kind, "index": self.index, "value": self.value, "commit": c.id,
                "date": format_date(c.time, c.offset), "author": c.author, "email": c.email,
                "op": self.op, "handler": self.handler}


class _Lines:
    """:func:`blocks` of one memory's versions, oldest first, kept up to date from the
    lines each version changed (:mod:`gitmem.git.hunks`), so that a version costs what its
    changed lines cost. In lines, :func:`blocks` reads: without the empty lines at either
    end, a blank line (spaces and tabs only) between the first and the last ends a block,
    and a block is the lines of a run of the others, joined and stripped on the right."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []  # the version's lines, without their newlines
        self._split: list[str] = []  # its blocks, a blank one kept (blocks() drops them all)
        self._starts: list[int] = []  # the line each of them starts at
        self._first = self._last = -1  # its first and last line that is not empty

    def change(self, start: int, removed: int, added: list[bytes]) -> None:
        """Lines ``start`` to ``start + removed`` become ``added``."""
        end = start + removed
        old_first, old_last = self._first, self._last
        self.lines[start:end] = added
        self._first, self._last = self._ends()
        shift = len(added) - removed
        # Where blocks end depends only on each line's blankness and whether it lies
        # between the first and the last line: split again from the block holding the
        # first line whose place may have changed (the change's, or a last line that
        # moved) to the first block after the change; the blocks before and after stay.
        near = min(start, old_last, self._last)
        if start <= max(old_first, self._first) or near < 0:
            begin = 0
        else:
            begin = max(bisect.bisect_right(self._starts, near) - 1, 0)
        until = len(self._split)
        if end <= old_last and old_first < end and self._first < end + shift:
            until = bisect.bisect_right(self._starts, end)
        line_from = self._starts[begin] if begin else 0
        tail = until < len(self._split)  # blocks after the change, kept as they were
        line_to = self._starts[until] + shift if tail else len(self.lines)
        found, starts = self._runs(line_from, line_to)
        self._split[begin:until] = found
        self._starts[begin:until] = starts
        if shift and tail:
            at = begin + len(found)
            self._starts[at:] = [s + shift for s in self._starts[at:]]

    def blocks(self) -> list[str]:
        """:func:`blocks` of the version as it is now."""
        return list(self._split) if any(self._split) else []

    def _ends(self) -> tuple[int, int]:
        lines, first, last = self.lines, 0, len(self.lines) - 1
        while first <= last and not lines[first]:
            first += 1
        while last >= first and not lines[last]:
            last -= 1
        return (first, last) if first <= last else (-1, -1)

    def _runs(self, line_from: int, line_to: int) -> tuple[list[str], list[int]]:
        """The blocks of lines ``line_from`` to ``line_to`` and the line each starts at."""
        found: list[str] = []
        starts: list[int] = []
        run: list[bytes] = []
        first, last, lines = self._first, self._last, self.lines
        if first < 0:
            return found, starts
        for at in range(max(line_from, first), min(line_to, last + 1)):
            line = lines[at]
            if first < at < last and not line.strip(b" \t"):
                if run:
                    found.append(b"\n".join(run).decode("utf-8", "surrogateescape").rstrip())
                    run = []
            else:
                if not run:
                    starts.append(at)
                run.append(line)
        if run:
            found.append(b"\n".join(run).decode("utf-8", "surrogateescape").rstrip())
        return found, starts


class _Blocks:
    """:func:`blocks` of one memory's versions, oldest first: a version that only adds
    text after the one before is split from the start of that one's last block on, so an
    appended-to memory costs what its appends cost, not its whole length each time."""

    def __init__(self) -> None:
        self._text = ""  # the last version, stripped of blank lines around it
        self._blocks: list[str] = []
        self._last = 0  # where its last block starts in _text

    def of(self, content: str) -> list[str]:
        text = content.strip("\n")
        start = self._last
        if not (self._blocks and text.startswith(self._text) and self._text[start:start + 1] not in ("", " ", "\t")):
            start, kept = 0, []  # a blank after the last block could join a separator: all of it
        else:
            kept = self._blocks[:-1]
        found = kept + [block.rstrip() for block in BLANK_LINES.split(text[start:])] if text.strip() else []
        for separator in BLANK_LINES.finditer(text, start):
            start = separator.end()
        self._text, self._blocks, self._last = text, found, start
        return found


def blame(mem: Records, record: str) -> list[Blamed]:
    """Each part of ``record`` as it is now, with the commit that introduced it."""
    parsed = layout.parse_record(record)
    versions = [v.id for v in reversed(mem.record_index.versions(parsed.path))]
    by_hunks = None
    if parsed.is_memory and len(versions) >= READ_AHEAD_FROM:
        by_hunks = _memory_by_hunks(mem, parsed.path, versions)
    values, owners = by_hunks or _by_versions(mem, parsed, versions)
    infos = {c.id: c for c in mem.engine.log.commit_infos(sorted({o for found in owners.values() for o in found}))}
    return [Blamed(kind, i, value, infos[owner])
            for kind in values for i, (value, owner) in enumerate(zip(values[kind], owners[kind], strict=True))]


def _memory_by_hunks(mem: Records, path: str, versions: list[str]) -> tuple[dict, dict] | None:
    """({"block": blocks}, {"block": owners}) of the memory at ``path`` from the lines each
    version changed, as git lists them; None when git cannot (missing, failing, a file
    that is not a regular one's text): then :func:`_by_versions` reads them whole."""
    lines = _Lines()
    keys: list[str] = []
    owners: list[str] = []
    try:
        # Scoped: git reads the trees; only the folders on the way to the memory are checked
        # here (the whole tree of each version was 2,000 walks of a 4,000-session tree: 12 s).
        # a commit's root tree: never None
        trees = [cast(str, mem.engine.snapshot_of(commit, scope=path).tree_id("")) for commit in versions]
        for commit, hunks in zip(versions, version_hunks(mem.engine.gitdir, path, trees), strict=True):
            for hunk in reversed(hunks):  # later lines first: the earlier hunks' line numbers hold
                lines.change(hunk.start, hunk.removed, hunk.added)
            new_keys = lines.blocks()
            owners = _carry(keys, owners, new_keys, commit)
            keys = new_keys
    except subprocess.CalledProcessError as exc:
        if exc.returncode < 0:
            raise
        log.debug("git diff-tree failed (%s); reading the versions whole", exc.stderr.strip())
        return None
    except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
        log.debug("git diff-tree failed (%s); reading the versions whole", exc)
        return None
    return {"block": keys}, {"block": owners}


def _by_versions(mem: Records, parsed: layout.Record, versions: list[str]) -> tuple[dict, dict]:
    """({kind: items}, {kind: owners}) of ``parsed`` from each of its versions read whole."""
    owners: dict[str, list[str]] = {}
    values: dict[str, list[Any]] = {}
    keys: dict[str, list[str]] = {}
    splitter = _Blocks()
    read_ahead = 0 if parsed.is_memory and len(versions) >= READ_AHEAD_FROM else len(versions)
    for at, commit in enumerate(versions):
        if at >= read_ahead:  # a memory's many versions: git reads them at once
            read_ahead = at + (mem.engine.log.prefetch(parsed.path, versions[at:]) or len(versions))
        parts = _parts(mem, parsed, commit, splitter)
        for kind, items in parts.items():
            new_keys = items if kind == "block" else [json.dumps(item, sort_keys=True) for item in items]
            owners[kind] = _carry(keys.get(kind, []), owners.get(kind, []), new_keys, commit)
            keys[kind], values[kind] = new_keys, items
        for kind in list(keys):
            if kind not in parts:
                keys[kind], owners[kind], values[kind] = [], [], []
    return values, owners


def _parts(mem: Records, record: layout.Record, commit: str, splitter: _Blocks) -> dict[str, list[Any]]:
    """{kind: items} of ``record`` at ``commit``."""
    shown = read_record(mem, record, mem.engine.snapshot_of(commit, scope=record.path), commit)
    if not shown.exists:
        return {}
    if "content" in shown.value:
        return {"block": splitter.of(shown.value["content"])}
    if "item" in shown.value:  # a store item: each field of its value
        return {"field": [{name: value} for name, value in shown.value["item"]["value"].items()]}
    found = {"message": shown.value["messages"]}
    if "events" in shown.value:
        found = {"event": shown.value["events"], **found}
    return found


def _carry(old_keys: list[str], old_owners: list[str], new_keys: list[str], commit: str) -> list[str]:
    """The owner of each of ``new_keys``: the old owner of what the previous version held
    (the same first and last ones kept, those between matched as a sequence), ``commit``
    for the rest: a change costs what it changed, not the memory's length."""
    if new_keys[:len(old_keys)] == old_keys:  # appended to: the common case, no matching
        return old_owners + [commit] * (len(new_keys) - len(old_keys))
    old_end, new_end = len(old_keys), len(new_keys)
    start = 0
    while start < min(old_end, new_end) and old_keys[start] == new_keys[start]:
        start += 1
    while old_end > start and new_end > start and old_keys[old_end - 1] == new_keys[new_end - 1]:
        old_end, new_end = old_end - 1, new_end - 1
    owners = old_owners[:start] + [commit] * (new_end - start) + old_owners[old_end:]
    matcher = difflib.SequenceMatcher(None, old_keys[start:old_end], new_keys[start:new_end], autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        owners[start + b:start + b + size] = old_owners[start + a:start + a + size]
    return owners
