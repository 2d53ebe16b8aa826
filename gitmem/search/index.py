"""Search every record, and with ``history`` everything they ever held: ``gitmem search``.

A record is cut into units: a memory into its blocks (what ``append`` joins with a
blank line), a session into its messages, a thread into its events and messages. The
search index holds each unit's words once per time it came into a record, with the
commit of main that brought it in and the one that took it out (none while it is
still there), in SQLite's FTS5 (BM25 ranking; English stems, case and accents ignored,
each character of unspaced writing a word), a second time with the text of the unit before
it in its file (for questions), and its own date. It keeps no
copy of the text: a hit's snippet is cut from the unit as its blob holds it.

The index is a cache, ``.git/gitmem/search.sqlite``, never committed: deleting it
changes no answer, only the time of the next search. It follows main's first-parent
line (the states main went through here, :mod:`gitmem.git.changes`), whoever made the
commits: gitmem, a hand edit, plain ``git commit``, a sync merge (what it brought in
counts from the merge), a clone's whole history. A search first takes in the hand
edits waiting in the work tree (as a read does), then the commits the index lacks,
in time that follows what they changed; a write never touches it. A main that no
longer holds the last commit indexed (an amend, a reset, ``gitmem forget``) makes it
start over. Image data (base64, ``data:`` URLs) is never indexed.

Queries are plain words (any of them; ranked by relevance), or operators when they use
them: ``"a phrase"``, ``prefix*``, ``OR`` between alternatives, ``-word`` to leave out
(:mod:`gitmem.search.query`). Either way they are translated into FTS5's syntax there,
so no query is refused and none reaches FTS5 unparsed.

    for hit in mem.search("when do we deploy?", at="2026-11-01", context=1):
        print(hit.record, hit.unit_id, hit.date, hit.snippet, hit.context)
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import TypeVar, cast

from gitmem.edits.handedits import HandEdits, SettledLook
from gitmem.errors import GitmemError, HistoryError, InvalidInput
from gitmem.git import gitproc, stamp
from gitmem.git.base import EngineError
from gitmem.git.changes import TIMEOUT, Step, StepsUnavailable, count_steps, first_parent_steps
from gitmem.git.engine import GitEngine
from gitmem.git.lock import FileLock, LockTimeout
from gitmem.history.versions import resolve_when
from gitmem.records import layout
from gitmem.records.dates import parse_time
from gitmem.search.embeddings import Provider, configured_spec, provider_from
from gitmem.search.meaning import (MeaningHits, VectorCache, by_meaning, embed, lacking,
                                   live_units)
from gitmem.search.meaning import FILE as VECTORS
from gitmem.search.query import (FILE, FORMAT, STAMP_SCOPE, TOKENIZER, Parsed, SearchHit, answer,
                                 check_options, hits_of, meta, parse, spaced, stamp_holds)
from gitmem.records.units import befores_and_dates, record_kind, unit_changes, unit_key, unit_kind

LOCK_FILE = "search.lock"
LOCK_WAIT = 120.0  # seconds another process may take to bring the index up to date
BATCH = 2000  # steps per transaction: a build cut short resumes from the last batch
ProgressCallback = Callable[[int, int], None]
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE commits(id INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE, time INTEGER NOT NULL,
                     date TEXT NOT NULL);
CREATE TABLE records(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
                     kind TEXT NOT NULL);
CREATE TABLE units(id INTEGER PRIMARY KEY, record INTEGER NOT NULL, unit TEXT NOT NULL,
                   path TEXT NOT NULL, blob TEXT NOT NULL, key INTEGER NOT NULL,
                   added INTEGER NOT NULL, removed INTEGER, asks INTEGER NOT NULL, time INTEGER);
CREATE INDEX live_units ON units(record, key) WHERE removed IS NULL;
CREATE INDEX unit_order ON units(record, id);
CREATE VIRTUAL TABLE unit_search USING fts5(text, content='', tokenize='TOKENIZER');
CREATE VIRTUAL TABLE unit_with_previous USING fts5(text, previous, content='', tokenize='TOKENIZER');
""".replace("TOKENIZER", TOKENIZER)


class SearchUnavailable(GitmemError):
    """The index could not be brought up to date (another process holds it too long,
    or git could not list the history)."""


# -- the index --------------------------------------------------------------------


