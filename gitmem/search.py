"""Search every record, and with ``history`` everything they ever held: ``gitmem search``.

A record is cut into units: a memory into its blocks (what ``append`` joins with a
blank line), a session into its messages, a thread into its events and messages. The
search index holds each unit's words once per time it came into a record, with the
commit of main that brought it in and the one that took it out (none while it is
still there), in SQLite's FTS5 (BM25 ranking; case and accents ignored). It keeps no
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

Queries: words (all must match, in any order), ``"a phrase"``, ``prefix*``, ``OR``
between alternatives, ``-word`` to leave out. They are translated into FTS5's syntax
here, so a query FTS5 could not parse never reaches it: :class:`BadQuery` says what is
wrong instead.

    for hit in mem.search("deploy friday", history=True):
        print(hit.record, hit.unit, hit.snippet, hit.added, hit.removed)
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import re
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from gitmem import layout
from gitmem.blame import blocks
from gitmem.errors import BadQuery, InvalidInput
from gitmem.git.base import EngineError
from gitmem.git.changes import StepsUnavailable, count_steps, first_parent_steps
from gitmem.git.engine import GitEngine
from gitmem.git.lock import FileLock, LockTimeout
from gitmem.handedits import HandEdits
from gitmem.history import HistoryError, parse_time, resolve_when
from gitmem.ids import UndecodableId, decode
from gitmem.record_index import record_path

FILE = "search.sqlite"  # in .git/gitmem/
LOCK_FILE = "search.lock"
FORMAT = "2"  # of the tables: another one is built anew
LOCK_WAIT = 120.0  # seconds another process may take to bring the index up to date
BATCH = 2000  # steps per transaction: a build cut short resumes from the last batch
KINDS = ("memory", "session", "thread")
MARK = ("**", "**")  # around each matched word of a snippet
SNIPPET_WORDS = 16
TOKENIZER = "unicode61 remove_diacritics 2"
ProgressCallback = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE commits(id INTEGER PRIMARY KEY, sha TEXT NOT NULL UNIQUE, time INTEGER NOT NULL,
                     date TEXT NOT NULL);
CREATE TABLE records(id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
                     kind TEXT NOT NULL);
CREATE TABLE units(id INTEGER PRIMARY KEY, record INTEGER NOT NULL, unit TEXT NOT NULL,
                   path TEXT NOT NULL, blob TEXT NOT NULL, key INTEGER NOT NULL,
                   added INTEGER NOT NULL, removed INTEGER);
CREATE INDEX live_units ON units(record, key) WHERE removed IS NULL;
CREATE VIRTUAL TABLE unit_search USING fts5(text, content='', tokenize='TOKENIZER');
""".replace("TOKENIZER", TOKENIZER)
# Snippets are cut from the hits' own text, read back from git: the index keeps no copy.
_HIT_TEXTS = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.hit_texts USING fts5(text, tokenize='TOKENIZER')"
              .replace("TOKENIZER", TOKENIZER))


class SearchUnavailable(Exception):
    """The index could not be brought up to date (another process holds it too long,
    or git could not list the history)."""


@dataclasses.dataclass(frozen=True)
class SearchHit:
    """One unit that matched: where, what, how well, and when it came and went."""

    record: str  # as ``gitmem log`` names it: user, agent:<id>, session:<type>/<id>, thread:<id>
    unit: str  # "block" (of a memory), "message" (of a session or thread) or "event"
    snippet: str  # the matched words between MARK
    score: float  # higher is better (BM25)
    added: str  # the commit that brought this text into the record
    added_date: str
    removed: str | None  # the commit that took it out; None while it is still there
    removed_date: str | None
    path: str  # the file that held it

    def as_json(self) -> dict[str, Any]:
        """The object ``gitmem search --json`` prints for this hit."""
        return dataclasses.asdict(self)


# -- the query language -----------------------------------------------------------

_TERM = re.compile(r'(-?)(?:"([^"]*)"|([^\s"]+))')


@dataclasses.dataclass(frozen=True)
class _Term:
    text: str
    prefix: bool
    negated: bool

    def fts(self) -> str:
        return '"' + self.text.replace('"', '""') + '"' + (" *" if self.prefix else "")


