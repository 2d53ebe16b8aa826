"""nui chat sessions: the message list of each (agentType, sessionId), one commit per write.

nui sends the whole message list on every write, so ``write`` replaces the session;
on disk the messages are chunked JSONL, and a write that extends the list touches
only the last chunk. Messages come back verbatim (unknown fields, key order).

A write compares every given message with the stored one, so its cost grows with the
session; a caller that knows it is adding messages uses ``append``, which touches only
the last chunk and never compares the earlier messages.

Two rules serve a writer that sends snapshots from threads of its own and reads with a
size limit, as nui does: with ``late_window``, a write of a strict prefix of the stored
list made within that many seconds of the stored one is a late snapshot, not applied;
and a read that had to leave the oldest messages out (:meth:`SessionStore.read_json_within`)
is remembered, in ``.git/gitmem/session-cuts.json``, so that a write starting where that
read started gets the left-out messages back in front.

    sessions = SessionStore(engine)
    sessions.write("claude-code", "6f1c...", [{"id": "m1", "role": "user", "content": "hi"}],
                   agent_session_id="resume-1", working_dir="/home/me/project")
    sessions.append("claude-code", "6f1c...", [{"id": "m2", "role": "assistant", "content": "hello"}])
    sessions.read("claude-code", "6f1c...")   # ([{...}, {...}], "resume-1")
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from gitmem.errors import BrokenFile, InvalidInput
from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.snapshot import Snapshot
from gitmem.records import layout
from gitmem.records.counts import counted
from gitmem.records.ids import printable
from gitmem.records.jsontexts import JsonTexts
from gitmem.records.meta import meta_bytes, now_iso, parse_meta, read_meta, record_trailers
from gitmem.records.strictjson import same_json
from gitmem.stores.blobs import is_blob_name
from gitmem.stores.jsonl import ChunkedJsonl, dumps, objects

log = logging.getLogger("gitmem.sessions")

CUTS_FILE = "session-cuts.json"


class SessionStore:
    """Chat sessions keyed by ``(agent_type, session_id)``."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self._cuts = ReadCuts(engine.private_dir / CUTS_FILE)

    @staticmethod
    def folder(agent_type: str, session_id: str) -> str:
        return layout.session_dir(agent_type, session_id)

    def _log(self, agent_type: str, session_id: str) -> ChunkedJsonl:
        return ChunkedJsonl(f"{self.folder(agent_type, session_id)}/{layout.MESSAGES}", blobs=True)

    def read(self, agent_type: str, session_id: str, *,
             snapshot: Snapshot | None = None) -> tuple[list[Any], str]:
        """``(messages, agent_session_id)``; ``([], "")`` for a session never written."""
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        meta = self._meta_to_read(agent_type, session_id, snapshot)
        return self._log(agent_type, session_id).read(snapshot), meta.get("agentSessionId", "")

    def read_json(self, agent_type: str, session_id: str, *,
                  snapshot: Snapshot | None = None) -> tuple[str, str]:
        """Like :meth:`read`, with the messages as the text of a JSON array (no re-encoding)."""
        pieces, agent_session_id = self.read_json_pieces(agent_type, session_id, snapshot=snapshot)
        return b"".join(pieces).decode("utf-8"), agent_session_id

    def read_json_pieces(self, agent_type: str, session_id: str, *,
                         snapshot: Snapshot | None = None) -> tuple[list[bytes], str]:
        """Like :meth:`read_json`, the array's UTF-8 text left in pieces (``b"".join``
        them, or write them out one after the other: a big session is not copied again)."""
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        meta = self._meta_to_read(agent_type, session_id, snapshot)
        return self._log(agent_type, session_id).read_json(snapshot), meta.get("agentSessionId", "")

    def read_json_within(self, agent_type: str, session_id: str, max_bytes: int, *,
                         snapshot: Snapshot | None = None) -> tuple[bytes, str]:
        """Like :meth:`read_json`, the messages' text at most ``max_bytes`` bytes (see
        :meth:`ChunkedJsonl.read_json_within`): images as blob references if need be,
        then only the newest messages. Such a cut is remembered until the next read of
        the session: a write whose first message is the first one sent gets the messages
        left out back in front of it (see :meth:`write`)."""
        folder = self.folder(agent_type, session_id)
        snapshot = snapshot or self.engine.snapshot(scope=folder)
        meta = self._meta_to_read(agent_type, session_id, snapshot)
        messages = self._log(agent_type, session_id)
        fitted = messages.read_json_within(snapshot, max_bytes)
        if fitted.left_out:
            first = messages.sent_lines(snapshot, fitted.left_out, fitted.left_out + 1)
            self._cuts.set(folder, {"from": fitted.left_out,
                                    "first": _message_key(json.loads(first[0])) if first else None})
        else:
            self._cuts.drop(folder)
        if fitted.left_out or fitted.references:
            log.info("read of %s/%s cut to fit %d bytes: %d images as references, the first %d "
                     "messages left out", agent_type, session_id, max_bytes, fitted.references,
                     fitted.left_out)
        return fitted.text, meta.get("agentSessionId", "")

    def page(self, agent_type: str, session_id: str, start: int, stop: int, *,
             snapshot: Snapshot | None = None) -> tuple[list[bytes], int]:
        """Messages ``start`` to ``stop`` as JSON lines, images left as blob references
        (``gitmem:blob:<name>``; :meth:`image` reads one), and how many messages the
        session holds: a page of a long session, no message parsed."""
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        return self._log(agent_type, session_id).page(snapshot, start, stop)

    def image(self, agent_type: str, session_id: str, name: str, *,
              snapshot: Snapshot | None = None) -> tuple[str, bytes] | None:
        """(media type, bytes) of the image a blob reference names; None when the session
        holds no such image."""
        if not is_blob_name(name):
            return None
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        blobs = self._log(agent_type, session_id).blobs
        data = snapshot.read(f"{blobs.folder}/{name}") if blobs is not None else None
        if data is None:
            return None
        return mimetypes.guess_type(name)[0] or "application/octet-stream", data

    def meta(self, agent_type: str, session_id: str, *,
             snapshot: Snapshot | None = None) -> dict[str, Any] | None:
        """The session's metadata (agentSessionId, workingDir, createdAt, updatedAt, ids).
        Raises :class:`~gitmem.errors.BrokenFile` when it does not parse: a write of the
        session is refused, for it would write over the file a person has to fix."""
        return read_meta(snapshot or self.engine.snapshot(), self.folder(agent_type, session_id))

    def _meta_to_read(self, agent_type: str, session_id: str, snapshot: Snapshot) -> dict[str, Any]:
        """The metadata a read answers with: {} when there is none, or when it does not
        parse (said in the log: the messages are answered all the same, agentSessionId "")."""
        try:
            return self.meta(agent_type, session_id, snapshot=snapshot) or {}
        except BrokenFile as exc:
            log.warning("%s: read without it (agentSessionId \"\")", exc)
            return {}

    def write(self, agent_type: str, session_id: str, messages: Sequence[Any] | JsonTexts | None,
              agent_session_id: str = "", working_dir: str = "", *,
              extra_meta: Mapping[str, Any] | None = None,
              trailers: Mapping[str, str] | None = None,
              late_window: float | None = None, arrived: float | None = None) -> str | None:
        """Replace the session with ``messages``; returns the commit id (None: nothing changed).

        Messages received as JSON can be given as :class:`~gitmem.records.jsontexts.JsonTexts`:
        those already stored as they are then cost no parsing and no comparison.

        With ``late_window`` (seconds; None or 0: off), a strict prefix of the stored messages is not
        applied when the stored ones were written less than that long before the write
        arrived (``arrived``, a ``time.monotonic()``; default now), or while it waited its
        turn, by their ``updatedAt``: it is a snapshot older than the stored one that arrived
        after it.
        A write that starts with the first message of a cut read (:meth:`read_json_within`)
        gets the messages that read left out in front of it.
        """
        if not isinstance(messages, JsonTexts):
            messages = objects("messages", messages)
        _check_texts(agent_session_id=agent_session_id, working_dir=working_dir)
        folder = self.folder(agent_type, session_id)
        chunks = self._log(agent_type, session_id)
        cut = self._cuts.get(folder)
        if cut is not None and len(messages):
            messages = self._with_head(self.engine.snapshot(scope=folder), chunks, cut, messages)
        late: list[tuple[int, float]] = []
        arrived_at = time.time() - (time.monotonic() - arrived) if arrived is not None else None

        def changes(snapshot: Snapshot) -> dict[str, bytes | None] | None:
            if late_window:
                found = self._lateness(snapshot, agent_type, session_id, chunks, messages, late_window,
                                       arrived_at)
                if found is not None:
                    late.append(found)
                    return None
            return chunks.replace(snapshot, messages)

        fields = {"agentSessionId": agent_session_id, "workingDir": working_dir, **(extra_meta or {})}
        commit = self._update(agent_type, session_id, "write",
                              f"write {agent_type}/{session_id} ({counted(len(messages), 'message')})",
                              changes, fields, trailers)
        if late:
            stored, age = late[-1]
            log.info("late snapshot of %s/%s not applied: its %d messages begin the %d stored "
                     "%.3f s ago", agent_type, session_id, len(messages), stored, age)
        return commit

    def _lateness(self, snapshot: Snapshot, agent_type: str, session_id: str, chunks: ChunkedJsonl,
                  messages: Sequence[Any] | JsonTexts, window: float,
                  arrived_at: float | None) -> tuple[int, float] | None:
        """``(stored count, seconds from the stored write to the arrival)`` when ``messages``
        are a late snapshot (see :meth:`write`; ``arrived_at`` on the clock of ``time.time()``,
        None: now), else None. Cheap checks first: the counts, the age,
        then the texts of the chunks (compared, not parsed)."""
        stored = chunks.count(snapshot)
        if len(messages) >= stored:
            return None
        meta = self.meta(agent_type, session_id, snapshot=snapshot) or {}
        now = time.time()
        arrived_at = now if arrived_at is None else arrived_at
        try:
            age = arrived_at - datetime.fromisoformat(meta["updatedAt"]).timestamp()
        except (KeyError, TypeError, ValueError):
            return None
        # Below 0: the stored write was made while this one waited its turn (as long as
        # now - arrived_at), after it arrived: later still than within the window.
        if not -(now - arrived_at) - window <= age <= window or not chunks.starts_with(snapshot, messages):
            return None
        return stored, age

    def _with_head(self, snapshot: Snapshot, chunks: ChunkedJsonl, cut: Mapping[str, Any],
                   messages: Sequence[Any] | JsonTexts) -> Sequence[Any] | JsonTexts:
        """``messages`` with the stored messages a cut read left out in front, when they
        start where that read started (when it sent none: anywhere but at the stored first)."""
        first = messages.parse(messages.texts[0]) if isinstance(messages, JsonTexts) else messages[0]
        if cut["first"] is not None:
            starts_there = _message_key(first) == cut["first"]
        else:
            stored = chunks.sent_lines(snapshot, 0, 1)
            starts_there = bool(stored) and _message_key(json.loads(stored[0])) != _message_key(first)
        if not starts_there:
            return messages
        head = chunks.sent_lines(snapshot, 0, cut["from"])
        if isinstance(messages, JsonTexts):
            return JsonTexts(head + list(messages.texts), messages.parse)
        return [json.loads(line) for line in head] + list(messages)

    def append(self, agent_type: str, session_id: str, messages: Sequence[Any] | None,
               agent_session_id: str | None = None, working_dir: str | None = None, *,
               extra_meta: Mapping[str, Any] | None = None,
               trailers: Mapping[str, str] | None = None) -> str | None:
        """Add ``messages`` after the stored ones, never comparing those; returns the commit id.
        An empty list makes no commit (None), whatever else is given.

        ``agent_session_id`` and ``working_dir`` replace the stored ones when given (None
        keeps them; a new session gets "").
        """
        messages = objects("messages", messages)
        _check_texts(agent_session_id=agent_session_id, working_dir=working_dir)
        self.folder(agent_type, session_id)  # the ids are checked before anything else
        if not messages:
            return None
        chunks = self._log(agent_type, session_id)
        fields = {key: value for key, value in (("agentSessionId", agent_session_id),
                                                ("workingDir", working_dir)) if value is not None}
        fields.update(extra_meta or {})
        return self._update(agent_type, session_id, "append",
                            f"append {counted(len(messages), 'message')} to {agent_type}/{session_id}",
                            lambda snapshot: chunks.append(snapshot, messages), fields, trailers)

    def pop(self, agent_type: str, session_id: str, *,
            trailers: Mapping[str, str] | None = None) -> tuple[Any, str | None]:
        """Remove the last message, as one commit; ``(the message, the commit id)``, or
        ``(None, None)`` when the session holds none. Taken from the tip under the writers'
        lock: a message another writer adds meanwhile is never the one removed unseen."""
        chunks = self._log(agent_type, session_id)
        popped: list[Any] = []

        def changes(snapshot: Snapshot) -> dict[str, bytes | None] | None:
            messages = chunks.read(snapshot)
            popped[:] = messages[-1:]
            return chunks.replace(snapshot, messages[:-1]) if messages else None

        commit = self._update(agent_type, session_id, "pop", f"pop the last message of "
                              f"{agent_type}/{session_id}", changes, {}, trailers)
        return (popped[0], commit) if popped else (None, None)

    def _update(self, agent_type: str, session_id: str, op: str, summary: str,
                log_changes: Callable[[Snapshot], dict[str, bytes | None] | None],
                fields: Mapping[str, Any], trailers: Mapping[str, str] | None) -> str | None:
        """One commit of the log's changes and the metadata with ``fields`` (see _with_meta);
        none when ``log_changes`` gives None."""
        def changes(snapshot: Snapshot) -> dict[str, bytes | None] | None:
            found = log_changes(snapshot)
            return None if found is None else self._with_meta(snapshot, agent_type, session_id,
                                                               found, fields)

        return self.engine.update(
            changes, f"session: {printable(summary)}",  # an id: one line, no escape sequence
            record_trailers(f"session.{op}", f"session:{agent_type}/{session_id}", trailers),
            scope=self.folder(agent_type, session_id))

    def _with_meta(self, snapshot: Snapshot, agent_type: str, session_id: str,
                   changes: dict[str, bytes | None], fields: Mapping[str, Any]
                   ) -> dict[str, bytes | None] | None:
        """``changes`` plus the session's meta.json with ``fields`` set (agentSessionId and
        workingDir are "" on a new session unless set), createdAt kept (set on the first
        write) and updatedAt bumped; None when neither the messages nor the fields change."""
        old = self.meta(agent_type, session_id, snapshot=snapshot)
        meta = {"agentType": agent_type, "sessionId": session_id, **fields}
        if old is not None and not changes and all(same_json(old.get(k), v) for k, v in meta.items()):
            return None
        stamp = now_iso()
        meta["createdAt"] = (old or {}).get("createdAt", stamp)
        meta["updatedAt"] = stamp
        base = old if old is not None else {"agentType": agent_type, "sessionId": session_id,
                                            "agentSessionId": "", "workingDir": ""}
        changes[f"{self.folder(agent_type, session_id)}/{layout.META}"] = meta_bytes({**base, **meta})
        return changes

    def delete(self, agent_type: str, session_id: str, *,
               trailers: Mapping[str, str] | None = None) -> str | None:
        """Remove the session; returns the commit id (None when there was none)."""
        folder = self.folder(agent_type, session_id)
        self._cuts.drop(folder)
        return self.engine.update(
            lambda snapshot: {path: None for path in snapshot.files(folder)},
            f"session: delete {printable(f'{agent_type}/{session_id}')}",
            record_trailers("session.delete", f"session:{agent_type}/{session_id}", trailers),
            scope=folder)

    def list(self, *, snapshot: Snapshot | None = None) -> list[tuple[str, str]]:
        """Every stored ``(agent_type, session_id)``, read from the metadata files; a session
        whose metadata cannot be read is skipped with a warning naming the file."""
        snapshot = snapshot or self.engine.snapshot()
        found = []
        for type_dir in snapshot.list(layout.SESSIONS):
            for session_dir in snapshot.list(f"{layout.SESSIONS}/{type_dir}"):
                path = f"{layout.SESSIONS}/{type_dir}/{session_dir}/{layout.META}"
                try:
                    meta = snapshot.read_parsed(path, parse_meta)
                except (ValueError, EngineError) as exc:  # one broken file hides no other
                    logging.getLogger("gitmem.sessions").warning("skipping %s: %s", path, exc)
                    continue
                if meta is None:
                    continue
                agent_type, session_id = meta.get("agentType"), meta.get("sessionId")
                if isinstance(agent_type, str) and isinstance(session_id, str):
                    found.append((agent_type, session_id))
                else:
                    logging.getLogger("gitmem.sessions").warning(
                        "skipping %s: it has no agentType and sessionId strings", path)
        return found


