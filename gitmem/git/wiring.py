"""What the engine calls above itself: the two parts wired in when it is opened
(``GitEngine.open(path, hand_edits=..., packer=...)``), each a factory called once with
the open engine. The engine knows them only by these protocols."""

from __future__ import annotations

from typing import Protocol


class RecordGuard(Protocol):
    """What an engine opened with ``hand_edits`` calls before a record is read or written."""

    def before_access(self, scope: str) -> object:  # its answer is not read
        """Called with a record's path (file or folder) before it is read from HEAD, and
        under the writers' lock before it is written."""

    def merge_displaced(self, path: str, base_id: str, data: bytes) -> object:  # its answer is not read
        """Called (from a thread of the engine's) with what a work-tree file a write had
        replaced holds now: bytes a writer put there after it was checked to hold
        ``base_id`` (see :mod:`gitmem.git.displaced`)."""


class BackgroundPacker(Protocol):
    """What an engine opened with ``packer`` tells of each commit it makes."""

    def maybe_start(self) -> None:
        """Note one commit (cheap: packing, when due, happens on a thread of its own)."""