def to_fts(query: str) -> str:
    """``query`` in FTS5's syntax; :class:`BadQuery` when it cannot be parsed."""
    if query.count('"') % 2:
        raise BadQuery('unbalanced quote: a " opens a phrase that no " closes')
    groups: list[list[_Term]] = [[]]
    at = 0
    while True:
        while at < len(query) and query[at].isspace():
            at += 1
        if at >= len(query):
            break
        match = _TERM.match(query, at)
        at = match.end()
        negated, phrase, word = bool(match[1]), match[2], match[3]
        if word == "OR" and not negated:
            if not groups[-1]:
                raise BadQuery("OR needs a word on each side")
            groups.append([])
            continue
        if word is not None and not word.strip("-*"):
            raise BadQuery(f"a lone {match[0]!r}: put it right before a word, as in -draft "
                           "or deploy*")
        text, prefix = (phrase, False) if phrase is not None else (word.rstrip("*"), word.endswith("*"))
        if phrase is not None and query.startswith("*", at):
            prefix, at = True, at + 1
        if not any(char.isalnum() for char in text):
            continue  # punctuation only, or an empty phrase: no word to match
        groups[-1].append(_Term(text, prefix, negated))
    if len(groups) > 1 and not groups[-1]:
        raise BadQuery("OR needs a word on each side")
    if not any(groups):
        raise BadQuery("empty query: give at least one word to search for")
    clauses = []
    for group in groups:
        wanted = [term.fts() for term in group if not term.negated]
        if not wanted:
            raise BadQuery("-word only leaves words out: give at least one word to find "
                           "beside it")
        clause = "(" + " AND ".join(wanted) + ")"
        clauses.append(clause + "".join(" NOT " + t.fts() for t in group if t.negated))
    return " OR ".join(f"({clause})" for clause in clauses)


# -- units: what the index holds of a record file ---------------------------------

_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
LONG_RUN = 200  # characters of base64 without a break: image data, not words
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{%d,}={0,2}" % LONG_RUN)
_STRUCTURE_KEYS = {"type", "role", "id", "timestamp", "createdAt", "updatedAt", "mediaType",
                   "mimeType"}


def unit_kind(path: str) -> tuple[str, str] | None:
    """(record path, unit) for a file whose text the index holds; None for others
    (metadata, images)."""
    record = record_path(path)
    if record is None:
        return None
    if record == path:
        return (record, "block") if path.endswith(".md") else None
    rest = path[len(record) + 1:].split("/")
    if len(rest) != 2 or not rest[1].endswith(".jsonl"):
        return None
    if rest[0] == "messages":
        return record, "message"
    if rest[0] == "events" and record.startswith(layout.THREADS + "/"):
        return record, "event"
    return None


def record_kind(record: str) -> str:
    return "memory" if record.startswith(layout.MEMORY + "/") else \
        "session" if record.startswith(layout.SESSIONS + "/") else "thread"


def record_name(record: str) -> str:
    """The name ``gitmem log`` takes for the record at path ``record``."""
    parts = record.split("/")
    if record == layout.USER_MEMORY:
        return "user"
    if parts[0] == layout.MEMORY:
        return f"agent:{_decoded(parts[2][:-len('.md')])}"
    if parts[0] == layout.SESSIONS:
        return f"session:{_decoded(parts[1])}/{_decoded(parts[2])}"
    return f"thread:{_decoded(parts[1])}"


def _decoded(segment: str) -> str:
    try:
        return decode(segment)
    except UndecodableId:  # a shortened id: its full form is in the record's meta.json
        return segment


def scrub(text: str) -> str:
    """``text`` without image data: ``data:`` URLs and long base64 runs."""
    if "base64," in text:
        text = _DATA_URL.sub("", text)
    if len(max(text.split(), key=len, default="")) >= LONG_RUN:
        text = _BASE64_RUN.sub("", text)
    return text


def line_text(line: str) -> str:
    """The text of one JSONL line (a message or event): its strings, less ids, types
    and image data."""
    try:
        value = json.loads(line)
    except ValueError:
        return scrub(line)
    return scrub("\n".join(_strings(value, None)))


def _strings(value: Any, key: str | None) -> Iterator[str]:
    if isinstance(value, str):
        if key in _STRUCTURE_KEYS or (key or "").endswith("Id") or value.startswith("gitmem:"):
            return
        if key == "data" and _BASE64.fullmatch(value) is not None:
            return
        yield value
    elif isinstance(value, dict):
        for name, item in value.items():
            yield from _strings(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)


