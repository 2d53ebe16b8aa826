"""Answering from the search index: the query, the hits, and the quick answer.

A query is read in plain words unless it uses the operators (:func:`uses_operators`):
the words less English stopwords (the first QUERY_WORDS of them), joined by OR, each
stemmed by the index's tokenizer; hits that hold more of them, rarer ones, and two of them
near each other rank higher, and, asked a question, a message or event also ranks by the
words of the one before it and a share of its score (a reply, by the words of the question
it answers), and by the time the question names (:mod:`gitmem.search.when`).

:mod:`gitmem.search.index` keeps the index (``.git/gitmem/search.sqlite``) up to date with
main and the work tree; this module reads it. A search that finds the index at main's
commit and the stamp of the work tree's last look still holding (:mod:`gitmem.git.stamp`:
no hand edit waiting, nothing moved) is answered here without opening the repository:
no pygit2, no look at the work tree, the snippets' blobs read by one ``git cat-file``.
Otherwise :func:`quick_search` says None, and the repository is opened.

    parse("Deploys on friday?").expression   # '"deploys" OR "friday"', FTS5's syntax
    parse('deploy -friday "on call"')        # operators: every word, a phrase, one left out
    quick_search(Path("~/gitmem").expanduser(), "deploy")   # [SearchHit, ...] or None
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections import namedtuple
from collections.abc import Callable, Sequence
from pathlib import Path

from gitmem.errors import InvalidInput
from gitmem.git import stamp
from gitmem.git.files import GITMEM_DIR, read_regular
from gitmem.records import layout
from gitmem.records.units import parts, pieces, unit_date, unit_key, unit_text

FILE = "search.sqlite"  # in .git/gitmem/
FORMAT = "9"  # of the tables and the tokenizer: another one is built anew (3: porter; 4: notes are searched, records named as commands take them; 5, 6: units in order, and which ask; 7: store items; 8: long blocks in parts; 9: the text before a message or event)
KINDS = ("memory", "session", "thread", "store")
MARK = ("**", "**")  # around each matched word of a snippet
SNIPPET_WORDS = 16
TOKENIZER = "porter unicode61 remove_diacritics 2"  # English stems, accents ignored
NEAR = 6  # words at most this far apart are near each other
NEAR_BOOST = 1.3  # a hit holding two of the query's words near each other: its score times this
# Asked a question, a message or event also scores a share of the score of the one before
# it, a larger one when that one asks something: a reply holds the answer to the words of
# the question just asked (measured on the retrieval set: docs/search.md).
SHARE_OF_BEFORE = 0.2
SHARE_OF_QUESTION = 0.4  # the one before holds a "?"
# Asked a question, a message or event is also found by the words of the one before it in
# its file, indexed with it as a column of its own at this weight in BM25 (1 for its own
# words): a turn answering a question, or telling more of what the one before began.
PREVIOUS_WEIGHT = 0.2
# It scores the better of the two, by its own words or with the text before: the second
# alone found more on LoCoMo and less on the generated set, where a fact's own words are
# enough (a term's rarity and a row's length are taken over both columns: docs/search.md).
# A question naming a time ("in May 2023", "last week": gitmem.search.when) ranks the units
# dated then (a message's own date, else its commit's) by their score times this.
DATE_BOOST = 2.0
POOL = 50  # hits beyond the limit ranked again for nearness and neighbours
QUERY_WORDS = 64  # words at most a query looks for: the first ones of a longer text
BLOB_TIMEOUT = 60.0  # seconds for git to read the hits' blobs
STAMP_SCOPE = ""  # the stamp of a look at every record (gitmem.git.stamp)
# Snippets are cut from the hits' own text, read back from git: the index keeps no copy.
_HIT_TEXTS = ("CREATE VIRTUAL TABLE IF NOT EXISTS temp.hit_texts USING fts5(text, tokenize='TOKENIZER')"
              .replace("TOKENIZER", TOKENIZER))
ReadBlobs = Callable[[list[str]], dict[str, bytes]]  # blob ids -> {id: bytes} of those found
ReadFile = Callable[[str], "bytes | None"]  # a record file's path -> its bytes (None: not there)


# typing.NamedTuple would import typing: 4 ms of each warm ``gitmem search``
class SearchHit(namedtuple("SearchHit", "record unit unit_id date snippet score added added_date "
                                        "removed removed_date path context")):
    """One unit that matched: where, what, how well, and when it came and went.

    - ``record``: as ``gitmem log`` names it: user, agent:<id>, session:<type>/<id>, thread:<id>,
      store:<namespace>/<key>;
    - ``unit``: "block" (of a memory), "message" (of a session or thread), "event" or "item"
      (a store item);
    - ``unit_id``: a message's own id, else the unit's position in its record from 0;
    - ``date``: the unit's createdAt (or an event's timestamp), else its commit's date;
    - ``snippet``: the matched words between MARK;
    - ``score``: higher is better (BM25, times NEAR_BOOST for words near each other, plus a
      share of the unit before's);
    - ``added``, ``added_date``: the commit that brought this text into the record;
    - ``removed``, ``removed_date``: the commit that took it out; None while it is still there;
    - ``path``: the file that held it;
    - ``context``: with ``context``, those around it, each {offset, unit_id, date, text}.
    """

    __slots__ = ()

    def as_json(self) -> dict[str, object]:
        """The object ``gitmem search --json`` prints for this hit."""
        return self._asdict()


# -- the query ----------------------------------------------------------------------

# English words too common to decide a hit (a query made of nothing else keeps them).
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can cannot could did do does doing down during each few for from
further had has have having he her here hers herself him himself his how i if in into is it
its itself just let me more most my myself no nor not now of off on once only or other ought
our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours yourself yourselves
s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn shouldn couldn
""".split())
# Writing without spaces between words (Han, kana, Hangul): the index takes each character
# as a word of its own, so that 日本 (two words next to each other) finds 日本語.
_UNSPACED = ("([\u2e80-\u2fff\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
             "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f])")
