"""Search by meaning: the units at HEAD ranked by their vectors' cosine with the query's,
fused with the keyword ranking by reciprocal rank (opt-in: ``mem.search(q, meaning=True)``,
``gitmem search --meaning``).

The vectors are a cache, ``.git/gitmem/vectors.sqlite``, never committed: float32 blobs
keyed by the provider's name and the unit's text (:func:`gitmem.records.units.unit_key`,
which the search index holds too, so a rebuilt index keeps them). Deleting it changes no
answer, only the time of the next search. Writes never touch it: a search by meaning
first embeds the units at HEAD that lack a vector, at most ``bound`` of them (the rest
rank by their words alone until a later search embeds them).

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
from gitmem.search.query import Parsed, ReadBlobs, ReadFile, filters, ranked, rows_of, units_found

FILE = "vectors.sqlite"  # in .git/gitmem/
RRF_K = 5  # measured on the retrieval set: k=5 beat k=60 (docs/search.md)
DEPTH = 20  # each ranking's first DEPTH units are fused
BOUND = 2000  # units embedded by one search at most
BATCH = 32  # units embedded a call
ProgressCallback = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors(provider TEXT NOT NULL, key INTEGER NOT NULL, vector BLOB NOT NULL,
                                   PRIMARY KEY (provider, key)) WITHOUT ROWID;
"""


class VectorCache:
    """The vectors of one repository's units, by provider (see the module's docstring)."""

    def __init__(self, path: Path | None):
        self.path = path  # None: in memory (a read-only repository)
        self._db: sqlite3.Connection | None = None

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

    def vectors(self, provider: str, keys: list[int]) -> dict[int, array]:
        """{key: vector} of those ``keys`` the cache holds for ``provider``."""
        found = {}
        for at in range(0, len(keys), 500):
            chunk = keys[at:at + 500]
            for key, blob in self._open().execute(
                    f"SELECT key, vector FROM vectors WHERE provider = ? AND key IN "
                    f"({','.join('?' * len(chunk))})", (provider, *chunk)):
                found[key] = array("f", blob)
        return found

    def keep(self, provider: str, vectors: dict[int, list[float]]) -> None:
        self._open().executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                                 [(provider, key, array("f", v).tobytes()) for key, v in vectors.items()])

    def close(self) -> None:
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


def by_meaning(db: sqlite3.Connection, cache: VectorCache, provider: Provider, query: str,
               parsed: Parsed, read_blobs: ReadBlobs, read_file: ReadFile | None, *,
               kind: str | None, path: str | None, limit: int, progress: ProgressCallback | None = None) -> tuple[list[tuple], dict[int, float]]:
    """(rows, {unit: fused score}) of the units at HEAD (of ``kind``, of the record at
    ``path``), best first: the keyword ranking and the cosine ranking fused (the first
    :data:`BOUND` units without a vector embedded first)."""
    words, _ = ranked(db, parsed, history=False, kind=kind, path=path, window=(None, None),
                      limit=max(limit, DEPTH))
    where, params = filters(history=False, kind=kind, path=path)
    live = db.execute("SELECT u.id, u.unit, u.path, u.blob, u.key FROM units u JOIN records r"
                      f" ON r.id = u.record WHERE {' AND '.join(where)} ORDER BY u.id", params).fetchall()
    vectors = cache.vectors(provider.name, sorted({row[4] for row in live}))
    _embed_missing(cache, provider, [row for row in live if row[4] not in vectors][:BOUND],
                   read_blobs, read_file, vectors, progress)
    wanted = provider.embed([query], query=True)[0]
    cosines = {row[0]: sum(a * b for a, b in zip(wanted, vectors[row[4]]))
               for row in live if row[4] in vectors}
    closest = sorted(cosines, key=lambda unit: (-cosines[unit], unit))[:max(limit, DEPTH)]
    scores = fuse([row[0] for row in words[:DEPTH]], closest[:DEPTH])
    best = sorted(scores, key=lambda unit: (-scores[unit], unit))[:limit]
    return rows_of(db, best), {unit: round(scores[unit], 6) for unit in best}


def _embed_missing(cache: VectorCache, provider: Provider, missing: list[tuple], read_blobs: ReadBlobs,
                   read_file: ReadFile | None, vectors: dict, progress: ProgressCallback | None) -> None:
    """Embed the units ``missing`` (id, unit, path, blob, key), a batch at a time, keeping
    each batch's vectors as it goes (a search cut short keeps what it embedded)."""
    if not missing:
        return
    if progress is not None:
        progress(0, len(missing))
    done = 0
    for at in range(0, len(missing), BATCH):
        batch = missing[at:at + BATCH]
        found = units_found(batch, [], read_blobs, read_file)
        texts = {row[4]: found[row[0]].text for row in batch if row[0] in found}
        keys = list(texts)
        made = dict(zip(keys, provider.embed([texts[key] for key in keys])))
        cache.keep(provider.name, made)
        vectors.update(made)
        done += len(batch)
        if progress is not None:
            progress(done, len(missing))
