"""``gitmem bench`` scenario for reads of memory and sessions (issue 2).

:func:`reads`: a 2 KB memory and a session of 1,000 messages, read first after opening
the repository (cold) and again (warm), against the file nui would read and SQLite.
The thread reads are in ``gitmem.bench.threads``.

    gitmem bench --only '^reads$'
"""

from __future__ import annotations

import json

from gitmem.bench.baselines import SQLITE, SqliteStore
from gitmem.bench.core import Bench
from gitmem.bench.workloads import (AGENT, AGENT_TYPE, MEMORY_PATH, ColdRead, build_repository,
                                    memory_content, session_messages)
from gitmem.repository import Gitmem


def reads(bench: Bench) -> None:
    """Reading memory and a session: first read after opening the repository (cold) and
    again (warm), against the file nui would read and SQLite."""
    path = build_repository(bench.workdir / "reads", 10)
    size = bench.pick(100, 1_000)
    messages = session_messages(size)
    db = SqliteStore(bench.workdir / "reads.sqlite")
    db.write_memory(AGENT, memory_content(-1).decode())
    db.write_session("s", messages)
    messages_file = bench.workdir / "messages.json"
    messages_file.write_text(json.dumps(messages, ensure_ascii=False))
    with Gitmem.open(path, create=False) as mem:
        mem.sessions.write(AGENT_TYPE, "s", messages)
        for setting, read, file_what, read_file, read_sqlite in (
                ("memory, 2 KB", lambda m: m.memory.read(AGENT), "file: read the .md (nui's memory)",
                 lambda: (path / MEMORY_PATH).read_text(), lambda: db.read_memory(AGENT)),
                (f"session, {size:,} messages", lambda m: m.sessions.read(AGENT_TYPE, "s"),
                 "file: json.loads of the messages", lambda: json.loads(messages_file.read_bytes()),
                 lambda: db.read_session("s"))):
            cold = ColdRead(path, read)
            try:
                rows = list(bench.measure("read", setting, {  # each called in this turn of the loop only
                    "store: first read after opening": cold,
                    "store: read again (warm)": lambda i: read(mem),  # noqa: B023
                    file_what: lambda i: read_file(),  # noqa: B023
                    f"{SQLITE}: SELECT": lambda i: read_sqlite(),  # noqa: B023
                }).values())
            finally:
                cold.close()
            bench.compare(rows[0], rows[2], what="store, first read / file")
            bench.compare(rows[1], rows[2], what="store, warm / file")
    db.close()


SCENARIOS = [reads]
