"""Answering from the search index: the query language, the hits, and the quick answer.

:mod:`gitmem.search.index` keeps the index (``.git/gitmem/search.sqlite``) up to date with
main and the work tree; this module reads it. A search that finds the index at main's
commit and the stamp of the work tree's last look still holding (:mod:`gitmem.git.stamp`:
no hand edit waiting, nothing moved) is answered here without opening the repository:
no pygit2, no look at the work tree, the snippets' blobs read by one ``git cat-file``.
Otherwise :func:`quick_search` says None, and the repository is opened.

    to_fts('deploy -friday "on call"')   # the query in FTS5's syntax, or BadQuery
    quick_search(Path("~/gitmem").expanduser(), "deploy")   # [SearchHit, ...] or None
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from gitmem.errors import BadQuery, InvalidInput
from gitmem.git import stamp
from gitmem.git.files import GITMEM_DIR, read_regular
from gitmem.records import layout
from gitmem.records.units import pieces, unit_key, unit_text

FILE = "search.sqlite"  # in .git/gitmem/
FORMAT = "3"  # of the tables: another one is built anew (3: records named as commands take them)
KINDS = ("memory", "session", "thread")
MARK = ("**", "**")  # around each matched word of a snippet
SNIPPET_WORDS = 16
TOKENIZER = "unicode61 remove_diacritics 2"
BLOB_TIMEOUT = 60.0  # seconds for git to read the hits' blobs
STAMP_SCOPE = ""  # the stamp of a look at every record (gitmem.git.stamp)
# Snippets are cut from the hits' own text, read back from git: the index keeps no copy.
_HIT_TEXTS = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.hit_texts USING fts5(text, tokenize='TOKENIZER')"
              .replace("TOKENIZER", TOKENIZER))
ReadBlobs = Callable[[list[str]], dict[str, bytes]]  # blob ids -> {id: bytes} of those found
ReadFile = Callable[[str], "bytes | None"]  # a record file's path -> its bytes (None: not there)


class SearchHit(NamedTuple):
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
        return self._asdict()


# -- the query language -----------------------------------------------------------

_TERM = re.compile(r'(-?)(?:"([^"]*)"|([^\s"]+))')


class _Term(NamedTuple):
    text: str
    prefix: bool
    negated: bool

    def fts(self) -> str:
        return '"' + self.text.replace('"', '""') + '"' + (" *" if self.prefix else "")


class Parsed(NamedTuple):
    """A query read once: FTS5's expression of it, and the words it looks for in lower case
    (a hit's unit is looked for first among the pieces of its file holding one)."""

    expression: str
    words: list[str]


def parse(query: str) -> Parsed:
    """``query`` read; :class:`BadQuery` when it cannot be parsed."""
    groups = _groups(query)
    clauses = []
    for group in groups:
        wanted = [term.fts() for term in group if not term.negated]
        if not wanted:
            raise BadQuery("-word only leaves words out: give at least one word to find "
                           "beside it")
        clause = "(" + " AND ".join(wanted) + ")"
        clauses.append(clause + "".join(" NOT " + t.fts() for t in group if t.negated))
    words = [word.lower() for group in groups for term in group if not term.negated
             for word in term.text.split()]
    return Parsed(" OR ".join(f"({clause})" for clause in clauses), words)


def to_fts(query: str) -> str:
    """``query`` in FTS5's syntax; :class:`BadQuery` when it cannot be parsed."""
    return parse(query).expression


def _groups(query: str) -> list[list[_Term]]:
    """The terms of ``query``, in groups that OR joins."""
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
    return groups


def check_options(kind: str | None, limit: int) -> None:
    """InvalidInput unless ``kind`` is a kind of record (or None) and ``limit`` a count."""
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"not a kind of record: {kind!r} (use {', '.join(KINDS)})")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a whole number of at least 1, not {limit!r}")


# -- answers ----------------------------------------------------------------------


def answer(db: sqlite3.Connection, query: Parsed, read_blobs: ReadBlobs, *, history: bool,
           kind: str | None, path: str | None, window: tuple[int | None, int | None],
           limit: int, read_file: ReadFile | None = None) -> list[SearchHit]:
    """The hits of ``query`` in index ``db``, best first (see
    :meth:`gitmem.search.index.SearchIndex.search` for the options). Each hit's text is looked
    for in ``read_file(path)`` first, when given, then in its blob."""
    where, params = ["unit_search MATCH ?"], [query.expression]
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
        [*params, min(limit, 2**62)]).fetchall()  # SQLite's integers end at 2**63
    texts = _unit_texts([(r[0], r[2], r[3], r[4], r[5]) for r in rows], query.words,
                        read_blobs, read_file)
    snippets = _snippets(db, query.expression, texts)
    return [SearchHit(name, unit, snippets.get(unit_id, ""), round(-score, 6), added,
                      added_date, removed, removed_date, file)
            for unit_id, name, unit, file, _blob, _key, score, added, added_date, removed,
            removed_date in rows]


