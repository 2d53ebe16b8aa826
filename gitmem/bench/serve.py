"""``gitmem bench`` scenarios for ``gitmem serve``: protocol overhead, durability, a large read.

- A memory write and a session write as round trips through a ``gitmem serve``
  subprocess (one request in flight, as nui sends them), against the same write on
  the store in-process: the ratio is the protocol's overhead (target <= 1.2x). Beside
  them, the same write made by a child process that is asked over a pipe without any
  protocol: what a second process costs by itself, so the table also shows the share
  of the JSON-RPC work alone (round trip / child). The same for a session of 2,000
  messages (about 800 KB a request; no target).
- nui's append through ``gitmem serve`` (a read, the text joined with a block, a replace:
  the write that takes the read it was made from) beside a replace alone, blind: what
  matching a write with its read costs (no target: two round trips against one).
- Durability: a memory write through ``gitmem serve --durability fast`` and through
  ``--durability fsync`` (no target: what fsync costs on this disk).
- A read of a 6 MB session (200 messages, two 3 MB screenshots) through ``gitmem serve``,
  whose answer must fit nui's 4 MiB line (one image goes out as its blob reference),
  beside the whole read in-process (no target: a read that blocks nui's request).

    gitmem bench --only serve

The cold start of ``gitmem serve`` is in ``gitmem.bench.cold``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, cast

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import (AGENT, AGENT_TYPE, GIT_ENV, ServeProcess, StoreWrite,
                                    build_repository, copy_repository, memory_content,
                                    nui_message, session_messages)
from gitmem.git.base import DURABILITIES
from gitmem.git.index import INDEX_IDLE
from gitmem.repository import Gitmem

SESSION_SIZE = 200  # messages in the session that each write sends in full, as nui does
LONG_SESSION = 2000  # messages in a long one (about 800 KB a request)
SERVED = "bench-served"  # the server's record, beside the in-process store's in one repository


class ServeWrite:
    """A write as a round trip through ``gitmem serve``; ``request(i)`` gives (method, params).

    The request is encoded before the clock starts: that is nui's work, the same whatever
    the storage; the server's decoding, its answer and the pipe both ways are timed.
    """

    def __init__(self, repo: Path, request: Callable[[int], tuple[str, dict[str, Any]]],
                 options: Sequence[str] = ()):
        self.server = ServeProcess(repo, options=options)
        self.request = request
        self.server.call("storage.info")
        self.line = b""

    def prepare(self, i: int) -> None:
        self.line = self.server.encode(*self.request(i))

    def __call__(self, i: int) -> None:
        self.server.send(self.line)

    def settle(self) -> None:
        """Let the server's background index refresh run before the other operation's turn."""
        time.sleep(INDEX_IDLE + 0.2)

    def close(self) -> None:
        self.server.close()


class ServeAppend(ServeWrite):
    """nui's append as it reaches ``gitmem serve``: a read, then a replace of the text read
    joined with a new block (a write made from a read, taking it)."""

    def __init__(self, repo: Path, record: str):
        self.read = {"agentId": record, "handlerId": "bench"}
        super().__init__(repo, lambda i: ("storage.agentMemory.read", self.read), options=["--no-watch"])

    def __call__(self, i: int) -> None:
        existing = self.server.send(self.line)["content"].strip()
        block = f"- learned fact {i}"
        self.server.call("storage.agentMemory.write", {
            **self.read, "content": f"{existing}\n\n{block}" if existing else block, "writeMode": "replace"})


class StoreSessionWrite(StoreWrite):
    """``SessionStore.write`` in-process of session ``record``: its messages and a new last one."""

    def __init__(self, path: Path, messages: list[dict[str, Any]], record: str = "bench"):
        super().__init__(path, record)
        self.messages = messages

    def __call__(self, i: int) -> None:
        self.mem.sessions.write(AGENT_TYPE, self.record, with_new_message(self.messages, i),
                                "resume", "/home/me")


class ChildWrite:
    """The in-process write made by a child process on the same repository, which the
    bench asks for over a pipe (a number in, an empty line back): what a second process
    costs a round trip (waking it, the pipe both ways, its colder caches) without the
    protocol's decoding, dispatch and encoding. ``kind`` is "memory" or "session" (of
    ``messages`` messages)."""

    def __init__(self, repo: Path, kind: str, messages: int = SESSION_SIZE):
        self.process = subprocess.Popen([sys.executable, "-c", _CHILD, kind, str(repo), str(messages)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=GIT_ENV)
        self.stdin = cast(IO[bytes], self.process.stdin)  # PIPEs: never None
        self.stdout = cast(IO[bytes], self.process.stdout)

    def __call__(self, i: int) -> None:
        self._ask(b"%d\n" % i)

    def settle(self) -> None:
        self._ask(b"settle\n")

    def _ask(self, line: bytes) -> None:
        self.stdin.write(line)
        self.stdin.flush()
        if not self.stdout.readline():
            raise RuntimeError(f"the child writer exited ({self.process.wait()})")

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=60)


CHILD = "bench-child"  # the child writer's record
_CHILD = """
import sys
from pathlib import Path
from gitmem.bench.serve import CHILD, StoreSessionWrite
from gitmem.bench.workloads import StoreWrite, session_messages
kind, repo, messages = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
write = (StoreWrite(repo, CHILD) if kind == "memory"
         else StoreSessionWrite(repo, session_messages(messages), CHILD))
