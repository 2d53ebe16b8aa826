"""Refs beside ``main``: its reflog, commits kept for rescue, backups, and refs by prefix.

For gitmem.sync.rescue: a commit a history rewrite by hand (`git commit --amend`, `git
reset`) dropped from main stays reachable under refs/gitmem/rescue/<commit id> until
it is merged back, so neither `git gc` nor a reflog expiry can delete it. The
former tips of main come from its reflog, read from the end of the file: the
reflog is never expired by gitmem and grows by one line a write.
"""

from __future__ import annotations

import os
import re
import time
from collections import namedtuple
from pathlib import Path

import pygit2

from gitmem.git.base import REF, Identity
from gitmem.git.snapshot import Reader

RESCUE_REFS = "refs/gitmem/rescue"
BACKUP_REFS = "refs/gitmem/backup"
REFLOG_SCAN = 1000  # the newest reflog entries of main searched for dropped tips
_REFLOG_BLOCK = 4096  # bytes read first from the end of the reflog (then twice as many, ...)
# <old> <new> <name> <<email>> <seconds> <zone>[\t<message>], as git and libgit2 write it
_REFLOG_LINE = re.compile(rb"([0-9a-f]{40,64}) ([0-9a-f]{40,64}) (.*?) <(.*?)> (\d+) [-+]\d{4}(?:\t(.*))?",
                          re.DOTALL)


class ReflogEntry(namedtuple("ReflogEntry", "old new name email time message")):
    """One move of ``main``, as its reflog records it: the ``old`` and ``new`` commit ids
    (None for "no commit"), the ``name`` and ``email`` of who moved it, its ``time``
    (seconds since the epoch) and ``message``."""

    __slots__ = ()


class Refs:
    """The refs of ``repo`` (git folder ``gitdir``); commits named through ``reader``."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, reader: Reader):
        self._repo = repo
        self._gitdir = gitdir
        self._reader = reader

    def reflog(self, limit: int = REFLOG_SCAN) -> list[ReflogEntry]:
        """The newest ``limit`` entries of main's reflog, newest first; [] when it has none.

        Reads only the end of the file, whatever the reflog's length.
        """
        path = self._gitdir / "logs" / REF
        try:
            with open(path, "rb") as file:
                end = file.seek(0, os.SEEK_END)
                start, data, block = end, b"", _REFLOG_BLOCK
                while start > 0 and data.count(b"\n") <= limit:
                    start, block = max(0, start - block), block * 2
                    file.seek(start)
                    data = file.read(end - start)
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")[1 if start > 0 else 0:]  # the first may be cut in the middle
        entries = []
        for line in reversed(lines):
            found = _REFLOG_LINE.fullmatch(line)
            if found is not None:
                entries.append(_reflog_entry(*found.groups()))
                if len(entries) == limit:
                    break
        return entries

    def dropped_tips(self, candidates: list[str], settled: list[str] | None = None) -> list[str]:
        """The commits of ``candidates`` that main's history does not hold, leaving out any
        that another one it does not hold, or one of ``settled`` (let go on purpose), has in
        its own history (those come along), in the order given. Candidates that are no
        commits (gone, or never were) are skipped.

        One walk from the candidates, stopping where main's history begins.
        """
        wanted, done = self._commit_ids(candidates), set(self._commit_ids(settled or []))
        if not wanted:
            return []
        walker = self._repo.walk(None, pygit2.enums.SortMode.TOPOLOGICAL)
        for oid in wanted.keys() | done:
            walker.push(oid)
        tip = self._reader.tip()
        if tip is not None:
            walker.hide(tip)
        covered: set[pygit2.Oid] = set()  # in the history of a dropped candidate or a settled one
        tips = set()
        for commit in walker:  # children before their parents
            if commit.id in wanted and commit.id not in covered and commit.id not in done:
                tips.add(commit.id)
            if commit.id in wanted or commit.id in covered or commit.id in done:
                covered.update(commit.parent_ids)
        return [commit for oid, commit in wanted.items() if oid in tips]

    def _commit_ids(self, commits: list[str]) -> dict[pygit2.Oid, str]:
        """``{oid: id}`` of those of ``commits`` that are commits here, in the order given."""
        found: dict[pygit2.Oid, str] = {}
        for commit in commits:
            try:
                oid = pygit2.Oid(hex=commit)
            except ValueError:
                continue
            if isinstance(self._repo.get(oid), pygit2.Commit):
                found.setdefault(oid, commit)
        return found

    def committer_of(self, commit: str) -> Identity:
        """Who committed ``commit`` (EngineError when there is no such commit)."""
        signature = self._reader.commit(commit).committer
        return Identity(signature.name, signature.email)

    def rescue_refs(self) -> dict[str, str]:
        """``{commit id: ref name}`` of the commits kept under ``refs/gitmem/rescue/``."""
        prefix = f"{RESCUE_REFS}/"
        return {str(self._repo.references[name].target): name
                for name in self._repo.references if name.startswith(prefix)}

    def keep_for_rescue(self, commit: str) -> str:
        """Keep ``commit`` under ``refs/gitmem/rescue/<commit>``; returns the ref's name."""
        name = f"{RESCUE_REFS}/{commit}"
        self._repo.references.create(name, pygit2.Oid(hex=commit), force=True)
        return name

    def release_rescued(self, commit: str) -> None:
        """Delete ``refs/gitmem/rescue/<commit>`` (it is fine when there is none)."""
        ref = self._repo.references.get(f"{RESCUE_REFS}/{commit}")
        if ref is not None:
            try:
                ref.delete()
            except pygit2.GitError:  # deleted meanwhile by another process
                pass

    def backup(self) -> str | None:
        """Save the tip of ``main`` as ``refs/gitmem/backup/<UTC time>``; return the ref's name.

        Call it before anything moves the branch other than a commit on top, a
        fast-forward or a merge.
        """
        tip = self._reader.tip()
        if tip is None:
            return None
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = f"{BACKUP_REFS}/{stamp}.{time.time_ns() % 1_000_000_000:09d}Z"
        self._repo.references.create(name, tip)
        return name

    def point_head_at_main(self) -> None:
        """Make HEAD name ``main`` (for a repository without commits on another branch)."""
        self._repo.set_head(REF)

    def refs_under(self, prefix: str) -> list[str]:
        """The names of the refs under ``prefix`` (``refs/gitmem/forgotten``), sorted."""
        return sorted(name for name in self._repo.references if name.startswith(prefix + "/"))

    def delete_ref(self, name: str) -> None:
        """Delete ref ``name`` (nothing when it is not there)."""
        ref = self._repo.references.get(name)
        if ref is not None:
            ref.delete()


def _reflog_entry(old: bytes, new: bytes, name: bytes, email: bytes, seconds: bytes,
                  message: bytes) -> ReflogEntry:
    def commit(oid: bytes) -> str | None:
        return None if oid.strip(b"0") == b"" else oid.decode()

    return ReflogEntry(commit(old), commit(new), name.decode("utf-8", "replace"),
                       email.decode("utf-8", "replace"), int(seconds),
                       (message or b"").decode("utf-8", "replace"))
