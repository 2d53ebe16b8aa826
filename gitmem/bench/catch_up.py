"""``gitmem bench`` scenarios for issue 25's history at git's speed: a repository that
gitmem did not build (a fast-import, a fresh clone), its first history command against
``git log --raw main``, a record's history and blame against git's, the floor of
``gitmem log -n 1`` as the repository grows, and a write's tail through ``gitmem serve``.

The repositories are made by ``git fast-import`` (:func:`build_imported`): every commit
changes one session of many (a new one, or one more message), every tenth one appends a
block to one agent's memory (the record with its own long history).

    gitmem bench --only catch_up
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, GITMEM, ServeProcess, copy_repository

RECORD = "agent:target"
RECORD_PATH = "memory/agents/target.md"
SESSION_TYPE = "cc"
START = 1_700_000_000  # the first commit's time; one commit a minute after it
OWN_EVERY = 10  # every tenth commit appends to RECORD


def build_imported(path: Path, commits: int, sessions: int, *, own_every: int = OWN_EVERY) -> Path:
    """A gitmem repository of ``commits`` commits made by ``git fast-import`` and checked
    out: each commit adds a message to one of ``sessions`` sessions (creating it with its
    ``meta.json`` the first time), except every ``own_every``-th one, which appends a
    block to :data:`RECORD`'s memory."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    stream: list[bytes] = []
    lengths = [0] * sessions
    memory = b""

    def inline(name: str, data: bytes) -> None:
        stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))

    for i in range(commits):
        if i % own_every == own_every - 1:
            block = f"- fact {i}: the reviewer prefers small, focused changes".encode()
            memory = memory + b"\n" + block + b"\n" if memory else block + b"\n"
            message = f"memory: append to agent target\n\nGitmem-Op: memory.append\nGitmem-Id: {RECORD}\n"
            files = [(RECORD_PATH, memory)]
        else:
            n = (i * 7919) % sessions
            folder = f"sessions/{SESSION_TYPE}/s{n}"
            lengths[n] += 1
            lines = b"".join(b'{"id":"m%d","role":"user","content":"step %d of task %d"}\n' % (m, m, n)
                             for m in range(lengths[n]))
            files = [(f"{folder}/messages/000000.jsonl", lines)]
            if lengths[n] == 1:
                meta = json.dumps({"agentType": SESSION_TYPE, "sessionId": f"s{n}"}).encode() + b"\n"
                files.append((f"{folder}/meta.json", meta))
            message = f"sessions: append 1 message to {SESSION_TYPE}/s{n}\n\nGitmem-Op: session.append\n"
        data = message.encode()
        stream.append(b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
                      b"data %d\n%s" % (START + 60 * i, len(data), data))
        if i == 0:
            inline("README.md", b"# memory\n")
        for name, content in files:
            inline(name, content)
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet"], input=b"".join(stream),
                   check=True, env=GIT_ENV)
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "-f", "main"], check=True, env=GIT_ENV)
    return path


SCENARIOS: list = []
