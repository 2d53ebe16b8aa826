"""A person's rewrites of main's history with plain git, and what gitmem does about them.

git's own ``git commit`` (and ``--amend``) builds its commit from the index it read just
after HEAD. gitmem brings the index to each commit before it moves main there, so such a
commit fails on git's HEAD check or carries gitmem's change; but an index a git command
wrote back from what it had read before (or one gitmem could not update while a git
command held ``index.lock``) may still lack a change of the last seconds. A person's
commit that took a file back to the version it held before one of gitmem's recent
commits dropped that change by accident: :func:`put_back` commits the file's newer
version again, merged with what came since (``Gitmem-Op: put-back``). A file the
person changed themselves is theirs: an amend that dropped gitmem's commit with it is
kept for ``gitmem rescue`` like a reset's.

A ``git reset`` (or any move of main that leaves gitmem's commits out of its history) is
the person's choice: :func:`find_lost` keeps each dropped commit under
``refs/gitmem/rescue/<commit id>`` (only the newest of each dropped line: its history
comes along), so neither ``git gc`` nor a reflog expiry can delete it, and says so once
(a warning: stderr for the CLI, ``serve.log`` for ``gitmem serve``); ``gitmem status``
lists them and :mod:`gitmem.sync.rescue` merges them back.

:func:`look` is what every access does when main moved under this process (see
:class:`gitmem.edits.handedits.HandEdits`): it reads only the moves not looked at before.

    look(engine)                       # cheap when nothing new moved main
    for dropped in find_lost(engine):
        print(dropped.commit[:10], dropped.summary)
"""

from __future__ import annotations

import contextlib
import logging
from collections import namedtuple
from typing import Any

from gitmem.git.base import CommitInfo, EngineError, Identity
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.refs import ReflogEntry
from gitmem.records.dates import format_date
from gitmem.records.merge import merge_changes

log = logging.getLogger("gitmem.edits.rewrites")

OP = "put-back"  # the Gitmem-Op trailer of the commits putting back what a person's commit dropped
LET_GO_FILE = "rescue-let-go"  # in .git/gitmem/: ids of dropped commits the person let go
LOOKED_FILE = "rescue-looked"  # in .git/gitmem/: the newest move of main find_lost looked at
LOOK_FIRST = 16  # moves of main read first by look(); more only when the last looked at is not among them
PUT_BACK_WINDOW = 60  # seconds: gitmem commits this much older than a person's commit are not looked at
PUT_BACK_DEPTH = 500  # gitmem commits looked at, at most, below a person's commit
_PERSON_COMMITS = ("commit: ", "commit (amend): ")  # reflog messages of git's own `git commit`