_SEPARATOR = "\u200b"  # a zero-width space: not a word character for FTS5's unicode61
_WORD = re.compile(r"[^\W_]+")  # letters and digits, as unicode61 cuts words
_OPERATORS = re.compile(r'"[^"]*"|(?:^|\s)OR(?=\s|$)|(?:^|\s)-[^\W_]|[^\W_]\*')
_TERM = re.compile(r'(-?)(?:"([^"]*)"|([^\s"]+))')
_TIME_WORDS = re.compile(r"\d|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|yesterday|today|last|this|past",
                         re.IGNORECASE)  # what a query naming a time holds (gitmem.search.when reads it)


def spaced(text: str) -> str:
    """``text`` as the index takes it: each character of unspaced writing a word of its own."""
    return text if text.isascii() else _unspaced().sub("\\1" + _SEPARATOR, text)


@functools.cache
def _unspaced() -> re.Pattern:
    """:data:`_UNSPACED` compiled when first needed: its ranges take 5 ms, a tenth of a
    warm ``gitmem search``, which a query and hits in spaced writing never need."""
    return re.compile(_UNSPACED)


def uses_operators(query: str) -> bool:
    """True when ``query`` is read as operators: it holds a ``"phrase"`` (a pair of
    quotes), ``OR`` in capitals between words, a ``-word`` or a ``prefix*``, and it is not
    a question (ending in ``?``: a title quoted in it is words to rank by, not a must)."""
    return _OPERATORS.search(query) is not None and not query.rstrip().endswith("?")


def _quoted(text: str) -> str:
    return '"' + spaced(text).replace('"', '""') + '"'


class _NotOperators(Exception):
    """A query whose operators make no sense: it is read in plain words."""


class _Term(namedtuple("_Term", "text prefix negated")):
    __slots__ = ()

    def fts(self) -> str:
        return _quoted(self.text) + (" *" if self.prefix else "")


class Parsed(namedtuple("Parsed", "expression words near when", defaults=(None, ()))):
    """A query read once: FTS5's ``expression`` of it (None: no word to look for), the
    ``words`` it looks for in lower case (a hit's unit is looked for first among the pieces
    of its file holding one), the expression of its neighbouring words NEAR each other
    (``near``; None for operators or a single word): hits it matches rank higher, and the
    times a question names (``when``, :func:`gitmem.search.when.periods`)."""

    __slots__ = ()


