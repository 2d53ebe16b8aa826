"""What gitmem is measured against in ``gitmem bench``, besides git itself.

- :class:`SqliteStore`: SQLite in WAL mode with ``synchronous=FULL``, one transaction
  per write, each record type in its own table (memory, one row per message, one row
  per event): the database a memory store would otherwise be built on.
- :class:`NuiDataJson`: nui's built-in storage, every session in one ``data.json``
  (2-space indented) rewritten whole on each write, through a temp file and a rename.
- :class:`JsonFileThreadStore`: the seed's kaboo thread store, every thread in one
  JSON file rewritten whole on each append.

All three are implemented here in Python, as gitmem is, and are used through the
same calls as gitmem's stores:

    db = SqliteStore(Path("/tmp/bench.sqlite"))
    db.write_session("s1", messages)      # inserts the messages it does not hold yet
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any


class SqliteStore:
    """Memory, sessions and threads in SQLite (WAL, ``synchronous=FULL``), one transaction a write.

    A session write inserts only the messages beyond those stored (nui sends the whole
    list; a careful handler writes the new tail): the cheapest write SQLite allows.
    """

    SCHEMA = """
        CREATE TABLE IF NOT EXISTS memory (agent TEXT PRIMARY KEY, content TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS messages (session TEXT, seq INTEGER, message TEXT NOT NULL,
                                             PRIMARY KEY (session, seq));
        CREATE TABLE IF NOT EXISTS events (thread TEXT, seq INTEGER, event TEXT NOT NULL,
                                           PRIMARY KEY (thread, seq));
        CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, agent TEXT, owner TEXT,
                                            created INTEGER, updated INTEGER);
        CREATE INDEX IF NOT EXISTS threads_by_update ON threads (updated DESC, id);
    """

    def __init__(self, path: Path):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)  # transactions are explicit
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(self.SCHEMA)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def write_memory(self, agent: str, content: str) -> None:
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO memory VALUES (?, ?)", (agent, content))

    def append_memory(self, agent: str, content: str) -> None:
        """Append a block after a blank line, as ``writeMode: append`` does."""
        with self._transaction() as db:
            db.execute("INSERT INTO memory VALUES (?, ?) ON CONFLICT (agent) DO UPDATE "
                       "SET content = content || char(10, 10) || excluded.content", (agent, content))

    def read_memory(self, agent: str) -> str:
        row = self.db.execute("SELECT content FROM memory WHERE agent = ?", (agent,)).fetchone()
        return row[0] if row else ""

    def write_session(self, session: str, messages: Sequence[Any]) -> None:
        with self._transaction() as db:
            held = db.execute("SELECT count(*) FROM messages WHERE session = ?", (session,)).fetchone()[0]
            db.executemany("INSERT INTO messages VALUES (?, ?, ?)",
                           [(session, seq, json.dumps(message, ensure_ascii=False))
                            for seq, message in enumerate(messages[held:], held)])

    def truncate_session(self, session: str, keep: int) -> None:
        """Keep the first ``keep`` messages of the session."""
        with self._transaction() as db:
            db.execute("DELETE FROM messages WHERE session = ? AND seq >= ?", (session, keep))

    def read_session(self, session: str) -> list[Any]:
        return self._read_array("SELECT message FROM messages WHERE session = ? ORDER BY seq", session)

    def append_events(self, thread: str, agent: str, events: Sequence[Any]) -> None:
        now = time.time_ns() // 1_000_000
        with self._transaction() as db:
            first = db.execute("SELECT coalesce(max(seq) + 1, 0) FROM events WHERE thread = ?",
                               (thread,)).fetchone()[0]
            db.executemany("INSERT INTO events VALUES (?, ?, ?)",
                           [(thread, seq, json.dumps(event, ensure_ascii=False))
                            for seq, event in enumerate(events, first)])
            db.execute("INSERT INTO threads VALUES (?, ?, NULL, ?, ?) ON CONFLICT (id) DO UPDATE "
                       "SET agent = excluded.agent, updated = excluded.updated", (thread, agent, now, now))

    def read_events(self, thread: str) -> list[Any]:
        return self._read_array("SELECT event FROM events WHERE thread = ? ORDER BY seq", thread)

    def add_threads(self, rows: Sequence[tuple[str, str, int]]) -> None:
        """Add ``(thread id, agent id, updated)`` rows without events, in one transaction."""
        with self._transaction() as db:
            db.executemany("INSERT OR REPLACE INTO threads VALUES (?, ?, NULL, ?, ?)",
                           [(thread, agent, updated, updated) for thread, agent, updated in rows])

    def list_threads(self) -> list[dict[str, Any]]:
        """Every thread, most recently updated first, as kaboo's ``listThreads`` gives them."""
        return [{"id": id_, "agentId": agent, "ownerId": owner, "createdAt": created, "updatedAt": updated}
                for id_, agent, owner, created, updated in self.db.execute(
                    "SELECT id, agent, owner, created, updated FROM threads ORDER BY updated DESC, id")]

    def _read_array(self, query: str, key: str) -> list[Any]:
        rows = self.db.execute(query, (key,)).fetchall()
        return json.loads("[" + ",".join(row[0] for row in rows) + "]")

    def close(self) -> None:
        self.db.close()


