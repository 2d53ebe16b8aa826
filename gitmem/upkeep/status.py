"""``gitmem status``: what is waiting to be committed, pushed or fixed.

It shows the hand edits not yet committed; the hand-edited files refused and why
(file, line, reason); the commits not yet pushed to the remote ``gitmem sync`` uses;
the last sync, its error and the places a merge asks a person to tidy (from
``.git/gitmem/sync-state.json``, written by :mod:`gitmem.sync.exchange`); the gitmem commits a
history rewrite by hand took off main (:mod:`gitmem.sync.rescue`, which keeps them under a
ref of its own); the lines of session and thread logs and the ``meta.json`` files at HEAD
that do not parse (plain git let them in: reads leave a line out, listings skip a record
whose metadata is broken, and gitmem never writes over either); and whether the index is
in step with HEAD. It commits nothing.
``--json`` prints one object:

    {"repository": ..., "head": ..., "checked_out": "main" | "branch NAME" | "commit ID",
     "pending": [{"path", "change"}], "refused": [{"path", "line", "reason"}],
     "out_of_step": [{"path", "reason"}],
     "unpushed": null | {"remote", "fetched", "ahead", "behind"},
     "sync": {"remote", "last_sync", "last_error", "merge_spots", ...},
     "dropped": [{"commit", "time", "summary", "ref"}],
     "unreadable": [{"path", "line", "reason"}],
     "index_in_step": true (null: a read-only repository),
     "git_locks": [{"path", "age", "left_by_killed_writer", "removed"}]}
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from gitmem.edits.handedits import HandEdits
from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.records import layout
from gitmem.records.meta import broken_meta, parse_meta
from gitmem.stores.jsonl import read_chunk
from gitmem.sync import exchange as sync, rescue

UNREADABLE_FILE = "unreadable.json"  # in .git/gitmem/: what the last look found, and at which commit


def status(target) -> dict[str, Any]:
    """The status of a :class:`~gitmem.repository.Gitmem` (or engine) as a JSON-ready dict."""
    engine: GitEngine = getattr(target, "engine", target)
    scan = HandEdits.of(engine).scan()
    in_step = None  # not known in a repository we cannot write (the check writes a tree)
    if engine.writable:
        with engine.lock:  # the index is shared with the engine's background refresher
            in_step = engine.index.in_step()
    return {
        "repository": str(engine.workdir),
        "head": engine.head(),
        "checked_out": scan.checked_out,
        "pending": [{"path": edit.path, "change": edit.change} for edit in scan.pending],
        "refused": [{"path": r.path, "line": r.line, "reason": r.reason} for r in scan.refused],
        "out_of_step": [{"path": o.path, "reason": o.reason} for o in scan.out_of_step],
        "unpushed": unpushed(engine),
        "sync": sync.read_state(engine),
        "dropped": [dropped.to_json() for dropped in rescue.find_lost(engine)],
        "unreadable": unreadable(engine),
        "index_in_step": in_step,
        "git_locks": [{"path": lock.path, "age": round(lock.age, 1),
                       "left_by_killed_writer": lock.left_by_killed_writer, "removed": lock.removed}
                      for lock in engine.git_locks()],
    }


def unreadable(engine: GitEngine) -> list[dict[str, Any]]:
    """``[{path, line, reason}]`` for each line of a session or thread log at HEAD that is
    not one JSON value, and each such ``meta.json`` that is not a JSON object (``line``
    None: the file as a whole). Only the files that changed since the commit of the last
    look (kept in :data:`UNREADABLE_FILE`) are read."""
    head = engine.head()
    if head is None:
        return []
    kept_file = engine.private_dir / UNREADABLE_FILE
    try:
        kept = json.loads(kept_file.read_text("utf-8"))
        since, found = kept["commit"], [dict(item) for item in kept["found"]]
        if since == head:
            return found
        changed = engine.log.changed_files(since, head)
    except (OSError, ValueError, KeyError, TypeError, EngineError):  # no look yet, or another history
        changed, found = engine.log.changed_files(None, head), []
    found = [item for item in found if item["path"] not in changed]
    snapshot = engine.snapshot()
    for path, (_old, new) in changed.items():
        if new is not None and _checked(path):
            found += _problems(snapshot, path)
    found.sort(key=lambda item: (item["path"], item["line"] or 0))
    try:
        write_private(kept_file, json.dumps({"commit": head, "found": found}).encode("utf-8"))
    except OSError:  # a read-only repository: the next look reads them again
        pass
    return found


def _checked(path: str) -> bool:
    """True for a file whose content readers parse: a log's chunk or a record's metadata."""
    if not path.startswith((layout.SESSIONS + "/", layout.THREADS + "/")):
        return False
    name = posixpath.basename(path)
    return name == layout.META or (name.endswith(layout.JSONL_SUFFIX)
                                   and posixpath.basename(posixpath.dirname(path)) in (layout.MESSAGES, layout.EVENTS))


def _problems(snapshot, path: str) -> list[dict[str, Any]]:
    try:
        if path.endswith(layout.JSONL_SUFFIX):
            return [{"path": path, "line": line.number, "reason": line.reason}
                    for line in snapshot.read_parsed(path, read_chunk).broken]
        snapshot.read_parsed(path, parse_meta)
    except ValueError as exc:
        broken = broken_meta(path, exc)
        return [{"path": path, "line": broken.line, "reason": broken.reason}]
    except EngineError as exc:  # a damaged object: fsck says more
        return [{"path": path, "line": None, "reason": str(exc).splitlines()[0]}]
    return []


def unpushed(engine: GitEngine) -> dict[str, Any] | None:
    """``{remote, fetched, ahead, behind}`` against the remote ``gitmem sync`` would use
    (as last fetched); None when there is no remote or no single obvious one."""
    try:
        remote = sync.choose_remote(engine)
    except sync.SyncError:
        return None
    head, tip = engine.head(), engine.remotes.tip(remote)
    ahead = len(engine.log.new_commits(head, [tip] if tip else [])) if head else 0
    behind = len(engine.log.new_commits(tip, [head] if head else [])) if tip else 0
    return {"remote": remote, "fetched": tip is not None, "ahead": ahead, "behind": behind}


def describe(report: dict[str, Any]) -> list[str]:
    """The status as lines for a person."""
    lines = [f"repository  {report['repository']}" + (
        f" ({report['chosen_by']})" if report.get("chosen_by") else "")]
    if report["checked_out"] != "main":
        lines.append(f"work tree   holds {report['checked_out']}, not main: gitmem keeps writing "
                     "to main and leaves the work tree and index alone until `git checkout main`")
    pending = report["pending"]
    lines.append(f"hand edits  {len(pending)} not committed yet" if pending else
                 "hand edits  none waiting")
    lines += [f"              {edit['change']}: {edit['path']}" for edit in pending]
    for refusal in report["refused"]:
        where = f"{refusal['path']} line {refusal['line']}" if refusal["line"] else refusal["path"]
        lines.append(f"refused     {where}: {refusal['reason']} (readers keep the committed "
                     "version until it is fixed)")
    for stale in report["out_of_step"]:
        lines.append(f"out of step {stale['path']}: {stale['reason']} (committed; the work-tree "
                     "file is gitmem's and is never committed from)")
    lines.append(f"unpushed    {_describe_unpushed(report['unpushed'])}")
    state = report["sync"]
    last = state.get("last_sync") or "never"
    lines.append(f"last sync   {last}" + (f" with {state['remote']}" if state.get("remote") else ""))
    if state.get("last_error"):
        lines.append(f"sync error  {state['last_error']} (at {state.get('last_attempt') or '?'})")
    for bad in report["unreadable"]:
        where = f"{bad['path']} line {bad['line']}" if bad.get("line") else bad["path"]
        left = "reads leave the line out" if bad["path"].endswith(layout.JSONL_SUFFIX) else \
            "listings skip this record, writes to it are refused"
        lines.append(f"unreadable  {where}: {bad['reason']} ({left}; fix it by hand)")
    for spot in state.get("merge_spots") or []:
        lines.append(f"to tidy     {spot.get('path')} line {spot.get('line')}: {spot.get('note')}")
    lines += _describe_dropped(report["dropped"])
    in_step = report["index_in_step"]
    if report["checked_out"] != "main":
        lines.append(f"index       {report['checked_out']}'s (left alone)")
    else:
        lines.append("index       " + ("in step with HEAD" if in_step else
                                       "not checked (the repository is read-only here)" if in_step is None
                                       else "not in step with HEAD yet (gitmem refreshes it within a "
                                       "second of its last write)"))
    lines += [_describe_git_lock(lock) for lock in report["git_locks"]]
    return lines


def _describe_git_lock(lock: dict[str, Any]) -> str:
    path = lock["path"]
    by = "a gitmem writer" if lock["left_by_killed_writer"] else "a git command"
    if lock["removed"]:
        return (f"git lock    {path} was left by {by} that was killed: removed now (a plain "
                "`git commit` was refused while it was there)")
    if lock["left_by_killed_writer"]:
        return (f"git lock    {path} was left by a gitmem writer that was killed: a plain "
                "`git commit` is refused until the next gitmem write removes it")
    return (f"git lock    {path} ({lock['age']:.0f} s old): a plain `git commit` is refused while it "
            "is there; a git command is running, or one that was killed left it (then remove it)")


def _describe_dropped(dropped: list[dict[str, Any]]) -> list[str]:
    if not dropped:
        return []
    count = f"{len(dropped)} gitmem commit{'s' if len(dropped) != 1 else ''}"
    return [f"dropped     {count} a history rewrite by hand took off main, kept until "
            "`gitmem rescue` merges them back:",
            *(f"              {d['commit'][:10]}  {d['time']}  {d['summary']}" for d in dropped)]


def _describe_unpushed(unpushed: dict[str, Any] | None) -> str:
    if unpushed is None:
        return "no remote"
    remote, ahead = unpushed["remote"], unpushed["ahead"]
    commits = f"{ahead} commit{'s' if ahead != 1 else ''}"
    if not unpushed["fetched"]:
        return f"{commits}; {remote} has no main yet (as last fetched)"
    text = f"{commits} not on {remote}/main" if ahead else f"nothing: {remote}/main has every commit"
    if unpushed["behind"]:
        text += f"; {unpushed['behind']} on {remote}/main not here yet"
    return text