def parse(query: str) -> Parsed:
    """``query`` read: as operators when it uses them (:func:`uses_operators`) and they
    make sense, else in plain words. Any text is a query."""
    if uses_operators(query):
        try:
            return _operators(query)
        except _NotOperators:  # a lone -, an unbalanced quote, OR at an end: read as plain words
            pass
    return _plain(query)


def _plain(query: str) -> Parsed:
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(query)))
    kept = ([word for word in words if word not in STOPWORDS] or words)[:QUERY_WORDS]
    terms = [_quoted(word) for word in kept]
    near = " OR ".join(f"NEAR({a} {b}, {NEAR})" for a, b in zip(terms, terms[1:], strict=False))
    when: tuple = ()
    if near and _TIME_WORDS.search(query):
        from gitmem.search.when import periods  # and datetime: only a query naming a time needs them
        when = tuple(periods(query))
    return Parsed(" OR ".join(terms) or None, kept, near or None, when)


def _operators(query: str) -> Parsed:
    """The query read as operators; :class:`_NotOperators` when they make no sense."""
    groups = _groups(query)
    clauses = []
    for group in groups:
        wanted = [term.fts() for term in group if not term.negated]
        if not wanted:
            raise _NotOperators("-word only leaves words out")
        clause = "(" + " AND ".join(wanted) + ")"
        clauses.append(clause + "".join(" NOT " + t.fts() for t in group if t.negated))
    words = [word.lower() for group in groups for term in group if not term.negated
             for word in term.text.split()]
    return Parsed(" OR ".join(f"({clause})" for clause in clauses), words)


def _groups(query: str) -> list[list[_Term]]:
    """The terms of ``query``, in groups that OR joins."""
    if query.count('"') % 2:
        raise _NotOperators("unbalanced quote")
    groups: list[list[_Term]] = [[]]
    at = 0
    while True:
        while at < len(query) and query[at].isspace():
            at += 1
        if at >= len(query):
            break
        match = _TERM.match(query, at)
        assert match is not None  # a character not a space starts a term (the quotes are paired)
        at = match.end()
        negated, phrase, word = bool(match[1]), match[2], match[3]
        if word == "OR" and not negated:
            if not groups[-1]:
                raise _NotOperators("OR needs a word on each side")
            groups.append([])
            continue
        if word is not None and not word.strip("-*"):
            raise _NotOperators(f"a lone {match[0]!r}")
        text, prefix = (phrase, False) if phrase is not None else (word.rstrip("*"), word.endswith("*"))
        if phrase is not None and query.startswith("*", at):
            prefix, at = True, at + 1
        if not any(char.isalnum() for char in text):
            continue  # punctuation only, or an empty phrase: no word to match
        groups[-1].append(_Term(text, prefix, negated))
        if sum(map(len, groups)) > QUERY_WORDS:
            raise _NotOperators("too many terms: read as plain words, the first ones kept")
    if len(groups) > 1 and not groups[-1]:
        raise _NotOperators("OR needs a word on each side")
    if not any(groups):
        raise _NotOperators("no word to search for")
    return groups


def check_options(kind: str | None, limit: int, context: int = 0) -> None:
    """InvalidInput unless ``kind`` is a kind of record (or None), ``limit`` a count and
    ``context`` a count or 0."""
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"not a kind of record: {kind!r} (use {', '.join(KINDS)})")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput(f"limit must be a whole number of at least 1, not {limit!r}")
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise InvalidInput(f"context must be a whole number of at least 0, not {context!r}")


# -- answers ----------------------------------------------------------------------