for line in sys.stdin.buffer:
    if line == b"settle\\n":
        write.settle()
    else:
        write(int(line))
    sys.stdout.buffer.write(b"\\n")
    sys.stdout.buffer.flush()
write.close()
"""


def with_new_message(messages: list[dict[str, Any]], i: int) -> list[dict[str, Any]]:
    """The full list nui sends: the session so far and a new message, different for every ``i``."""
    return messages + [nui_message(0, len(messages) + i)]


def memory_request(i: int, agent: str = AGENT) -> tuple[str, dict[str, Any]]:
    """A memory write as nui sends it, different for every ``i``."""
    return "storage.agentMemory.write", {"agentId": agent, "content": memory_content(i).decode(),
                                         "handlerId": "bench", "writeMode": "replace"}


def serve_writes(bench: Bench) -> None:
    """A memory write and a session write through ``gitmem serve`` against the store
    in-process, and a session of 2,000 messages (no target: what a long request costs)."""
    base = build_repository(bench.workdir / "serve-base", 10)
    # (label, repo, what the store does, its writer made of a path, the request, size, target)
    cases: list[tuple[str, str, str, Callable[..., StoreWrite], Callable[[int], tuple[str, dict[str, Any]]],
                      int, float | None]] = [("memory", "10 files", "MemoryStore.write", StoreWrite,
              lambda i: memory_request(i, SERVED), 0, 1.2)]
    for size, repo, target in ((SESSION_SIZE, "10 files", 1.2),
                               (bench.pick(400, LONG_SESSION), "10 files, long session", None)):
        messages = session_messages(size)
        cases.append(("session", repo, "SessionStore.write",
                      lambda path, messages=messages: StoreSessionWrite(path, messages),
                      session_request(messages), size, target))
    for label, repo, store_what, make_store, request, size, target in cases:
        # One repository for all, each writing a record of its own (see memory_write).
        # The server does not watch it: its watcher would react to the store's writes
        # too; what a watcher costs is measured under "hand edits".
        shared = copy_repository(base, bench.workdir / f"serve-{label}-{size}")
        store = make_store(shared)
        child = ChildWrite(shared, label, size)
        served = ServeWrite(shared, request, options=["--no-watch"])
        what = f"{store_what}, {size:,} messages" if size else store_what
        try:
            rows = bench.measure(f"serve {label}", repo, {
                f"store: {what}": store,
                f"child process: {what}, asked over a pipe": child,
                "serve --no-watch: round trip": served,
            })
        finally:
            store.close()
            child.close()
            served.close()
        in_process, in_child, round_trip = rows.values()
        bench.compare(round_trip, in_process, target)
        bench.compare(round_trip, in_child, what="  the protocol's own share: round trip / child process")


class StoreSessionRead:
    """``SessionStore.read_json`` in-process of session ``record``: the whole session."""

    def __init__(self, path: Path, record: str):
        self.mem = Gitmem.open(path, create=False)
        self.record = record

    def __call__(self, i: int) -> None:
        self.mem.sessions.read_json(AGENT_TYPE, self.record)

    def close(self) -> None:
        self.mem.close()


SCREENSHOT = 3_000_000 * 3 // 4  # bytes of a screenshot whose base64 is 3 MB


def serve_session_read(bench: Bench) -> None:
    """A read of a 6 MB session through ``gitmem serve``, answered within 4 MiB, beside the
    whole read in-process, and the size of the answer."""
    repo = build_repository(bench.workdir / "serve-read", 10)
    messages = session_messages(SESSION_SIZE)
    for n in (SESSION_SIZE // 4, SESSION_SIZE // 2):
        messages[n] = nui_message(0, n, image=os.urandom(SCREENSHOT))
    with Gitmem.open(repo, create=False) as mem:
        mem.sessions.write(AGENT_TYPE, SERVED, messages, "resume", "/home/me")
    size = len(json.dumps(messages, separators=(",", ":")))
    params = {"agentType": AGENT_TYPE, "handlerId": "bench", "sessionId": SERVED, "workingDir": "/home/me"}
    store = StoreSessionRead(repo, SERVED)
    served = ServeWrite(repo, lambda i: ("storage.session.read", params), options=["--no-watch"])
    setting = f"{SESSION_SIZE} messages, {size / 1e6:.1f} MB"
    try:
        in_process, round_trip = bench.measure("serve session read", setting, {
            "store: SessionStore.read_json, the whole session": store,
            "serve --no-watch: storage.session.read round trip, within 4 MiB": served,
        }).values()
        served.server.stdin.write(served.server.encode("storage.session.read", params))
        served.server.stdin.flush()
        answer = len(served.server.stdout.readline())
    finally:
        store.close()
        served.close()
    bench.add(Row(round_trip.scenario, setting, "  the answer line", value=answer / 1e6, unit="MB"))
    bench.compare(round_trip, in_process, what="  round trip / whole read in-process")


def session_request(messages: list[dict[str, Any]]) -> Callable[[int], tuple[str, dict[str, Any]]]:
    """A session write as nui sends it: ``messages`` and a new last one, different for every ``i``."""
    def request(i: int) -> tuple[str, dict[str, Any]]:
        return "storage.session.write", {
            "agentSessionId": "resume", "agentType": AGENT_TYPE, "handlerId": "bench",
            "messages": with_new_message(messages, i), "sessionId": SERVED, "workingDir": "/home/me"}
    return request


def serve_durability(bench: Bench) -> None:
    """A memory write through ``gitmem serve`` with each ``--durability``, taking turns, and
    what one fsync costs on this disk (for reference: the difference is a few of them)."""
    base = build_repository(bench.workdir / "durability-base", 10)
    servers = {f"serve --durability {mode}: memory write round trip":
               ServeWrite(copy_repository(base, bench.workdir / f"durability-{mode}"), memory_request,
                          ("--durability", mode)) for mode in DURABILITIES}
    scratch = bench.workdir / "fsync-reference"

    def write_and_fsync(i: int) -> None:
        with scratch.open("wb") as file:
            file.write(memory_content(i))
            file.flush()
            os.fsync(file.fileno())

    try:
        fast, fsync, _ = bench.measure("durability", "10 files", {
            **servers, "write a 2 KB file and fsync it (for reference)": write_and_fsync}).values()
    finally:
        for server in servers.values():
            server.close()
    bench.compare(fsync, fast, what="fsync / fast")


def serve_nui_append(bench: Bench) -> None:
    """nui's append (read, join, replace) through ``gitmem serve`` beside a blind replace."""
    repo = copy_repository(build_repository(bench.workdir / "serve-append-base", 10),
                           bench.workdir / "serve-append")
    replace = ServeWrite(repo, lambda i: memory_request(i, SERVED), options=["--no-watch"])
    append = ServeAppend(repo, "bench-appended")
    try:
        replace_row, append_row = bench.measure("serve nui append", "10 files", {
            "serve --no-watch: replace, blind (one round trip)": replace,
            "serve --no-watch: nui's append, read + replace (two round trips)": append,
        }).values()
    finally:
        replace.close()
        append.close()
    bench.compare(append_row, replace_row, what="nui's append / a blind replace")


SCENARIOS = [serve_durability, serve_writes, serve_nui_append, serve_session_read]
