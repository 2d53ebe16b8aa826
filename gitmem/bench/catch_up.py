"""``gitmem bench`` scenarios for issue 25's history at git's speed: a repository that
gitmem did not build (a fast-import, a fresh clone), its first history command against
``git log --raw main``, a record's history and blame against git's, the floor of
``gitmem log -n 1`` as the repository grows, a write's tail through ``gitmem serve``, and
``log`` and ``blame`` of a big memory against git's of its file.

The repositories are made by ``git fast-import`` (:func:`build_imported`): every commit
changes one session of many (a new one, or one more message), every tenth one appends a
block to one agent's memory (the record with its own long history).

    gitmem bench --only catch_up
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import GIT_ENV, GITMEM, ServeProcess, command, fast_import

RECORD = "agent:target"
RECORD_PATH = "memory/agents/target.md"
SESSION_TYPE = "cc"
START = 1_700_000_000  # the first commit's time; one commit a minute after it
OWN_EVERY = 10  # every tenth commit appends to RECORD
BIG_RECORD, BIG_PATH = "agent:big", "memory/agents/big.md"
REPLACE_EVERY = 10  # every tenth version of the big memory rewrites it, the others append
FLOOR_RECORD = f"session:{SESSION_TYPE}/s0"  # a few versions, whatever the size (commits 0, sessions, 2 * sessions...)


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
    fast_import(path, stream)
    return path


def build_big_memory(path: Path, size: int, versions: int, *, replace_every: int = REPLACE_EVERY) -> Path:
    """A repository holding one memory (:data:`BIG_PATH`) that grows to about ``size``
    bytes in ``versions`` commits made by ``git fast-import``: appends of blocks of twenty
    lines (every seventh one a ``---`` rule, the same text each time), and every
    ``replace_every``-th version a replace as an agent rewrites its memory (a block edited,
    one deleted, one added)."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    per_append = size // versions

    def stream():
        found: list[str] = []
        made = 0
        for version in range(versions):
            if version % replace_every == replace_every - 1 and len(found) > 4:
                middle = len(found) // 2
                found[middle] += " (edited)"
                del found[middle // 2]
                found.insert(middle + 3, f"a rewritten block {version}")
                op = "memory.replace"
            else:
                added = 0
                while added < per_append:
                    found.append("\n".join(f"- note {made}.{line}: the reviewer prefers small, focused "
                                           "changes with tests" for line in range(20)) if made % 7 else "---")
                    added += len(found[-1]) + 2
                    made += 1
                op = "memory.append"
            data = ("\n\n".join(found) + "\n").encode()
            message = f"memory: {op}\n\nGitmem-Op: {op}\nGitmem-Id: {BIG_RECORD}\n".encode()
            yield (b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\ndata %d\n%s"
                   % (START + 60 * version, len(message), message))
            yield b"M 100644 inline %s\ndata %d\n%s\n" % (BIG_PATH.encode(), len(data), data)

    fast_import(path, stream())
    return path


class ColdHistory:
    """``gitmem log RECORD -n 1`` with no record index (removed before each run, untimed)."""

    def __init__(self, path: Path):
        self.path = path

    def prepare(self, i: int) -> None:
        (self.path / ".git/gitmem/record-index").unlink(missing_ok=True)

    def __call__(self, i: int) -> None:
        command(*GITMEM, "log", RECORD, "-n", "1", "--repo", str(self.path))(i)


def _first_history(bench: Bench, setting: str, path: Path) -> None:
    """The first history command against ``git log --raw main``, and its peak memory."""
    samples = bench.pick(5, 10)
    rows = bench.measure("catch-up", setting, {
        "first gitmem log RECORD -n 1 (no index yet)": ColdHistory(path),
        "git log --raw main > /dev/null": command("git", "-C", str(path), "log", "--raw", "main"),
    }, samples=samples)
    bench.compare(rows["first gitmem log RECORD -n 1 (no index yet)"],
                  rows["git log --raw main > /dev/null"], 3.0)
    (path / ".git/gitmem/record-index").unlink(missing_ok=True)
    # a child of its own: ru_maxrss of the children is the largest one so far
    probe = [sys.executable, "-c", "import subprocess, sys, resource; subprocess.run(sys.argv[1:], "
             "check=True, stdout=subprocess.DEVNULL); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
             *GITMEM, "log", RECORD, "-n", "1", "--repo", str(path)]
    peak = int(subprocess.run(probe, check=True, capture_output=True, text=True, env=GIT_ENV).stdout) / 1024
    bench.add(Row("catch-up", setting, "first history command: peak resident memory", value=peak,
                  unit="MB", target=200))


def catch_up_imported(bench: Bench) -> None:
    """A fast-imported repository: the first history command, then a record with its own
    long history (warm log and blame against git's)."""
    commits, sessions = bench.pick((2_000, 400), (20_000, 4_000))
    setting = f"fast-import, {commits:,} commits, {sessions:,} sessions"
    path = build_imported(bench.workdir / "catch-up-imported", commits, sessions)
    _first_history(bench, setting, path)
    own = commits // OWN_EVERY
    rows = bench.measure("catch-up", f"{setting}, record of {own:,} own commits", {
        "gitmem log RECORD": command(*GITMEM, "log", RECORD, "--repo", str(path)),
        "git log --numstat -- PATH": command("git", "-C", str(path), "log", "--numstat", "--", RECORD_PATH),
        "gitmem blame RECORD": command(*GITMEM, "blame", RECORD, "--repo", str(path)),
        "git blame PATH": command("git", "-C", str(path), "blame", "--", RECORD_PATH),
    }, samples=bench.pick(5, 10))
    bench.compare(rows["gitmem log RECORD"], rows["git log --numstat -- PATH"], 2.0)
    bench.compare(rows["gitmem blame RECORD"], rows["git blame PATH"], 2.0)


def catch_up_clone(bench: Bench) -> None:
    """A fresh ``gitmem clone`` of a repository built through the API (memory appends and
    session messages): the clone's first history command, and the catching up itself."""
    from gitmem.repository import Gitmem
    writes = bench.pick(500, 5_000)
    source = bench.workdir / "catch-up-api"
    with Gitmem.open(source) as mem:
        for i in range(writes):
            if i % OWN_EVERY == 0:
                mem.memory.write(f"- fact {i}", agent_id="target", mode="append")
            else:
                mem.sessions.append(SESSION_TYPE, f"s{i % 400}",
                                    [{"id": f"m{i}", "role": "user", "content": f"step {i}"}])
    remote = bench.workdir / "catch-up-api.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(source), str(remote)], check=True, env=GIT_ENV)
    clone = bench.workdir / "catch-up-clone"
    started = time.perf_counter()
    subprocess.run([*GITMEM, "clone", str(remote), str(clone)], check=True, stdout=subprocess.DEVNULL,
                   env=GIT_ENV)
    setting = f"gitmem clone of {writes:,} API writes"
    bench.add(Row("catch-up", setting, "gitmem clone (the index built)",
                  value=(time.perf_counter() - started) * 1000))
    rows = bench.measure("catch-up", setting, {
        "first gitmem log RECORD -n 1 after the clone": command(*GITMEM, "log", RECORD, "-n", "1",
                                                                 "--repo", str(clone)),
        "git log --raw main > /dev/null": command("git", "-C", str(clone), "log", "--raw", "main"),
    }, samples=bench.pick(5, 10))
    bench.compare(rows["first gitmem log RECORD -n 1 after the clone"],
                  rows["git log --raw main > /dev/null"], 3.0)
    _first_history(bench, setting, clone)


def catch_up_floor(bench: Bench) -> None:
    """``gitmem log -n 1`` of a session (a handful of versions at either size; index warm)
    at 1,000 and 50,000 commits, measured in the same turns; then a memory append's tail
    through ``gitmem serve`` at the larger size."""
    sizes = bench.pick((1_000, 5_000), (1_000, 50_000))
    commands = {}
    for commits in sizes:
        path = build_imported(bench.workdir / f"catch-up-floor-{commits}", commits, min(4_000, commits // 5))
        argv = [*GITMEM, "log", FLOOR_RECORD, "-n", "1", "--repo", str(path)]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=GIT_ENV)  # the index built, untimed
        commands[f"gitmem log -n 1 SESSION, {commits:,} commits"] = command(*argv)
    rows = bench.measure("catch-up", f"{sizes[1]:,} and {sizes[0]:,} commits", commands,
                         samples=bench.pick(5, 20))
    small, large = (rows[f"gitmem log -n 1 SESSION, {size:,} commits"] for size in sizes)
    bench.compare(large, small, 1.2, what=f"gitmem log -n 1 SESSION, {sizes[1]:,} / {sizes[0]:,} commits")
    path = bench.workdir / f"catch-up-floor-{sizes[1]}"
    server = ServeProcess(path, options=["--no-watch"])
    try:
        server.call("storage.info")
        time.sleep(1.0)  # past serve's start-up work
        times = []
        for i in range(bench.pick(50, 400)):
            line = server.encode("storage.agentMemory.write",
                                 {"agentId": "tail", "content": f"- fact {i}", "handlerId": "bench",
                                  "writeMode": "append"})
            started = time.perf_counter()
            server.send(line)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        server.close()
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    bench.add(Row("catch-up", f"{sizes[1]:,} commits", "memory append through serve", samples=times))
    bench.add(Row("catch-up", f"{sizes[1]:,} commits", "memory append through serve: p99 / median",
                  ratio=p99 / statistics.median(times), target=3.0))


def catch_up_big_memory(bench: Bench) -> None:
    """``gitmem log`` and ``blame`` of a memory of about 50 MB and a few hundred versions
    (fast-imported) against ``git log --numstat`` and ``git blame`` of its file. Each run
    reads and diffs every version (git's own runs take a minute or two at the full size),
    so the four take turns, one run each (three turns with ``--quick``), after one untimed
    ``gitmem log`` (the record index built)."""
    size, versions = bench.pick((5_000_000, 100), (50_000_000, 200))
    path = build_big_memory(bench.workdir / "catch-up-big-memory", size, versions)
    setting = f"fast-import, a memory of {size / 1e6:g} MB in {versions} versions"
    operations = {
        "gitmem log BIG": command(*GITMEM, "log", BIG_RECORD, "--repo", str(path)),
        "git log --numstat -- BIG_PATH": command("git", "-C", str(path), "log", "--numstat", "--", BIG_PATH),
        "gitmem blame BIG": command(*GITMEM, "blame", BIG_RECORD, "--repo", str(path)),
        "git blame BIG_PATH": command("git", "-C", str(path), "blame", "--", BIG_PATH),
    }
    operations["gitmem log BIG"](0)
    samples: dict[str, list[float]] = {what: [] for what in operations}
    for turn in range(bench.pick(3, 1)):
        for what, operation in operations.items():
            started = time.perf_counter()
            operation(turn)
            samples[what].append((time.perf_counter() - started) * 1000)
    rows = {what: bench.add(Row("catch-up", setting, what, samples=times)) for what, times in samples.items()}
    bench.compare(rows["gitmem log BIG"], rows["git log --numstat -- BIG_PATH"], 2.0)
    bench.compare(rows["gitmem blame BIG"], rows["git blame BIG_PATH"], 2.0)


SCENARIOS = [catch_up_imported, catch_up_clone, catch_up_floor, catch_up_big_memory]
