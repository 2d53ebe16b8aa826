"""nui chat sessions: the message list of each (agentType, sessionId), one commit per write.

nui sends the whole message list on every write, so ``write`` replaces the session;
on disk the messages are chunked JSONL, and a write that extends the list touches
only the last chunk. Messages come back verbatim (unknown fields, key order).

A write compares every given message with the stored one, so its cost grows with the
session; a caller that knows it is adding messages uses ``append``, which touches only
the last chunk and never compares the earlier messages.

    sessions = SessionStore(engine)
    sessions.write("claude-code", "6f1c...", [{"id": "m1", "role": "user", "content": "hi"}],
                   agent_session_id="resume-1", working_dir="/home/me/project")
    sessions.append("claude-code", "6f1c...", [{"id": "m2", "role": "assistant", "content": "hello"}])
    sessions.read("claude-code", "6f1c...")   # ([{...}, {...}], "resume-1")
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from gitmem import layout
from gitmem.engine import EngineError, GitEngine, Snapshot
from gitmem.stores.jsonl import ChunkedJsonl, JsonTexts


def now_iso() -> str:
    """The current time as RFC 3339 in UTC with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_meta(data: bytes) -> dict[str, Any]:
    value = json.loads(data)
    if not isinstance(value, dict):
        raise ValueError("metadata is not a JSON object")
    return value


def meta_bytes(meta: Mapping[str, Any]) -> bytes:
    text = json.dumps(meta, ensure_ascii=False, indent=2) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: escaped, so the file stays UTF-8
        return (json.dumps(meta, indent=2) + "\n").encode("ascii")


class SessionStore:
    """Chat sessions keyed by ``(agent_type, session_id)``."""

    def __init__(self, engine: GitEngine):
        self.engine = engine

    @staticmethod
    def folder(agent_type: str, session_id: str) -> str:
        return layout.session_dir(agent_type, session_id)

    def _log(self, agent_type: str, session_id: str) -> ChunkedJsonl:
        return ChunkedJsonl(f"{self.folder(agent_type, session_id)}/messages", blobs=True)

    def read(self, agent_type: str, session_id: str, *,
             snapshot: Snapshot | None = None) -> tuple[list[Any], str]:
        """``(messages, agent_session_id)``; ``([], "")`` for a session never written."""
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        meta = self.meta(agent_type, session_id, snapshot=snapshot) or {}
        return self._log(agent_type, session_id).read(snapshot), meta.get("agentSessionId", "")

    def read_json(self, agent_type: str, session_id: str, *,
                  snapshot: Snapshot | None = None) -> tuple[str, str]:
        """Like :meth:`read`, with the messages as the text of a JSON array (no re-encoding)."""
        snapshot = snapshot or self.engine.snapshot(scope=self.folder(agent_type, session_id))
        meta = self.meta(agent_type, session_id, snapshot=snapshot) or {}
        return self._log(agent_type, session_id).read_json(snapshot), meta.get("agentSessionId", "")

    def meta(self, agent_type: str, session_id: str, *,
             snapshot: Snapshot | None = None) -> dict[str, Any] | None:
        """The session's metadata (agentSessionId, workingDir, createdAt, updatedAt, ids)."""
        snapshot = snapshot or self.engine.snapshot()
        meta = snapshot.read_parsed(f"{self.folder(agent_type, session_id)}/{layout.META}", parse_meta)
        return dict(meta) if meta is not None else None

    def write(self, agent_type: str, session_id: str, messages: Sequence[Any] | JsonTexts | None,
              agent_session_id: str = "", working_dir: str = "", *,
              extra_meta: Mapping[str, Any] | None = None,
              trailers: Mapping[str, str] | None = None) -> str | None:
        """Replace the session with ``messages``; returns the commit id (None: nothing changed).

        Messages received as JSON can be given as :class:`~gitmem.stores.jsonl.JsonTexts`:
        those already stored as they are then cost no parsing and no comparison.
        """
        if not isinstance(messages, JsonTexts):
            messages = list(messages or [])
        log = self._log(agent_type, session_id)
        fields = {"agentSessionId": agent_session_id, "workingDir": working_dir, **(extra_meta or {})}
        return self._update(agent_type, session_id, "write",
                            f"write {agent_type}/{session_id} ({len(messages)} messages)",
                            lambda snapshot: log.replace(snapshot, messages), fields, trailers)

    def append(self, agent_type: str, session_id: str, messages: Sequence[Any] | None,
               agent_session_id: str | None = None, working_dir: str | None = None, *,
               extra_meta: Mapping[str, Any] | None = None,
               trailers: Mapping[str, str] | None = None) -> str | None:
        """Add ``messages`` after the stored ones, never comparing those; returns the commit id.
        An empty list makes no commit (None), whatever else is given.

        ``agent_session_id`` and ``working_dir`` replace the stored ones when given (None
        keeps them; a new session gets "").
        """
        messages = list(messages or [])
        if not messages:
            return None
        log = self._log(agent_type, session_id)
        fields = {key: value for key, value in (("agentSessionId", agent_session_id),
                                                ("workingDir", working_dir)) if value is not None}
        fields.update(extra_meta or {})
        count = f"{len(messages)} message{'s' if len(messages) != 1 else ''}"
        return self._update(agent_type, session_id, "append",
                            f"append {count} to {agent_type}/{session_id}",
                            lambda snapshot: log.append(snapshot, messages), fields, trailers)

    def _update(self, agent_type: str, session_id: str, op: str, summary: str,
                log_changes: Callable[[Snapshot], dict[str, bytes | None]],
                fields: Mapping[str, Any], trailers: Mapping[str, str] | None) -> str | None:
        """One commit of the log's changes and the metadata with ``fields`` (see _with_meta)."""
        return self.engine.update(
            lambda snapshot: self._with_meta(snapshot, agent_type, session_id,
                                             log_changes(snapshot), fields),
            f"session: {summary}", _trailers(f"session.{op}", agent_type, session_id, trailers),
            scope=self.folder(agent_type, session_id))

    def _with_meta(self, snapshot: Snapshot, agent_type: str, session_id: str,
                   changes: dict[str, bytes | None], fields: Mapping[str, Any]
                   ) -> dict[str, bytes | None] | None:
        """``changes`` plus the session's meta.json with ``fields`` set (agentSessionId and
        workingDir are "" on a new session unless set), createdAt kept (set on the first
        write) and updatedAt bumped; None when neither the messages nor the fields change."""
        old = self.meta(agent_type, session_id, snapshot=snapshot)
        meta = {"agentType": agent_type, "sessionId": session_id, **fields}
        if old is not None and not changes and all(old.get(k) == v for k, v in meta.items()):
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
        return self.engine.update(
            lambda snapshot: {path: None for path in snapshot.files(folder)},
            f"session: delete {agent_type}/{session_id}",
            _trailers("session.delete", agent_type, session_id, trailers), scope=folder)

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
                ids = (meta.get("agentType"), meta.get("sessionId"))
                if all(isinstance(part, str) for part in ids):
                    found.append(ids)
                else:
                    logging.getLogger("gitmem.sessions").warning(
                        "skipping %s: it has no agentType and sessionId strings", path)
        return found


def _trailers(op: str, agent_type: str, session_id: str,
              extra: Mapping[str, str] | None) -> dict[str, str]:
    return {"Gitmem-Op": op, **(extra or {}), "Gitmem-Id": f"session:{agent_type}/{session_id}"}
