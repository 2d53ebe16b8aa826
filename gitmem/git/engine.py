"""The git engine: one commit per write on ``main``, and the one object the layers above open.

One operation matters: apply a set of path changes to branch ``main`` as one commit,
atomically, serialised across processes, with a compare-and-swap on the ref. The
work tree is kept in step with each commit, and the index is refreshed in the
background so that ``git status`` stays clean.

    engine = GitEngine.open("/path/to/repo")
    engine.commit({"memory/user.md": b"likes tea\\n"}, "memory: replace user memory")
    engine.snapshot().read("memory/user.md")   # b"likes tea\\n"
    engine.log.history("memory/user.md")       # the commits that changed it, newest first

The engine's own methods are the write loop (:meth:`GitEngine.update`,
:meth:`~GitEngine.commit`, merges, fast-forwards, rewrites), opening and closing, the
reads of ``main``'s tip and of snapshots and blobs, and the configuration. The rest it
shows as parts, each made once when the engine opens and given what it needs (the way
dulwich shows ``repo.object_store`` and ``repo.refs``):

- ``engine.log``: history and diffs (:class:`~gitmem.git.log.History`);
- ``engine.worktree``: the work-tree files (:class:`~gitmem.git.worktree.WorkTree`);
- ``engine.index``: git's index kept in step with HEAD (:class:`~gitmem.git.index.Index`);
- ``engine.remotes``: remotes, fetch and push (:class:`~gitmem.git.remote.Remotes`);
- ``engine.pack``: packing and checking objects (:class:`~gitmem.git.pack.Packer`);
- ``engine.refs``: the reflog, rescue and backup refs (:class:`~gitmem.git.refs.Refs`);
- ``engine.journal``: what gitmem last put in each work-tree file
  (:class:`~gitmem.git.journal.Journal`).

Only the engine moves ``main``; it keeps the pieces that do so to itself: trees built in
memory (:mod:`~gitmem.git.trees`), the compare-and-swap on the ref
(:mod:`~gitmem.git.branch`), a write made again after plain git moved ``main``
(:mod:`~gitmem.git.attempts`) and crash recovery (:class:`~gitmem.git.index.Recovery`).

Two parts above the engine are wired in when it is opened, never assigned later:
``hand_edits`` (:class:`RecordGuard`: :class:`gitmem.edits.handedits.HandEdits`) commits a
person's pending edit of a record before the record is read or written, and
``packer`` (:class:`BackgroundPacker`: :class:`gitmem.upkeep.maintenance.Maintenance`) is
told of each commit this engine makes. Each is given as a factory, called once with
the open engine, and is then ``engine.hand_edits`` / ``engine.packer``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import cast

import pygit2

from gitmem.git.base import (BRANCH, DURABILITIES, GITMEM_DIR, BranchMoved, Changes, Closed,
                             DamagedObject, EngineError, Identity, MissingRepository,
                             check_path, config_get, default_identity, make_folder, user_identity,
                             with_trailers)
from gitmem.git.attempts import Attempt, expected_files
from gitmem.git.branch import Branch, NotOnDisk
from gitmem.git.cancel import stop_if_cancelled
from gitmem.git.displaced import DisplacedFiles
from gitmem.git.wiring import BackgroundPacker, RecordGuard
from gitmem.git.facts import open_work_tree
from gitmem.git.files import LOCK_FILE, may_write
from gitmem.git.index import GitLock, Index, Recovery
from gitmem.git.journal import Journal
from gitmem.git.lock import FileLock
from gitmem.git.log import History, tree_changes
from gitmem.git.objects import ObjectCheck
from gitmem.git.pack import Packer
from gitmem.git.refs import Refs
from gitmem.git.remote import Remotes
from gitmem.git.snapshot import Reader, Snapshot
from gitmem.git.statcache import StatCache
from gitmem.git.trees import TreeWriter, disk_full
from gitmem.git.worktree import WorkTree

log = logging.getLogger("gitmem.engine")

MAX_CAS_RETRIES = 20
OBJECT_WRITE_RETRIES = 3  # object writes that may fail while a packer removes empty folders
TREE_CACHE_LIMIT = 64 << 20  # bytes: the largest tree libgit2 keeps parsed (see GitEngine)
STAT_CACHE_FILE = "stat-cache"  # in .git/gitmem/


class GitEngine:
    """A git repository used as a store: one commit per write, on branch ``main``.

    Its parts are attributes: ``log``, ``worktree``, ``index``, ``remotes``, ``pack``,
    ``refs`` and ``journal`` (see the module doc). ``hand_edits`` and ``packer`` are factories of the parts above the engine that it
    calls (see the module doc); without them it calls nothing above itself.
    """

    def __init__(self, repo: pygit2.Repository, *, lock_timeout: float = 10.0,
                 identity: Identity | None = None, durability: str = "fast",
                 cache_bytes: int = 256 << 20,
                 hand_edits: Callable[[GitEngine], RecordGuard] | None = None,
                 packer: Callable[[GitEngine], BackgroundPacker] | None = None):
        self._repo = repo
        self.workdir = Path(repo.workdir).resolve()
        self.gitdir = Path(repo.path).resolve()
        self.private_dir = self.gitdir / GITMEM_DIR
        tmp_dir = self.private_dir / "tmp"
        # A repository this process cannot write (another user's, a read-only mount) is
        # still read: no lock, no recovery; a write fails at the lock with one line.
        self.writable = may_write(self.gitdir)
        if self.writable:
            make_folder(tmp_dir)
        self.identity = identity or default_identity(repo.config)
        if durability not in DURABILITIES:
            raise EngineError(f"durability must be one of {', '.join(DURABILITIES)}, not {durability!r}")
        self.durability = durability
        if durability == "fsync":
            # Process-wide in libgit2: objects, refs, reflogs and the index, each with
            # its folder. (pygit2's settings.enable_fsync_gitdir is a method, not a property.)
            pygit2.option(pygit2.enums.Option.ENABLE_FSYNC_GITDIR, True)
        # libgit2 keeps parsed trees in its cache only up to 4 KB by default: a folder of
        # thousands of records (threads/, sessions/) was parsed again for every path
        # looked up in it (10,000 threads: 20 s to list, 30 ms with this).
        pygit2.settings.cache_object_limit(pygit2.enums.ObjectType.TREE, TREE_CACHE_LIMIT)
        self._lock = FileLock(self.private_dir / LOCK_FILE, timeout=lock_timeout,
                              on_abandoned=lambda taken_at: self._recovery.after_dead_writer(taken_at))
        self._closed = False
        self._known_tip: pygit2.Oid | None | bool = False  # main's tip as this engine left it (False: not known)
        self._stat_cache = StatCache(self.private_dir / STAT_CACHE_FILE)
        self.journal = Journal(self.private_dir)  # what gitmem last put in each work-tree file
        self._objects = ObjectCheck(repo, self.gitdir, self.private_dir)
        self._reader = Reader(repo, self._objects, self._stat_cache, self.workdir, cache_bytes)
        self._displaced = DisplacedFiles(self._displaced_edit)
        self.worktree = WorkTree(self.workdir, self.gitdir, tmp_dir, journal=self.journal,
                                 stat_cache=self._stat_cache, content_id=self._reader.content_id,
                                 durability=durability, displaced=self._displaced)
        self.index = Index(repo, self.gitdir, self.private_dir, lock=self._lock, writable=self.writable,
                           reader=self._reader, worktree=self.worktree, durability=durability)
        self._trees = TreeWriter(repo, self._objects)
        self._branch = Branch(repo, self.gitdir, tip=self._reader.tip, durable=durability == "fsync")
        self.log = History(repo, self._reader, self._objects)
        self._recovery = Recovery(repo, self.gitdir, reader=self._reader, worktree=self.worktree,
                                  index=self.index, path_versions=self.log.path_versions,
                                  private_dir=self.private_dir)
        self.remotes = Remotes(repo, self.workdir)
        self.pack = Packer(repo, self.gitdir, objects=self._objects, tip=self._reader.tip)
        self.refs = Refs(repo, self.gitdir, self._reader)
        if self.writable:
            with self._lock:
                self._recovery.remove_stale_locks()
                self.worktree.clean_tmp()
                try:
                    self._recovery.recover_worktree()
                except DamagedObject as exc:  # reads say so; `gitmem fsck` can still run
                    log.info("work tree not checked: %s", exc)
        else:
            log.info("%s is read-only here: reading only", self.workdir)
        self._hand_edits = hand_edits(self) if hand_edits is not None else None
        self._background_packer = packer(self) if packer is not None else None

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, *, create: bool = True, **kwargs) -> GitEngine:
        """Open the repository at ``path``; create it (branch ``main``) when ``create`` and missing."""
        path = Path(path)
        repo = open_work_tree(path, or_git_folder=True)
        if repo is None and create:
            make_folder(path)
            repo = pygit2.init_repository(str(path), initial_head=BRANCH)
        elif repo is None:
            raise MissingRepository(f"no gitmem repository at {path} (run `gitmem init {path}`)")
        if repo.is_bare:
            raise EngineError(f"{path} is a bare repository; gitmem needs a work tree")
        return cls(repo, **kwargs)

    @property
    def hand_edits(self) -> RecordGuard | None:
        """The hand-edit part this engine was opened with (None: reads see HEAD only)."""
        return self._hand_edits

    @property
    def packer(self) -> BackgroundPacker | None:
        """The background packer this engine was opened with, told of each commit."""
        return self._background_packer

    def close(self) -> None:
        """Bring the index in step with HEAD, stop the background thread, save the stat cache."""
        if not self._closed:
            self._displaced.close()  # may commit what reached a replaced file: before the rest
            self._closed = True
            self.index.refresher.stop()
            if self.writable:
                self.index.save_in_step(self._reader.tip())
                self._stat_cache.save()
            self._recovery.close()
            self.journal.close()

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("the repository was closed: nothing was written")

    def _displaced_edit(self, path: str, base_id: str, data: bytes) -> None:
        if self._hand_edits is not None:
            self._hand_edits.merge_displaced(path, base_id, data)
        else:
            log.warning("%s was written to after gitmem replaced it; what it held then is blob %s",
                        path, self.store_blob(data))

    def __enter__(self) -> GitEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------

    def head(self) -> str | None:
        """The commit id at the tip of ``main``, or None before the first commit."""
        oid = self._reader.tip()
        return str(oid) if oid else None

    def moved_elsewhere(self) -> bool:
        """True when main's tip is not the one this engine last moved it to (or saw, see
        :meth:`saw_tip`): another process moved it (plain git, or another gitmem)."""
        return self._reader.tip() != self._known_tip

    def saw_tip(self) -> None:
        """Note main's tip now as seen: :meth:`moved_elsewhere` is False until it moves again."""
        self._known_tip = self._reader.tip()

    def snapshot(self, rev: str | None = None, *, scope: str | None = None) -> Snapshot:
        """A view of HEAD, or of revision ``rev`` (anything ``git rev-parse`` takes).

        ``scope`` names the record about to be read, so that :attr:`hand_edits` can
        first commit a hand edit of it.
        """
        if rev is None:
            if scope is not None and self._hand_edits is not None:
                self._hand_edits.before_access(scope)
            return Snapshot(self._reader, self._reader.tip())
        return Snapshot(self._reader, self._reader.resolve(rev))

    def resolve(self, rev: str) -> pygit2.Oid:
        """The commit id of ``rev``; its history is checked (see :mod:`gitmem.git.objects`)."""
        return self._reader.resolve(rev)

    def snapshot_of(self, commit: str | None, *, scope: str | None = None) -> Snapshot:
        """The snapshot of commit ``commit`` (an empty one for None: before the first commit);
        ``scope``: a path, the only one that will be read from it (only it is checked)."""
        return Snapshot(self._reader, pygit2.Oid(hex=commit) if commit else None, scope)

    def store_blob(self, data: bytes) -> str:
        """Put ``data`` in the object database (no commit refers to it); returns its blob id."""
        return str(self._repo.create_blob(data))

    def has_blob(self, blob_id: str) -> bool:
        """True when the object database holds blob ``blob_id``."""
        return pygit2.Oid(hex=blob_id) in self._repo.odb

    def read_blob(self, blob_id: str) -> bytes:
        """The bytes of a blob (cached like every read)."""
        return self._reader.blob(pygit2.Oid(hex=blob_id))

    # -- writing -----------------------------------------------------------------

    def commit(self, changes: Changes, message: str, trailers: Mapping[str, str] | None = None,
               *, author: Identity | None = None, scope: str | None = None,
               worktree_holds: Mapping[str, str | None] | None = None) -> str | None:
        """Apply ``changes`` ({path: bytes, or None to delete}) as one commit on ``main``.

        Returns the new commit id, or None when the changes alter nothing (no empty commit).
        """
        return self.update(lambda _snapshot: changes, message, trailers, author=author,
                           scope=scope, worktree_holds=worktree_holds)

    def update(self, make_changes: Callable[[Snapshot], Changes | None],
               message: str | Callable[[], str], trailers: Mapping[str, str] | None = None, *,
               author: Identity | None = None, scope: str | None = None,
               worktree_holds: Mapping[str, str | None] | None = None) -> str | None:
        """Like :meth:`commit`, with changes computed from the tip under the writers' lock.

        ``make_changes(snapshot)`` may run more than once when another writer moves the
        branch in between; it returns the changes, or None for none. ``scope`` names the
        record being written (see :meth:`snapshot`). The work tree is brought to the new
        commit for the changed paths, each file only while it holds its version in the
        snapshot, or ``worktree_holds[path]`` (a blob id, None: no file) for a change made
        from what the work tree holds (a hand edit); and the index with it, both before
        main moves, so that a plain ``git commit`` never undoes the write: one racing it
        fails on git's own HEAD check or carries it. Returns the commit's id (that of a
        person's commit when it carries the whole write). ``message`` may be a callable,
        and ``trailers`` a mapping that ``make_changes`` fills: both are read after each
        ``make_changes``, so that a commit says what the changes it carries are.
        """
        self._check_open()
        with self._lock:
            if scope is not None and self._hand_edits is not None:
                self._hand_edits.before_access(scope)
            tried: Attempt | None = None  # the last attempt, made on a tip that main left
            try:
                for attempt in range(MAX_CAS_RETRIES):
                    base = self._reader.tip()
                    snapshot = Snapshot(self._reader, base)
                    if tried is None:
                        changes = make_changes(snapshot)
                    else:
                        changes = tried.onto(snapshot, make_changes)
                        if changes is None:  # a person's commit on main took the whole write along
                            log.info("a commit made with plain git holds this write already")
                            tried = None
                            return str(base)
                    if not changes:
                        return None
                    for path in changes:
                        check_path(path)
                    full_message = with_trailers(message() if callable(message) else message, trailers)
                    base_tree = snapshot.tree
                    try:
                        tree_id = self._trees.build(base_tree, changes)
                        if base_tree is not None and tree_id == base_tree.id:
                            return None
                        committer = self.identity.signature()
                        signature = author.signature() if author is not None else committer
                        commit_id = self._repo.create_commit(None, signature, committer, full_message,
                                                             tree_id, [base] if base else [])
                    except (OSError, pygit2.GitError) as exc:
                        full = disk_full(self.gitdir, changes)
                        if full is not None:
                            raise full from None
                        # Background packing (git prune-packed) may remove an emptied
                        # objects/xx folder between libgit2's mkdir and its rename: write again.
                        if not isinstance(exc, OSError) or attempt >= OBJECT_WRITE_RETRIES:
                            raise
                        log.info("writing objects again after: %s", exc)
                        continue
                    stop_if_cancelled()  # the last moment: only objects no ref holds are written
                    tree = cast(pygit2.Tree, self._repo[tree_id])
                    ids = {path: str(tree[path].id) if data is not None else None for path, data in changes.items()}
                    on_main = self.worktree.is_main()
                    made = Attempt(snapshot, changes, ids, expected_files(snapshot, changes, tried, worktree_holds))
                    if on_main:
                        # Work tree and index first, main last: git reads HEAD before the index
                        # and moves HEAD only from the HEAD it read, so a plain `git commit`
                        # either fails on that check or carries this change.
                        self._recovery.note_in_flight(commit_id)
                        self.worktree.write(changes, expected=made.expected,
                                             blob_ids={p: b for p, b in ids.items() if b})
                        tried = made
                        self.index.stage(changes, tree, moved=(base, commit_id))
                    try:
                        moved = self._branch.move_waiting(base, commit_id, full_message)
                    except NotOnDisk:
                        tried = None  # main holds the write: nothing to take back
                        raise
                    except (OSError, pygit2.GitError):
                        full = disk_full(self.gitdir, changes)
                        if full is not None:
                            raise full from None
                        raise
                    if moved:
                        tried = None
                        if self._known_tip == base:
                            self._known_tip = commit_id
                        self._objects.wrote(commit_id, [base] if base else [], tree_id, base_tree)
                        if self._background_packer is not None:
                            self._background_packer.maybe_start()
                        return str(commit_id)
                    tried = made if on_main else None
                raise EngineError("the branch kept moving under us; gave up after "
                                  f"{MAX_CAS_RETRIES} attempts")
            finally:
                if tried is not None:  # the work tree and index hold a write main never got
                    self._take_back(tried)

    def _take_back(self, tried: Attempt) -> None:
        """Bring the work-tree files and index entries an attempt wrote back to HEAD (it
        never reached main: they must not look like a person's edit)."""
        head = Snapshot(self._reader, self._reader.tip())
        try:
            written = tried.written()
            self.worktree.write({path: head.read(path) if head.blob_id(path) else None
                                  for path in written}, expected=written)
            if head.tree is not None:
                self.index.stage(tried.changes, head.tree, moved=(head.commit_id, head.commit_id))
        except Exception:  # noqa: BLE001 - the next access repairs them (see gitmem.edits.handedits)
            log.exception("could not take back the work-tree files of a write that failed")

    # -- moving main otherwise: merges, fast-forwards, rewrites ------------------

    def commit_merge(self, ours: str, theirs: str, changes: Changes, message: str,
                     trailers: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
        """Commit ``ours`` plus ``changes`` with parents ``ours`` and ``theirs``, and move ``main``
        there from ``ours`` (EngineError when it is elsewhere).

        Returns the merge commit and the paths left alone in the work tree because they
        hold an uncommitted hand edit.
        """
        self._check_open()
        full_message = with_trailers(message, trailers)
        for path in changes:
            check_path(path)
        with self._lock:
            base = self._repo[self.resolve(ours)]
            base_tree = self._reader.tree_of(base.id)
            try:
                tree_id = self._trees.build(base_tree, changes)
                commit_id = self._repo.create_commit(
                    None, self.identity.signature(), self.identity.signature(), full_message,
                    tree_id, [base.id, self.resolve(theirs)])
            except (OSError, pygit2.GitError):
                full = disk_full(self.gitdir, changes)
                if full is not None:
                    raise full from None
                raise
            self._objects.wrote(commit_id, [base.id, self.resolve(theirs)], tree_id, base_tree)
            return str(commit_id), self._advance(base.id, commit_id, full_message)

    def fast_forward(self, expected: str | None, target: str) -> list[str]:
        """Move ``main`` from ``expected`` to its descendant ``target`` and the work tree with it.

        Returns the paths left alone because they hold an uncommitted hand edit.
        """
        self._check_open()
        if expected is not None and not self.log.is_ancestor(expected, target):
            raise EngineError(f"{target[:10]} does not descend from {expected[:10]}")
        with self._lock:
            old = self.resolve(expected) if expected else None
            return self._advance(old, self.resolve(target), f"fast-forward to {target[:10]}")

    def rewrite_commits(self, commits: list[str], scope: str, rewrite: Callable[[str, bytes], bytes],
                        keep_ref: str, message: str) -> tuple[str, list[str]]:
        """Make ``commits`` (oldest first, the last one ``main``'s tip) again with each file
        under ``scope`` (a file or folder) replaced by ``rewrite(path, data)``, keeping every
        author, date, message and other change; move ``main`` to the new tip and the work
        tree with it; keep the old tip as ``keep_ref``.

        Returns the new tip and the paths left alone because they hold a hand edit.
        EngineError when ``main`` is no longer at ``commits[-1]``.
        """
        self._check_open()
        repo = self._repo
        with self._lock:
            tip = self._reader.tip()
            if not commits or tip is None or str(tip) != commits[-1]:
                raise EngineError("the branch moved meanwhile; try again")
            made: dict[pygit2.Oid, pygit2.Oid] = {}
            for commit_id in commits:
                old = cast(pygit2.Commit, repo[pygit2.Oid(hex=commit_id)])
                snapshot = Snapshot(self._reader, old.id)
                paths = [scope] if snapshot.blob_id(scope) else list(snapshot.files(scope))
                changes = {}
                for path in paths:
                    data = snapshot.read(path)
                    if data is None:  # not a file: a submodule's commit
                        continue
                    new = rewrite(path, data)
                    if new != data:
                        changes[path] = new
                tree_id = old.tree_id
                if changes:
                    tree_id = self._trees.build(old.tree, changes)
                parents = [made.get(parent, parent) for parent in old.parent_ids]
                made[old.id] = repo.create_commit(None, old.author, old.committer, old.message,
                                                  tree_id, parents)
            repo.references.create(keep_ref, tip, force=True)
            kept = self._advance(tip, made[tip], message)
        return str(made[tip]), kept

    def _advance(self, old: pygit2.Oid | None, new: pygit2.Oid, message: str) -> list[str]:
        """Move ``main`` from ``old`` to ``new`` (under our lock) and update the work tree.

        A file that no longer holds its old version holds a hand edit: it is left alone
        (see :mod:`gitmem.git.worktree`) and returned.
        """
        changed = tree_changes(self._reader.tree_of(old), self._reader.tree_of(new))
        for path in changed:
            check_path(path)
        if not self._branch.move(old, new, message):
            raise BranchMoved("the branch moved while syncing; try again")
        if self._known_tip == old:
            self._known_tip = new
        if not self.worktree.is_main():
            return []
        writes = {path: self.read_blob(new_id) if new_id else None
                  for path, (_, new_id) in changed.items() if self.worktree.file_id(path) != new_id}
        self.worktree.write(writes, expected=Snapshot(self._reader, old))
        # staged as a write stages what it wrote: a small file with its stat data
        self.index.stage({path: writes.get(path) for path in changed}, self._repo[new].peel(pygit2.Tree),
                         moved=(old, new))
        return [path for path in writes if self.worktree.file_id(path) != changed[path][1]]

    # -- configuration and the lock ----------------------------------------------

    def user_identity(self) -> Identity:
        return user_identity(self._repo.config)

    def config_get(self, key: str) -> str | None:
        return config_get(self._repo.config, key)

    def set_config_default(self, key: str, value: str) -> bool:
        """Set ``key`` in the repository's own config file unless that file sets it already.
        Safe from any thread (it does not touch the writers' repository object)."""
        config = pygit2.Config(str(self.gitdir / "config"))
        if config_get(config, key) is not None:
            return False
        config[key] = value
        return True

    @property
    def lock(self) -> FileLock:
        """The writers' lock; hold it to keep other gitmem writers out."""
        return self._lock

    def git_locks(self) -> list[GitLock]:
        """git's lock files this process removed as stale (a killed writer left them), then
        those that exist now: a plain ``git commit`` is refused while one is there. Those a
        killed gitmem writer left are removed by the next one to take the writers' lock."""
        return self._recovery.removed_locks + self._recovery.git_locks(self._lock.died_holding())

