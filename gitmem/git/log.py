"""History: commits that touched a path, what they changed, and diffs between revisions.

Every commit and tree is checked for damage before libgit2 walks or diffs it
(:mod:`gitmem.git.objects`). A long stretch of history (catching up from a clone or
an import) is read by ``git log --raw`` instead, which skips the folders a commit did
not change by their ids and stops with an error at a damaged object.
"""

from __future__ import annotations

import logging
import subprocess
from collections import namedtuple
from collections.abc import Callable, Generator, Iterator
from typing import cast

import pygit2

from gitmem.git import gitproc, parentdiffs
from gitmem.git.base import CommitInfo, entry_id, is_hex, join
from gitmem.git.objects import ObjectCheck
from gitmem.git.parentdiffs import ParentDiffs
from gitmem.git.rawlog import raw_log
from gitmem.git.snapshot import Reader

log = logging.getLogger("gitmem.engine")

RECOVERY_DEPTH = 1000  # commits searched for the versions a killed writer may have left
GIT_FROM = 16  # pairs of commits: fewer cost less here than a git process
_STATUS = {b"A": "added", b"D": "deleted"}
PROGRESS_FROM = 2000  # commits: a shorter history is read before a bar is worth drawing
LOG_TIMEOUT = 900.0  # seconds for git to read a whole history (git reads some 10,000 commits a second)
_NEWEST_FIRST = pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.TIME


class ChangedCommit(namedtuple("ChangedCommit", "id parents time paths")):
    """A commit with the files that differ from its first parent (every file of a root commit):
    its ``id``, its ``parents``' ids, its committer ``time`` (seconds since the epoch) and
    the ``paths`` (a tuple)."""

    __slots__ = ()


class FileChange(namedtuple("FileChange", "path status added removed binary")):
    """How one file changed between two commits, without the patch (see :meth:`History.changes`):
    its ``path``, ``status`` ("added", "deleted" or "modified"), lines ``added`` and
    ``removed`` (0 for a binary file), and whether it is ``binary``."""

    __slots__ = ()


class FileDiff(namedtuple("FileDiff", "path status added removed binary patch")):
    """How one file changed between two revisions (see :meth:`History.diff`): its ``path``,
    ``status`` ("added", "deleted" or "modified"), lines ``added`` and ``removed``, whether
    it is ``binary``, and the ``patch`` (a unified diff, with the full repository path in
    its headers)."""

    __slots__ = ()


