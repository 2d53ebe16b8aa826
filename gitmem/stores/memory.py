"""Agent and user memory: markdown documents, one commit per write.

``read`` gives the content ("" when there is none); ``write`` replaces it or appends
a block after a blank line; ``delete`` removes it. A write that changes nothing
makes no commit, and neither does deleting what is not there.

    memory = MemoryStore(engine)
    memory.write("likes tea", agent_id="reviewer", mode="append")
    memory.read(agent_id="reviewer")   # "likes tea\\n"
"""

from __future__ import annotations

from collections.abc import Mapping

from gitmem import layout
from gitmem.engine import GitEngine, Snapshot
from gitmem.ids import UndecodableId, decode

MODES = ("replace", "append")


def join_blocks(existing: str, new: str) -> str:
    """Append ``new`` to ``existing`` as nui does: one blank line between the blocks."""
    if existing.strip():
        return existing.rstrip() + "\n\n" + new.strip()
    return new


def normalise(content: str) -> str:
    """The stored form: the text ending with exactly one newline ("" stays "")."""
    content = content.rstrip("\n")
    return content + "\n" if content else ""


class MemoryStore:
    """User memory (``agent_id=None``) and per-agent memory as markdown files."""

    def __init__(self, engine: GitEngine):
        self.engine = engine

    @staticmethod
    def path(agent_id: str | None = None) -> str:
        return layout.USER_MEMORY if agent_id is None else layout.agent_memory_path(agent_id)

    def read(self, agent_id: str | None = None, *, snapshot: Snapshot | None = None) -> str:
        """The memory's content, "" when there is none."""
        path = self.path(agent_id)
        snapshot = snapshot or self.engine.snapshot(scope=path)
        data = snapshot.read_parsed(path, _decode)
        return data or ""

    def write(self, content: str, agent_id: str | None = None, mode: str = "replace",
              *, trailers: Mapping[str, str] | None = None) -> str | None:
        """Replace the memory with ``content`` or append it; returns the commit id (None: no change)."""
        if mode not in MODES:
            raise ValueError(f"writeMode must be 'replace' or 'append', not {mode!r}")
        path = self.path(agent_id)

        def changes(snapshot: Snapshot):
            new = content
            if mode == "append":
                new = join_blocks(self.read(agent_id, snapshot=snapshot), content)
            return {path: normalise(new).encode("utf-8", "surrogateescape")}

        verb = "append to" if mode == "append" else "replace"
        return self.engine.update(changes, f"memory: {verb} {_describe(agent_id)}",
                                  _trailers(f"memory.{mode}", agent_id, trailers), scope=path)

    def delete(self, agent_id: str | None = None, *,
               trailers: Mapping[str, str] | None = None) -> str | None:
        """Remove the memory; returns the commit id (None when there was nothing to delete)."""
        path = self.path(agent_id)
        return self.engine.update(
            lambda snapshot: {path: None} if snapshot.exists(path) else None,
            f"memory: delete {_describe(agent_id)}",
            _trailers("memory.delete", agent_id, trailers), scope=path)

    def agents(self, *, snapshot: Snapshot | None = None) -> list[str]:
        """The ids of the agents that have memory."""
        snapshot = snapshot or self.engine.snapshot()
        found = []
        for name in snapshot.list(layout.AGENT_MEMORY):
            if name.endswith(".md"):
                try:
                    found.append(decode(name[:-3]))
                except UndecodableId:
                    found.append(name[:-3])
        return found


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _describe(agent_id: str | None) -> str:
    return "user memory" if agent_id is None else f"agent {agent_id}"


def _trailers(op: str, agent_id: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    record = "user" if agent_id is None else f"agent:{agent_id}"
    return {"Gitmem-Op": op, **(extra or {}), "Gitmem-Id": record}
