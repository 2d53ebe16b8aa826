"""The record index: for each record, the commits that changed it, newest first.

It lives in ``.git/gitmem/record-index`` (never committed): a header line, then one line
per commit of main's history, parents before children::

    <commit id> <commit time> <generation>\t<record path>\t<record path>...

and after each batch of lines a check line, ``#`` and the CRC-32 of every byte before it.
A record path is the file or folder that holds a record (``memory/user.md``,
``memory/agents/<id>.md``, ``sessions/<type>/<id>``, ``threads/<id>``). A commit counts for
a record when the record's file or folder differs from its first parent's and, for a
merge, from every other parent's too, as ``engine.log.history`` counts it. The generation is one more than the largest of the parents' (1 for a root commit).

The index is a cache. It is brought up to date on use, whoever made the new commits
(gitmem, a hand edit, a sync merge, plain ``git commit``, a fetch): only commits it does
not hold yet are diffed, and their lines are appended (one write, then its check line)
under ``record-index-lock``, waited for at most :data:`LOCK_WAIT`; without the lock the
answer is computed and not saved. Lines after the last check line (a writer killed
mid-write) are ignored. A missing file, a check that fails, or a last indexed commit
that is no longer in main's history (an amend, a reset) makes it start over (written to
a temporary file, then renamed): deleting it changes no answer.

A record's versions are read from the index's parts (:mod:`gitmem.history.index_parts`:
each record's lines together, made from the file up to one of its check lines) and the
file's lines past them, so answering reads the record's own lines and a bounded tail,
whatever the history's length, and so does ``commit_at``; catching up on new commits
reads the whole file.
Versions are ordered newest first by main's topology, not by dates (a clock that was
wrong leaves a commit dated in the future): by generation (a child always comes before
its parents), then commit time, then commit id.
"""

from __future__ import annotations

import os
import re
import zlib
from collections import namedtuple
from collections.abc import Callable

from gitmem.git.engine import GitEngine
from gitmem.history import index_parts
from gitmem.git.lock import FileLock, LockTimeout, NotWritable
from gitmem.git.log import ChangedCommit
from gitmem.records.layout import record_path

FILE = "record-index"  # in .git/gitmem/
PARTS_FILE = "record-index-parts"  # each record's lines together: gitmem.history.index_parts
LOCK_FILE = "record-index-lock"  # a flock file kept, not a git-style .lock (none is left behind)
HEADER = b"gitmem record index 3\n"  # 3: notes (memory/<path>) are records
LOCK_WAIT = 2.0  # seconds
FILE_MODE = 0o600
_LINE_HEAD = re.compile(rb"^([0-9a-f]{40}) (-?\d+) (\d+)", re.M)
_LINE_ID = re.compile(rb"^[0-9a-f]{40}", re.M)
_CHECK = re.compile(rb"#([0-9a-f]{8})\n")

class IndexedCommit(namedtuple("IndexedCommit", "id time generation records", defaults=((),))):
    """One commit as the index holds it: its ``id``, ``time``, ``generation`` and the
    ``records`` it touched (a tuple, empty by default)."""

    __slots__ = ()

    def line(self) -> bytes:
        return "\t".join((f"{self.id} {self.time} {self.generation}", *self.records)).encode() + b"\n"


def checked(data: bytes) -> bytes | None:
    """The part of an index file that its last complete check line vouches for (the
    header alone when there is none); None when the file is not an index or the check
    fails."""
    if not data.startswith(HEADER):
        return None
    end = len(data)
    while (at := data.rfind(b"\n#", len(HEADER) - 1, end)) >= 0:
        match = _CHECK.match(data, at + 1)
        if match is not None:
            good = data[:at + 1]
            return data[:match.end()] if int(match[1], 16) == zlib.crc32(good) else None
        end = at  # a check line cut short: the one before vouches
    return HEADER


