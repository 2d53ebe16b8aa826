"""Agent and user memory: markdown documents, one commit per write.

``read`` gives the content ("" when there is none); ``write`` replaces it or appends
a block after a blank line; ``delete`` removes it. A write that changes nothing
makes no commit, and neither does deleting what is not there.

nui appends by reading, joining ``existing + "\n\n" + block`` and sending a replace from
a thread of its own, so two appends made back to back both extend the same version
and arrive in either order. With ``stale_window`` a write is matched with the read it
was made from among the reads this store answered (see :meth:`MemoryStore.write`): a
replace made from an earlier version is merged three-way onto HEAD from it, one that
*is* an earlier version is dropped, and a replace after the client's own writes is a
replace. Times are those the requests arrived at (``arrived``), never when they were
handled: how long a write waited behind others decides nothing.

    memory = MemoryStore(engine)
    memory.write("likes tea", agent_id="reviewer", mode="append")
    memory.read(agent_id="reviewer")   # "likes tea\\n"
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Mapping
from typing import NamedTuple

from gitmem.errors import InvalidInput
from gitmem.git.base import Identity
from gitmem.git.engine import GitEngine
from gitmem.git.snapshot import Snapshot
from gitmem.git.statcache import git_blob_id
from gitmem.records import layout
from gitmem.records.ids import UndecodableId, decode, printable
from gitmem.records.merge import merge_file
from gitmem.records.meta import record_trailers

log = logging.getLogger("gitmem.memory")

MODES = ("replace", "append")
BLOCK = "\n\n"  # what nui puts between the blocks it appends
STALE_BASES = 4  # earlier versions a replace may extend that are looked for, longest first
STALE_VERSIONS = 32  # versions of a record remembered for the stale checks
STALE_WALK = 64  # commits walked back at most, looking for them
STALE_ATTEMPTS = 3  # merges tried again when another writer moves the record meanwhile


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
        # {path: (monotonic time, blob id)} of the versions replace checks saw at HEAD or
        # wrote: only those can be the earlier version a stale replace was made from
        self._seen: dict[str, deque[tuple[float, str]]] = {}
        self._written: dict[str, tuple[str, str]] = {}  # {path: (blob id, text)} last checked
        self._served: dict[str, deque[Served]] = {}  # the reads answered, newest last

    @staticmethod
    def path(agent_id: str | None = None) -> str:
        return layout.USER_MEMORY if agent_id is None else layout.agent_memory_path(agent_id)

    def read(self, agent_id: str | None = None, *, snapshot: Snapshot | None = None) -> str:
        """The memory's content, "" when there is none.

        A read of HEAD (no ``snapshot`` given) is remembered: a replace may be made from it.
        """
        path = self.path(agent_id)
        if snapshot is not None:
            return self.read_file(path, snapshot=snapshot)
        snapshot = self.engine.snapshot(scope=path)
        data = snapshot.read_parsed(path, _decode) or ""
        served = self._served.get(path)
        if served is None:
            served = self._served[path] = deque(maxlen=STALE_VERSIONS)
        served.append(Served(time.monotonic(), data, snapshot.commit_id))
        return data

    def read_file(self, path: str, *, snapshot: Snapshot | None = None) -> str:
        """The content of memory file ``path`` (``memory/user.md``, an agent's, a note's)
        at HEAD or in ``snapshot``, "" when there is none."""
        snapshot = snapshot or self.engine.snapshot(scope=path)
        return snapshot.read_parsed(path, _decode) or ""

    def write(self, content: str, agent_id: str | None = None, mode: str = "replace",
              *, trailers: Mapping[str, str] | None = None,
              stale_window: float | None = None, arrived: float | None = None) -> str | None:
        """Replace the memory with ``content`` or append it; returns the commit id (None: no change).

        With ``stale_window`` (seconds; None or 0: off), the write is taken to be made by
        the client this store answered reads for (nui's one connection to ``gitmem
        serve``), from one of the reads it was answered and no write took yet: those of
        the ``stale_window`` seconds before the write arrived (``arrived``, a
        ``time.monotonic()``; default now), else the newest one, however old. Every write
        (append, replace, delete) takes one such read: so a client that reads and then
        writes in turn never writes from a read it has written since, while each of
        nui's appends made back to back (each read before any of them is written) has a
        read of its own. A replace takes the read whose version V its text is or extends
        (V, a blank line, more; any text extends the empty version), the longest V on a
        tie the newest, else the newest read; an append or a delete, the newest read.

        A replace made from a read of V when HEAD has moved on from V (a write of another
        client, or of this one made from an earlier read) is merged three-way onto HEAD
        from V: what the replace removed from V is removed, what was written since is
        kept. One that *is* V, when HEAD extends V, is a late duplicate and makes no
        commit. A replace that took no read (a client that does not read) and does not
        extend HEAD is compared with the versions of the ``stale_window`` seconds before
        it arrived (and the one they replaced): if it extends one, V, it is merged from V
        the same way; if it *is* one that HEAD extends, it is a late duplicate. A merge's
        ``Gitmem-Merged-Base`` trailer names V's commit.
        """
        if not isinstance(content, str):
            raise InvalidInput(f"content must be a string, not {type(content).__name__}"
                               + (" (decode the bytes first)" if isinstance(content, bytes) else ""))
        if mode not in MODES:
            raise InvalidInput(f"mode must be 'replace' or 'append', not {mode!r}")
        path = self.path(agent_id)
        verb = "append to" if mode == "append" else "replace"
        arrived = time.monotonic() if arrived is None else arrived
        read = None
        if stale_window:
            read = self._read_made_from(path, normalise(content) if mode == "replace" else None,
                                        stale_window, arrived)
        try:
            for attempt in range(STALE_ATTEMPTS + 1):
                check = mode == "replace" and bool(stale_window) and attempt < STALE_ATTEMPTS
                found: list[Stale] = []

                def changes(snapshot: Snapshot):
                    new = content
                    if mode == "append":
                        new = join_blocks(self.read(agent_id, snapshot=snapshot), content)
                    elif check:
                        stale = self._stale(path, snapshot, content, stale_window, arrived, read)
                        if stale is not None:
                            found.append(stale)
                            return None
                    return {path: normalise(new).encode("utf-8", "surrogateescape")}

                commit = self.engine.update(changes, f"memory: {verb} {_describe(agent_id)}",
                                            record_trailers(f"memory.{mode}", _record(agent_id), trailers),
                                            scope=path)
                if not found:
                    return commit
                if found[0].merged is None:
                    log.info("late duplicate of %s not applied: it is the version of %s, which "
                             "HEAD extends", _describe(agent_id), found[0].base)
                    return None
                commit, moved = self._merge(path, agent_id, found[0], trailers)
                if not moved:
                    return commit
            raise AssertionError("unreachable: the last attempt checks nothing")
        finally:
            if read is not None:
                read.taken = True

    def _read_made_from(self, path: str, new: str | None, window: float,
                        arrived: float) -> Served | None:
        """The read a write arriving at ``arrived`` was made from (see :meth:`write`): of
        the reads answered before it arrived and not taken yet, those of the last
        ``window`` seconds, else the newest. For replace text ``new``, the one whose
        version it is or extends (the longest, the newest on a tie), else the newest;
        None when there is none."""
        served = self._served.get(path)
        if not served:
            return None
        reads = [read for read in served if not read.taken and read.time <= arrived]
        if not reads:
            return None
        within = [read for read in reads if arrived - read.time <= window] or reads[-1:]
        best = None
        if new is not None:
            for read in within:  # oldest first: a later read wins a tie
                if _made_from(new, normalise(read.text)) and (best is None or len(read.text) >= len(best.text)):
                    best = read
        return best or within[-1]

    def _stale(self, path: str, snapshot: Snapshot, content: str, window: float, arrived: float,
               read: Served | None = None) -> Stale | None:
        """What to do with a replace that may be stale (see :meth:`write`), made from
        ``read`` if it is known; None: replace.

        Cheap checks first: a replace that extends HEAD (nui's append in order) or
        shares no block with it needs no history, nor one whose earlier version this
        store has not seen at HEAD in the window; only then are commits walked, at most
        :data:`STALE_WALK` and none older than the window. (A memory's first blocks,
        appended back to back onto nothing, share nothing: only the reads of the empty
        version they were made from tell them from replaces.)
        """
        head_id = snapshot.blob_id(path)
        written = self._written.get(path)
        if written is not None and written[0] == head_id:  # spares reading the file just written
            head = written[1]
        else:
            head = snapshot.read_parsed(path, _decode) or ""
        new = normalise(content)
        seen = self._seen.setdefault(path, deque(maxlen=STALE_VERSIONS))
        now = time.monotonic()
        recent = {version for stamp, version in seen if arrived - stamp <= window}
        new_id = git_blob_id(new.encode("utf-8", "surrogateescape"))
        if head_id is not None:
            seen.append((now, head_id))  # the version this write replaces
        seen.append((now, new_id))
        self._written[path] = (new_id, new)
        if read is not None:  # made from the version read: merged from it, if HEAD moved on
            if read.text == head:
                return None
            base = str(read.commit) if read.commit else None
            if new == normalise(read.text) and head.startswith(new.rstrip("\n") + BLOCK):
                return Stale(base, head_id, None)
            merged, _ = merge_file(path, read.text.encode("utf-8", "surrogateescape"),
                                   head.encode("utf-8", "surrogateescape"),
                                   new.encode("utf-8", "surrogateescape"))
            return Stale(base, head_id, merged)
        if not head or new == head or new.startswith(head.rstrip("\n") + BLOCK):
            return None
        wanted: dict[str, str] = {}  # version (blob id) -> its text
        if new and head.startswith(new.rstrip("\n") + BLOCK):  # new may be a late duplicate
            wanted[new_id] = new
        end, bases = len(new), 0
        while bases < STALE_BASES and (end := new.rfind(BLOCK, 0, end)) > 0:
            if head.startswith(new[:end + len(BLOCK)]):  # new extends new[:end], and so does HEAD
                bases += 1
                base = normalise(new[:end])
                wanted[git_blob_id(base.encode("utf-8", "surrogateescape"))] = base
        wanted = {version: text for version, text in wanted.items() if version in recent}
        found = self._recent(path, snapshot, wanted, window, arrived) if wanted else None
        if found is None:
            return None
        commit, version = found
        base = wanted[version]
        if base == new:
            return Stale(commit, head_id, None)
        merged, _ = merge_file(path, base.encode("utf-8", "surrogateescape"),
                               head.encode("utf-8", "surrogateescape"),
                               new.encode("utf-8", "surrogateescape"))
        return Stale(commit, head_id, merged)

    def _recent(self, path: str, snapshot: Snapshot, versions: Mapping[str, object],
                window: float, arrived: float) -> tuple[str, str] | None:
        """``(commit, version)``: the newest commit back from ``snapshot`` holding one of
        ``versions`` at ``path``, among those of the ``window`` seconds before ``arrived``
        and the one before them (whose version they replaced); None when there is none."""
        arrived_at = time.time() - (time.monotonic() - arrived)  # on the clock of commit times
        cutoff = arrived_at - window - 1  # commit times are whole seconds
        commit = snapshot.id
        for _ in range(STALE_WALK):
            if commit is None:
                return None
            version = self.engine.snapshot(commit).blob_id(path)
            if version in versions:
                return commit, version
            info = self.engine.commit_info(commit)
            if info.time < cutoff or not info.parents:
                return None
            commit = info.parents[0]
        return None

    def _merge(self, path: str, agent_id: str | None, stale: Stale,
               trailers: Mapping[str, str] | None) -> tuple[str | None, bool]:
        """Commit ``stale.merged`` if HEAD's version is still the one merged onto;
        ``(commit id, whether HEAD had moved)``."""
        moved = []

        def changes(snapshot: Snapshot):
            if snapshot.blob_id(path) != stale.head:
                moved.append(True)
                return None
            return {path: normalise(stale.merged.decode("utf-8", "surrogateescape")).encode(
                "utf-8", "surrogateescape")}

        commit = self.engine.update(
            changes, f"memory: merge a stale replace into {_describe(agent_id)}",
            record_trailers("memory.replace", _record(agent_id),
                            {**(trailers or {}), **({"Gitmem-Merged-Base": stale.base} if stale.base else {})}),
            scope=path)
        if not moved:
            log.info("stale replace of %s merged onto HEAD from the version of %s",
                     _describe(agent_id), stale.base)
        return commit, bool(moved)

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
               trailers: Mapping[str, str] | None = None,
               stale_window: float | None = None, arrived: float | None = None) -> str | None:
        """Remove the memory; returns the commit id (None when there was nothing to delete).
        With ``stale_window``, it takes a read as a write does (see :meth:`write`)."""
        path = self.path(agent_id)
        if stale_window:
            read = self._read_made_from(path, None, stale_window,
                                        time.monotonic() if arrived is None else arrived)
            if read is not None:
                read.taken = True
        return self.engine.update(
            lambda snapshot: {path: None} if snapshot.exists(path) else None,
            f"memory: delete {_describe(agent_id)}",
            record_trailers("memory.delete", _record(agent_id), trailers), scope=path)

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


class Served:
    """A read this store answered: when (monotonic), the text served, the commit read
    (a pygit2.Oid, None: no commit yet, turned into text only when used), and whether a
    write was made from it already."""

    __slots__ = ("time", "text", "commit", "taken")

    def __init__(self, time: float, text: str, commit: object, taken: bool = False):
        self.time, self.text, self.commit, self.taken = time, text, commit, taken


class Stale(NamedTuple):
    """A replace made from an earlier version: the commit that holds that version, HEAD's
    version (blob id) when it was checked, and the merge (None: a late duplicate)."""

    base: str | None  # None: read before the repository's first commit
    head: str | None
    merged: bytes | None


def _made_from(new: str, version: str) -> bool:
    """True when text ``new`` may have been made from ``version``: it is that version or
    extends it (the version, a blank line, more: nui trims the version's whitespace before
    it joins); any text extends the empty version."""
    trimmed = version.strip()
    return not trimmed or new == version or new.startswith(trimmed + BLOCK)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _describe(agent_id: str | None) -> str:
    return "user memory" if agent_id is None else f"agent {printable(agent_id)}"


def _record(agent_id: str | None) -> str:
    """The document as its commits' ``Gitmem-Id`` trailer names it."""
    return "user" if agent_id is None else f"agent:{agent_id}"
