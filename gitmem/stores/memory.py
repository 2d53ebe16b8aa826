"""Agent and user memory: markdown documents, one commit per write.

``read`` gives the content ("" when there is none); ``write`` replaces it or appends
a block after a blank line; ``delete`` removes it. A write that changes nothing
makes no commit, and neither does deleting what is not there.

Every write is made from its writer's *base*, the newest version that writer has seen
(see :mod:`gitmem.stores.bases`): a replace from a writer who has seen the tip is a plain
replace; one made from an earlier version is merged three-way onto the tip from it, in
the same step that commits it (worked out again when another writer moved the tip), so
what others wrote since is kept and what the writer removed is removed. An append joins
its block onto the tip. The rule every history obeys: a block any writer was told was
saved is there afterwards, unless a writer that had seen it removed it.

    memory = MemoryStore(engine)
    memory.write("likes tea", agent_id="reviewer", mode="append")
    memory.read(agent_id="reviewer")   # "likes tea\\n"
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Mapping

from gitmem.errors import InvalidInput
from gitmem.git.base import Identity
from gitmem.git.engine import GitEngine
from gitmem.git.snapshot import Snapshot
from gitmem.records import layout
from gitmem.records.ids import UndecodableId, decode, printable
from gitmem.records.merge import merge_file
from gitmem.records.meta import record_trailers
from gitmem.stores.bases import BLOCK, PROCESS, Bases, Seen, replace_onto

log = logging.getLogger("gitmem.memory")

MODES = ("replace", "append")


def join_blocks(existing: str, new: str) -> str:
    """Append ``new`` to ``existing`` as nui does: one blank line between the blocks."""
    if existing.strip():
        return existing.rstrip() + BLOCK + new.strip()
    return new


def normalise(content: str) -> str:
    """The stored form: the text ending with exactly one newline ("" stays "")."""
    content = content.rstrip("\n")
    return content + "\n" if content else ""


class MemoryStore:
    """User memory (``agent_id=None``) and per-agent memory as markdown files.

    ``writer`` (any hashable; default: this process) names who reads and writes, so that
    each write is made from what its own writer has seen: a server passes one per
    connection."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.bases = Bases()

    @staticmethod
    def path(agent_id: str | None = None) -> str:
        return layout.USER_MEMORY if agent_id is None else layout.agent_memory_path(agent_id)

    def read(self, agent_id: str | None = None, *, snapshot: Snapshot | None = None,
             writer: Hashable = PROCESS) -> str:
        """The memory's content, "" when there is none.

        A read of HEAD (no ``snapshot`` given) is remembered as seen by ``writer``: its
        next write is made from it.
        """
        path = self.path(agent_id)
        if snapshot is not None:
            return self.read_file(path, snapshot=snapshot)
        snapshot = self.engine.snapshot(scope=path)
        data = snapshot.read_parsed(path, _decode) or ""
        self.bases.read(writer, path, data, snapshot.id)
        return data

    def read_file(self, path: str, *, snapshot: Snapshot | None = None) -> str:
        """The content of memory file ``path`` (``memory/user.md``, an agent's, a note's)
        at HEAD or in ``snapshot``, "" when there is none."""
        snapshot = snapshot or self.engine.snapshot(scope=path)
        return snapshot.read_parsed(path, _decode) or ""

    def write(self, content: str, agent_id: str | None = None, mode: str = "replace",
              *, trailers: Mapping[str, str] | None = None, writer: Hashable = PROCESS,
              late_window: float | None = None, arrived: float | None = None) -> str | None:
        """Replace the memory with ``content`` or append it; returns the commit id (None: no change).

        The write is made from ``writer``'s base (see :mod:`gitmem.stores.bases`):
        ``late_window`` (seconds; None: off) turns on the rule for nui's racing appends,
        ``arrived`` (a ``time.monotonic()``; default now) is when the request arrived, so
        that reads answered after it are not taken for its base. A replace whose base is
        not the tip is merged onto the tip from it, in the commit's own step: its commit
        says "merge a stale replace" and its ``Gitmem-Merged-Base`` trailer names the
        base's commit. A write that cannot be placed (the tip kept moving) raises
        :class:`gitmem.git.base.EngineError` and is not acknowledged.
        """
        if not isinstance(content, str):
            raise InvalidInput(f"content must be a string, not {type(content).__name__}"
                               + (" (decode the bytes first)" if isinstance(content, bytes) else ""))
        if mode not in MODES:
            raise InvalidInput(f"mode must be 'replace' or 'append', not {mode!r}")
        path = self.path(agent_id)
        arrived = time.monotonic() if arrived is None else arrived
        new = normalise(content)
        base, view = self.bases.base(writer, path, new if mode == "replace" else None, late_window, arrived)
        commit_trailers = record_trailers(f"memory.{mode}", _record(agent_id), trailers)
        subject = [f"memory: {'append to' if mode == 'append' else 'replace'} {_describe(agent_id)}"]

        def changes(snapshot: Snapshot) -> dict[str, bytes] | None:
            head = snapshot.read_parsed(path, _decode) or ""
            commit_trailers.pop("Gitmem-Merged-Base", None)
            subject[1:] = []
            if mode == "append":
                result = join_blocks(head, content)
            else:
                result, merged_from = replace_onto(path, base, head, new)
                if merged_from is not None:
                    subject.append(f"memory: merge a stale replace into {_describe(agent_id)}")
                    if merged_from.commit:
                        commit_trailers["Gitmem-Merged-Base"] = str(merged_from.commit)
            return {path: normalise(result).encode("utf-8", "surrogateescape")}

        commit = self.engine.update(changes, lambda: subject[-1], commit_trailers, scope=path)
        self.bases.wrote(writer, path, _seen_after(mode, content, new, base, view, path), commit, arrived)
        return commit

    def save_from(self, content: str, agent_id: str | None, base: str | None, *,
                  author: Identity | None = None,
                  trailers: Mapping[str, str] | None = None) -> str | None:
        """A person's save of the memory, made from its version at commit ``base`` (None:
        from no version). When HEAD has moved on since, it is merged three-way onto HEAD
        by the rules of an editor's save (:func:`merge_file`: what the person never saw
        is kept, what they saw and deleted stays deleted). ``author``: the person. Returns
        the commit id (None: no change)."""
        path = self.path(agent_id)
        saved = normalise(content).encode("utf-8", "surrogateescape")
        shown = self.engine.snapshot_of(base, scope=path).read(path) if base else None

        def changes(snapshot: Snapshot):
            head = snapshot.read(path)
            merged, spots = merge_file(path, shown, head, saved)
            for spot in spots:
                log.warning("save of %s merged with a newer version: %s", _describe(agent_id), spot)
            return None if merged == head else {path: merged}

        return self.engine.update(changes, f"memory: edit {_describe(agent_id)}",
                                  record_trailers("memory.edit", _record(agent_id), trailers),
                                  author=author, scope=path)

    def delete(self, agent_id: str | None = None, *,
               trailers: Mapping[str, str] | None = None, writer: Hashable = PROCESS,
               arrived: float | None = None) -> str | None:
        """Remove the memory; returns the commit id (None when there was nothing to delete).
        ``writer`` has seen the memory empty since."""
        path = self.path(agent_id)
        arrived = time.monotonic() if arrived is None else arrived
        self.bases.base(writer, path, None, None, arrived)  # the read it was made from is taken
        commit = self.engine.update(
            lambda snapshot: {path: None} if snapshot.exists(path) else None,
            f"memory: delete {_describe(agent_id)}",
            record_trailers("memory.delete", _record(agent_id), trailers), scope=path)
        self.bases.wrote(writer, path, "", commit, arrived)
        return commit

    def paths(self, *, snapshot: Snapshot | None = None) -> list[str]:
        """The memory files: ``memory/user.md`` (when there is one) first, then every
        ``memory/agents/*.md``, whoever named it."""
        snapshot = snapshot or self.engine.snapshot()
        agents = [f"{layout.AGENT_MEMORY}/{name}" for name in snapshot.list(layout.AGENT_MEMORY)
                  if name.endswith(".md")]
        return [path for path in [layout.USER_MEMORY, *agents] if snapshot.blob_id(path) is not None]

    def agents(self, *, snapshot: Snapshot | None = None) -> list[str]:
        """The ids of the agents that have memory: each one :meth:`read` reads. A file whose
        name is no id's encoding (saved by hand as ``Upper.md``; an id too long for a file
        name, cut) is none: listings name it by its path (:func:`gitmem.records.layout.record_name`)."""
        snapshot = snapshot or self.engine.snapshot()
        found = []
        for name in snapshot.list(layout.AGENT_MEMORY):
            if name.endswith(".md"):
                try:
                    found.append(decode(name[:-3]))
                except UndecodableId:
                    continue
        return found


def _seen_after(mode: str, content: str, new: str, base: Seen | None, view: Seen | None,
                path: str) -> str | None:
    """What a writer has seen once its write is acknowledged (None: still no version): a
    replace's text, with what it had seen since the base merged in (a racing append's
    siblings); an append's block joined onto what it had seen."""
    if mode == "append":
        return normalise(join_blocks(view.text, content)) if view is not None else None
    return new if view is None else replace_onto(path, base, view.text, new)[0]


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _describe(agent_id: str | None) -> str:
    return "user memory" if agent_id is None else f"agent {printable(agent_id)}"


def _record(agent_id: str | None) -> str:
    """The document as its commits' ``Gitmem-Id`` trailer names it."""
    return "user" if agent_id is None else f"agent:{agent_id}"