class SearchIndex:
    """The search index of one repository (see the module's docstring).

    ``steps`` counts the commits this object took in, and ``rebuilds`` the times it
    started over, for tests and the bench.
    """

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.path = engine.private_dir / FILE
        self.steps = 0
        self.rebuilds = 0
        self._db: sqlite3.Connection | None = None
        self._opened: int | None = None  # the inode of the file _db has open
        self._lock = FileLock(self.path.with_name(LOCK_FILE), timeout=LOCK_WAIT)
        self.vectors = VectorCache(engine.private_dir / VECTORS if engine.writable else None)
        self._provider: Provider | None = None

    # -- answers ------------------------------------------------------------------

    def search(self, query: str, *, history: bool = False, kind: str | None = None,
               record: str | None = None, since: str | None = None, until: str | None = None,
               at: str | None = None, context: int = 0, limit: int = 20,
               progress: ProgressCallback | None = None, meaning: bool = False,
               embed_at_most: int | None = None) -> list[SearchHit]:
        """The units matching ``query``, best first: those at HEAD, with ``history``
        every unit main ever held, with ``at`` (a WHEN, as ``gitmem log`` takes) those
        main held then. ``since``/``until`` (WHENs) keep the hits that came or went in
        between; ``context`` adds that many units on each side of a hit. With ``meaning``
        the units at HEAD are ranked by meaning too (:mod:`gitmem.search.meaning`), after
        embedding up to ``embed_at_most`` (None: :data:`~gitmem.search.meaning.BOUND`) of
        those without a vector (``progress`` is told how many); the hits are then
        :class:`~gitmem.search.meaning.MeaningHits`, which say how many are left."""
        parsed = parse(query)
        check_options(kind, limit, context)
        if at is not None and history:
            raise InvalidInput("at and history do not go together: at searches one time, "
                               "history every time")
        if meaning and (history or at or since or until):
            raise InvalidInput("meaning searches what main holds now: not with history, at, "
                               "since or until")
        path = layout.parse_record(record).path if record is not None else None
        window = (self._moment(since), self._moment(until))
        moment = self._at(at)
        options = dict(history=history, kind=kind, path=path, window=window, limit=limit,
                       context=context)
        if meaning:
            self.provider()  # off, or not installed: said before anything is indexed
            options["embed_at_most"] = embed_at_most
        try:
            return self._query(query, parsed, moment, options, progress, meaning)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # not damage: said as it is
                raise
        with self._locked():  # damaged inside (a disk error, a bad copy): built anew
            self._start_over()
        return self._query(query, parsed, moment, options, progress, meaning)

    def _query(self, text: str, query: Parsed, moment: tuple[int, str | None] | None, options: dict,
               progress: ProgressCallback | None, meaning: bool = False) -> list[SearchHit]:
        db = self._open()
        if not self._stamp_holds(db):
            look = self._take_in_hand_edits(options["path"])
            db = self.catch_up(progress)
            if look is not None and meta(db, "tip") == look.head:
                self._stamp(db, look.started_ns)
        at, view = None, meta(db, "tip")
        if moment is not None:  # the commit named, else the last one main had by then (0: none)
            time, commit = moment
            found = db.execute("SELECT id, sha FROM commits WHERE sha = ?", (commit,)).fetchone()
            found = found or db.execute("SELECT id, sha FROM commits WHERE time <= ? ORDER BY id DESC"
                                        " LIMIT 1", (time,)).fetchone()
            at, view = found if found else (0, None)
        # A hit's unit is looked for in its file as main held it then (now, or at): its
        # position and neighbours are those of that version, not of the one that added it.
        snapshot = self.engine.snapshot_of(view) if view else None
        read_file = None if snapshot is None else lambda path: _read(snapshot, path)
        if meaning:
            rows, scores, unembedded = self._by_meaning(db, text, query, read_file, options, progress)
            return MeaningHits(hits_of(db, rows, scores, query, self._read_blobs,
                                       context=options["context"], read_file=read_file), unembedded)
        return answer(db, query, self._read_blobs, at=at, read_file=read_file, **options)

    def _by_meaning(self, db: sqlite3.Connection, text: str, query: Parsed, read_file, options: dict,
                    progress: ProgressCallback | None) -> tuple[list[tuple], dict[int, float], int]:
        def ranked() -> tuple[list[tuple], dict[int, float], int]:
            return by_meaning(db, self.vectors, self.provider(), text, query, self._read_blobs,
                              read_file, kind=options["kind"], path=options["path"],
                              limit=options["limit"], bound=options["embed_at_most"],
                              progress=progress)
        return self._vectors_anew_if_damaged(ranked)

    def _vectors_anew_if_damaged(self, run: Callable[[], T]) -> T:
        """``run()``, and once more after deleting the vectors' cache when it is damaged
        (a disk error, a bad copy: the vectors are embedded anew)."""
        try:
            return run()
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # not damage: said as it is
                raise
        self.vectors.drop()
        return run()

    def provider(self) -> Provider:
        """The embeddings provider this repository is set to (:mod:`gitmem.search.embeddings`),
        loaded on first use."""
        if self._provider is None:
            self._provider = provider_from(configured_spec(self.engine.config_get))
        return self._provider

    def embed_missing(self, stop: Callable[[], bool] | None = None,
                      progress: ProgressCallback | None = None) -> int:
        """Bring the index up to main's tip, then embed every unit at HEAD without a vector,
        a batch at a time, until ``stop()`` says to stop (asked between batches; a batch
        made while the index was deleted, by ``gitmem forget``, is not kept); how many
        units were embedded. The index's lock is held only while it catches up."""
        db = self.catch_up()
        opened = self._opened
        tip = meta(db, "tip")
        snapshot = self.engine.snapshot_of(tip) if tip else None
        read_file = None if snapshot is None else lambda path: _read(snapshot, path)
        provider = self.provider()
        live = live_units(db)

        def stopped() -> bool:
            return (stop is not None and stop()) or _inode(self.path) != opened

        def embedded() -> int:
            vectors = self.vectors.vectors(provider.name, sorted({row[4] for row in live}))
            return embed(self.vectors, provider, lacking(live, vectors), self._read_blobs, read_file,
                         progress=progress, stop=stopped)
        return self._vectors_anew_if_damaged(embedded)

    def _read_blobs(self, ids: list[str]) -> dict[str, bytes]:
        found = {}
        for blob_id in ids:
            try:
                found[blob_id] = self.engine.read_blob(blob_id)
            except (KeyError, ValueError, EngineError):  # gone (a gc after a rewrite)
                continue
        return found

    def _moment(self, when: str | None) -> int | None:
        found = self._at(when)
        return None if found is None else found[0]

    def _at(self, when: str | None) -> tuple[int, str | None] | None:
        """(time, commit) that ``at`` names: a date's time, or a revision's commit and its
        time (a commit that changed no unit is not in the index: its time then says)."""
        if when is None:
            return None
        moment = parse_time(when)
        if moment is not None:
            return int(moment), None
        commit = resolve_when(self.engine, when)
        if commit is None:
            raise HistoryError(f"{when!r} names no commit")
        return self.engine.log.commit_info(commit).time, commit

    def _take_in_hand_edits(self, path: str | None) -> SettledLook | None:
        """What a read does first: commit the hand edits waiting (of ``path``'s record, or
        all). The look when it was at every record and found each holding HEAD's version
        (the stamp is of a look at them all)."""
        if self.engine.hand_edits is None:
            return None
        look = HandEdits.of(self.engine).settled_look(path)
        return look if path is None else None

    def _stamp_holds(self, db: sqlite3.Connection) -> bool:
        """True when a search needs neither a look at the work tree nor a catch-up
        (:func:`gitmem.search.query.stamp_holds`)."""
        return self.engine.hand_edits is not None and stamp_holds(db, self.engine.gitdir, self.engine.workdir)

    def _stamp(self, db: sqlite3.Connection, started_ns: int) -> None:
        """Keep a stamp of the look at the work tree that started at ``started_ns`` and
        found every record holding HEAD, for the next search (in this process or another)."""
        engine = self.engine
        taken = stamp.take(engine.gitdir, engine.workdir, meta(db, "tip") or "", layout.TOP_FOLDERS,
                           started_ns)
        if taken is not None:
            stamp.keep(engine.gitdir, STAMP_SCOPE, taken)

    # -- keeping it up to date ----------------------------------------------------

    def catch_up(self, progress: ProgressCallback | None = None) -> sqlite3.Connection:
        """Bring the index up to main's tip; the open database."""
        head = self.engine.head() or ""
        db = self._open()
        if self._tip(db) == head:
            return db
        with self._locked():
            db = self._open()
            tip = self._tip(db)
            if tip == head:
                return db
            if tip and not self.engine.log.descends_from(head, tip):  # an amend, a reset, forget
                db, tip = self._start_over(), ""
            if head:
                self._take_in(db, tip or None, head, progress)
            db.execute("INSERT OR REPLACE INTO meta VALUES ('tip', ?)", (head,))
        return db

    def _take_in(self, db: sqlite3.Connection, since: str | None, head: str,
                 progress: ProgressCallback | None) -> None:
        """Index the steps from ``since`` to ``head``, a transaction a :data:`BATCH`."""
        gitdir = self.engine.gitdir
        try:
            total = count_steps(gitdir, since=since, tip=head)
            steps = first_parent_steps(gitdir, since=since, tip=head)
            writer, done = _Writer(db, self.engine), 0
            if progress is not None:
                progress(0, total)
            while batch := list(itertools.islice(steps, BATCH)):
                db.execute("BEGIN IMMEDIATE")
                try:
                    with writer.reading_ahead(batch):
                        for step in batch:
                            writer.step(step)
                    writer.flush()
                    db.execute("INSERT OR REPLACE INTO meta VALUES ('tip', ?)", (batch[-1].commit,))
                    db.execute("COMMIT")
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                done += len(batch)
                self.steps += len(batch)
                if progress is not None:
                    progress(min(done, total), total)
        except StepsUnavailable as exc:
            raise SearchUnavailable(f"cannot read main's history for the search index: {exc}") from None

    def _tip(self, db: sqlite3.Connection) -> str:
        return meta(db, "tip") or ""

    def _open(self) -> sqlite3.Connection:
        """The open index; made anew when it is missing, of another format or damaged."""
        if self._db is not None and (not self.engine.writable or self._opened == _inode(self.path)):
            return self._db
        self.close()
        if not self.engine.writable:  # a read-only repository: built in memory, each time
            return self._start_over()
        try:
            db = _connect(str(self.path))
            if meta(db, "format") == FORMAT:
                self._db, self._opened = db, _inode(self.path)
                return db
            db.close()
        except sqlite3.DatabaseError:
            pass
        with self._locked():
            return self._start_over()

    def _start_over(self) -> sqlite3.Connection:
        """A new, empty index in place of the old one (the old file removed first, so
        nothing it held, a forgotten secret say, lingers in free pages)."""
        self.rebuilds += 1
        self.close()
        if self.engine.writable:
            self.drop()
        db = _connect(str(self.path) if self.engine.writable else ":memory:")
        db.executescript(_SCHEMA)
        db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        self._db, self._opened = db, _inode(self.path)
        return db

    def drop(self) -> None:
        """Delete the index (it is rebuilt on the next search)."""
        self.close()
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    def close(self) -> None:
        self.vectors.close()
        if self._db is not None:
            self._db.close()
            self._db = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Held while the index is changed (one holder across processes, re-entrant)."""
        if not self.engine.writable:  # the index is this process's own, in memory
            yield
            return
        try:
            self._lock.acquire()
        except LockTimeout:
            raise SearchUnavailable(f"another process has been bringing the search index up "
                                    f"to date for {LOCK_WAIT:g} s; try again") from None
        try:
            yield
        finally:
            self._lock.release()


def _read(snapshot, path: str) -> bytes | None:
    """The file at ``path`` in ``snapshot``; None when it is not there or cannot be read."""
    try:
        return snapshot.read(path)
    except (KeyError, ValueError, EngineError):
        return None


def _seconds(date: str | None) -> int | None:
    """A unit's own date (:func:`~gitmem.records.units.unit_date`) as seconds since the
    epoch (one without a zone taken as UTC); None when it has none or it is no date."""
    if not date:
        return None
    try:
        moment = datetime.fromisoformat(date)
    except ValueError:
        return None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp())


def _inode(path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _connect(target: str) -> sqlite3.Connection:
    db = sqlite3.connect(target, timeout=LOCK_WAIT, isolation_level=None, check_same_thread=False)
    if target != ":memory:":
        os.chmod(target, 0o600)
        db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


class _Writer:
    """Takes steps into an open index, inside the caller's transaction; :meth:`flush`
    writes what it gathered."""

    def __init__(self, db: sqlite3.Connection, engine: GitEngine):
        self.db = db
        self.engine = engine
        self._records: dict[str, int] = dict(
            (path, rowid) for rowid, path in db.execute("SELECT id, path FROM records"))
        self._next_unit = db.execute("SELECT coalesce(max(id), 0) + 1 FROM units").fetchone()[0]
        self._next_commit = db.execute("SELECT coalesce(max(id), 0) + 1 FROM commits").fetchone()[0]
        self._last: dict[str, tuple[str, bytes]] = {}  # path: (blob id, bytes), read last step
        self._commits: list[tuple] = []
        self._units: dict[int, list] = {}  # id: row, not written yet
        self._live: dict[tuple[int, int], list[int]] = {}  # (record, key): ids in _units still there
        self._texts: list[tuple[int, str, str]] = []  # (unit id, text, the text before it)
        self._ahead: Iterator[tuple[str, bytes]] | None = None  # blobs git reads ahead, in order

    @contextlib.contextmanager
    def reading_ahead(self, steps: list[Step]) -> Iterator[None]:
        """While the block takes ``steps``, the blobs they read come from one ``git cat-file``
        reading ahead on a core of its own: libgit2's reads were a third of a clone's first
        search. Anything git does not give is read through the engine, which says what is wrong."""
        ahead = gitproc.read_objects(self.engine.gitdir, list(self._wanted(steps)), timeout=TIMEOUT)
        self._ahead = ahead
        try:
            yield
        finally:
            self._ahead = None
            ahead.close()  # ends git if it is still reading

    def _wanted(self, steps: list[Step]) -> Iterator[str]:
        """The blobs :meth:`step` will read for ``steps``, in the order it reads them."""
        last = {path: blob for path, (blob, _) in self._last.items()}
        for step in steps:
            for path, old, new in step.files:
                if unit_kind(path) is None:
                    continue
                for blob in (new, old):
                    if blob is not None and last.get(path) != blob:
                        yield blob
                if new is not None:
                    last[path] = new

    def step(self, step) -> None:
        changes: dict[tuple[str, str], tuple[Counter, list[tuple[str, tuple, str, str]]]] = {}
        for path, old, new in step.files:
            found = unit_kind(path)
            if found is None:
                continue
            new_data = self._read(path, new)
            removed, added = unit_changes(found[1], self._read(path, old), new_data)
            if new is not None and new_data is not None:  # one is None when the other is
                self._last[path] = (new, new_data)
            gone, came = changes.setdefault(found, (Counter(), []))
            gone.update(removed)
            details = befores_and_dates(found[1], new_data or b"", added)
            came.extend((text, detail, path, new) for text, detail in zip(added, details, strict=True))
        if not changes:
            return
        commit = self._next_commit
        self._next_commit += 1
        self._commits.append((commit, step.commit, step.time, step.date))
        for (record, unit), (gone, came) in changes.items():
            record_id = self._record(record)
            kept = gone & Counter(text for text, _, _, _ in came)  # moved between chunks of one log
            for text in (gone - kept).elements():
                self._remove(record_id, unit_key(unit, text), commit)
            for text, (before, date), path, blob in came:
                if kept[text]:
                    kept[text] -= 1
                else:
                    self._add(record_id, unit, path, blob, text, before, _seconds(date), commit)

    def flush(self) -> None:
        self.db.executemany("INSERT INTO commits(id, sha, time, date) VALUES (?, ?, ?, ?)",
                            self._commits)
        self.db.executemany("INSERT INTO units(id, record, unit, path, blob, key, added, removed, asks,"
                            " time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self._units.values())
        texts = [(unit, spaced(text), spaced(before)) for unit, text, before in self._texts]
        self.db.executemany("INSERT INTO unit_search(rowid, text) VALUES (?, ?)",
                            [(unit, text) for unit, text, _ in texts])
        self.db.executemany("INSERT INTO unit_with_previous(rowid, text, previous) VALUES (?, ?, ?)", texts)
        self._commits, self._units, self._live, self._texts = [], {}, {}, []

    def _read(self, path: str, blob: str | None) -> bytes | None:
        if blob is None:
            return None
        last = self._last.get(path)
        if last is not None and last[0] == blob:
            return last[1]
        if self._ahead is not None:
            try:
                found, data = next(self._ahead)
            except (StopIteration, ValueError, OSError, subprocess.SubprocessError, gitproc.GitMissing,
                    gitproc.GitTimeout):
                self._ahead = None  # git failed, or gave out: the engine reads the rest
            else:
                if found == blob:
                    return data
                self._ahead = None  # missing there, or out of step: from here on the engine reads
        return self.engine.read_blob(blob)

    def _record(self, record: str) -> int:
        if record not in self._records:
            self._records[record] = cast(int, self.db.execute(  # an INSERT's row id: never None
                "INSERT INTO records(path, name, kind) VALUES (?, ?, ?)",
                (record, layout.record_name(record), record_kind(record))).lastrowid)
        return self._records[record]

    def _add(self, record: int, unit: str, path: str, blob: str, text: str, before: str,
             time: int | None, commit: int) -> None:
        unit_id, key = self._next_unit, unit_key(unit, text)
        self._next_unit += 1
        self._units[unit_id] = [unit_id, record, unit, path, blob, key, commit, None, "?" in text, time]
        self._live.setdefault((record, key), []).append(unit_id)
        self._texts.append((unit_id, text, before))

    def _remove(self, record: int, key: int, commit: int) -> None:
        pending = self._live.get((record, key))
        if pending:
            self._units[pending.pop(0)][7] = commit
            return
        self.db.execute(
            "UPDATE units SET removed = ? WHERE id = (SELECT id FROM units WHERE record = ? AND"
            " key = ? AND removed IS NULL ORDER BY id LIMIT 1)", (commit, record, key))