class History:
    """The history of ``main`` in ``repo``, read through ``reader``, checked by ``objects``."""

    def __init__(self, repo: pygit2.Repository, reader: Reader, objects: ObjectCheck):
        self._repo = repo
        self._reader = reader
        self._objects = objects

    def commit_info(self, rev: str) -> CommitInfo:
        """The commit ``rev`` names."""
        return CommitInfo.of(cast(pygit2.Commit, self._repo[self._reader.resolve(rev)]))

    def history(self, path: str | None = None, *, rev: str | None = None,
                limit: int | None = None) -> list[CommitInfo]:
        """Commits that changed ``path`` (a file or folder; None for all), newest first."""
        start = self._reader.resolve(rev) if rev else self._reader.tip()
        if start is None:
            return []
        self._objects.make_walkable([start])
        found = []
        walker = self._repo.walk(start, _NEWEST_FIRST)
        for commit in walker:
            if path is None or self._touches(commit, path):
                found.append(CommitInfo.of(commit))
                if limit is not None and len(found) >= limit:
                    break
        return found

    def commit_at(self, when: float) -> str | None:
        """The newest commit on ``main`` made at or before ``when`` (seconds since the epoch)."""
        tip = self._reader.tip()
        if tip is None:
            return None
        self._objects.make_walkable([tip])
        # TOPOLOGICAL too: commits made in the same second come child first
        for commit in self._repo.walk(tip, _NEWEST_FIRST):
            if commit.commit_time <= when:
                return str(commit.id)
        return None

    def _touches(self, commit: pygit2.Commit, path: str) -> bool:
        mine = self._checked_entry_id(commit.tree_id, path)
        if not commit.parent_ids:
            return mine is not None
        return all(self._checked_entry_id(cast(pygit2.Commit, self._repo[p]).tree_id, path) != mine
                   for p in commit.parent_ids)

    def path_versions(self, path: str, *, limit: int | None = None) -> list[str]:
        """The versions of file ``path`` on ``main`` (blob ids, each once), newest first, from
        the last RECOVERY_DEPTH commits; at most ``limit`` of them."""
        tip = self._reader.tip()
        found: dict[str, None] = {}
        if tip is None:
            return []
        self._objects.make_walkable([tip])
        for depth, commit in enumerate(self._repo.walk(tip, pygit2.enums.SortMode.TOPOLOGICAL)):
            if depth >= RECOVERY_DEPTH or (limit is not None and len(found) >= limit):
                break
            version = entry_id(commit.tree, path)
            if version is not None:
                found.setdefault(str(version))
        return list(found)

    def merge_base(self, a: str, b: str) -> str | None:
        """The best common ancestor of commits ``a`` and ``b`` (None: unrelated histories)."""
        found = self._repo.merge_base(self._reader.resolve(a), self._reader.resolve(b))
        return str(found) if found else None

    def is_ancestor(self, ancestor: str, commit: str) -> bool:
        """True when ``ancestor`` is ``commit`` or in its history."""
        a, c = self._reader.resolve(ancestor), self._reader.resolve(commit)
        return a == c or self._repo.descendant_of(c, a)

    def new_commits(self, tip: str, known: list[str]) -> list[str]:
        """Commits in the history of ``tip`` and in none of ``known``, oldest first."""
        walker = self._repo.walk(self._reader.resolve(tip),
                                 pygit2.enums.SortMode.TOPOLOGICAL | pygit2.enums.SortMode.REVERSE)
        for commit in known:
            walker.hide(self._reader.resolve(commit))
        return [str(commit.id) for commit in walker]

    def changed_files(self, old: str | None, new: str | None) -> dict[str, tuple[str | None, str | None]]:
        """``{path: (blob id in old, blob id in new)}`` for every file that differs between
        two commits (None: no commit, or no file there)."""
        # a commit id is read checked, its history is not walked (nor checked)
        return tree_changes(*(self._reader.tree_of(pygit2.Oid(hex=c) if c and len(c) == 40 and is_hex(c) else c)
                              for c in (old, new)))

    # -- for the record index (gitmem.history.record_index): commit ids of main's history, so
    # no revision is resolved (and no whole ancestry checked) on the way

    def changed_commits(self, tip: str, known: Callable[[str], bool], *, after: str | None = None,
                        progress: Callable[[int, int], None] | None = None) -> list[ChangedCommit]:
        """The commits in the history of ``tip`` for which ``known(id)`` is false, parents
        first, each with the files it changed; the walk stops at known commits.

        ``after``: a known commit all of whose history is known too (the walk hands
        the work to ``git log`` then, or when nothing is known); ``progress(done, total)``
        is called as commits are read there.
        """
        if after is not None or not known(tip):
            try:
                return self._git_changed_commits(tip, after, progress)
            except subprocess.CalledProcessError as exc:
                if exc.returncode < 0:  # ended by a signal (gitmem is stopping): no walk
                    raise
                log.debug("git log of the history failed (%s); walking it", exc.stderr.strip())
            except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
                log.debug("git log of the history failed (%s); walking it", exc)
        found: dict[pygit2.Oid, pygit2.Commit] = {}
        order = []
        pending: list[tuple[pygit2.Oid, bool]] = [(pygit2.Oid(hex=tip), False)]
        while pending:
            oid, parents_done = pending.pop()
            if parents_done:
                order.append(found[oid])
                continue
            if oid in found or known(str(oid)):
                continue
            commit = self._objects.load(oid, "a commit in the history")
            found[oid] = commit
            pending.append((oid, True))
            pending.extend((p, False) for p in commit.parent_ids if p not in found)
        result = []
        last: tuple[pygit2.Oid | None, pygit2.Tree | None] = (None, None)  # parents come first
        for commit in order:
            first_parent = commit.parent_ids[0] if commit.parent_ids else None
            if first_parent is None:
                parent = None
            else:
                parent = last[1] if last[0] == first_parent else self._reader.tree_of(first_parent)
            tree = self._reader.tree_of(commit.id)
            last = (commit.id, tree)
            paths = tuple(tree_changes(parent, tree))
            result.append(ChangedCommit(str(commit.id), tuple(str(p) for p in commit.parent_ids),
                                        commit.commit_time, paths))
        return result

    def _git_changed_commits(self, tip: str, after: str | None,
                             progress: Callable[[int, int], None] | None) -> list[ChangedCommit]:
        revs = [tip, *([f"^{after}"] if after else [])]
        git = ["--git-dir", self._repo.path]
        total = 0
        if progress is not None and after is None:  # a whole history: worth a bar when long
            counted = gitproc.run([*git, "rev-list", "--count", *revs], cwd=self._repo.path, timeout=LOG_TIMEOUT)
            total = int(counted.stdout.strip() or 0) if counted.returncode == 0 else 0
        if total < PROGRESS_FROM:
            progress = None
        result: list[ChangedCommit] = []
        command = [*git, "-c", "core.quotePath=false", "log", "--raw", "-r", "-z", "--root",
                   "--no-renames", "--no-abbrev", "--no-show-signature", "--no-color",
                   "--diff-merges=first-parent", "--topo-order",  # children first: --reverse
                   # would keep every commit git read in memory (100 MB more at 20,000 commits)
                   "--format=%H %P %ct", *revs, "--"]
        logged = gitproc.stream(command, cwd=self._repo.path, timeout=LOG_TIMEOUT)
        for header, changes in raw_log(logged):
            if header is None:  # changes under no commit: not git log's output
                raise ValueError("git log gave changes under no commit")
            commit, *parents, when = header.split(b" ")
            paths = tuple(path.decode("utf-8", "surrogateescape") for fields, path in changes
                          if fields[2] != fields[3])  # a change of mode alone is no change
            result.append(ChangedCommit(commit.decode(), tuple(p.decode() for p in parents if p),
                                        int(when), paths))
            if progress is not None and (len(result) % 512 == 0):
                progress(len(result), max(total, len(result)))
        if progress is not None:
            progress(len(result), len(result))
        result.reverse()  # parents first
        return result

    def entry_ids(self, commit: str, paths) -> dict[str, str | None]:
        """The id of the file or folder at each of ``paths`` in ``commit`` (None: nothing there)."""
        tree = self._reader.tree_of(pygit2.Oid(hex=commit))
        return {path: str(oid) if (oid := entry_id(tree, path)) is not None else None for path in paths}

    def descends_from(self, commit: str, ancestor: str) -> bool:
        """True when ``ancestor`` is ``commit`` or in its history (False when either is gone)."""
        if commit == ancestor:
            return True
        try:
            return self._repo.descendant_of(pygit2.Oid(hex=commit), pygit2.Oid(hex=ancestor))
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def commit_exists(self, commit: str) -> bool:
        """True when the object database holds commit ``commit``."""
        try:
            return self._repo[pygit2.Oid(hex=commit)].type == pygit2.enums.ObjectType.COMMIT
        except (KeyError, ValueError, pygit2.GitError):
            return False

    def commit_infos(self, commits: list[str]) -> list[CommitInfo]:
        """The :class:`CommitInfo` of each of ``commits`` (commit ids)."""
        return [CommitInfo.of(self._objects.load(pygit2.Oid(hex=c), "a commit in the history")
                              .peel(pygit2.Commit)) for c in commits]

    def changes_from_parents(self, commits: list[str]) -> Generator[ParentDiffs, None, None]:
        """What each of ``commits`` (ids) changed from each of its parents, read by one git
        process while the caller goes on (see :mod:`gitmem.git.parentdiffs`). Each commit
        is checked first: git passes over a missing one in silence."""
        self.commit_infos(commits)
        return parentdiffs.changes_from_parents(self._repo.path, commits)

    def _checked_entry_id(self, tree_id: pygit2.Oid, path: str) -> pygit2.Oid | None:
        """The id of the entry at ``path`` in tree ``tree_id``, each folder on the way checked."""
        parts = path.split("/")
        for depth, part in enumerate(parts):
            self._objects.check(tree_id, "a folder in the history")
            try:
                entry = cast(pygit2.Tree, self._repo[tree_id])[part]
            except KeyError:
                return None
            if depth == len(parts) - 1:
                return entry.id
            if entry.type_str != "tree":
                return None
            tree_id = entry.id
        return None

    def _object_at(self, tree: pygit2.Tree, path: str):
        oid = entry_id(tree, path)
        if oid is None:
            return None
        self._objects.check(oid, path)
        return self._repo[oid]

    def diff(self, path: str, old: str | pygit2.Oid | None, new: str | pygit2.Oid | None) -> list[FileDiff]:
        """The files at or under ``path`` ("" for all) that differ from revision ``old``
        to revision ``new`` (None: before the first commit), in path order.

        ``engine.log.diff("memory/user.md", "HEAD~1", "HEAD")[0].added`` is the lines added.
        """
        sides = []
        for rev in (old, new):
            tree = self._reader.tree_of(rev, path)
            obj = tree if not path or tree is None else self._object_at(tree, path)
            sides.append(obj)
        old_tree, new_tree = [o if isinstance(o, pygit2.Tree) else None for o in sides]
        changed = {join(path, rel): ids for rel, ids in tree_changes(old_tree, new_tree).items()}
        blobs = [str(o.id) if isinstance(o, pygit2.Blob) else None for o in sides]
        if blobs != [None, None] and blobs[0] != blobs[1]:
            changed[path] = (blobs[0], blobs[1])
        return [self._file_diff(file, old_id, new_id)
                for file, (old_id, new_id) in sorted(changed.items())]

    def diff_commits(self, path: str, old: str | None, new: str | None) -> list[FileDiff]:
        """:meth:`diff` of two commit ids (no revision syntax)."""
        return self.diff(path, *(pygit2.Oid(hex=c) if c else None for c in (old, new)))

    def changes(self, path: str, pairs: list[tuple[str | None, str]]) -> list[list[FileChange]]:
        """For each ``(old commit, new commit)`` of ``pairs`` (old None: before the first
        commit), the files at or under ``path`` ("" for all) that differ, in path order,
        with their line counts: :meth:`diff` without the patches. Many pairs are handed to
        one ``git diff-tree --stdin``, which skips the folders that did not change."""
        if len(pairs) >= GIT_FROM:
            try:
                return self._git_changes(path, pairs)
            except subprocess.CalledProcessError as exc:
                if exc.returncode < 0:
                    raise
                log.debug("git diff-tree failed (%s); diffing here", exc.stderr.strip())
            except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
                log.debug("git diff-tree failed (%s); diffing here", exc)
        return [[FileChange(f.path, f.status, f.added, f.removed, f.binary)
                 for f in self.diff_commits(path, *pair)]
                for pair in pairs]

    def _git_changes(self, path: str, pairs: list[tuple[str | None, str]]) -> list[list[FileChange]]:
        for pair in pairs:  # a revision's syntax never reaches git's stdin
            if not all(c is None or (len(c) == 40 and is_hex(c)) for c in pair):
                raise ValueError("not a commit id")
        lines = "".join(f"{new} {old}\n" if old else f"{new}\n" for old, new in pairs)
        command = ["--git-dir", self._repo.path, "--literal-pathspecs", "diff-tree", "--stdin",
                   "--always", "--root", "-r", "-z", "--raw", "--numstat", "--no-renames",
                   "--no-ext-diff", "--no-textconv", "--", *([path] if path else [])]
        found: list[list[FileChange]] = []
        for header, entries in raw_log(gitproc.stream(command, cwd=self._repo.path, timeout=LOG_TIMEOUT,
                                                      input=lines.encode())):
            if header is None:
                raise ValueError("git diff-tree's output does not match what was asked")
            status = {name: _STATUS.get(fields[4][:1], "modified") for fields, name in entries
                      if len(fields) == 5 and fields[2] != fields[3]}  # a change of mode alone is no change
            files = []
            for fields, name in entries:
                if len(fields) == 2 and name in status:  # --numstat's counts: [added, removed]
                    binary = fields[0] == b"-"
                    files.append(FileChange(name.decode("utf-8", "surrogateescape"), status[name],
                                            0 if binary else int(fields[0]), 0 if binary else int(fields[1]),
                                            binary))
            found.append(files)
        if len(found) != len(pairs):
            raise ValueError("git diff-tree's output does not match what was asked")
        return [sorted(changed, key=lambda f: f.path) for changed in found]

    def prefetch(self, path: str, commits: list[str], budget: int = 64 << 20) -> int:
        """Read file ``path`` of many ``commits`` at once into the blob cache (about
        ``budget`` bytes, by one git process, see :meth:`_blobs_at`), so that reading their
        snapshots after inflates nothing; returns how many of ``commits`` were read (0: git
        failed)."""
        read = 0
        try:
            for blob_id, data in self._blobs_at(path, commits, budget):
                if blob_id:
                    self._reader.keep(blob_id, data)
                read += 1
        except subprocess.CalledProcessError as exc:
            if exc.returncode < 0:
                raise
            log.debug("git cat-file failed (%s); reading the versions one by one", exc.stderr.strip())
            return 0
        except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
            log.debug("git cat-file failed (%s); reading the versions one by one", exc)
            return 0
        return read

    def _blobs_at(self, path: str, commits: list[str], budget: int) -> Iterator[tuple[str, bytes]]:
        """``(blob id, bytes)`` of file ``path`` in each of ``commits`` that has it, in order,
        read by one ``git cat-file --batch`` (whose delta cache makes a run of one file's
        versions cheap), until ``budget`` bytes are read. Raises as :func:`gitproc.stream`."""
        if not all(len(c) == 40 and is_hex(c) for c in commits):
            raise ValueError("not a commit id")
        read = 0
        for blob_id, blob in gitproc.read_objects(self._repo.path, [f"{c}:{path}" for c in commits],
                                                  timeout=LOG_TIMEOUT):
            yield blob_id, blob
            read += len(blob)
            if read >= budget:
                return

    def _file_diff(self, path: str, old_id: str | None, new_id: str | None) -> FileDiff:
        for blob_id in filter(None, (old_id, new_id)):
            self._objects.check(pygit2.Oid(hex=blob_id), path)
        old_blob = cast(pygit2.Blob, self._repo[old_id]) if old_id else None
        new_blob = cast(pygit2.Blob, self._repo[new_id]) if new_id else None
        patch = pygit2.Patch.create_from(old_blob, new_blob, old_as_path=path, new_as_path=path)
        _, added, removed = patch.line_stats
        status = "added" if old_id is None else "deleted" if new_id is None else "modified"
        return FileDiff(path, status, added, removed, patch.delta.is_binary, patch.text or "")


def tree_changes(old: pygit2.Tree | None, new: pygit2.Tree | None) -> dict[str, tuple[str | None, str | None]]:
    """``{path: (blob id in old, blob id in new)}`` for each file that differs between two
    trees (None: no tree, or no file there)."""
    if old is None:
        if new is None:
            return {}
        diff = new.diff_to_tree(swap=True)
    else:  # diff_to_tree() diffs to nothing; it takes no None
        diff = old.diff_to_tree(new) if new is not None else old.diff_to_tree()
    changed = {}
    for delta in diff.deltas:
        old_id = None if delta.status_char() == "A" else str(delta.old_file.id)
        new_id = None if delta.status_char() == "D" else str(delta.new_file.id)
        if old_id != new_id:
            changed[delta.new_file.path or delta.old_file.path] = (old_id, new_id)
    return changed