class NuiDataJson:
    """nui's built-in session storage: ``data`` (as :func:`make_nui_data` gives it) in one
    ``data.json``, 2-space indented, rewritten whole through a temp file and a rename."""

    def __init__(self, folder: Path, data: dict[str, Any]):
        self.file = folder / "data.json"
        self.data = data
        self._flush()

    def write_session(self, session_id: str, messages: list[Any], agent_session_id: str) -> None:
        self.data["sessionMessages"][session_id] = messages
        self.data["agentSessions"][session_id] = agent_session_id
        self._flush()

    def _flush(self) -> None:
        tmp = self.file.with_name(f".{self.file.name}.tmp")
        tmp.write_text(json.dumps(self.data, indent=2, ensure_ascii=False) + "\n")
        os.replace(tmp, self.file)


class JsonFileThreadStore:
    """The seed's store: every thread in one JSON file, rewritten whole on each write."""

    def __init__(self, file: Path):
        self.file = file
        self.data: dict[str, dict[str, Any]] = json.loads(file.read_text()) if file.exists() else {}

    def append_events(self, thread_id: str, agent_id: str, events: list[dict[str, Any]]) -> None:
        now = time.time_ns() // 1_000_000
        row = self.data.setdefault(thread_id, {"agentId": agent_id, "ownerId": None, "events": [],
                                               "messages": [], "createdAt": now, "updatedAt": now})
        row["agentId"] = agent_id
        row["events"].extend(events)
        row["updatedAt"] = now
        self.file.write_text(json.dumps(self.data, separators=(",", ":")))

    def read_events(self, thread_id: str) -> list[Any]:
        return list(self.data.get(thread_id, {}).get("events", []))

    def read_state(self, thread_id: str) -> Any:
        for event in reversed(self.data.get(thread_id, {}).get("events", [])):
            if event.get("type") == "STATE_SNAPSHOT":
                snapshot = event.get("snapshot")
                return snapshot if isinstance(snapshot, (dict, list)) else None
        return None


# -- a realistic nui data folder ------------------------------------------------------


def make_nui_data(folder: Path, *, sessions: int = 6, messages: int = 8, image_every: int = 3,
                  image_bytes: int = 30_000, seed: int = 0) -> dict[str, Any]:
    """Write a nui data folder as nui's built-in storage keeps it; returns its data.json.

    Sessions of ``claude-code``, ``codex`` and ``ext:corp/reviewer`` alternate; assistant
    turns carry text and tool parts; every ``image_every``-th session (0: none) has a
    user turn with an image; every third one has a sub-agent resume id. User memory
    and agent memory of ``claude-code`` and ``ext:corp/reviewer`` (as ``ext-corp-reviewer.md``).
    """
    rng = random.Random(seed)
    agent_types = ["claude-code", "codex", "ext:corp/reviewer"]
    data: dict[str, Any] = {"sessions": [], "agentSessions": {}, "sessionMessages": {}}
    for n in range(sessions):
        session_id = f"{rng.getrandbits(32):08x}-{n:04d}-4c1e-9a57-3f2d1e0c9b8a"
        agent_type = agent_types[n % len(agent_types)]
        data["sessions"].append({"id": session_id, "name": f"session {n}",
                                 "workingDir": f"/home/me/project{n % 4}", "agentType": agent_type,
                                 "createdAt": f"2026-10-{1 + n % 28:02d}T09:{n % 60:02d}:00Z",
                                 "pinned": n % 5 == 0})
        data["agentSessions"][session_id] = f"resume-{n}"
        if n % 3 == 0:
            data["agentSessions"][f"{session_id}#explorer"] = f"sub-resume-{n}"
        data["sessionMessages"][session_id] = [
            nui_message(n, i, rng.randbytes(image_bytes)
                        if image_every and n % image_every == 0 and i == 2 else b"")
            for i in range(messages)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    agents = folder / "memory" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (folder / "memory" / "user.md").write_text("Prefers short answers.\n\nWorks in Go and Python.\n")
    (agents / "claude-code.md").write_text("Run the tests with `make test`.\n")
    (agents / "ext-corp-reviewer.md").write_text("Review for naming first, then tests.\n")
    return data


def nui_message(session: int, i: int, image: bytes = b"") -> dict[str, Any]:
    """Message ``i`` of session number ``session`` as nui stores it: a user turn (with
    ``image`` attached when given) or an assistant turn with a text part and a tool part."""
    stamp = f"2026-10-{1 + session % 28:02d}T10:{i % 60:02d}:00.000Z"
    if i % 2 == 0:
        message: dict[str, Any] = {"id": f"u{session}-{i}", "role": "user",
                                   "content": f"please look at step {i} of task {session}",
                                   "createdAt": stamp}
        if image:
            message["images"] = [{"id": f"img{session}-{i}", "mediaType": "image/png",
                                  "data": base64.b64encode(image).decode()}]
        return message
    return {"id": f"a{session}-{i}", "role": "assistant", "content": f"Done with step {i}. " * 8,
            "createdAt": stamp,
            "parts": [{"type": "text", "id": f"p{session}-{i}a", "content": "Let me check."},
                      {"type": "tool", "id": f"p{session}-{i}b", "content": "",
                       "toolCallId": f"call_{session}_{i}", "toolName": "bash",
                       "toolArgs": {"command": f"grep -rn step{i} src/"},
                       "toolResult": f"src/a.py:{i}: step{i}()\n" * 5,
                       "subagentTrace": [{"role": "assistant", "content": "searching"}]}]}