def _unit_texts(hits: list[tuple[int, str, str, str, int]], words: list[str], read_blobs: ReadBlobs,
                read_file: ReadFile | None) -> list[tuple[int, str]]:
    """(unit id, text) for hits (unit id, unit, path, blob, key): the unit whose text has
    that key, found in the file at ``path`` (a text with the key is the text indexed),
    else in the blob that brought it (missing: gone after a rewrite and a gc). The units
    holding one of ``words`` as they are written are tried first."""
    texts, left = [], []
    files: dict[str, bytes | None] = {}
    for unit_id, unit, path, blob, key in hits:
        if read_file is not None and path not in files:
            files[path] = read_file(path)
        data = files.get(path)
        text = _unit_text(unit, data, key, words) if data is not None else None
        if text is None:
            left.append((unit_id, unit, blob, key))
        else:
            texts.append((unit_id, text))
    blobs = read_blobs(sorted({blob for _, _, blob, _ in left})) if left else {}
    for unit_id, unit, blob, key in left:
        text = _unit_text(unit, blobs[blob], key, words) if blob in blobs else None
        if text is not None:
            texts.append((unit_id, text))
    return texts


def _unit_text(unit: str, data: bytes, key: int, words: list[str]) -> str | None:
    # A hit's unit holds the words it matched, though folded (accents, JSON escapes) perhaps
    # not as written: the others are tried too, but a text is made of only a few units.
    found = pieces(unit, data)
    likely = [piece for piece in found if any(word in piece.lower() for word in words)]
    for piece in (*likely, *found):
        text = unit_text(unit, piece)
        if unit_key(unit, text) == key:
            return text
    return None


def _snippets(db: sqlite3.Connection, expression: str, texts: list[tuple[int, str]]) -> dict[int, str]:
    """{unit id: snippet}: FTS5's snippet of each (unit id, text)."""
    db.execute(_HIT_TEXTS)
    db.execute("DELETE FROM temp.hit_texts")
    db.executemany("INSERT INTO temp.hit_texts(rowid, text) VALUES (?, ?)", texts)
    return dict(db.execute(
        "SELECT rowid, snippet(hit_texts, 0, ?, ?, '…', ?) FROM temp.hit_texts"
        " WHERE hit_texts MATCH ?", (*MARK, SNIPPET_WORDS, expression)))


def meta(db: sqlite3.Connection, key: str) -> str | None:
    """The index's ``meta`` value at ``key`` (None: none)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def stamp_holds(db: sqlite3.Connection, gitdir: Path, workdir: Path) -> bool:
    """True when the index is at main's commit and the stamp of the last whole look at the
    work tree still holds: a search needs no look at the work tree and no catch-up."""
    kept = stamp.kept(gitdir, STAMP_SCOPE)
    return kept is not None and kept.get("head") == meta(db, "tip") and stamp.holds(gitdir, workdir, kept)


def quick_search(workdir: Path, query: str, *, history: bool = False, kind: str | None = None,
                 record: str | None = None, limit: int = 20) -> list[SearchHit] | None:
    """The hits of ``query`` in the repository at ``workdir``, answered from its search index
    without opening the repository; None when the index cannot vouch for main and the work
    tree as they are now (see the module's docstring). Raises as the full search does."""
    parsed = parse(query)  # a query that cannot be parsed is refused before anything is opened
    check_options(kind, limit)
    path = layout.parse_record(record).path if record is not None else None
    try:  # none there, a name too long, a removed current folder: the full path says so
        workdir = workdir.resolve()
        gitdir = workdir / ".git"
        index = gitdir / GITMEM_DIR / FILE
        if not index.is_file():
            return None
    except OSError:
        return None
    try:
        db = sqlite3.connect(f"{index.as_uri()}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        if meta(db, "format") != FORMAT or not stamp_holds(db, gitdir, workdir):
            return None
        return answer(db, parsed, lambda ids: _read_blobs(gitdir, ids), history=history,
                      kind=kind, path=path, window=(None, None), limit=limit,
                      read_file=lambda file: _read_file(workdir, file))
    except Exception:  # git missing, slow or failing, a damaged index: the full search
        return None    # says what is wrong, or repairs it
    finally:
        db.close()


def _read_file(workdir: Path, path: str) -> bytes | None:
    """The work tree's regular file at ``path`` (what HEAD holds while the stamp holds),
    never through a symbolic link; None when there is none."""
    if layout.record_path(path) is None or ".." in path.split("/"):
        return None
    found = read_regular(workdir / path)
    return found[0] if found is not None else None


def _read_blobs(gitdir: Path, ids: list[str]) -> dict[str, bytes]:
    from gitmem.git import gitproc  # only a hit no work-tree file holds needs git
    return {blob_id: data for blob_id, data in gitproc.read_objects(gitdir, ids, timeout=BLOB_TIMEOUT)
            if blob_id}
