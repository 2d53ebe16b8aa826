"""Which write put this into a record: ``gitmem blame RECORD``.

A memory is cut into blocks (paragraphs: what ``append`` joins with a blank line), a
session into its messages, a thread into its events and messages. Each gets the commit
that introduced it: walking the record's versions oldest first (from the record index),
a block or message that the previous version already held keeps that version's commit,
matched as a sequence (difflib), so moving or editing one block leaves the others alone.

    for item in mem.blame("agent:reviewer"):
        print(item.commit.id[:10], item.op, item.value)
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any

from gitmem import layout
from gitmem.git.base import CommitInfo
from gitmem.history import Records, format_date, read_record
from gitmem.units import BLANK_LINES

READ_AHEAD_FROM = 16  # versions of a memory: more are read by one git process


@dataclasses.dataclass(frozen=True)
class Blamed:
    """One block, message or event of a record, with the commit that introduced it."""

    kind: str  # "block", "message" or "event"
    index: int  # its position among the record's blocks, messages or events
    value: Any  # the block's text, or the message / event as stored
    commit: CommitInfo

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
    owners: dict[str, list[str]] = {}
    values: dict[str, list[Any]] = {}
    keys: dict[str, list[str]] = {}
    splitter = _Blocks()
    read_ahead = 0 if parsed.kind in ("user", "agent") and len(versions) >= READ_AHEAD_FROM else len(versions)
    for at, commit in enumerate(versions):
        if at >= read_ahead:  # a memory's many versions: git reads them at once
            read_ahead = at + (mem.engine.prefetch(parsed.path, versions[at:]) or len(versions))
        parts = _parts(mem, parsed, commit, splitter)
        for kind, items in parts.items():
            new_keys = items if kind == "block" else [json.dumps(item, sort_keys=True) for item in items]
            owners[kind] = _carry(keys.get(kind, []), owners.get(kind, []), new_keys, commit)
            keys[kind], values[kind] = new_keys, items
        for kind in list(keys):
            if kind not in parts:
                keys[kind], owners[kind], values[kind] = [], [], []
    infos = {c.id: c for c in mem.engine.commit_infos(sorted({o for found in owners.values() for o in found}))}
    return [Blamed(kind, i, value, infos[owner])
            for kind in values for i, (value, owner) in enumerate(zip(values[kind], owners[kind]))]


def _parts(mem: Records, record: layout.Record, commit: str, splitter: _Blocks) -> dict[str, list[Any]]:
    """{kind: items} of ``record`` at ``commit``."""
    shown = read_record(mem, record, mem.engine.snapshot_of(commit, scope=record.path), commit)
    if not shown.exists:
        return {}
    if "content" in shown.value:
        return {"block": splitter.of(shown.value["content"])}
    found = {"message": shown.value["messages"]}
    if "events" in shown.value:
        found = {"event": shown.value["events"], **found}
    return found


def _carry(old_keys: list[str], old_owners: list[str], new_keys: list[str], commit: str) -> list[str]:
    """The owner of each of ``new_keys``: the old owner of what the previous version held
    (matched as a sequence), ``commit`` for the rest."""
    if new_keys[:len(old_keys)] == old_keys:  # appended to: the common case, no matching
        return old_owners + [commit] * (len(new_keys) - len(old_keys))
    owners = [commit] * len(new_keys)
    matcher = difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        owners[b:b + size] = old_owners[a:a + size]
    return owners