def _units(unit: str, data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    if unit == "block":
        return [scrub(block) for block in blocks(text)]
    return [line_text(line) for line in text.splitlines() if line.strip()]


def unit_changes(unit: str, old: bytes | None, new: bytes | None) -> tuple[list[str], list[str]]:
    """(removed, added) unit texts from file content ``old`` to ``new``. An append
    (``new`` starts with ``old``) is cut after the last unit ``old`` surely completes."""
    old, new = old or b"", new or b""
    cut = 0
    if old and new.startswith(old):
        cut = max(old.rfind(b"\n\n"), 0) if unit == "block" else old.rfind(b"\n") + 1
    gone = Counter(_units(unit, old[cut:]))
    came = Counter(_units(unit, new[cut:]))
    return list((gone - came).elements()), list((came - gone).elements())


def _key(unit: str, text: str) -> int:
    digest = hashlib.blake2b(f"{unit}\0{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


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

    # -- answers ------------------------------------------------------------------

    def search(self, query: str, *, history: bool = False, kind: str | None = None,
               record: str | None = None, since: str | None = None, until: str | None = None,
               limit: int = 20, progress: ProgressCallback | None = None) -> list[SearchHit]:
        """The units matching ``query``, best first: those at HEAD, or with ``history``
        every unit main ever held. ``since``/``until`` (WHENs, as ``gitmem log`` takes)
        keep the hits that came or went in between."""
        expression = to_fts(query)
        if kind is not None and kind not in KINDS:
            raise InvalidInput(f"not a kind of record: {kind!r} (use {', '.join(KINDS)})")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a whole number of at least 1, not {limit!r}")
        path = layout.parse_record(record).path if record is not None else None
        window = (self._moment(since), self._moment(until))
        self._take_in_hand_edits(path)
        try:
            return self._query(expression, history, kind, path, window, limit, progress)
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError):  # not damage: said as it is
                raise
        with self._locked():  # damaged inside (a disk error, a bad copy): built anew
            self._start_over()
        return self._query(expression, history, kind, path, window, limit, progress)

    def _query(self, expression: str, history: bool, kind: str | None, path: str | None,
               window: tuple[int | None, int | None], limit: int,
               progress: ProgressCallback | None) -> list[SearchHit]:
        db = self.catch_up(progress)
        where, params = ["unit_search MATCH ?"], [expression]
        if not history:
            where.append("u.removed IS NULL")
        if kind is not None:
            where.append("r.kind = ?")
            params.append(kind)
        if path is not None:
            where.append("r.path = ?")
            params.append(path)
        low, high = window
        if low is not None or high is not None:
            where.append("(ca.time BETWEEN ? AND ? OR cr.time BETWEEN ? AND ?)")
            bounds = (low if low is not None else -2**62, high if high is not None else 2**62)
            params.extend(bounds * 2)
        rows = db.execute(
            "SELECT u.id, r.name, u.unit, u.path, u.blob, u.key, bm25(unit_search),"
            " ca.sha, ca.date, cr.sha, cr.date"
            " FROM unit_search JOIN units u ON u.id = unit_search.rowid"
            " JOIN records r ON r.id = u.record JOIN commits ca ON ca.id = u.added"
            " LEFT JOIN commits cr ON cr.id = u.removed"
            f" WHERE {' AND '.join(where)} ORDER BY bm25(unit_search), u.id LIMIT ?",
            [*params, limit]).fetchall()
        snippets = self._snippets(db, expression, [(r[0], r[2], r[4], r[5]) for r in rows])
        return [SearchHit(name, unit, snippets.get(unit_id, ""), round(-score, 6), added,
                          added_date, removed, removed_date, file)
                for unit_id, name, unit, file, _blob, _key, score, added, added_date, removed,
                removed_date in rows]

    def _snippets(self, db: sqlite3.Connection, expression: str,
                  hits: list[tuple[int, str, str, int]]) -> dict[int, str]:
        """{unit id: snippet} for hits (unit id, unit, blob, key): each unit's text read
        from its blob, and FTS5's snippet of it."""
        texts = []
        for unit_id, unit, blob, key in hits:
            try:
                data = self.engine.read_blob(blob)
            except (KeyError, ValueError, EngineError):  # gone (a gc after a rewrite)
                continue
            text = next((t for t in _units(unit, data) if _key(unit, t) == key), None)
            if text is not None:
                texts.append((unit_id, text))
        db.execute(_HIT_TEXTS)
        db.execute("DELETE FROM temp.hit_texts")
        db.executemany("INSERT INTO temp.hit_texts(rowid, text) VALUES (?, ?)", texts)
        return dict(db.execute(
            "SELECT rowid, snippet(hit_texts, 0, ?, ?, '…', ?) FROM temp.hit_texts"
            " WHERE hit_texts MATCH ?", (*MARK, SNIPPET_WORDS, expression)))

    def _moment(self, when: str | None) -> int | None:
        if when is None:
            return None
        moment = parse_time(when)
        if moment is not None:
            return int(moment)
        commit = resolve_when(self.engine, when)
        if commit is None:
            raise HistoryError(f"{when!r} names no commit")
        return self.engine.commit_info(commit).time

    def _take_in_hand_edits(self, path: str | None) -> None:
        """What a read does first: commit the hand edits waiting (of ``path``'s record, or all)."""
        if self.engine.hand_edits is None:
            return
        if path is not None:
            self.engine.hand_edits.before_access(path)
        else:
            HandEdits.of(self.engine).before_access_all()

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
            if tip and not self.engine.descends_from(head, tip):  # an amend, a reset, forget
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

    def _tip(self, db: sqlite3.Connection) -> str | None:
        row = db.execute("SELECT value FROM meta WHERE key = 'tip'").fetchone()
        return row[0] if row else ""

    def _open(self) -> sqlite3.Connection:
        """The open index; made anew when it is missing, of another format or damaged."""
        if self._db is not None and (not self.engine.writable or self._opened == _inode(self.path)):
            return self._db
        self.close()
        if not self.engine.writable:  # a read-only repository: built in memory, each time
            return self._start_over()
        try:
            db = _connect(str(self.path))
            row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if row is not None and row[0] == FORMAT:
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
        self._texts: list[tuple[int, str]] = []

    def step(self, step) -> None:
        changes: dict[tuple[str, str], tuple[Counter, list[tuple[str, str, str]]]] = {}
        for path, old, new in step.files:
            found = unit_kind(path)
            if found is None:
                continue
            new_data = self._read(path, new)
            removed, added = unit_changes(found[1], self._read(path, old), new_data)
            if new is not None:
                self._last[path] = (new, new_data)
            gone, came = changes.setdefault(found, (Counter(), []))
            gone.update(removed)
            came.extend((text, path, new) for text in added)
        if not changes:
            return
        commit = self._next_commit
        self._next_commit += 1
        self._commits.append((commit, step.commit, step.time, step.date))
        for (record, unit), (gone, came) in changes.items():
            record_id = self._record(record)
            kept = gone & Counter(text for text, _, _ in came)  # moved between chunks of one log
            for text in (gone - kept).elements():
                self._remove(record_id, _key(unit, text), commit)
            for text, path, blob in came:
                if kept[text]:
                    kept[text] -= 1
                else:
                    self._add(record_id, unit, path, blob, text, commit)

    def flush(self) -> None:
        self.db.executemany("INSERT INTO commits(id, sha, time, date) VALUES (?, ?, ?, ?)",
                            self._commits)
        self.db.executemany("INSERT INTO units(id, record, unit, path, blob, key, added, removed)"
                            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self._units.values())
        self.db.executemany("INSERT INTO unit_search(rowid, text) VALUES (?, ?)", self._texts)
        self._commits, self._units, self._live, self._texts = [], {}, {}, []

    def _read(self, path: str, blob: str | None) -> bytes | None:
        if blob is None:
            return None
        last = self._last.get(path)
        if last is not None and last[0] == blob:
            return last[1]
        return self.engine.read_blob(blob)

    def _record(self, record: str) -> int:
        if record not in self._records:
            self._records[record] = self.db.execute(
                "INSERT INTO records(path, name, kind) VALUES (?, ?, ?)",
                (record, record_name(record), record_kind(record))).lastrowid
        return self._records[record]

    def _add(self, record: int, unit: str, path: str, blob: str, text: str, commit: int) -> None:
        unit_id, key = self._next_unit, _key(unit, text)
        self._next_unit += 1
        self._units[unit_id] = [unit_id, record, unit, path, blob, key, commit, None]
        self._live.setdefault((record, key), []).append(unit_id)
        self._texts.append((unit_id, text))

    def _remove(self, record: int, key: int, commit: int) -> None:
        pending = self._live.get((record, key))
        if pending:
            self._units[pending.pop(0)][7] = commit
            return
        self.db.execute(
            "UPDATE units SET removed = ? WHERE id = (SELECT id FROM units WHERE record = ? AND"
            " key = ? AND removed IS NULL ORDER BY id LIMIT 1)", (commit, record, key))
