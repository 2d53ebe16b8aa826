"""Hand edits: what a person saves in the work tree becomes a commit of its own.

People open their memory repository in an editor. gitmem commits what they save,
authored by them (``user.name``/``user.email`` from git config; without those, the
name ``$USER`` and the email ``$USER@<host name>``), committed by gitmem, with the
trailer ``Gitmem-Op: hand-edit`` and a message listing the files:

- on access: a read or write of a record first commits an edit of its files
  (an engine opened with ``hand_edits=HandEdits`` calls :meth:`HandEdits.before_access`,
  under the writers' lock for a write; a stat check per file keeps it cheap), so a
  reader sees what the person saved and an API write lands on top of it instead of
  over it;
- from the watcher (:mod:`gitmem.edits.watch`), once the edits settle;
- from the engine, for what a writer that had a file open put in it after a write
  replaced it (:meth:`HandEdits.merge_displaced`, :mod:`gitmem.git.displaced`).

One rule decides what a work-tree file that differs from HEAD is:

- **gitmem's own stale file**: it holds an older version of that path committed on
  ``main`` that the journal last saw it hold (a write that failed or was cut short left
  it; one the file held something else after is a person's revert), or it is missing where
  gitmem never managed to write it. It is repaired (HEAD's version written again),
  never committed. One gitmem cannot write (full disk, read-only or symlinked folder)
  is listed by ``gitmem status`` and tried again at the next access.
- **a person's save**: anything else. It was made from the version their editor had:
  of the versions the file held lately (the journal, :mod:`gitmem.git.journal`), the one
  whose lines are most like the save's. When HEAD has moved past that base, the save
  is merged three-way onto HEAD (base, HEAD, the save) with the sync merge rules
  (:mod:`gitmem.records.merge`): lines the person never saw are kept, lines they saw and
  deleted stay deleted. The result is committed as the person and written back to
  the file (while it still holds the save).

Only files under the layout folders count (``memory/``, ``sessions/``, ``threads/``),
and not editor by-products (:func:`is_watched`). A JSONL chunk with a line that does
not parse, or a ``.json`` metadata file that does not parse as an object, is
refused: it stays out of HEAD, so readers keep the committed version; the log says
which file, line and why, and :meth:`HandEdits.scan` (``gitmem status``) lists it
until it is fixed, when it is merged like any save (its base stays the version the
person started from, so what the API added meanwhile is kept). Markdown is always
valid. While the work tree is not ``main``'s (a person checked out another commit or
branch), nothing in it is an edit.

    engine = GitEngine.open(path, hand_edits=HandEdits)   # as Gitmem.open does
    edits = HandEdits.of(engine)      # the engine's own (a new one for an engine without)
    edits.commit_pending()            # commit every edit waiting now
    edits.scan().refused              # [Refusal(path, line, reason), ...]
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import time
from collections import Counter, namedtuple
from collections.abc import Iterable, Mapping

from gitmem.edits import rewrites
from gitmem.git.engine import GitEngine
from gitmem.git.snapshot import Snapshot
from gitmem.git.statcache import git_blob_id
from gitmem.records import layout
from gitmem.records.ids import UndecodableId, decode
from gitmem.records.layout import JSONL_SUFFIX
from gitmem.records.merge import merge_file
from gitmem.records.meta import parse_meta
from gitmem.stores.jsonl import parse_chunk

log = logging.getLogger("gitmem.edits.handedits")

OP = "hand-edit"  # the Gitmem-Op trailer of hand-edit commits
SETTLE = 0.05  # seconds a change must be old before it is committed (a save in progress)
# Seconds a file must have been empty before a read or write commits that: an editor
# saving in place truncates it first.
EMPTY_SETTLE = 1.0
BASE_CANDIDATES = 16  # versions of a file searched for the one a person's save was made from
# Editor by-products: vim swap files and its write test, backups, emacs lock and
# autosave files, JetBrains safe-write files, generic temp files. Names starting with
# a dot are skipped too (no layout file starts with one).
BY_PRODUCTS = ("*.swp", "*.swx", "*~", "4913", "*.tmp", "#*#", "*___jb_tmp___", "*___jb_old___")


_BY_PRODUCT = re.compile("|".join(fnmatch.translate(pattern) for pattern in BY_PRODUCTS))


def is_watched(path: str) -> bool:
    """True for a repository path a hand edit may touch: under a layout folder, not a by-product."""
    parts = path.split("/")
    if parts[0] not in layout.TOP_FOLDERS or any(part.startswith(".") for part in parts):
        return False
    return _BY_PRODUCT.match(parts[-1]) is None


def check(path: str, data: bytes) -> tuple[int | None, str] | None:
    """Why ``data`` may not be committed at ``path``, as ``(line or None, reason)``; None if it may."""
    if path.endswith(JSONL_SUFFIX):
        try:
            parse_chunk(data)
        except ValueError as exc:
            return _bad_jsonl_line(data) or (None, str(exc))
    elif path.endswith(".json"):
        try:
            parse_meta(data)
        except json.JSONDecodeError as exc:
            return exc.lineno, f"{exc.msg} (column {exc.colno})"
        except UnicodeDecodeError as exc:
            return _line_at(data, exc.start), "not UTF-8"
        except ValueError as exc:
            return None, str(exc)
    return None


def _bad_jsonl_line(data: bytes) -> tuple[int, str] | None:
    """The first line (numbered as an editor numbers them) that is not one JSON value."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _line_at(data, exc.start), "not UTF-8"
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as exc:
                return number, f"{exc.msg} (column {exc.colno})"
    return None