class RecordIndex:
    """The record index of one repository (see the module's docstring).

    ``diffed`` counts the commits this object has diffed, ``rebuilds`` the times it
    started over and ``reads.bytes`` the bytes it read of its files, for tests and the
    bench. ``progress``, when set, is called as
    ``progress(done, total)`` while a long stretch of history is read.
    """

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.path = engine.private_dir / FILE
        self.diffed = 0
        self.rebuilds = 0
        self.progress: Callable[[int, int], None] | None = None
        self._data = HEADER  # the index the answers come from (the file's, or ahead of it)
        self._tip: str | None = None  # its last commit
        self._head: str | None = None  # main's tip when it was last brought up to date
        self._file: tuple[tuple[int, int, int], bytes] | None = None  # the file as last read
        self._versions: dict[str, list[IndexedCommit]] = {}  # by record path, while at _head
        self._ids: set[bytes] | None = None  # every indexed commit, read when needed
        self.parts_path = engine.private_dir / PARTS_FILE
        self.reads = index_parts.Reads()
        self._view: index_parts.View | None = None  # the answers come from it when set, not _data

    # -- answers ------------------------------------------------------------------

    def versions(self, path: str) -> list[IndexedCommit]:
        """The commits that changed the record at ``path``, newest first."""
        self._update()
        found = self._versions.get(path)
        if found is None:
            found = self._versions[path] = sorted(self._find(path), key=_order, reverse=True)
        return list(found)

    def _find(self, path: str) -> list[IndexedCommit]:
        if self._view is not None:
            lines = self._view.part(self.parts_path, path, self.reads)
            if lines is not None:
                return [_parse_line(line) for line in lines] + [
                    IndexedCommit(e.id, e.time, e.generation) for e in _search(self._view.tail, path)]
            self._update(full=True)  # the parts file changed meanwhile, or is damaged
            self._write_parts()
        return [IndexedCommit(e.id, e.time, e.generation) for e in _search(self._data, path)]

    def commit_at(self, when: float) -> str | None:
        """The newest commit of main (by topology) among those made at or before ``when``
        (seconds since the epoch)."""
        self._update()
        if self._view is not None:
            found = self._view.newest_at(self.parts_path, when, self.reads)
            if found is not False:
                best = max([*([found] if found else []), *(
                    (int(generation), int(time), commit.decode())
                    for commit, time, generation in _LINE_HEAD.findall(self._view.tail)
                    if int(time) <= when)], default=None)
                return best[2] if best is not None else None
            self._update(full=True)  # the parts file changed meanwhile, or is damaged
            self._write_parts()
        newest = max(((int(generation), int(time), commit)
                      for commit, time, generation in _LINE_HEAD.findall(self._data)
                      if int(time) <= when), default=None)
        return newest[2].decode() if newest is not None else None

    def commits_between(self, since: float, until: float) -> list[IndexedCommit]:
        """The commits of main made from ``since`` to ``until`` (seconds since the epoch),
        each with the records it changed, newest first (by topology, as :meth:`versions`)."""
        self._update()
        data, found = self._data, []
        for match in _LINE_HEAD.finditer(data):
            if since <= int(match[2]) <= until:
                found.append(_parse_line(data[match.start():data.index(b"\n", match.start())]))
        return sorted(found, key=_order, reverse=True)

    def _known(self, commit: str) -> bool:
        if self._ids is None:
            self._ids = set(_LINE_ID.findall(self._data))
        return commit.encode() in self._ids

    def _line_of(self, commit: str) -> IndexedCommit:
        at = self._data.index(b"\n" + commit.encode() + b" ") + 1
        return _parse_line(self._data[at:self._data.index(b"\n", at)])

    # -- keeping it up to date ----------------------------------------------------

    def catch_up(self) -> None:
        """Bring the index up to date with main now (``gitmem clone`` and ``gitmem serve``
        do, so that the first history command finds it ready)."""
        self._update()

    def _update(self, full: bool = False) -> None:
        """Bring the index up to date with main; ``full``: with the whole index read, not
        only its parts' heads and the log's tail."""
        head = self.engine.head()
        if head == self._head and (self._view is None or not full):
            return
        self._versions, self._ids = {}, None
        if head is None:
            self._data, self._tip, self._head, self._view = HEADER, None, None, None
            return
        view = None if full else index_parts.look(self.parts_path, self.path, HEADER, self.reads)
        if view is not None and view.tip == head:  # up to date: the parts and the tail answer
            self._view, self._tip, self._head = view, head, head
            if len(view.tail) > index_parts.TAIL_LIMIT:
                self._write_parts()
            return
        self._view = None
        data = self._read()
        if data is not None:
            self._data, self._tip = data, _last_commit(data)
        if data is None or self._tip != head:
            new = self._new_commits(head) if data is not None else None
            if new is None:  # damaged, or it holds commits main no longer has: start over
                self._rebuild(head)
            else:
                self._append(new)
        self._head = head
        covered = len(HEADER) if view is None or view.head is None else view.covered
        if not full and len(self._data) - covered > index_parts.TAIL_LIMIT:
            self._write_parts()

    def _write_parts(self) -> None:
        """Make the parts file again from the index file as it is now (see
        :mod:`gitmem.history.index_parts`)."""
        data = self._read()
        if data is None or not data.endswith(b"\n") or _last_commit(data) is None:
            return
        try:
            index_parts.write(self.parts_path, self.engine.private_dir / "tmp" / f"{os.getpid()}-{PARTS_FILE}",
                              data, HEADER)
        except OSError:
            pass  # answered all the same; the next use tries again

    def _read(self) -> bytes | None:
        """The checked part of the index file (cached while the file does not change);
        None when it is missing or damaged."""
        try:
            with open(self.path, "rb") as file:
                info = os.fstat(file.fileno())
                stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
                if self._file is not None and self._file[0] == stamp:
                    return self._file[1]
                whole = file.read()
                self.reads.bytes += len(whole)
                data = checked(whole)
        except OSError:
            return None
        if data is not None:
            self._file = (stamp, data)
        return data

    def _new_commits(self, head: str) -> list[IndexedCommit] | None:
        """Lines for the commits of ``head``'s history that the index lacks; None when
        the index cannot be built on."""
        tip = self._tip
        if tip is None or not self.engine.log.commit_exists(tip):
            return None
        # every indexed commit is in the history of the last one: git lists the rest
        changed = self.engine.log.changed_commits(head, self._known, after=tip, progress=self.progress)
        if not self.engine.log.descends_from(head, tip):
            return None
        return self._index(changed)

    def _index(self, changed: list[ChangedCommit]) -> list[IndexedCommit]:
        made: dict[str, IndexedCommit] = {}
        for commit in changed:
            generation = 1 + max((self._generation(p, made) for p in commit.parents), default=0)
            records = sorted({r for r in map(record_path, commit.paths) if r is not None})
            if len(commit.parents) > 1 and records:
                records = self._merge_records(commit, records)
            made[commit.id] = IndexedCommit(commit.id, commit.time, generation, tuple(records))
        self.diffed += len(changed)
        return list(made.values())

    def _generation(self, commit: str, made: dict[str, IndexedCommit]) -> int:
        if commit in made:
            return made[commit].generation
        return self._line_of(commit).generation

    def _merge_records(self, commit: ChangedCommit, records: list[str]) -> list[str]:
        """Of the records a merge changed from its first parent, those that differ from
        every other parent too."""
        mine = self.engine.log.entry_ids(commit.id, records)
        for parent in commit.parents[1:]:
            theirs = self.engine.log.entry_ids(parent, records)
            records = [r for r in records if mine[r] != theirs[r]]
        return records

    def _append(self, new: list[IndexedCommit]) -> None:
        if not new:
            return
        base = self._data
        self._data, self._tip = _with_check(base + b"".join(e.line() for e in new)), new[-1].id
        try:
            with self._lock():
                now = self._read()
                if now is None:
                    self._write_all()
                    return
                missing = new
                if now != base:  # another process indexed meanwhile, maybe some of these
                    have = set(_LINE_ID.findall(now))
                    missing = [e for e in new if e.id.encode() not in have]
                if missing:
                    self._data = _with_check(now + b"".join(e.line() for e in missing))
                    with open(self.path, "r+b") as file:  # past a tail no check vouches for
                        file.seek(len(now))
                        file.write(self._data[len(now):])
                        file.truncate()
        except (LockTimeout, NotWritable, OSError):
            pass  # answered from memory; the next use writes it

    def _rebuild(self, head: str) -> None:
        self.rebuilds += 1
        self._data, self._tip = HEADER, None
        new = self._index(self.engine.log.changed_commits(head, lambda _commit: False,
                                                      progress=self.progress))
        self._data, self._tip = _with_check(HEADER + b"".join(e.line() for e in new)), head
        try:
            with self._lock():
                self._write_all()
        except (LockTimeout, NotWritable, OSError):
            pass

    def _write_all(self) -> None:
        """Replace the file with this object's index (a temporary file, then a rename)."""
        # in the engine's temp folder, named so that it is removed if this process dies first
        tmp = self.engine.private_dir / "tmp" / f"{os.getpid()}-{FILE}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as file:
            file.write(self._data)
        os.replace(tmp, self.path)

    def _lock(self) -> FileLock:
        return FileLock(self.path.with_name(LOCK_FILE), timeout=LOCK_WAIT)