def answer(db: sqlite3.Connection, query: Parsed, read_blobs: ReadBlobs, *, history: bool,
           kind: str | None, path: str | None, window: tuple[int | None, int | None],
           limit: int, at: int | None = None, context: int = 0,
           read_file: ReadFile | None = None) -> list[SearchHit]:
    """The hits of ``query`` in index ``db``, best first (see
    :meth:`gitmem.search.index.SearchIndex.search` for the options; ``at`` is the index's
    number of the last commit the memory had then). Each hit's text is looked for in
    ``read_file(path)`` first, when given, then in its blob."""
    rows, scores = ranked(db, query, history=history, kind=kind, path=path, window=window,
                          limit=limit, at=at)
    return hits_of(db, rows, scores, query, read_blobs, at=at, context=context, read_file=read_file)


def ranked(db: sqlite3.Connection, query: Parsed, *, history: bool, kind: str | None,
           path: str | None, window: tuple[int | None, int | None], limit: int,
           at: int | None = None) -> tuple[list[tuple], dict[int, float]]:
    """The index's rows of the units matching ``query``, best first, and {unit id: score}
    (see :func:`answer` for the options). Asked a question (plain words, two or more), a
    message or event also ranks by the words of the one before it (:data:`PREVIOUS_WEIGHT`,
    :data:`SHARE_OF_BEFORE`), so a reply holding none of the question's words can be found,
    and by the time the question names (:data:`DATE_BOOST`)."""
    if query.expression is None:
        return [], {}
    where, params = filters(history=history, kind=kind, path=path, at=at, window=window)
    limit = min(limit, 2**61)  # SQLite's integers end at 2**63
    rows = _matching(db, "unit_search", "bm25(unit_search)", query.expression, where, params, limit + POOL)
    scores = {row[0]: row[6] for row in rows}
    if query.near is not None:  # a question: by its own words, or with the text before, the better
        with_previous = _matching(db, "unit_with_previous",
                                  f"bm25(unit_with_previous, 1.0, {PREVIOUS_WEIGHT})", query.expression,
                                  where, params, limit + POOL)
        rows += [row for row in with_previous if row[0] not in scores]
        for row in with_previous:
            scores[row[0]] = max(scores.get(row[0], 0.0), row[6])
        for (near,) in db.execute(
                "SELECT rowid FROM unit_search WHERE unit_search MATCH ?"
                " AND rowid IN (SELECT value FROM json_each(?))", (query.near, json.dumps(list(scores)))):
            scores[near] *= NEAR_BOOST
        # only a unit holding the words itself shares: not one found by its neighbour's alone
        holding = [unit for (unit,) in db.execute(
            "SELECT rowid FROM unit_search WHERE unit_search MATCH ? AND rowid IN (SELECT value FROM"
            " json_each(?))", (query.expression, json.dumps(list(scores))))]
        rows += _share_with_neighbours(db, scores, holding, history=history, at=at, where=where,
                                       params=params)
        if query.when:
            for unit, moment in db.execute(
                    "SELECT u.id, coalesce(u.time, c.time) FROM units u JOIN commits c ON c.id = u.added"
                    " WHERE u.id IN (SELECT value FROM json_each(?))", (json.dumps(list(scores)),)):
                if any(period.holds(moment) for period in query.when):
                    scores[unit] *= DATE_BOOST
    return sorted(rows, key=lambda row: (-scores[row[0]], row[0]))[:limit], scores


def _matching(db: sqlite3.Connection, table: str, bm25: str, expression: str, where: list[str],
              params: list, count: int) -> list[tuple]:
    """The rows (:data:`_COLUMNS`, the score ``-bm25``) of the first ``count`` units of
    ``table`` matching ``expression`` and ``where``, best first."""
    return db.execute(
        _COLUMNS.format(score="-" + bm25) + f" FROM {table} JOIN units u ON u.id = {table}.rowid" + _JOINS
        + f" WHERE {' AND '.join([f'{table} MATCH ?', *where])} ORDER BY {bm25}, u.id LIMIT ?",
        [expression, *params, count]).fetchall()


