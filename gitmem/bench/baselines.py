"""What gitmem is measured against in ``gitmem bench``: every baseline, in this one module.

- :class:`FloorWrite` and its variants: the raw floor, a pygit2 commit with nothing
  around it (plus the work-tree file, plus the index entry, plus both);
- :class:`GitCliWrite`, :class:`GitCliAppend`: the file written, then ``git commit -a``
  in a subprocess (what most git-memory tools do); :func:`plain_git_sync`: two
  machines synced with ``git push`` and ``git pull``;
- :func:`spawned`: a command's time from spawn to exit, its output read through a pipe:
  ``cat`` of a session's chunk files, ``grep -E`` of the secret scan's words;
- :class:`SqliteStore`: SQLite in WAL mode with ``synchronous=FULL``, one transaction
  per write, each record type in its own table (memory, one row per message, one row
  per event): the database a memory store would otherwise be built on;
- :class:`NuiDataJson`: nui's built-in storage, every session in one ``data.json``
  (2-space indented) rewritten whole on each write, through a temp file and a rename;
- :class:`JsonFileThreadStore`: the seed's kaboo thread store, every thread in one
  JSON file rewritten whole on each append.

They are implemented here in Python, as gitmem is, and are used through the same
calls as gitmem's stores:

    db = SqliteStore(Path("/tmp/bench.sqlite"))
    db.write_session("s1", messages)      # inserts the messages it does not hold yet
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

# The raw floor is a pygit2 commit with nothing of gitmem around it, so this module is
# the one outside the git engine that imports pygit2: as a baseline, never to store data.
import pygit2

from gitmem.bench.workloads import GIT_ENV, MEMORY_PATH, git, memory_content

SQLITE = "SQLite"  # in WAL mode with synchronous=FULL, one transaction per write
# The words of the secret scan's patterns (gitmem.sync.secrets), as grep -i -E takes them.
GREP_SECRETS = ("PRIVATE KEY|A[KS]IA|gh[pousr]_|github_pat_|sk-|token|secret|passw(or)?d|pwd|api.?key|"
                "access.?key|credential")


def pygit2_versions() -> dict[str, str]:
    """The pygit2 and libgit2 the floor (and gitmem's engine) run on."""
    return {"pygit2": pygit2.__version__, "libgit2": pygit2.LIBGIT2_VERSION}


# -- the raw floor: pygit2 alone ------------------------------------------------------


class FloorWrite:
    """The raw floor: blob, trees and commit built in memory by pygit2, ref moved; nothing else.

    It writes ``record`` (by default the store's own file): in a repository the store
    writes too, give it a file of its own, as deep as the store's.
    """

    def __init__(self, path: Path, record: str = MEMORY_PATH):
        self.repo = pygit2.Repository(str(path))
        self.signature = pygit2.Signature("bench", "bench@localhost")
        self.record = record

    def __call__(self, i: int) -> None:
        parent = self.repo.head.peel(pygit2.Commit)
        blob = self.repo.create_blob(memory_content(i))
        tree = self._tree_with(parent.tree, self.record.split("/"), blob)
        self.repo.create_commit("refs/heads/main", self.signature, self.signature,
                                "memory: replace agent bench\n", tree, [parent.id])

    def _tree_with(self, tree: pygit2.Tree, parts: list[str], blob: pygit2.Oid) -> pygit2.Oid:
        builder = self.repo.TreeBuilder(tree)
        name = parts[0]
        if len(parts) == 1:
            builder.insert(name, blob, pygit2.enums.FileMode.BLOB)
        else:
            builder.insert(name, self._tree_with(cast(pygit2.Tree, self.repo[tree[name].id]), parts[1:], blob),
                           pygit2.enums.FileMode.TREE)
        return builder.write()


class FloorAndFileWrite(FloorWrite):
    """The raw floor plus the work-tree file (temp file + rename): what the store adds by design."""

    def __init__(self, path: Path, record: str = MEMORY_PATH):
        super().__init__(path, record)
        self.file = path / record
        self.tmp = path / ".git" / "bench.tmp"

    def __call__(self, i: int) -> None:
        super().__call__(i)
        self.tmp.write_bytes(memory_content(i))
        os.replace(self.tmp, self.file)


class FloorAndIndexWrite(FloorWrite):
    """The raw floor plus the index entry of the file (one index write): the cost of keeping
    the index in step with every commit, which the store pays so that a plain ``git
    commit`` after a crash never undoes a write."""

    def __call__(self, i: int) -> None:
        super().__call__(i)
        index = self.repo.index
        index.read(force=False)
        entry = self.repo.head.peel(pygit2.Commit).tree[self.record]
        index.add(pygit2.IndexEntry(self.record, entry.id, entry.filemode))
        index.write()


class FloorFileAndIndexWrite(FloorAndIndexWrite, FloorAndFileWrite):
    """The raw floor plus the work-tree file and its index entry: everything a store write
    must do (the file a person edits, the commit, the index kept in step), nothing else."""


# -- the git CLI ------------------------------------------------------------------------


class GitCliWrite:
    """Write the file, then ``git commit -a`` in a subprocess: what most git-memory tools do."""

    def __init__(self, path: Path):
        self.path = path
        self.file = path / MEMORY_PATH

    def __call__(self, i: int) -> None:
        self.write_file(i)
        subprocess.run(["git", "-C", str(self.path), "commit", "-a", "-q", "--no-verify",
                        "-m", "memory: replace agent bench"], env=GIT_ENV, check=True)

    def write_file(self, i: int) -> None:
        self.file.write_bytes(memory_content(i))


class GitCliAppend(GitCliWrite):
    """Append a block to the file, then ``git commit -a`` in a subprocess."""

    def write_file(self, i: int) -> None:
        with self.file.open("a") as file:
            file.write(f"\n- learned fact {i}\n")


def plain_git_sync(root: Path) -> tuple[float, int]:
    """Seconds for ``root/a`` and ``root/b`` (clones of one remote) to sync with plain git:
    A pushes, B pulls (merge) and pushes, A pulls; and the number of files it left in conflict."""
    start = time.perf_counter()
    git(root / "a", "push", "--quiet", "origin", "main")
    pulled = git(root / "b", "pull", "--quiet", "--no-rebase", "origin", "main", check=False)
    if pulled.returncode != 0:
        conflicts = git(root / "b", "diff", "--name-only", "--diff-filter=U").stdout.split()
        return time.perf_counter() - start, len(conflicts)
    git(root / "b", "push", "--quiet", "origin", "main")
    git(root / "a", "pull", "--quiet", "--no-rebase", "origin", "main")
    return time.perf_counter() - start, 0


# -- stores built on something else -----------------------------------------------------


def spawned(command: Sequence[str], env: dict[str, str] | None = None) -> float:
    """Seconds from spawning ``command`` to its exit, its output read whole through a pipe
    (exit status 0 or 1, grep's "nothing found", else RuntimeError)."""
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env or GIT_ENV, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1) or not done.stdout:
        raise RuntimeError(f"{command[0]}: exit {done.returncode}, "
                           f"{done.stderr.decode(errors='replace').strip()[-300:]}")
    return elapsed


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
