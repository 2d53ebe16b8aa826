"""Packing and checking the object database: loose objects into packs, and fsck.

Packing runs on a background thread (``gitmem serve``'s maintenance) with repository
objects of its own: libgit2 repository objects are not to be shared between threads.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pygit2

from gitmem.git.base import DamagedObject, is_hex, join, unlink
from gitmem.git.objects import ObjectCheck

log = logging.getLogger("gitmem.engine")


class Packer:
    """The object database of ``repo`` (git folder ``gitdir``), checked by ``objects``;
    ``tip()`` is the commit at the tip of ``main``."""

    def __init__(self, repo: pygit2.Repository, gitdir: Path, *, objects: ObjectCheck,
                 tip: Callable[[], pygit2.Oid | None]):
        self._repo = repo
        self._gitdir = gitdir
        self._objects = objects
        self._tip = tip

    def loose_objects(self, *, sample: int = 256) -> int:
        """How many loose objects the object database holds (files counted, none read);
        with ``sample`` below 256, an estimate from that many of the 256 ``objects/xx``
        folders, as ``git gc --auto`` makes one (much cheaper in a big pile)."""
        objects = self._gitdir / "objects"
        count = 0
        for n in range(0, 256, 256 // sample):
            try:
                count += sum(1 for name in os.listdir(objects / f"{n:02x}") if len(name) == 38)
            except FileNotFoundError:
                pass
        return count * (256 // sample)

    def pack_files(self) -> list[Path]:
        """The ``.pack`` files of the object database."""
        return sorted((self._gitdir / "objects" / "pack").glob("*.pack"))

    def pack_loose_objects(self) -> int:
        """Put every loose object into one new pack with libgit2, then delete the loose
        copies; returns how many were packed. Needs no git CLI; a corrupt loose object is
        left where it is (``check_objects`` reports it)."""
        damaged = dict(self.damaged_loose_objects())
        loose = self._loose_object_files()
        _, builder = _pack_builder(self._gitdir)
        packed = []
        for oid, file in loose.items():
            if oid in damaged:
                log.warning("not packing damaged loose object %s: %s", oid, damaged[oid])
                continue
            try:
                builder.add(pygit2.Oid(hex=oid))
                packed.append(file)
            except pygit2.GitError as exc:
                log.warning("not packing loose object %s: %s", oid, exc)
        if not packed:
            return 0
        builder.write()  # the .pack and its .idx exist when this returns
        for file in packed:
            unlink(file)
        return len(packed)

    def pack_all_objects(self) -> int:
        """Put every object into one new pack, then delete the packs and loose objects it
        replaces (packs with a ``.keep`` file stay); returns how many objects it holds."""
        old_packs = [p for p in self.pack_files() if not p.with_suffix(".keep").exists()]
        damaged = dict(self.damaged_loose_objects())
        if damaged:
            oid, problem = next(iter(damaged.items()))
            raise DamagedObject(oid, problem)
        loose = self._loose_object_files()
        repo, builder = _pack_builder(self._gitdir)
        for object_id in repo.odb:
            builder.add(object_id)
        builder.write()
        new_packs = set(self.pack_files()) - set(old_packs)
        for pack in old_packs:
            if pack not in new_packs:
                for suffix in (".pack", ".idx", ".rev", ".bitmap"):
                    unlink(pack.with_suffix(suffix))
        for file in loose.values():
            unlink(file)
        return builder.written_objects_count

    def check_objects(self) -> list[tuple[str, str]]:
        """Read every object (libgit2 checks each one's hash) and every object reachable
        from ``main``; returns ``[(object id, problem)]``, empty when all is well."""
        repo = pygit2.Repository(str(self._gitdir))  # its own: the index refresher shares ours
        problems: dict[str, str] = dict(self.damaged_loose_objects())
        for oid in repo.odb:
            if str(oid) in problems:
                continue  # reading it would hang
            try:
                repo.odb.read(oid)
            except (pygit2.GitError, KeyError, ValueError) as exc:
                problems[str(oid)] = f"corrupt: {exc}"
        tip = self._tip()
        if tip is None:
            return sorted(problems.items())
        seen: set[pygit2.Oid] = {pygit2.Oid(hex=oid) for oid in problems if len(oid) == 40}
        pending = [tip]
        try:
            while pending:  # by hand, not repo.walk: a damaged commit must not be read
                oid = pending.pop()
                if oid in seen:
                    continue
                seen.add(oid)
                commit = cast(pygit2.Commit, repo[oid])
                _check_tree(repo, commit.tree_id, seen, problems)
                pending.extend(commit.parent_ids)
        except (pygit2.GitError, KeyError) as exc:
            problems.setdefault("history", f"cannot walk the history: {exc}")
        return sorted(problems.items())

    def locate_objects(self, ids: set[str]) -> dict[str, str]:
        """Where at HEAD each of ``ids`` is: ``{id: "the commit", "the root folder" or a
        path}``, found without reading a damaged object."""
        tip = self._tip()
        found: dict[str, str] = {}
        if tip is None:
            return found
        if str(tip) in ids:
            found[str(tip)] = "the commit"
        try:
            self._objects.check(tip)
            root = self._repo[tip].peel(pygit2.Commit).tree_id
        except (DamagedObject, KeyError, pygit2.GitError):
            return found
        pending = [(root, "")]
        while pending:
            tree_id, folder = pending.pop()
            if str(tree_id) in ids:
                found[str(tree_id)] = f"folder {folder}" if folder else "the root folder"
            try:
                self._objects.check(tree_id)
                entries = list(cast(pygit2.Tree, self._repo[tree_id]))
            except (DamagedObject, KeyError, pygit2.GitError):
                continue
            for entry in entries:
                # pygit2 types a tree entry's name optional; it is never None
                path = join(folder, entry.name)  # type: ignore[arg-type]
                if entry.type_str == "tree":
                    pending.append((entry.id, path))
                elif str(entry.id) in ids:
                    found[str(entry.id)] = path
        return found

    def damaged_loose_objects(self) -> list[tuple[str, str]]:
        """``[(object id, problem)]`` for each loose object whose file does not inflate
        completely (libgit2 would hang on it); each file is read once."""
        found = []
        for oid in sorted(self._loose_object_files()):
            try:
                self._objects.check(pygit2.Oid(hex=oid))
            except DamagedObject as exc:
                found.append((oid, exc.problem))
        return found

    def _loose_object_files(self) -> dict[str, Path]:
        found = {}
        objects = self._gitdir / "objects"
        for folder in os.scandir(objects):
            if len(folder.name) == 2 and is_hex(folder.name) and folder.is_dir():
                for entry in os.scandir(folder.path):
                    if len(entry.name) == 38 and is_hex(entry.name):
                        found[folder.name + entry.name] = Path(entry.path)
        return found


def _pack_builder(gitdir: Path) -> tuple[pygit2.Repository, pygit2.PackBuilder]:
    """A pack builder on a repository object of its own: packing runs on a background
    thread, and libgit2 repository objects are not to be shared between threads."""
    repo = pygit2.Repository(str(gitdir))
    builder = pygit2.PackBuilder(repo)
    builder.set_threads(1)  # and pack.windowMemory from the config bounds its memory
    return repo, builder


def _check_tree(repo: pygit2.Repository, oid: pygit2.Oid, seen: set, problems: dict[str, str]) -> None:
    if oid in seen:
        return
    seen.add(oid)
    try:
        tree = cast(pygit2.Tree, repo[oid])
    except (pygit2.GitError, KeyError, ValueError) as exc:
        problems.setdefault(str(oid), f"missing or corrupt tree: {exc}")
        return
    for entry in tree:
        if entry.type_str == "tree":
            _check_tree(repo, entry.id, seen, problems)
        elif entry.id not in seen:
            seen.add(entry.id)
            if entry.id not in repo.odb:
                problems.setdefault(str(entry.id), f"missing blob ({entry.name})")