def _search(data: bytes, path: str) -> list[IndexedCommit]:
    """The lines of index ``data`` that name the record at ``path``."""
    needle, found = b"\t" + path.encode(), []
    at = data.find(needle)
    while at >= 0:
        after = at + len(needle)
        if data[after:after + 1] in (b"\t", b"\n"):
            start = data.rfind(b"\n", 0, at) + 1
            found.append(_parse_line(data[start:data.index(b"\n", at)]))
        at = data.find(needle, after)
    return found


def _order(entry: IndexedCommit) -> tuple[int, int, str]:
    return (entry.generation, entry.time, entry.id)


def _parse_line(line: bytes) -> IndexedCommit:
    head, *records = line.decode().split("\t")
    commit, time, generation = head.split(" ")
    return IndexedCommit(commit, int(time), int(generation), tuple(records))


def _with_check(data: bytes) -> bytes:
    return data + b"#%08x\n" % zlib.crc32(data)


def _last_line(data: bytes) -> bytes:
    """The last commit line of checked index ``data`` (b"" for none)."""
    end = data.rfind(b"\n#")  # its last check line
    if end < 0:
        return b""
    start = data.rfind(b"\n", 0, end) + 1  # batches are never empty: a commit's line
    return data[start:end] if start >= len(HEADER) else b""


def _last_commit(data: bytes) -> str | None:
    line = _last_line(data)
    return line[:40].decode() if line else None