class ReadCuts:
    """The cut reads still in force, ``{session folder: {"from": n, "first": key}}``, kept
    in a file of the repository's private folder so that a restart does not forget them."""

    def __init__(self, path: Path):
        self.path = path
        self._cuts: dict[str, Any] | None = None  # read at the first use
        self._lock = threading.Lock()

    def get(self, folder: str) -> dict[str, Any] | None:
        with self._lock:
            return self._loaded().get(folder)

    def set(self, folder: str, cut: dict[str, Any]) -> None:
        with self._lock:
            cuts = self._loaded()
            if cuts.get(folder) != cut:
                cuts[folder] = cut
                self._save()

    def drop(self, folder: str) -> None:
        with self._lock:
            if self._loaded().pop(folder, None) is not None:
                self._save()

    def _loaded(self) -> dict[str, Any]:
        if self._cuts is None:
            try:
                found = json.loads(self.path.read_text("utf-8"))
            except (OSError, ValueError):  # none yet, or unreadable: no cut is in force
                found = {}
            self._cuts = found if isinstance(found, dict) else {}
        return self._cuts

    def _save(self) -> None:
        write_private(self.path, json.dumps(self._cuts).encode("ascii"))


def _check_texts(**given: str | None) -> None:
    """Raise :class:`~gitmem.errors.InvalidInput` naming the parameter that is given (not
    None) and not a string."""
    for name, value in given.items():
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")


def _message_key(message: Any) -> dict[str, str]:
    """What tells a message apart when a writer sends it back: its id, else its content."""
    if isinstance(message, dict) and isinstance(message.get("id"), str):
        return {"id": message["id"]}
    return {"sha256": hashlib.sha256(dumps(message).encode("utf-8", "surrogateescape")).hexdigest()}

