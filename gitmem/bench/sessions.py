"""``gitmem bench`` scenarios for nui session writes (issues 2 and 3).

- :func:`session_write`: sessions of 10 to 10,000 messages, each extended by one
  message per write, through ``SessionStore.write`` (the whole list, as nui sends it)
  and ``SessionStore.append``, and on SQLite: appending to 5,000 messages costs
  <= 1.5x appending to 10;
- :func:`session_nui`: the same write against nui's built-in storage (the whole
  ``data.json`` rewritten), with 10 to 1,000 sessions;
- :func:`session_read_big`: ``gitmem session read`` of a 100,000-message session
  (about 40 MB) into a pipe, against ``cat`` of its chunk files: at most 3x (issue 25).

    gitmem bench --only session
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitmem.bench.baselines import SQLITE, NuiDataJson, SqliteStore, spawned
from gitmem.bench.cold import bytecode_env
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import (AGENT_TYPE, GITMEM, build_repository, make_nui_data, nui_message,
                                    session_messages)
from gitmem.repository import Gitmem


class SessionExtend:
    """``SessionStore.write`` of a session of ``size`` messages plus a new one, as nui sends it
    (the whole list). Before each write, untimed, the session is cut back to ``size``
    messages, so every write extends it by one message."""

    def __init__(self, mem: Gitmem, session_id: str, size: int):
        self.mem = mem
        self.session_id = session_id
        self.messages = session_messages(size)

    def prepare(self, i: int) -> None:
        self._write(self.messages)

    def __call__(self, i: int) -> None:
        self._write(self.messages + [nui_message(0, len(self.messages) + i)])

    def _write(self, messages: list[dict[str, Any]]) -> None:
        self.mem.sessions.write(AGENT_TYPE, self.session_id, messages, "resume", "/home/me")


class SessionAppend(SessionExtend):
    """``SessionStore.append`` of one new message, which never looks at the earlier ones
    (cut back to ``size`` messages with a write before each, untimed, as above)."""

    def __call__(self, i: int) -> None:
        self.mem.sessions.append(AGENT_TYPE, self.session_id, [nui_message(0, len(self.messages) + i)])


class SqliteSessionExtend:
    """The same on SQLite: the new message inserted in one transaction, cut back before each write."""

    def __init__(self, db: SqliteStore, session_id: str, size: int):
        self.db = db
        self.session_id = session_id
        self.messages = session_messages(size)
        db.write_session(session_id, self.messages)

    def prepare(self, i: int) -> None:
        self.db.truncate_session(self.session_id, len(self.messages))

    def __call__(self, i: int) -> None:
        self.db.write_session(self.session_id, self.messages + [nui_message(0, len(self.messages) + i)])


def session_write(bench: Bench) -> None:
    """Extending a session by one message costs about the same whatever its length.

    Sessions of 10 to 10,000 messages in one repository, each extended by one message
    per write through the store (the whole list, as nui sends it, and an append), and
    the same on SQLite. The target is on the append; a whole-list write compares every
    message with the stored one, so it grows with the session.
    """
    sizes = bench.pick((10, 5_000), (10, 1_000, 5_000, 10_000))
    db = SqliteStore(bench.workdir / "sessions.sqlite")
    with Gitmem.open(build_repository(bench.workdir / "sessions", 10), create=False) as mem:
        operations: dict[str, Callable[[int], None]] = {}
        for size in sizes:
            operations[f"store: +1 message to {size:,}"] = SessionExtend(mem, f"session-{size}", size)
            operations[f"store: append 1 message to {size:,}"] = SessionAppend(mem, f"append-{size}", size)
            operations[f"{SQLITE}: +1 message to {size:,}"] = SqliteSessionExtend(db, f"session-{size}", size)
        rows = bench.measure("session write", "10 files", operations)
    db.close()
    for what, target in (("store: +1 message to", None), ("store: append 1 message to", 1.5)):
        for size in sizes[1:]:
            bench.compare(rows[f"{what} {size:,}"], rows[f"{what} {sizes[0]:,}"],
                          target if size == 5_000 else None)
    for size in sizes:
        bench.compare(rows[f"store: +1 message to {size:,}"], rows[f"{SQLITE}: +1 message to {size:,}"],
                      what=f"store / SQLite, +1 message to {size:,}")


def session_nui(bench: Bench) -> None:
    """A session write through the store against nui's built-in storage (the whole
    ``data.json`` rewritten per write), with 10, 100 and 1,000 sessions of 10 messages.

    The store's repository holds the same sessions; both extend the first one by a message.
    """
    folder = bench.workdir / "nui"
    with Gitmem.open(bench.workdir / "nui-sessions") as mem:
        held = 0
        for sessions in bench.pick((10, 50), (10, 100, 1_000)):
            data = make_nui_data(folder, sessions=sessions, messages=10, image_every=0)
            for session in data["sessions"][held:]:  # the same sessions as before, and more
                session_id = session["id"]
                mem.sessions.write(session["agentType"], session_id, data["sessionMessages"][session_id],
                                   data["agentSessions"][session_id], session["workingDir"])
            held = sessions
            nui = NuiDataJson(folder, data)
            first = data["sessions"][0]
            messages = data["sessionMessages"][first["id"]]

            def extended(i: int) -> list[dict[str, Any]]:  # called in this turn of the loop only
                return messages + [nui_message(0, len(messages) + i)]  # noqa: B023

            setting = f"{sessions:,} sessions x 10 messages, data.json {nui.file.stat().st_size / 1e6:.1f} MB"
            store, nui_row = bench.measure("session vs nui", setting, {  # called in this turn only
                "store: +1 message": lambda i: mem.sessions.write(
                    first["agentType"], first["id"], extended(i), "resume-0", first["workingDir"]),  # noqa: B023
                "nui: data.json rewritten (indent 2, temp + rename)":
                    lambda i: nui.write_session(first["id"], extended(i), "resume-0"),  # noqa: B023
            }, samples=min(bench.samples, 40) if sessions >= 1_000 else None).values()
            bench.compare(store, nui_row, what="store / nui")


def session_read_big(bench: Bench) -> None:
    """``gitmem session read`` of one session of 100,000 messages (10,000 with --quick), its
    output read through a pipe, against ``cat`` of the session's chunk files in the work
    tree; one process each, taking turns (Python's bytecode cached, as after an install)."""
    count = bench.pick(10_000, 100_000)
    repo = bench.workdir / "session-read"
    with Gitmem.open(repo) as mem:
        mem.sessions.write(AGENT_TYPE, "long", session_messages(count), "resume", "/home/me")
        chunks = sorted(mem.engine.worktree.path(f"{mem.sessions.folder(AGENT_TYPE, 'long')}/messages")
                        .glob("*.jsonl"))
    env = bytecode_env(bench)
    size = sum(chunk.stat().st_size for chunk in chunks)
    setting = f"{count:,} messages, {size / 1e6:.0f} MB in {len(chunks)} chunks"
    commands = {"gitmem session read > pipe": [*GITMEM, "session", "read", "--repo", str(repo),
                                              AGENT_TYPE, "long"],
                "cat CHUNKS > pipe": ["cat", *map(str, chunks)]}
    rows = {what: Row("session read", setting, what) for what in commands}
    for command in commands.values():
        spawned(command, env)  # bytecode written, files in the page cache
    for run in range(bench.pick(3, 11)):
        for what, command in (list(commands.items())[::-1] if run % 2 else commands.items()):
            rows[what].samples.append(spawned(command, env) * 1000)
    bench.rows.extend(rows.values())
    gitmem_row, cat_row = rows.values()
    bench.compare(gitmem_row, cat_row, 3.0, what="session read / cat")


SCENARIOS = [session_write, session_nui, session_read_big]
