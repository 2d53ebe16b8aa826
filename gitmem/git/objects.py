"""Damaged objects: checking each object before libgit2 first reads it.

libgit2 spins forever on a loose object whose zlib stream was cut short (a crash
of another tool, a full disk): every read of it, `git fsck` aside, hangs. So each
object is checked with Python's zlib, which stops, before libgit2 first reads it.
What is checked is remembered: objects gitmem writes itself are known good, trees
whose whole content was checked are "sound" (libgit2 may walk them freely, as the
index diffs and tree diffs do), commits whose whole ancestry was checked may be
walked. The root tree last found sound, and the newest commits whose ancestry was
found walkable, are kept in .git/gitmem/, so a new process checks only the folders
and the commits that came since.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import zlib
from pathlib import Path
from typing import Literal, cast

import pygit2

from gitmem.git.base import DamagedObject, join
from gitmem.git.files import write_private

log = logging.getLogger("gitmem.engine")

SOUND_TREE_FILE = "sound-tree"  # in .git/gitmem/
WALKABLE_FILE = "walkable-commits"  # in .git/gitmem/
WALKABLE_KEPT = 32  # commits remembered there, newest first
CHECKED_LIMIT = 2_000_000  # remembered object ids before the memory starts over
_LOOSE_KINDS = (b"commit", b"tree", b"blob", b"tag")


class LooseObjectDamaged(ValueError):
    """A loose object file that does not hold its object: truncated, corrupt or not its id's."""


