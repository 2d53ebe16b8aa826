"""History of a record: its log with a summary of each change, how it was at a time,
what changed between two times, and putting an old version back.

Records are named as everywhere else (``user``, ``agent:<id>``, ``note:<path>``,
``session:<agentType>/<sessionId>``, ``thread:<threadId>``, ``store:<namespace>/<key>``).
A time (WHEN) is a revision (``HEAD~3``, a commit hash) or a date: ``2026-11-01`` (the end
of that day, local time: as it was that day), ``2026-11-01T14:00``, ``2026-11-01 14:00:30+02:00``,
``3 days ago``, ``today``, ``yesterday``, ``@1793534400``, and what else git reads as a
date (``last friday``, ``noon yesterday``). A date stands for the newest commit made at
or before it. A version of the record itself is ``@`` (its newest) or ``@~N`` (N changes of the record
back: ``@~1`` is the one before the newest). Restoring writes the old content back as a
new commit; nothing is ever reset. The record's commits come from the record index
(:mod:`gitmem.history.record_index`), so a record's history costs what its own changes cost.
What changed lately across every record, each change with its diff, is :func:`recent`.

    with Gitmem.open() as mem:
        for entry in log(mem, "user"):
            print(entry.commit.summary, entry.summary)   # "memory: replace user memory" "+1 -0 lines"
        show(mem, "user", "yesterday").value["content"]
        restore(mem, "user", "yesterday")
        recent(mem, "2 hours ago")   # [RecentChange(commit, files with their patches), ...]
"""

from __future__ import annotations

import logging
import re
from collections import namedtuple
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from gitmem.errors import HistoryError
from gitmem.git import gitproc
from gitmem.git.base import CommitInfo, DamagedObject, EngineError, Identity
from gitmem.git.engine import GitEngine
from gitmem.git.log import FileChange
from gitmem.history.record_index import RecordIndex
from gitmem.records import layout
from gitmem.records.counts import counted
from gitmem.records.dates import format_date, parse_time
from gitmem.records.ids import printable
from gitmem.records.items import parse_item
from gitmem.records.meta import meta_bytes, now_iso, parse_meta, read_meta, record_trailers
from gitmem.records.layout import record_name
from gitmem.stores import MemoryStore, SessionStore, ThreadStore


class Records(Protocol):
    """What a history command reads and writes through: a :class:`~gitmem.repository.Gitmem`."""

    engine: GitEngine
    record_index: RecordIndex
    memory: MemoryStore
    sessions: SessionStore
    threads: ThreadStore

_RECORD_VERSION = re.compile(r"@(?:~(\d+))?")
# what only a revision looks like: git's date reading takes these as now (HEAD~999, @~1x,
# abc1234) or as a day of this month (12), so one that names no commit is refused
_REVISION_LIKE = re.compile(r"[^~^]*[~^].*|@.*|[0-9a-fA-F]+")
_NOUNS = {"messages": "message", "events": "event"}
MAX_RECENT_DIFF = 20_000  # characters of one file's diff that recent() answers


class NoRecord(HistoryError):
    """A record no commit ever held: it has no version to show (``@``, ``@~N``) or restore."""


class LogEntry(namedtuple("LogEntry", "commit summary changes")):
    """One commit that touched a record, with what it changed there: the ``commit``
    (a :class:`CommitInfo`), a ``summary`` ("+2 messages, 1 changed", "+3 -1 lines",
    "created: 4 messages" ...) and the ``changes`` counted (``{"messages": {"added": 2,
    "removed": 0}, ...}``)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        c = self.commit
        return {"id": c.id, "author": c.author, "email": c.email, "time": c.time,
                "date": format_date(c.time, c.offset), "message": c.message,
                "trailers": c.trailers, "summary": self.summary, "changes": self.changes}


class Shown(namedtuple("Shown", "record commit exists value")):
    """A record as it was at one commit (``commit`` None: before the first one): whether it
    ``exists``, and its ``value``: ``{"content"}`` for memory; ``{"messages",
    "agentSessionId", "meta"}`` for a session; ``{"events", "messages", "meta"}`` for a thread."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"record": self.record, "commit": self.commit, "exists": self.exists, **self.value}