def _share_with_neighbours(db: sqlite3.Connection, scores: dict[int, float], holding: list[int], *,
                           history: bool, at: int | None, where: list[str], params: list) -> list[tuple]:
    """Give the message or event after each one of ``holding`` (units in ``scores``; the next
    one in its record that the search sees) :data:`SHARE_OF_BEFORE` of its score (:data:`SHARE_OF_QUESTION`
    when it asks); the rows of those it brings in."""
    seen, seen_params = _visible(history, at, unit="n")
    found = db.execute(
        "SELECT u.id, u.asks, (SELECT min(n.id) FROM units n WHERE n.record = u.record AND n.id > u.id"
        f" {''.join(' AND ' + condition for condition in seen)})"
        " FROM units u WHERE u.id IN (SELECT value FROM json_each(?)) AND u.unit != 'block'",
        [*seen_params, json.dumps(holding)]).fetchall()
    own = dict(scores)
    for unit, asks, after in found:
        if after is not None:
            share = SHARE_OF_QUESTION if asks else SHARE_OF_BEFORE
            scores[after] = scores.get(after, 0.0) + share * own[unit]
    new = [unit for unit in scores if unit not in own]
    rows = rows_of(db, new, where, params)
    for unit in set(new) - {row[0] for row in rows}:  # outside the search's kind, record or window
        del scores[unit]
    return rows


def filters(*, history: bool, kind: str | None, path: str | None, at: int | None = None,
            window: tuple[int | None, int | None] = (None, None)) -> tuple[list[str], list]:
    """The conditions (on ``units u``, ``records r`` and the commits that added and
    removed it, ``ca`` and ``cr``) and their parameters of the units a search looks at:
    those at HEAD, at ``at``, or (``history``) all; of ``kind``; of the record at ``path``;
    that came or went within ``window`` (times, either end open)."""
    where, params = _visible(history, at)
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
    return where, params


def _visible(history: bool, at: int | None, unit: str = "u") -> tuple[list[str], list]:
    """The conditions on ``units`` (as ``unit``) of those main held at ``at``, at HEAD, or
    ever (``history``), and their parameters."""
    if at is not None:
        return [f"{unit}.added <= ? AND ({unit}.removed IS NULL OR {unit}.removed > ?)"], [at, at]
    return ([], []) if history else ([f"{unit}.removed IS NULL"], [])


_COLUMNS = ("SELECT u.id, r.name, u.unit, u.path, u.blob, u.key, {score}, ca.sha, ca.date, cr.sha,"
            " cr.date, u.record, u.added, u.removed")
_JOINS = (" JOIN records r ON r.id = u.record JOIN commits ca ON ca.id = u.added"
          " LEFT JOIN commits cr ON cr.id = u.removed")


def rows_of(db: sqlite3.Connection, ids: list[int], where: Sequence[str] = (), params: Sequence = ()) -> list[tuple]:
    """The index's rows of units ``ids``, in that order, as :func:`ranked` gives them (of
    those meeting ``where``, :func:`filters`' conditions)."""
    found = {row[0]: row for row in db.execute(
        _COLUMNS.format(score="0.0") + " FROM units u" + _JOINS
        + f" WHERE {' AND '.join(['u.id IN (SELECT value FROM json_each(?))', *where])}",
        (json.dumps(ids), *params))}
    return [found[unit] for unit in ids if unit in found]


def hits_of(db: sqlite3.Connection, rows: list[tuple], scores: dict[int, float], query: Parsed,
            read_blobs: ReadBlobs, *, at: int | None = None, context: int = 0,
            read_file: ReadFile | None = None) -> list[SearchHit]:
    """The hits of ``rows`` (:func:`ranked`'s), with their ``scores``; a unit no word of
    ``query`` matches has its first words as its snippet."""
    found = units_found([(r[0], r[2], r[3], r[4], r[5]) for r in rows], query.words, read_blobs,
                         read_file)
    snippets = {} if query.expression is None else _snippets(
        db, query.expression, [(unit, f.text) for unit, f in found.items()])
    hits = []
    for (unit_id, name, unit, file, _blob, _key, _score, added, added_date, removed, removed_date,
         record, added_at, removed_at) in rows:
        seen = at if at is not None else added_at if removed_at is not None else None
        place = _Place(db, record, unit, file, seen, added_date)
        hit = found.get(unit_id)
        near = place.neighbours(hit, context) if hit is not None else []
        number, date = (None, added_date) if hit is None else place.identity(hit.pieces[hit.index],
                                                                              hit.index)
        snippet = snippets.get(unit_id) or (_opening(hit.text) if hit is not None else "")
        hits.append(SearchHit(name, unit, number, date, snippet,
                              round(scores[unit_id], 6), added, added_date, removed, removed_date,
                              file, near))
    return hits