def read_loose_object(path: str, oid: str) -> tuple[bytes, bytes]:
    """``(kind, content)`` of object ``oid`` from its loose object file at ``path``, inflated
    with Python's zlib and checked against the id. Raises FileNotFoundError when there is
    none, LooseObjectDamaged saying what is wrong with a damaged one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = b"".join(iter(lambda: os.read(fd, 1 << 20), b""))
    finally:
        os.close(fd)
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(data)
    except zlib.error as exc:
        raise LooseObjectDamaged(f"its zlib stream is corrupt ({exc})") from None
    if not inflater.eof:
        raise LooseObjectDamaged(f"its file {path} is truncated")
    header, sep, content = raw.partition(b"\0")
    kind, _, length = header.partition(b" ")
    if not sep or kind not in _LOOSE_KINDS or not length.isdigit() or int(length) != len(content):
        raise LooseObjectDamaged("it holds no git object (bad header or size)")
    if hashlib.sha1(raw).hexdigest() != oid:
        raise LooseObjectDamaged("its content does not match its id")
    return kind, content


class ObjectCheck:
    """Which objects of repository ``repo`` have been checked, and the checks (see the
    module doc); the sound root tree is kept in ``private_dir``."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, private_dir: Path):
        self._repo = repo
        self._objects = str(gitdir / "objects")
        self._sound_tree_file = private_dir / SOUND_TREE_FILE
        self._walkable_file = private_dir / WALKABLE_FILE
        self.checked: set[pygit2.Oid] = set()  # readable (loose and complete, or packed)
        self.sound: set[pygit2.Oid] = set()  # trees: themselves and every tree under them
        self.walkable: set[pygit2.Oid] = set()  # commits: themselves and all their ancestry
        self._trusted: pygit2.Oid | None | Literal[False] = False  # False: not read yet
        self._walked: list[pygit2.Oid] | None = None  # the walkable file's commits; None: not read yet
        self.commits_walked = 0  # commits make_walkable checked: what a start-up costs

    def check(self, oid: pygit2.Oid, where: str | None = None) -> bytes | None:
        """Raise DamagedObject unless ``oid`` can be read without hanging. Returns the content
        of a loose blob it has just inflated to check it (else None)."""
        if oid in self.checked:
            return None
        text = str(oid)
        path = f"{self._objects}/{text[:2]}/{text[2:]}"
        try:
            kind, content = read_loose_object(path, text)
        except FileNotFoundError:  # packed, or missing: libgit2 answers either at once
            kind, content = None, None
        except LooseObjectDamaged as exc:
            raise DamagedObject(text, str(exc), where) from None
        except OSError as exc:  # unreadable: libgit2 fails on it at once too
            log.debug("cannot check %s: %s", path, exc)
            return None
        self.remember(self.checked, oid)
        return content if kind == b"blob" else None

    def load(self, oid: pygit2.Oid, where: str | None):
        """The object ``oid``, checked first; DamagedObject when it is damaged or missing."""
        self.check(oid, where)
        try:
            return self._repo[oid]
        except KeyError:
            raise DamagedObject(str(oid), "it is missing from the object database", where) from None
        except pygit2.GitError as exc:
            raise DamagedObject(str(oid), f"it cannot be read ({exc})", where) from None

    def read(self, oid: pygit2.Oid, where: str | None) -> bytes:
        """The content of blob ``oid`` from the object database (check it first)."""
        try:
            return self._repo.odb.read(oid)[1]
        except KeyError:
            raise DamagedObject(str(oid), "it is missing from the object database", where) from None
        except pygit2.GitError as exc:
            raise DamagedObject(str(oid), f"it cannot be read ({exc})", where) from None

    def wrote(self, commit_id: pygit2.Oid, parents: list[pygit2.Oid], tree_id: pygit2.Oid,
              base_tree: pygit2.Tree | None) -> None:
        """Note a commit gitmem made on ``parents``, its tree built on ``base_tree``."""
        self.remember(self.checked, commit_id)
        if all(p in self.walkable for p in parents):
            self.remember(self.walkable, commit_id)
        if base_tree is None or base_tree.id in self.sound:  # every other tree in it is ours
            self.remember(self.sound, tree_id)

    def remember(self, known: set, oid: pygit2.Oid) -> None:
        if len(known) >= CHECKED_LIMIT:
            known.clear()
        known.add(oid)

    def make_sound(self, root_id: pygit2.Oid, *, keep: bool = True) -> None:
        """Check every tree under root tree ``root_id``, except the folders that are the
        same as in the root tree found sound last time (by this process or one before).
        ``keep``: remember ``root_id`` as that tree (for the tip's tree: an old tree of the
        history read by ``gitmem log`` would cost a file write each)."""
        if root_id in self.sound:
            return
        self._sound_below(root_id, self._trusted_root(), "")
        if keep:
            self._save_trusted(root_id)

    def make_path_sound(self, root_id: pygit2.Oid, path: str) -> None:
        """Check the folders on the way to ``path`` under root tree ``root_id``, and every
        tree under ``path`` when it is a folder: what reading one record of an old
        commit needs, whatever the rest of its tree holds."""
        if root_id in self.sound:
            return
        tree_id, where = root_id, ""
        for part in path.split("/"):
            tree = self.load(tree_id, f"folder {where or '/'}")
            try:
                entry = tree[part]
            except KeyError:
                return
            if entry.type_str != "tree":
                return  # a file: its blob is checked when it is read
            tree_id, where = entry.id, join(where, part)
        self._sound_below(tree_id, None, where)

    def _sound_below(self, tree_id: pygit2.Oid, trusted_id: pygit2.Oid | None, where: str) -> None:
        if tree_id in self.sound:
            return
        if tree_id == trusted_id:
            self.remember(self.sound, tree_id)
            return
        repo = self._repo
        tree = self.load(tree_id, f"folder {where or '/'}")
        trusted: dict[str | None, pygit2.Oid] = {}  # a tree entry's name: None in pygit2's types only
        if trusted_id is not None:
            try:
                trusted = {e.name: e.id for e in cast(pygit2.Tree, repo[trusted_id]) if e.type_str == "tree"}
            except (KeyError, pygit2.GitError):  # pruned since: check everything
                trusted = {}
        for entry in tree:
            if entry.type_str == "tree":
                self._sound_below(entry.id, trusted.get(entry.name), join(where, entry.name))
        self.remember(self.sound, tree_id)

    def make_walkable(self, starts) -> None:
        """Check every commit in the history of ``starts`` before libgit2 walks it."""
        repo = self._repo
        starts = [oid for oid in starts if oid is not None]
        if all(oid in self.walkable for oid in starts):
            return
        if self._walked is None:
            self._walked = self._read_walked()
            for oid in self._walked:
                self.remember(self.walkable, oid)
        pending = list(starts)
        seen: set[pygit2.Oid] = set()
        while pending:
            oid = pending.pop()
            if oid in self.walkable or oid in seen:
                continue
            seen.add(oid)
            self.commits_walked += 1
            if oid in starts:  # an unknown revision, not a damaged history: KeyError
                self.check(oid, "a commit in the history")
                commit = repo[oid]
            else:
                commit = self.load(oid, "a commit in the history")
            pending.extend(getattr(commit, "parent_ids", ()))
        for oid in seen:  # only once all of it is checked
            self.remember(self.walkable, oid)
        if seen:
            self._walked = [*starts, *(oid for oid in self._walked if oid not in starts)][:WALKABLE_KEPT]
            self._save(self._walkable_file, "".join(f"{oid}\n" for oid in self._walked))

    def _read_walked(self) -> list[pygit2.Oid]:
        try:
            return [pygit2.Oid(hex=line) for line in self._walkable_file.read_text("ascii").split()]
        except (OSError, ValueError):  # none yet, or garbage: walk (and check) again
            return []

    def _trusted_root(self) -> pygit2.Oid | None:
        if self._trusted is False:
            try:
                text = self._sound_tree_file.read_text("ascii").strip()
                self._trusted = pygit2.Oid(hex=text)
            except (OSError, ValueError):
                self._trusted = None
        return self._trusted

    def _save_trusted(self, tree_id: pygit2.Oid) -> None:
        self._trusted = tree_id
        self._save(self._sound_tree_file, f"{tree_id}\n")

    @staticmethod
    def _save(target: Path, text: str) -> None:
        with contextlib.suppress(OSError):  # a read-only repository: the next process checks again
            write_private(target, text.encode("ascii"))