class RecordDiff(namedtuple("RecordDiff", "record since until files")):
    """What changed in a ``record`` between two commits, ``since`` and ``until`` (None:
    before the first commit), as a list of :class:`FileDiff` ``files``."""

    __slots__ = ()

    @property
    def patch(self) -> str:
        return "".join(f.patch for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {"record": self.record, "from": self.since, "to": self.until,
                "files": [{"path": f.path, "status": f.status, "added": f.added,
                           "removed": f.removed, "binary": f.binary} for f in self.files],
                "patch": self.patch}


class Restored(namedtuple("Restored", "record source commit")):
    """What a restore did: the ``record``, the commit it took it from (``source``; None:
    before the first commit, the record was deleted), and the ``commit`` it made (None: the
    record already was that way)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return {"record": self.record, "from": self.source, "commit": self.commit}


class MemoryListed(namedtuple("MemoryListed", "record size last")):
    """A memory ``record``, its ``size`` in bytes (None: its file cannot be read) and its
    ``last`` commit, a :class:`CommitInfo` (None: not committed yet)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        last = self.last
        return {"record": self.record, "size": self.size,
                "changed": format_date(last.time, last.offset) if last else None,
                "commit": last.id if last else None}


class RecentChange(namedtuple("RecentChange", "commit files")):
    """One commit of :func:`recent`: who made it and when (``commit``, a :class:`CommitInfo`),
    and each file it changed (``files``, :class:`FileDiff`), with the record the file belongs
    to (None: no record's, like README.md) and its diff."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        c = self.commit
        return {"id": c.id, "author": c.author, "email": c.email, "time": c.time,
                "date": format_date(c.time, c.offset), "summary": c.summary,
                "op": c.trailers.get("Gitmem-Op"), "trailers": c.trailers,
                "changes": [{"record": _record_of(f.path), "path": f.path, "status": f.status,
                             "added": f.added, "removed": f.removed, "binary": f.binary,
                             "diff": _cut(f.patch)} for f in self.files]}


# -- times ------------------------------------------------------------------------


def resolve_when(engine: GitEngine, when: str) -> str | None:
    """The commit that WHEN names: a revision, or the newest commit at or before a date
    (None when the date is before the first commit); what is neither is read as git
    reads a date, unless it looks like a revision (``~``, ``^``, a leading ``@``, all hex
    digits): that is refused."""
    moment = parse_time(when)
    if moment is not None:
        return engine.log.commit_at(moment)
    try:
        return str(engine.resolve(when))
    except DamagedObject:  # a revision, and one that cannot be read: say which object
        raise
    except EngineError as exc:
        if _REVISION_LIKE.fullmatch(when.strip()):
            raise HistoryError(f"{when!r} names no commit ({exc}); it looks like a revision, "
                               "so it is not read as a date (dates: 2026-11-01, '3 days ago', "
                               "@1793534400)") from None
    try:  # after the revisions: git reads an abbreviated hash as a date too
        moment = gitproc.git_date(when)
    except (gitproc.GitMissing, gitproc.GitTimeout):
        moment = None
    if moment is None:
        raise HistoryError(f"{when!r} is neither a revision nor a date (use e.g. HEAD~3, "
                           "2026-11-01, 2026-11-01T14:00 or '3 days ago')")
    return engine.log.commit_at(moment)


def resolve_version(mem: Records, record: layout.Record, when: str) -> str | None:
    """The commit WHEN names for ``record``: ``@``/``@~N`` (the record's newest version,
    N of its changes back), a date (the newest commit at or before it; None: before the
    first commit) or a revision."""
    match = _RECORD_VERSION.fullmatch(when.strip())
    if match:
        back = int(match[1] or 0)
        versions = mem.record_index.versions(record.path)
        if not versions:
            raise NoRecord(f"no record {record.name}")
        if back >= len(versions):
            have = f"@ to @~{len(versions) - 1}" if versions else "none"
            raise HistoryError(f"{record.name} has {counted(len(versions), 'version')} ({have}): "
                               f"{when!r} goes back further")
        return versions[back].id
    moment = parse_time(when)
    if moment is not None:
        return mem.record_index.commit_at(moment)
    return resolve_when(mem.engine, when)


# -- the operations ---------------------------------------------------------------


def log(mem: Records, record: str | None = None, *, limit: int | None = None,
        skip: int = 0) -> list[LogEntry]:
    """The commits that touched ``record`` (None: every commit), newest first, each with
    a one-line summary of what it changed there; with ``skip``, the record's newest
    ``skip`` commits are left out (a page of a long history)."""
    parsed = layout.parse_record(record) if record else None
    if parsed is None:
        commits = mem.engine.log.history(None, limit=limit)
    else:
        commits = record_commits(mem, parsed, limit=limit, skip=skip)
    pairs = [(commit.parents[0] if commit.parents else None, commit.id) for commit in commits]
    entries = []
    for commit, files in zip(commits, mem.engine.log.changes(parsed.path if parsed else "", pairs), strict=True):
        summary, changes = summarise(parsed, files)
        entries.append(LogEntry(commit, summary, changes))
    return entries


def memories(mem: Records) -> list[MemoryListed]:
    """Every memory record (``user`` first, then ``agent:<id>`` by id, then ``note:<path>``
    by path) with its size and last change. The hand edits under ``memory/`` are taken in
    first, as a read takes them in; a file that cannot be read (a damaged object) is listed
    without a size, and the log says why."""
    snapshot = mem.engine.snapshot(scope=layout.MEMORY)
    records = []
    for path in snapshot.files(layout.MEMORY):
        if layout.record_path(path) == path and snapshot.blob_id(path) is not None:
            record = layout.memory_record(path[len(layout.MEMORY) + 1:])
            order = {"user": 0, "agent": 1}.get(record.kind, 2)
            records.append(((order, record.ids), record))
    found = []
    for _, record in sorted(records, key=lambda pair: pair[0]):
        try:
            size = len(snapshot.read(record.path) or b"")
        except EngineError as exc:  # one damaged file hides no other
            logging.getLogger("gitmem.history").warning("%s", exc)
            size = None
        last = record_commits(mem, record, limit=1)
        found.append(MemoryListed(record.name, size, last[0] if last else None))
    return found


def recent(mem: Records, since: str, *, limit: int = 50) -> list[RecentChange]:
    """What changed across every record since WHEN ``since``, newest first: the commits of
    ``main``'s first-parent line after it (a sync's merge is one change, holding what came
    from the other side; an API write, a hand edit and a restore are one each), at most
    ``limit``, each with every file it changed and its diff. A date stands for the newest
    commit made at or before it, as everywhere in history."""
    if limit < 1:
        raise HistoryError(f"limit must be 1 or more, not {limit}")
    stop = resolve_when(mem.engine, since)
    found: list[RecentChange] = []
    commit = mem.engine.head()
    while commit is not None and len(found) < limit and not (
            stop is not None and mem.engine.log.descends_from(stop, commit)):
        info = mem.engine.log.commit_info(commit)
        parent = info.parents[0] if info.parents else None
        found.append(RecentChange(info, mem.engine.log.diff_commits("", parent, commit)))
        commit = parent
    return found


def record_commits(mem: Records, record: layout.Record, *, limit: int | None = None,
                   skip: int = 0) -> list[CommitInfo]:
    """The commits that changed ``record``, newest first (at most ``limit``, after the
    newest ``skip``)."""
    versions = mem.record_index.versions(record.path)[skip:None if limit is None else skip + limit]
    return mem.engine.log.commit_infos([v.id for v in versions])


def show(mem: Records, record: str, at: str) -> Shown:
    """``record`` as it was at WHEN ``at``."""
    parsed = layout.parse_record(record)
    commit = resolve_version(mem, parsed, at)
    return read_record(mem, parsed, mem.engine.snapshot_of(commit, scope=parsed.path), commit)


def diff(mem: Records, record: str, since: str | None = None,
         until: str | None = None) -> RecordDiff:
    """What changed in ``record`` from WHEN ``since`` (default: its beginning) to WHEN
    ``until`` (default: now)."""
    parsed = layout.parse_record(record)
    old = resolve_version(mem, parsed, since) if since else None
    new = resolve_version(mem, parsed, until) if until else mem.engine.head()
    times = [at for when in (since, until) if when and (at := parse_time(when)) is not None]
    later = (len(times) == 2 and times[0] > times[1]) or (
        old and new and old != new and mem.engine.log.descends_from(old, new))
    if later:
        raise HistoryError(f"--since {since!r} is later than --until {until or 'now'!r}: "
                           "swap them")
    return RecordDiff(parsed.name, old, new, mem.engine.log.diff_commits(parsed.path, old, new))


def restore(mem: Records, record: str, at: str, *, trailers: Mapping[str, str] | None = None,
            author: Identity | None = None) -> Restored:
    """Write ``record`` back as it was at WHEN ``at``, as one new commit (none when the
    record already is that way), with the caller's ``trailers`` and ``author`` (a face
    naming itself and the person). A time the record did not exist at is refused
    (:class:`HistoryError` naming its first version): deleting is what the stores'
    ``delete`` is for."""
    parsed = layout.parse_record(record)
    commit = resolve_version(mem, parsed, at)
    old = mem.engine.snapshot_of(commit, scope=parsed.path)
    if not _files(old, parsed):
        versions = mem.record_index.versions(parsed.path)
        if not versions:
            raise NoRecord(f"no record {parsed.name}: nothing to restore")
        first = mem.engine.log.commit_info(versions[-1].id)
        delete = {"user": "`gitmem memory delete --user`", "agent": "`gitmem memory delete "
                  "--agent`", "note": "the memory tool's delete",
                  "session": "`gitmem session delete`",
                  "store": "the store's delete"}.get(parsed.kind, "its delete")
        raise HistoryError(f"{parsed.name} did not exist at {at!r}: its first version is "
                           f"{first.id[:10]} of {format_date(first.time, first.offset)}; "
                           f"nothing restored ({delete} deletes it)")

    def changes(snapshot):
        before = _files(snapshot, parsed)
        after = _files(old, parsed)
        changed: dict[str, bytes | None] = {p: None for p in before if p not in after}
        for path, blob_id in after.items():
            if before.get(path) != blob_id:
                changed[path] = old.read(path)
        return _updated_now(mem, parsed, snapshot, old, changed)

    label = commit[:10] if commit else "before the first commit"
    new = mem.engine.update(changes, f"restore: {printable(parsed.name)} as of {label}",
                            record_trailers("restore", parsed.name,
                                            {**(trailers or {}), "Gitmem-Restored-From": commit or "none"}),
                            author=author, scope=parsed.path)
    return Restored(parsed.name, commit, new)


def _updated_now(mem: Records, record: layout.Record, snapshot, old,
                 changed: dict[str, bytes | None]) -> dict[str, bytes | None]:
    """``changed`` (a restore of a session or thread) with the restored ``meta.json``'s
    ``updatedAt`` set to now, as any write of it sets it; nothing when that stamp is all
    the restore would change."""
    path = f"{record.path}/{layout.META}"
    if record.kind not in ("session", "thread") or not changed or not old.exists(path):
        return changed
    try:
        restored, current = parse_meta(old.read(path)), read_meta(snapshot, record.path) or {}
    except ValueError:  # a meta.json broken by hand is put back as it was
        return changed
    if set(changed) == {path} and ({**restored, "updatedAt": None} == {**current, "updatedAt": None}):
        return {}
    restored["updatedAt"] = now_iso() if record.kind == "session" else mem.threads.stamp(current)
    return {**changed, path: meta_bytes(restored)}


def summarise(record: layout.Record | None, files: list[FileChange]) -> tuple[str, dict[str, dict[str, int]]]:
    """A one-line summary of ``files`` (a commit's changes to ``record``) and the counts
    behind it, grouped by what the files hold."""
    if record is None:
        added = sum(f.added for f in files)
        removed = sum(f.removed for f in files)
        return f"{counted(len(files), 'file')}, +{added} -{removed} lines", {"lines": {"added": added, "removed": removed}}
    changes: dict[str, dict[str, int]] = {}
    for f in files:
        group, unit = _group(record, f.path)
        counts = changes.setdefault(group, {"added": 0, "removed": 0})
        if unit == "files":
            counts["added"] += f.status == "added"
            counts["removed"] += f.status == "deleted"
        elif unit == "lines":
            counts["added"] += f.added
            counts["removed"] += f.removed
        else:  # a changed file of its own, like meta.json
            counts["added"] += 1
    words = []
    for group, counts in changes.items():
        words.append(_describe(group, counts["added"], counts["removed"]))
    text = ", ".join(w for w in words if w) or "no change"
    statuses = {f.status for f in files}
    if statuses == {"added"}:
        text = f"created: {text}"
    elif statuses == {"deleted"}:
        text = "deleted"
    return text, changes


# -- helpers ----------------------------------------------------------------------


def read_record(mem: Records, record: layout.Record, snapshot, commit: str | None) -> Shown:
    """``record`` as ``snapshot`` (of ``commit``) holds it."""
    value: dict[str, Any]
    if record.is_memory:
        value = {"content": mem.memory.read_file(record.path, snapshot=snapshot)}
        exists = snapshot.exists(record.path)
    elif record.kind == "store":
        data = snapshot.read(record.path)
        value = {"item": _item_of(data, record.path)}
        exists = data is not None
    elif record.kind == "session":
        ids = record.ids or _ids_in_meta(snapshot, record, ("agentType", "sessionId"), mem.sessions.folder)
        messages, agent_session_id = mem.sessions.read(*ids, snapshot=snapshot)
        value = {"messages": messages, "agentSessionId": agent_session_id,
                 "meta": mem.sessions.meta(*ids, snapshot=snapshot)}
        exists = snapshot.tree_id(record.path) is not None
    else:
        thread_id, = record.ids or _ids_in_meta(snapshot, record, ("threadId",), mem.threads.folder)
        value = {"events": mem.threads.read_events(thread_id, snapshot=snapshot),
                 "messages": mem.threads.read_messages(thread_id, snapshot=snapshot),
                 "meta": mem.threads.meta(thread_id, snapshot=snapshot)}
        exists = snapshot.tree_id(record.path) is not None
    return Shown(record.name, commit, exists, value)


def _item_of(data: bytes | None, path: str) -> dict[str, Any] | None:
    """The store item in file content ``data`` as its file holds it (None: no file)."""
    if data is None:
        return None
    try:
        return parse_item(data)._asdict()
    except ValueError as exc:
        raise HistoryError(f"{path} is not a store item's file: {exc}") from None


def _ids_in_meta(snapshot, record: layout.Record, keys: tuple[str, ...],
                 folder_of: Callable[..., str]) -> tuple[str, ...]:
    """The ids of a session or thread named by its path (a folder name cut to fit, whose
    full ids its ``meta.json`` keeps), as ``snapshot`` holds them."""
    meta = read_meta(snapshot, record.path) or {}
    ids = tuple(meta.get(key) for key in keys)
    try:
        found = all(isinstance(id_, str) for id_ in ids) and folder_of(*ids) == record.path
    except ValueError:  # an empty id
        found = False
    if not found:
        raise HistoryError(f"{record.path}: its meta.json names no ids whose folder it is, and "
                           "gitmem reads sessions and threads by their ids")
    return cast("tuple[str, ...]", ids)  # each one a str, as found says
def _record_of(path: str) -> str | None:
    """The name of the record file ``path`` belongs to (None: no record's)."""
    record = layout.record_path(path)
    return record_name(record) if record is not None else None


def _cut(patch: str) -> str:
    """``patch``, cut after :data:`MAX_RECENT_DIFF` characters with a line saying so."""
    if len(patch) <= MAX_RECENT_DIFF:
        return patch
    rest = len(patch) - MAX_RECENT_DIFF
    return (patch[:MAX_RECENT_DIFF].rsplit("\n", 1)[0] + f"\n... ({rest} more characters: "
            "`gitmem diff RECORD` shows them)\n")


def _files(snapshot, record: layout.Record) -> dict[str, str]:
    """{path: blob id} of every file of ``record`` in ``snapshot``."""
    if record.is_file:
        blob_id = snapshot.blob_id(record.path)
        return {record.path: blob_id} if blob_id else {}
    return {path: snapshot.blob_id(path) for path in snapshot.files(record.path)}


def _group(record: layout.Record, path: str) -> tuple[str, str]:
    """What a changed file of ``record`` holds, and how its changes are counted."""
    if record.is_file:
        return "lines", "lines"
    parts = path[len(record.path) + 1:].split("/")
    if len(parts) == 2 and parts[1].endswith(".jsonl"):
        return parts[0], "lines"
    if len(parts) == 3 and parts[1] == "blobs":
        return "images", "files"
    if parts == [layout.META]:
        return "metadata", "file"
    return "other files", "files"


def _describe(group: str, added: int, removed: int) -> str:
    if group == "metadata":
        return "metadata"
    if group == "lines":
        return f"+{added} -{removed} lines"
    noun = _NOUNS.get(group, group[:-1] if group.endswith("s") else group)
    changed = min(added, removed) if group in _NOUNS else 0
    parts = []
    if added - changed:
        parts.append(f"+{counted(added - changed, noun)}")
    if removed - changed:
        parts.append(f"-{counted(removed - changed, noun)}")
    if changed:
        parts.append(f"{counted(changed, noun)} changed")
    return ", ".join(parts)

