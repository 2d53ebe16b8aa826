"""The records page's rows: every record at HEAD with its size and its last change.

A record's size is the bytes of its files (a session's or thread's chunks, metadata and
images); sizes are remembered by blob id, so a listing after a write reads only the
files that write made.
"""

from __future__ import annotations

import dataclasses

from gitmem.records import layout
from gitmem.records.dates import format_date
from gitmem.records.layout import record_name
from gitmem.repository import Gitmem

KINDS = ("user", "agent", "session", "thread", "store")


@dataclasses.dataclass(frozen=True)
class Listed:
    """One record: its name as ``gitmem log`` takes it, kind, bytes and last commit."""

    name: str
    kind: str
    size: int
    changed: str | None  # the last commit's date, ISO 8601
    commit: str | None


class Listing:
    """Lists the records of ``mem``, remembering blob sizes between calls."""

    def __init__(self, mem: Gitmem):
        self.mem = mem
        self._sizes: dict[str, int] = {}

    def records(self, kind: str | None = None) -> list[Listed]:
        """The records at HEAD, of ``kind`` only when given, by kind then name."""
        mem = self.mem
        snapshot = mem.engine.snapshot()
        paths = mem.memory.paths(snapshot=snapshot) \
            + [mem.sessions.folder(t, s) for t, s in mem.sessions.list(snapshot=snapshot)] \
            + [mem.threads.folder(t["id"]) for t in mem.threads.list_threads(snapshot=snapshot)] \
            + [layout.item_path(item.namespace, item.key) for item in mem.items.items(snapshot=snapshot)]
        found = []
        for path in paths:
            record = layout.parse_record(record_name(path))
            if kind is not None and record.kind != kind:
                continue
            versions = mem.record_index.versions(path)
            last = mem.engine.log.commit_infos([versions[0].id])[0] if versions else None
            found.append(Listed(record.name, record.kind, self._size(snapshot, path),
                                format_date(last.time, last.offset) if last else None,
                                last.id if last else None))
        return sorted(found, key=lambda r: (KINDS.index(r.kind), r.name))

    def _size(self, snapshot, path: str) -> int:
        files = [path] if snapshot.blob_id(path) else list(snapshot.files(path))
        total = 0
        for file in files:
            entry = snapshot.entry(file)
            key = str(entry.id)
            if key not in self._sizes:
                self._sizes[key] = entry.size
            total += self._sizes[key]
        return total
