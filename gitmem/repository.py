"""A gitmem repository: the git engine with the record stores on top (the facade).

Where a repository is and whether it may be opened or made is :mod:`gitmem.opening`'s.

    with Gitmem.open("~/gitmem") as mem:
        mem.memory.write("prefers short answers", mode="append")
        mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}])
        mem.log("user")   # commits that touched user memory, newest first
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gitmem.edits import quick_reads
from gitmem.edits.handedits import HandEdits
from gitmem.git.base import CommitInfo, EngineError, MissingRepository
from gitmem.git.engine import GitEngine
from gitmem.history import versions as history
from gitmem.history.record_index import RecordIndex
from gitmem.opening.location import default_repo_path
from gitmem.opening.policy import ForeignRepository, open_engine
from gitmem.records import layout
from gitmem.stores import MemoryStore, SessionStore, ThreadStore
from gitmem.stores.items import ItemStore
from gitmem.stores.memory_tree import MemoryTree

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gitmem.git.base import Identity
    from gitmem.history.blame import Blamed
    from gitmem.search.index import SearchHit, SearchIndex
    from gitmem.search.neighbours import UnitRead


class Gitmem:
    """One repository and its stores: ``memory``, ``memory_tree``, ``sessions``, ``threads``
    and ``items`` (a key-value store's, LangGraph's)."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.memory = MemoryStore(engine)
        self.memory_tree = MemoryTree(engine)  # the /memories tree of Claude's memory tool
        self.sessions = SessionStore(engine)
        self.threads = ThreadStore(engine)
        self.items = ItemStore(engine)
        self.record_index = RecordIndex(engine)  # read when a record's history is asked for
        self._search_index: SearchIndex | None = None  # made on the first search

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, create: bool = True,
             hand_edits: bool = True, adopt: bool = False, **engine_options) -> Gitmem:
        """Open (and, when ``create``, initialise) the repository at ``path`` or the default one.

        A git repository that gitmem did not make (a project's code) is refused with
        :class:`ForeignRepository` unless ``adopt``; even then only on branch ``main``.
        Nothing is written into a refused one. Without ``create`` a missing repository is
        :class:`MissingRepository`, naming the one probably meant; a folder inside a gitmem
        repository is never one (:class:`~gitmem.opening.policy.NotAFolderOfItsOwn`).
        The first time gitmem opens a repository (a plain ``git clone``), the files git
        created are made private (0600, folders 0700).

        ``durability`` (an engine option) defaults to ``$GITMEM_DURABILITY``, else "fast".
        ``hand_edits`` commits a person's uncommitted edit of a record before the record
        is read or written (:mod:`gitmem.edits.handedits`): the engine is opened with the
        hand-edit part, which the stores' reads and writes then go through.
        """
        return cls(open_engine(path, create=create, hand_edits=hand_edits, adopt=adopt,
                               **engine_options))

    def log(self, record: str | None = None, *, limit: int | None = None) -> list[CommitInfo]:
        """Commits that touched ``record`` (``user``, ``agent:<id>``, ...; None for all), newest first."""
        if record is None:
            return self.engine.log.history(None, limit=limit)
        return history.record_commits(self, layout.parse_record(record), limit=limit)

    # -- history (gitmem.history.versions; WHEN is a revision or a date such as "3 days ago") --

    def changes(self, record: str | None = None, *, limit: int | None = None) -> list[history.LogEntry]:
        """Like :meth:`log`, each commit with a one-line summary of what it changed there."""
        return history.log(self, record, limit=limit)

    def show(self, record: str, at: str) -> history.Shown:
        """``record`` as it was at WHEN ``at``."""
        return history.show(self, record, at)

    def diff(self, record: str, since: str | None = None, until: str | None = None) -> history.RecordDiff:
        """What changed in ``record`` between two WHENs (default: its beginning, now)."""
        return history.diff(self, record, since, until)

    def restore(self, record: str, at: str, *, trailers: Mapping[str, str] | None = None,
                author: Identity | None = None) -> history.Restored:
        """Write ``record`` back as it was at WHEN ``at``, as one new commit (with the
        caller's ``trailers`` and ``author``, when a face names itself and the person)."""
        return history.restore(self, record, at, trailers=trailers, author=author)

    def recent(self, since: str, *, limit: int = 50) -> list[history.RecentChange]:
        """What changed across every record since WHEN ``since``, newest first, each change
        with its diff; a person's edits waiting in the work tree are committed first."""
        hand_edits = self.engine.hand_edits
        if isinstance(hand_edits, HandEdits):
            hand_edits.before_access_all()
        return history.recent(self, since, limit=limit)

    def blame(self, record: str) -> list[Blamed]:
        """Each block of a memory, or each message and event of a session or thread, with
        the commit that introduced it."""
        from gitmem.history.blame import blame
        return blame(self, record)

    def session_json(self, agent_type: str, session_id: str) -> tuple[list[bytes], str]:
        """:meth:`SessionStore.read_json_pieces` after the session's hand edits are taken in;
        when the work tree then held HEAD's files of it, a stamp is kept so that the next
        process reads it from the work tree (:func:`gitmem.edits.quick_reads.session_json`)."""
        folder = self.sessions.folder(agent_type, session_id)
        hand_edits = self.engine.hand_edits
        look = hand_edits.settled_look(folder) if isinstance(hand_edits, HandEdits) else None
        head = self.engine.snapshot()
        found = self.sessions.read_json_pieces(agent_type, session_id, snapshot=head)
        if look is not None and self.engine.writable and head.id == look.head:
            quick_reads.keep_stamp(self.engine, folder, head, look.started_ns)
        return found

    @property
    def search_index(self) -> SearchIndex:
        """The search index (:mod:`gitmem.search.index`), loaded on first use."""
        if self._search_index is None:
            from gitmem.search.index import SearchIndex
            self._search_index = SearchIndex(self.engine)
        return self._search_index

    def search(self, query: str, history: bool = False, kind: str | None = None,
               record: str | None = None, since: str | None = None, until: str | None = None,
               limit: int = 20, at: str | None = None, context: int = 0, meaning: bool = False,
               progress=None, embed_at_most: int | None = None) -> list[SearchHit]:
        """The memory blocks, session messages and thread events matching ``query`` (any
        text: plain words, or operators, :mod:`gitmem.search.query`), best first; with
        ``history`` also text main no longer holds, with ``at`` (a WHEN) what main held
        then; ``context`` adds that many units on each side of a hit. ``meaning`` ranks by
        meaning too (:mod:`gitmem.search.meaning`; ``progress(done, total)`` hears of the
        units it embeds first, at most ``embed_at_most``, by default 2,000; the hits then
        say how many are left, ``hits.unembedded``)."""
        return self.search_index.search(query, history=history, kind=kind, record=record,
                                        since=since, until=until, at=at, context=context,
                                        limit=limit, meaning=meaning, progress=progress,
                                        embed_at_most=embed_at_most)

    def read_unit(self, record: str, unit_id: str | int, context: int = 0) -> list[UnitRead]:
        """The unit of ``record`` a search hit's ``unit_id`` names, at HEAD, with up to
        ``context`` units on each side (:mod:`gitmem.search.neighbours`)."""
        from gitmem.search.neighbours import read_unit, record_units
        return read_unit(record_units(self.memory, self.sessions, self.threads, self.items), record,
                         unit_id, context)

    def close(self) -> None:
        if self._search_index is not None:
            self._search_index.close()
        self.engine.close()

    def __enter__(self) -> Gitmem:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Gitmem", "EngineError", "ForeignRepository", "MissingRepository", "default_repo_path"]