def _line_at(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


class Refusal:
    """A hand-edited file kept out of HEAD, and why: its ``path``, the ``line`` at fault
    (None: the whole file), the ``reason``, and the ``blob_id`` of the refused content
    (not compared, not shown)."""

    __slots__ = ("path", "line", "reason", "blob_id")

    def __init__(self, path: str, line: int | None, reason: str, blob_id: str = ""):
        self.path, self.line, self.reason, self.blob_id = path, line, reason, blob_id

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Refusal):
            return NotImplemented
        return (self.path, self.line, self.reason) == (other.path, other.line, other.reason)

    def __hash__(self) -> int:
        return hash((self.path, self.line, self.reason))

    def __repr__(self) -> str:
        return f"Refusal(path={self.path!r}, line={self.line!r}, reason={self.reason!r})"

    def __str__(self) -> str:
        where = f"{self.path} line {self.line}" if self.line else self.path
        return f"{where}: {self.reason}"


class Edit(namedtuple("Edit", "path change")):
    """A hand edit waiting to be committed: ``change`` is "new", "edited" or "deleted"."""

    __slots__ = ()


class OutOfStep(namedtuple("OutOfStep", "path reason")):
    """A work-tree file of gitmem's (``path``) that does not hold HEAD's version yet, and why
    (``reason``)."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class Scan(namedtuple("Scan", "pending refused out_of_step checked_out")):
    """What the work tree holds that HEAD does not: edits to commit (``pending``), refused
    files (``refused``), and gitmem's own files not yet repaired (``out_of_step``, a new
    empty list by default); ``checked_out`` is what the work tree is of (``main``, the
    default, else a branch or commit a person checked out: then nothing is an edit)."""

    __slots__ = ()

    def __new__(cls, pending: list[Edit], refused: list[Refusal],
                out_of_step: list[OutOfStep] | None = None, checked_out: str = "main") -> Scan:
        return super().__new__(cls, pending, refused, [] if out_of_step is None else out_of_step,
                               checked_out)


class SettledLook(namedtuple("SettledLook", "started_ns head")):
    """A look that found every file it compared holding HEAD's version: when it began
    (``started_ns``, ``time.time_ns()``) and the ``head`` it compared with, what a stamp of
    it is taken from (:mod:`gitmem.git.stamp`)."""

    __slots__ = ()


class _Save(namedtuple("_Save", "path data blob_id base_id")):
    """A person's save: its ``path``, its content (``data``, None: deleted), ``blob_id``, and
    the version it was made from (``base_id``)."""

    __slots__ = ()


class _Plan:
    """What a look does: the ``saves`` to commit, the ``repairs`` (``{path: what the work
    tree holds there now}``, a blob id) and the files ``refused``."""

    __slots__ = ("saves", "repairs", "refused")

    def __init__(self, saves: list[_Save], repairs: dict[str, str | None], refused: list[Refusal]):
        self.saves, self.repairs, self.refused = saves, repairs, refused


class HandEdits:
    """Finds and commits the hand edits in one repository's work tree.

    The engine is given the class as its ``hand_edits`` factory and makes its own
    instance (:meth:`of` finds it); thread-safe: commits happen under the writers' lock,
    and a file is compared with HEAD again under it.
    """

    def __init__(self, engine: GitEngine, *, settle: float = SETTLE):
        self.engine = engine
        self.settle = settle
        self._refused: dict[str, Refusal] = {}  # the last refusal per path, not to log it twice

    @classmethod
    def of(cls, engine: GitEngine) -> HandEdits:
        """The hand-edit part ``engine`` was opened with; a new one for an engine opened
        without (it commits and scans, but the engine's reads and writes do not call it)."""
        made = engine.hand_edits
        return made if isinstance(made, cls) else cls(engine)

    def before_access(self, scope: str) -> bool:
        """Commit the edits of record ``scope`` (a file or folder) before it is read or written.
        True when the look found every file there holding HEAD's version (nothing waiting,
        nothing refused): what a stamp of it may vouch for (:mod:`gitmem.git.stamp`).

        A file emptied less than :data:`EMPTY_SETTLE` ago is left for the watcher: it is
        more likely a save in progress than a person's choice (and a write meanwhile leaves
        it alone anyway).
        """
        if self.engine.moved_elsewhere():
            rewrites.look(self.engine)
        return is_watched(scope) and self._look([scope])

    def settled_look(self, scope: str | None) -> SettledLook | None:
        """:meth:`before_access` of record ``scope`` (None: :meth:`before_access_all`);
        the look when it found every file there holding HEAD's version, else None."""
        started = time.time_ns()
        looked_at = self.engine.head()  # main moved during the look: it was not compared with this HEAD
        settled = self.before_access(scope) if scope is not None else self.before_access_all()
        return SettledLook(started, looked_at) if settled else None

    def merge_displaced(self, path: str, base_id: str, data: bytes) -> str | None:
        """Commit ``data`` as the person's save of ``path`` made from version ``base_id``:
        what reached a work-tree file after a write had checked it and replaced it
        (:mod:`gitmem.git.displaced`), merged onto HEAD. Returns the commit id (None: nothing new)."""
        problem = check(path, data) if is_watched(path) else (None, "not a file of the layout")
        if problem is not None:
            log.warning("%s was written to after gitmem replaced it, and that is not committed "
                        "(%s); what it held is blob %s", path, Refusal(path, *problem),
                        self.engine.store_blob(data))
            return None
        save = _Save(path, data, git_blob_id(data), base_id)
        commit = self.engine.update(
            lambda head: self._merged([save], head)[0], f"hand edit: {path}\n\nedited: {path} "
            "(written to the file as gitmem replaced it: merged, keeping the changes made since)\n",
            {"Gitmem-Op": OP}, author=self.engine.user_identity(), scope=path)
        if commit is not None:
            log.info("committed what reached %s as gitmem replaced it, merged onto HEAD", path)
        return commit

    def before_access_all(self) -> bool:
        """:meth:`before_access` for every record at once (one look at the work tree)."""
        return self._look(None)

    def _look(self, scopes: list[str] | None) -> bool:
        head = self.engine.snapshot()
        differing = self._differing(self._files(scopes, head), head)
        if differing:
            self._commit_found(scopes, EMPTY_SETTLE, head, differing)
        return not differing

    def commit_pending(self, scopes: Iterable[str] | None = None) -> str | None:
        """Commit the edits under ``scopes`` (files or folders; None: every layout folder).

        One commit for all of them, by the user; refused files are left out. Returns the
        commit id, or None when nothing was committed.
        """
        if self.engine.moved_elsewhere():
            rewrites.look(self.engine)
        return self._commit(None if scopes is None else list(scopes), 0.0)

    def _commit(self, scopes: list[str] | None, hold_empty: float) -> str | None:
        head = self.engine.snapshot()
        return self._commit_found(scopes, hold_empty, head, self._differing(self._files(scopes, head), head))

    def _commit_found(self, scopes: list[str] | None, hold_empty: float, looked_at: Snapshot,
                      differing: list[tuple[str, str | None]]) -> str | None:
        """:meth:`_commit`, given what a look at HEAD ``looked_at`` found ``differing``."""
        engine = self.engine

        def ready(head: Snapshot, differing: list[tuple[str, str | None]]) -> list[str]:
            return [path for path in self._unrefused(differing)
                    if not self._emptied_within(path, head, hold_empty)]

        def look(head: Snapshot) -> list[str]:
            return ready(head, self._differing(self._files(scopes, head), head))

        if not ready(looked_at, differing) or not engine.worktree.is_main():
            return None  # the common case, decided without the lock
        with engine.lock:
            head = engine.snapshot()
            dirty = look(head)
            if dirty and self._wait_to_settle(dirty):
                dirty = look(head)
            plan = self._plan(dirty, head)
            self._log_refusals(plan.refused)
            if plan.repairs and engine.head() != head.id:
                return None  # plain git moved main while this was planned: look again next time
            self._repair(plan.repairs)
            if not plan.saves:
                return None
            return self._commit_saves(plan.saves, head)

    def _commit_saves(self, saves: list[_Save], head: Snapshot) -> str | None:
        """Commit the saves, each merged onto HEAD from its base, as one commit by the person;
        then bring the work-tree files whose merge differs from the save to the result."""
        engine = self.engine
        edits, merged = self._merged(saves, head)
        for save in saves:  # a later save may be made from this one: keep it to merge from
            if save.data is not None and edits.get(save.path) != save.data:
                engine.store_blob(save.data)
            engine.journal.wrote(save.path, save.blob_id, saved=True)
        commit = engine.update(lambda snapshot: edits if snapshot.id == head.id
                               else self._merged(saves, snapshot)[0],
                               _message(edits, head, merged), {"Gitmem-Op": OP},
                               author=engine.user_identity(),
                               worktree_holds={save.path: save.blob_id for save in saves})
        # A save the merge left HEAD unchanged for (it brought nothing new): the file gets HEAD's.
        now = engine.snapshot()
        engine.worktree.write({save.path: now.read(save.path) for save in saves
                               if save.path not in edits and now.blob_id(save.path) != save.blob_id},
                              expected={save.path: save.blob_id for save in saves})
        if commit is not None:
            log.info("committed hand edit of %s%s", ", ".join(sorted(edits)),
                     f" (saved from older versions, merged: {', '.join(merged)})" if merged else "")
        return commit

    def _merged(self, saves: list[_Save], head: Snapshot) -> tuple[dict[str, bytes | None], list[str]]:
        """The changes that put the saves onto ``head`` (each merged three-way from its base
        when ``head`` moved past it), and the paths merged."""
        changes: dict[str, bytes | None] = {}
        merged: list[str] = []
        for save in saves:
            ours = head.read(save.path)
            result = save.data
            if save.base_id != head.blob_id(save.path):
                base = self.engine.read_blob(save.base_id) if save.base_id else None
                result, spots = merge_file(save.path, base, ours, save.data)
                for spot in spots:
                    log.warning("hand edit merged with a newer version: %s", spot)
                if result != ours:
                    merged.append(save.path)
            if result != ours:
                changes[save.path] = result
        return changes, merged

    def _plan(self, paths: list[str], head: Snapshot) -> _Plan:
        """Sort the files that differ from HEAD into a person's saves, gitmem's own stale
        files to repair, and refused saves (see the module doc)."""
        engine = self.engine
        plan = _Plan([], {}, [])
        failures = engine.journal.failures()
        for path in paths:
            head_id = head.blob_id(path)
            found = engine.worktree.read(path)
            if found is None and self._unseen(path):
                continue  # a symlink, folder or device, or behind one: never committed, never deleted
            data, on_disk = found if found is not None else (None, None)
            if on_disk == head_id:
                continue
            states = engine.journal.states(path)
            if data is None:
                if head_id is None:
                    continue
                if path in failures or states[:1] == [None] or not states and not engine.index.contains(path):
                    plan.repairs[path] = None  # never written here: gitmem's to finish
                else:
                    plan.saves.append(_Save(path, None, None, states[0] if states else head_id))
                continue
            assert on_disk is not None  # read with data
            versions = engine.log.path_versions(path)
            if on_disk in versions and (not states or states[0] == on_disk or path in failures):
                # an older version the file was left holding: gitmem's own stale file (one
                # the journal saw it hold something else after is a person's revert)
                plan.repairs[path] = on_disk
                continue
            problem = check(path, data)
            if problem is not None:
                plan.refused.append(Refusal(path, *problem, blob_id=on_disk))
                continue
            if head_id is None:
                _warn_if_no_agent_reads(path)
            # a save is made from another version than itself (one equal to an older version is a revert)
            versions = [v for v in versions if v != on_disk]
            states = [s for s in states if s != on_disk]
            plan.saves.append(_Save(path, data, on_disk, self._base(path, data, states, versions, head)))
        return plan

    def _base(self, path: str, data: bytes, states: list[str | None], versions: list[str],
              head: Snapshot) -> str | None:
        """The version a save of ``data`` was made from (None: no file): the person's own
        last save when it is HEAD and this one keeps all its lines (an editor writes what it
        wrote before, and more; a save observed half written is one); else, of the versions
        the work-tree file held (the journal: gitmem's writes and the person's earlier
        saves), then the older committed ones (all of them when the journal knows none), the
        one whose lines are most like the save's (shared lines over all lines); the newest
        on a tie."""
        if states and states[0] is None:
            return None  # the file was gone: the person made a new one
        saved = Counter(_lines(data))
        head_id = head.blob_id(path)
        if states[:1] == [head_id] and self.engine.journal.saved_last(path):
            if not Counter(_lines(head.read(path) or b"")) - saved:
                return head_id
        known = [s for s in states if s is not None and self.engine.has_blob(s)]
        if known:
            held = [v for v in versions if v in known]
            older = versions[versions.index(held[-1]) + 1:] if held else []
            candidates = known + [v for v in older if v not in known]
        else:
            candidates = versions
        candidates = candidates[:BASE_CANDIDATES]
        if len(candidates) < 2:
            return candidates[0] if candidates else None
        best, best_score = candidates[0], -1.0
        for version in candidates:
            lines = Counter(_lines(self.engine.read_blob(version)))
            union = sum((lines | saved).values())
            score = sum((lines & saved).values()) / union if union else 1.0
            if score > best_score:
                best, best_score = version, score
        return best

    def _repair(self, repairs: dict[str, str | None]) -> None:
        """Write HEAD's version over gitmem's own stale files (each only while it holds what it held)."""
        if not repairs:
            return
        head = self.engine.snapshot()
        for path in repairs:
            log.warning("repairing %s: it held an older version gitmem wrote, not an edit", path)
        self.engine.worktree.write({path: head.read(path) for path in repairs}, expected=repairs)

    def _log_refusals(self, refused: list[Refusal]) -> None:
        for refusal in refused:
            previous = self._refused.get(refusal.path)
            if previous is None or previous.blob_id != refusal.blob_id:
                log.warning("not committing hand edit of %s; readers keep the committed "
                            "version until it is fixed", refusal)
            self._refused[refusal.path] = refusal

    def scan(self) -> Scan:
        """The hand edits waiting now, valid and refused, and gitmem's files out of step,
        committing and repairing nothing."""
        engine = self.engine
        checked_out = engine.worktree.checked_out()
        failures = [OutOfStep(path, reason) for path, reason in sorted(engine.journal.failures().items())]
        if not engine.worktree.is_main():
            return Scan([], [], failures, checked_out)
        head = engine.snapshot()
        files = self._files(None, head)
        plan = self._plan(files, head)
        failures += _hidden_folders(engine, files, head)
        failed = {f.path for f in failures}
        stale = [OutOfStep(path, "holds an older version gitmem wrote (repaired at the next access)")
                 for path in sorted(plan.repairs) if path not in failed]
        pending = [Edit(save.path, _change(save.path, save.data, head))
                   for save in sorted(plan.saves, key=lambda save: save.path)]
        return Scan(pending, plan.refused, sorted(failures + stale, key=lambda o: o.path), checked_out)

    def _files(self, scopes: list[str] | None, head: Snapshot) -> list[str]:
        """The files an edit under ``scopes`` may have touched: HEAD's and the work tree's."""
        scopes = list(layout.TOP_FOLDERS) if scopes is None else scopes
        # A whole layout folder: one git status on the index's stat data beats a walk.
        tops = [scope for scope in scopes if "/" not in scope]
        found = set(self.engine.index.suspects(tops)) if tops else set()
        for scope in (s for s in scopes if "/" in s):
            if head.blob_id(scope) is not None:  # a file: the common case, one stat
                found.add(scope)
                continue
            if head.tree_id(scope) is not None:
                found.update(head.files(scope))
            else:
                found.add(scope)
            found.update(self.engine.worktree.files(scope))
        return sorted(path for path in found if is_watched(path))

    def _unrefused(self, differing: list[tuple[str, str | None]]) -> list[str]:
        """The paths of ``differing`` (:meth:`_differing`), less those already refused as they are."""
        return [path for path, on_disk in differing
                if (refused := self._refused.get(path)) is None or refused.blob_id != on_disk]

    def _differing(self, paths: list[str], head: Snapshot) -> list[tuple[str, str | None]]:
        """(path, blob id of its work-tree file) for the paths whose file differs from HEAD."""
        differing = []
        for path in paths:
            on_disk = self.engine.worktree.file_id(path)
            if on_disk == head.blob_id(path):
                continue
            if on_disk is None and self._unseen(path):
                continue  # a symlink, folder or device, or behind one: never committed, never deleted
            differing.append((path, on_disk))
        return differing

    def _unseen(self, path: str) -> bool:
        """True when something other than a regular file is at ``path`` (never followed), or
        a folder on the way hides it (:meth:`WorkTree.hidden_by <gitmem.git.worktree.WorkTree.hidden_by>`): what gitmem
        cannot see is not deleted."""
        return self.engine.worktree.hidden_by(path) is not None or os.path.lexists(self.engine.worktree.path(path))

    def _wait_to_settle(self, paths: list[str]) -> bool:
        """Sleep until the newest change to ``paths`` is :attr:`settle` old; True if it slept.

        An editor saving in place truncates then writes; one saving by rename may move
        the file away first: a moment later, the save is complete.
        """
        newest = max(self._changed_at(path) for path in paths)
        wait = min(newest + self.settle - time.time(), self.settle)
        if wait <= 0:
            return False
        time.sleep(wait)
        return True

    def _emptied_within(self, path: str, head: Snapshot, seconds: float) -> bool:
        """True when the file HEAD has at ``path`` was emptied less than ``seconds`` ago."""
        if not seconds or head.blob_id(path) is None:
            return False
        try:
            st = os.lstat(self.engine.worktree.path(path))
        except OSError:
            return False
        return st.st_size == 0 and st.st_ctime > time.time() - seconds

    def _changed_at(self, path: str) -> float:
        target = self.engine.worktree.path(path)
        for changed in (target, target.parent):  # a file that is gone changed its folder
            try:
                return os.lstat(changed).st_ctime
            except OSError:
                continue
        return 0.0


def _hidden_folders(engine: GitEngine, paths: list[str], head: Snapshot) -> list[OutOfStep]:
    """The folders on the way to ``paths`` that gitmem cannot see into, with what main
    holds under each (readable through gitmem, never committed as deleted)."""
    hidden: dict[str, int] = {}
    for path in paths:
        folder = engine.worktree.hidden_by(path)
        if folder is not None and folder not in hidden:
            hidden[folder] = len(list(head.files(folder))) if head.tree_id(folder) else 0
    found = []
    for folder, count in sorted(hidden.items()):
        target = engine.worktree.path(folder)
        what = ("a symlink" if os.path.islink(target) else "not a folder" if not os.path.isdir(target)
                else "a folder gitmem may not read")
        found.append(OutOfStep(folder, f"{what}: gitmem does not look into it; the {count} file"
                               f"{'s' if count != 1 else ''} main holds under it stay readable "
                               "through gitmem and are not taken as deleted (put the folder back "
                               "to bring it in step)"))
    return found


def _change(path: str, data: bytes | None, head: Snapshot) -> str:
    if data is None:
        return "deleted"
    return "new" if head.blob_id(path) is None else "edited"


def _message(edits: Mapping[str, bytes | None], head: Snapshot, merged: list[str]) -> str:
    paths = sorted(edits)
    subject = ", ".join(paths) if len(paths) <= 3 else f"{len(paths)} files"
    body = "\n".join(f"{_change(path, edits[path], head)}: {path}" +
                     (" (saved from an older version: merged, keeping the changes made since)"
                      if path in merged else "") for path in paths)
    return f"hand edit: {subject}\n\n{body}\n"


def _lines(data: bytes) -> list[bytes]:
    return [line for line in data.split(b"\n") if line.strip()]


def _warn_if_no_agent_reads(path: str) -> None:
    """A new ``memory/agents/<name>.md`` is an agent's memory only if ``<name>`` is an encoded id."""
    folder, _, name = path.rpartition("/")
    if folder == layout.AGENT_MEMORY and name.endswith(".md"):
        try:
            decode(name[:-3])
        except UndecodableId:
            log.warning("%s is not the memory file of any agent: an agent id's file name is "
                        "the id itself only for lower-case letters, digits, '.', '_' and '-' "
                        "(see `gitmem memory read --agent ID`)", path)