class _Found(namedtuple("_Found", "text pieces index")):
    """A hit's unit found again: its text, and where it is among its file's ``pieces``."""

    __slots__ = ()


def units_found(hits: list[tuple[int, str, str, str, int]], words: list[str], read_blobs: ReadBlobs,
                read_file: ReadFile | None) -> dict[int, _Found]:
    """{unit id: found} for hits (unit id, unit, path, blob, key): the unit whose text has
    that key, found in the file at ``path`` (a text with the key is the text indexed),
    else in the blob that brought it (missing: gone after a rewrite and a gc). Each
    file's units are read once for all its hits, those holding one of ``words`` as
    they are written first."""
    found, left = {}, []
    files: dict[str, _FileUnits | None] = {}
    for unit_id, unit, path, blob, key in hits:
        if read_file is not None and path not in files:
            data = read_file(path)
            files[path] = None if data is None else _FileUnits(unit, data, words)
        in_file = files.get(path)
        text = in_file.find(key) if in_file is not None else None
        if text is None:
            left.append((unit_id, unit, blob, key))
        else:
            found[unit_id] = text
    blobs = read_blobs(sorted({blob for _, _, blob, _ in left})) if left else {}
    in_blobs = {blob: _FileUnits(unit, blobs[blob], words) for _, unit, blob, _ in left if blob in blobs}
    for unit_id, _unit, blob, key in left:
        text = in_blobs[blob].find(key) if blob in in_blobs else None
        if text is not None:
            found[unit_id] = text
    return found


class _FileUnits:
    """The units of one file's content, their keys worked out as hits ask for them: each
    piece's at most once, whatever the number of hits in the file."""

    def __init__(self, unit: str, data: bytes, words: list[str]):
        self.unit = unit
        self.pieces = pieces(unit, data)
        self._keys: dict[int, tuple[str, int]] = {}
        self._order = self._likely_first([word[:5] for word in words])

    def _likely_first(self, stems: list[str]):
        # A hit's unit holds the words it matched, though folded (accents, JSON escapes,
        # stems) perhaps not as written: the others are tried too, after.
        later = []
        for i, piece in enumerate(self.pieces):
            if any(stem in piece.lower() for stem in stems):
                yield i
            else:
                later.append(i)
        yield from later

    def find(self, key: int) -> _Found | None:
        """The unit whose text has ``key``, None when none has."""
        while key not in self._keys:
            i = next(self._order, None)
            if i is None:
                return None
            text = unit_text(self.unit, self.pieces[i])
            self._keys.setdefault(unit_key(self.unit, text), (text, i))
        text, i = self._keys[key]
        return _Found(text, self.pieces, i)