class Dropped(namedtuple("Dropped", "commit time offset summary ref")):
    """A gitmem commit that main's history no longer holds, kept under ``ref`` ("" while it
    cannot be kept: a read-only repository): its ``commit`` id, commit ``time`` (seconds
    since the epoch) and ``offset`` (minutes east of UTC), and ``summary``."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"commit": self.commit, "time": format_date(self.time, self.offset),
                "summary": self.summary, "ref": self.ref}


def find_lost(engine: GitEngine) -> list[Dropped]:
    """The dropped commits, newest first, each kept under ``refs/gitmem/rescue/``.

    Searches the newest entries of main's reflog (engine.REFLOG_SCAN; the first LOOK_FIRST
    when they hold every move not looked at and none of them dropped anything) and the refs
    kept before; a kept ref whose commit main holds again (merged back, or restored by hand)
    is released. Only a move of main that gitmem did not make can drop a commit (each of
    gitmem's is a commit on top, a merge or a fast-forward): without one, and with no
    ref kept, nothing is walked. Moves an earlier call looked at are not looked at again
    (telling whether one kept main's history can cost a walk of all of it).
    """
    with engine.lock if engine.writable else contextlib.nullcontext():
        return _find_lost(engine, *_moves(engine))


def _find_lost(engine: GitEngine, entries: list[ReflogEntry], unseen: list[ReflogEntry]) -> list[Dropped]:
    """:func:`find_lost` of the moves :func:`_moves` read, under the writers' lock."""
    kept = engine.refs.rescue_refs()
    if engine.writable:
        for entry in reversed(unseen):  # oldest first
            put_back(engine, entry)
    rewrites = [entry for entry in unseen
                if entry.old and not _made_by_gitmem(engine, entry)
                and not _descends(engine, entry.new, entry.old)]
    if not kept and not rewrites:
        _looked_at(engine, unseen)
        return []
    if len(entries) == LOOK_FIRST:  # the tips gitmem made before these moves are candidates too
        entries = engine.refs.reflog()
    # The tip each rewrite replaced, if gitmem made it, then every tip gitmem made, newest
    # first, then those kept (their refs list by id): commits of one second list in
    # the order main was at them.
    candidates = [*(e.old for e in rewrites if _committed_by_gitmem(engine, e.old)),
                  *(e.new for e in entries if e.new and _made_by_gitmem(engine, e)), *kept]
    dropped = engine.refs.dropped_tips(candidates, _let_go(engine))
    for commit in kept.keys() - set(dropped) if engine.writable else ():
        engine.refs.release_rescued(commit)
    found = []
    for commit in dropped:
        ref = kept.get(commit)
        if ref is None:  # a read-only repository is only looked at
            ref = engine.refs.keep_for_rescue(commit) if engine.writable else ""
            log.warning("main no longer holds gitmem commit %s (a history rewrite by hand?): "
                        "kept as %s; `gitmem rescue` merges it back", commit[:10], ref)
        info = engine.log.commit_info(commit)
        found.append(Dropped(commit, info.time, info.offset, info.summary, ref))
    if all(d.ref for d in found):  # each kept: later calls find it from its ref
        _looked_at(engine, unseen)
    return sorted(found, key=lambda d: d.time, reverse=True)


def _let_go(engine: GitEngine) -> list[str]:
    try:
        return (engine.private_dir / LET_GO_FILE).read_text(encoding="ascii").split()
    except FileNotFoundError:
        return []


def _moves(engine: GitEngine) -> tuple[list[ReflogEntry], list[ReflogEntry]]:
    """main's newest reflog entries, newest first, and those of them not looked at before:
    the first LOOK_FIRST entries when the last move looked at is among them, else
    REFLOG_SCAN of them."""
    entries = engine.refs.reflog(limit=LOOK_FIRST)
    unseen = _not_looked_at(engine, entries)
    if len(unseen) == len(entries):  # the last move looked at is further back (or none is noted)
        entries = engine.refs.reflog()
        unseen = _not_looked_at(engine, entries)
    return entries, unseen


def _not_looked_at(engine: GitEngine, entries: list[ReflogEntry]) -> list[ReflogEntry]:
    """``entries`` (newest first) newer than the one :func:`_looked_at` noted; all of them
    when none is (none noted yet, or the reflog was expired or rewritten)."""
    try:
        noted = (engine.private_dir / LOOKED_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return entries
    for count, entry in enumerate(entries):
        if _entry_key(entry) == noted:
            return entries[:count]
    return entries


def _looked_at(engine: GitEngine, unseen: list[ReflogEntry]) -> None:
    """Note the newest of ``unseen`` (the moves not looked at before) as looked at."""
    if unseen and engine.writable:
        with contextlib.suppress(OSError):  # the next call looks again
            write_private(engine.private_dir / LOOKED_FILE, f"{_entry_key(unseen[0])}\n".encode("ascii"))


def _entry_key(entry: ReflogEntry) -> str:
    return f"{entry.old or '-'} {entry.new or '-'} {entry.time}"


def _made_by_gitmem(engine: GitEngine, entry: ReflogEntry) -> bool:
    """True for a reflog entry of gitmem's: a commit by its identity, or a move it made."""
    return entry.message.startswith("gitmem: ") or Identity(entry.name, entry.email) == engine.identity


def _committed_by_gitmem(engine: GitEngine, commit: str) -> bool:
    try:
        return engine.refs.committer_of(commit) == engine.identity
    except EngineError:  # gone (pruned)
        return False


def _descends(engine: GitEngine, commit: str | None, ancestor: str) -> bool:
    try:  # a commit on top (git's own `git commit`) is told without walking its history
        return commit is not None and (ancestor in engine.log.commit_infos([commit])[0].parents
                                       or engine.log.is_ancestor(ancestor, commit))
    except EngineError:  # one of them is gone: nothing to tell
        return False


def look(engine: GitEngine) -> None:
    """Look at the moves of main not looked at before (another process made them): put
    back what a person's commit dropped, keep what a reset dropped (see the module doc).
    Reads a few reflog entries when only gitmem moved main."""
    with engine.lock if engine.writable else contextlib.nullcontext():
        entries, unseen = _moves(engine)
        # as many unseen as the first LOOK_FIRST entries: the last move looked at was not among them
        if len(unseen) >= min(LOOK_FIRST, len(entries)) or not all(_made_by_gitmem(engine, e) for e in unseen):
            _find_lost(engine, entries, unseen)
        else:
            _looked_at(engine, unseen)
        engine.saw_tip()


def put_back(engine: GitEngine, entry: ReflogEntry) -> str | None:
    """Commit again what a person's ``git commit`` (``entry``, a move of main) dropped of
    gitmem's recent commits: each file it took back to a version the file held before one
    of them. Returns the commit made, or None."""
    if not entry.old or not entry.new or not entry.message.startswith(_PERSON_COMMITS) \
            or _made_by_gitmem(engine, entry):
        return None
    try:
        changed = engine.log.changed_files(entry.old, entry.new)  # {path: (before it, in it)}
        states = _states_before(engine, entry, list(changed))
    except EngineError:  # a commit is gone (pruned) or damaged: nothing to tell
        return None
    # {path: (its version in the person's commit, the version gitmem had)}: merged back
    # onto main as "their" change from the person's commit. A file whose work-tree copy is
    # the person's version is theirs (a `git rm`, a revert saved and committed): an index
    # that lacked gitmem's change leaves the file gitmem wrote in the work tree.
    on_disk = engine.worktree.is_main()
    dropped = {path: (in_person, before) for path, (before, in_person) in changed.items()
               if any(state.get(path) == in_person for state in states)
               and not (on_disk and engine.worktree.file_id(path) == in_person)}
    if not dropped:
        return None
    paths = sorted(dropped)

    def changes(snapshot) -> dict[str, bytes | None]:
        since = engine.log.changed_files(entry.new, snapshot.id and str(snapshot.id))
        return merge_changes(since, dropped, engine.read_blob).changes

    commit = engine.update(changes, f"put-back: {_brief(paths)} (a plain git commit dropped it)\n\n"
                           f"{entry.new[:10]} ({entry.message}) took {_brief(paths)} back to an "
                           "older version\nwhile gitmem's commits of the seconds before were "
                           "not in its index.\n", {"Gitmem-Op": OP, "Gitmem-Dropped-By": entry.new})
    if commit is not None:
        log.warning("a plain git commit (%s) dropped %s of gitmem's writes: put back as %s",
                    entry.new[:10], _brief(paths), commit[:10])
    return commit


def _states_before(engine: GitEngine, entry: ReflogEntry, paths: list[str]) -> list[dict[str, str | None]]:
    """The blob ids ``paths`` had before each of gitmem's recent commits below the tip a
    person's commit replaced (``entry.old``), newest first: the versions an index not yet
    updated by gitmem could hold. Stops at a commit gitmem did not make."""
    states: list[dict[str, str | None]] = []
    commit: str | None = entry.old
    while commit is not None and len(states) < PUT_BACK_DEPTH:
        info: CommitInfo = engine.log.commit_infos([commit])[0]
        if info.time < entry.time - PUT_BACK_WINDOW or not _committed_by_gitmem(engine, commit):
            break
        commit = info.parents[0] if info.parents else None
        states.append(engine.log.entry_ids(commit, paths) if commit else dict.fromkeys(paths))
    return states


def _brief(paths: list[str]) -> str:
    return ", ".join(paths) if len(paths) <= 3 else f"{len(paths)} files"