class _Place:
    """Where a hit's unit lies in its record: its id and date, and its neighbours'."""

    def __init__(self, db: sqlite3.Connection, record: int, unit: str, path: str, seen: int | None,
                 added_date: str):
        self.db, self.record, self.unit, self.path = db, record, unit, path
        self.seen = seen  # the commit whose version of the record the hit is in (None: now)
        self.added_date = added_date
        self._before: int | None = None

    def identity(self, piece: str, index: int, own: bool = True) -> tuple[str | int | None, str]:
        """(unit id, date) of the unit held in ``piece``, at ``index`` among its file's
        pieces: the hit's own (``own``) or a neighbour's."""
        value = _value(self.unit, piece)
        if isinstance(value, dict) and self.unit == "message" and isinstance(value.get("id"), str):
            number: str | int | None = value["id"]
        elif self.unit == "message" and self.path.startswith(layout.THREADS + "/"):
            number = None  # in a thread a position names an event: an id-less message has none
        else:
            number = self.before() + index
        return number, unit_date(value) or (self.added_date if own else self._added_date(piece))

    def _added_date(self, piece: str) -> str:
        """The date of the commit that brought a neighbour's text in (the hit's, if not found)."""
        row = self.db.execute(
            "SELECT c.date FROM units u JOIN commits c ON c.id = u.added WHERE u.record = ? AND"
            " u.key = ? ORDER BY u.removed IS NOT NULL, u.id DESC LIMIT 1",
            (self.record, unit_key(self.unit, unit_text(self.unit, piece)))).fetchone()
        return row[0] if row else self.added_date

    def neighbours(self, found: _Found, context: int) -> list[dict[str, object]]:
        """The ``context`` units on each side of ``found`` in its file, with their offset."""
        around = []
        for i in range(max(0, found.index - context), min(len(found.pieces), found.index + context + 1)):
            if i != found.index:
                number, date = self.identity(found.pieces[i], i, own=False)
                around.append({"offset": i - found.index, "unit_id": number, "date": date,
                               "text": unit_text(self.unit, found.pieces[i])})
        return around

    def before(self) -> int:
        """How many units of the record's log lie in the chunks before the hit's (blocks: 0)."""
        if self._before is None:
            self._before = 0 if self.unit == "block" else self.db.execute(
                "SELECT count(*) FROM units WHERE record = ? AND unit = ? AND path < ? AND "
                + ("removed IS NULL" if self.seen is None else
                   "added <= ? AND (removed IS NULL OR removed > ?)"),
                (self.record, self.unit, self.path) + (() if self.seen is None else (self.seen,) * 2)
            ).fetchone()[0]
        return self._before


def _opening(text: str) -> str:
    """The first SNIPPET_WORDS words of ``text``: the snippet of a hit no word matched."""
    words = spaced(text).replace(_SEPARATOR, " ").split()
    return " ".join(words[:SNIPPET_WORDS]) + ("…" if len(words) > SNIPPET_WORDS else "")


def _value(unit: str, piece: str) -> object:
    if unit == "block":
        return piece
    try:
        return json.loads(piece)
    except ValueError:
        return piece


def _snippets(db: sqlite3.Connection, expression: str, texts: list[tuple[int, str]]) -> dict[int, str]:
    """{unit id: snippet}: FTS5's snippet of each (unit id, text), from its best-matching
    part when the text is longer than PART_CHARS (snippet() costs the square of its text)."""
    db.execute(_HIT_TEXTS)
    owners: list[int] = []
    rows: list[tuple[int, str]] = []
    for unit, text in texts:
        for part in parts(text):
            rows.append((len(owners), spaced(part)))
            owners.append(unit)
    db.execute("SAVEPOINT hit_texts")  # one transaction, not one a row: half the time
    try:
        db.executemany("INSERT INTO temp.hit_texts(rowid, text) VALUES (?, ?)", rows)
        best: dict[int, int] = {}  # unit id: its best part's row; the snippet of that part only
        for (row,) in db.execute("SELECT rowid FROM temp.hit_texts WHERE hit_texts MATCH ? ORDER BY rank",
                                 (expression,)):
            best.setdefault(owners[row], row)
        return {owners[row]: snippet.replace(_SEPARATOR, "") for row, snippet in db.execute(
            "SELECT rowid, snippet(hit_texts, 0, ?, ?, '…', ?) FROM temp.hit_texts WHERE hit_texts MATCH ?"
            " AND rowid IN (SELECT value FROM json_each(?))",
            (*MARK, SNIPPET_WORDS, expression, json.dumps(list(best.values()))))}
    finally:  # emptied by undoing the inserts: a DELETE tokenizes every text again
        db.execute("ROLLBACK TO hit_texts")
        db.execute("RELEASE hit_texts")


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
                 record: str | None = None, limit: int = 20,
                 context: int = 0) -> list[SearchHit] | None:
    """The hits of ``query`` in the repository at ``workdir``, answered from its search index
    without opening the repository; None when the index cannot vouch for main and the work
    tree as they are now (see the module's docstring). Raises as the full search does."""
    parsed = parse(query)
    check_options(kind, limit, context)
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
                      kind=kind, path=path, window=(None, None), limit=limit, context=context,
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
