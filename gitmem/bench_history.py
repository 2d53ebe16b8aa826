"""Measurements for issue 7 (history, import, a repository that stays small), for ``gitmem bench``.

``suite(root)`` returns one dict per measurement, ``{name, value, unit}`` plus, where
there is one, ``{baseline, baseline_value}`` measured in the same run:

- repository size after N mixed writes with background maintenance, against the
  size of the final content and against ``git gc --aggressive`` of the same history;
- write latency while background packing runs, against the same writes without it
  (packing must never hold a request up by more than a few milliseconds);
- ``.git`` growth of a session holding 20 images of 1 MB written 100 times, images
  stored as blobs against images inline;
- import throughput (sessions per second) on a generated nui data folder of 1,000
  sessions, and the second (no-op) import.

    python -m gitmem.bench_history --quick
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gitmem.maintenance import LOOSE_THRESHOLD, Maintenance
from gitmem.nui_import import import_nui
from gitmem.repository import Gitmem
from gitmem.stores.jsonl import ChunkedJsonl
from gitmem.stores.sessions import SessionStore

MB = 1_000_000


# -- a realistic nui data folder ------------------------------------------------------


def make_nui_data(folder: Path, *, sessions: int = 6, messages: int = 8, image_every: int = 3,
                  image_bytes: int = 30_000, seed: int = 0) -> dict[str, Any]:
    """Write a nui data folder as nui's built-in storage keeps it; returns its data.json.

    Sessions of ``claude-code``, ``codex`` and ``ext:corp/reviewer`` alternate; assistant
    turns carry text and tool parts; every ``image_every``-th session has a user turn
    with an image; every third one has a sub-agent resume id. User memory and agent
    memory of ``claude-code`` and ``ext:corp/reviewer`` (as ``ext-corp-reviewer.md``).
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
            _message(rng, n, i, image_bytes if image_every and n % image_every == 0 and i == 2 else 0)
            for i in range(messages)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    agents = folder / "memory" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (folder / "memory" / "user.md").write_text("Prefers short answers.\n\nWorks in Go and Python.\n")
    (agents / "claude-code.md").write_text("Run the tests with `make test`.\n")
    (agents / "ext-corp-reviewer.md").write_text("Review for naming first, then tests.\n")
    return data


def _message(rng: random.Random, session: int, i: int, image_bytes: int) -> dict[str, Any]:
    stamp = f"2026-10-{1 + session % 28:02d}T10:{i % 60:02d}:00.000Z"
    if i % 2 == 0:
        message: dict[str, Any] = {"id": f"u{session}-{i}", "role": "user",
                                   "content": f"please look at step {i} of task {session}",
                                   "createdAt": stamp}
        if image_bytes:
            message["images"] = [{"id": f"img{session}-{i}", "mediaType": "image/png",
                                  "data": base64.b64encode(rng.randbytes(image_bytes)).decode()}]
        return message
    return {"id": f"a{session}-{i}", "role": "assistant", "content": f"Done with step {i}. " * 8,
            "createdAt": stamp,
            "parts": [{"type": "text", "id": f"p{session}-{i}a", "content": "Let me check."},
                      {"type": "tool", "id": f"p{session}-{i}b", "content": "",
                       "toolCallId": f"call_{session}_{i}", "toolName": "bash",
                       "toolArgs": {"command": f"grep -rn step{i} src/"},
                       "toolResult": f"src/a.py:{i}: step{i}()\n" * 5,
                       "subagentTrace": [{"role": "assistant", "content": "searching"}]}]}


# -- measurements -------------------------------------------------------------------


def repository_size(root: Path, writes: int) -> dict[str, float]:
    """``.git`` size after ``writes`` mixed writes (background maintenance on), the final
    content size, and ``.git`` after ``git gc --aggressive`` of a copy, in bytes."""
    path = root / "mixed"
    with Gitmem.open(path) as mem:
        maintenance = Maintenance(mem.engine)
        _mixed_writes(mem, writes, maintenance, random.Random(1))
        maintenance.wait()
        maintenance.close()
        loose = mem.engine.loose_objects()
        packs = len(maintenance.reports)
    result = {"git": _size(path / ".git"), "content": _content_size(path), "loose": loose,
              "packs_run": packs}
    copy = root / "mixed-aggressive"
    shutil.copytree(path, copy, symlinks=True)
    subprocess.run(["git", "-C", str(copy), "gc", "--aggressive", "--prune=now", "-q"], check=True)
    result["git_gc_aggressive"] = _size(copy / ".git")
    return result


def write_latency(root: Path, writes: int) -> dict[str, list[float]]:
    """Seconds per write to a repository whose background maintenance packs often
    (threshold 300 loose objects) and to one without maintenance, taking turns so that
    drift hits both alike; plus the cost of each ``maybe_start`` call."""
    found: dict[str, list[float]] = {"with": [], "without": [], "maybe_start": []}
    with Gitmem.open(root / "latency-without") as plain, Gitmem.open(root / "latency-with") as mem:
        maintenance = Maintenance(mem.engine, threshold=300, check_every=16)
        rngs = {"without": random.Random(2), "with": random.Random(2)}
        for i in range(writes):
            for label, target in (("without", plain), ("with", mem)):
                started = time.perf_counter()
                _one_mixed_write(target, i, rngs[label])
                found[label].append(time.perf_counter() - started)
            started = time.perf_counter()
            maintenance.maybe_start()
            found["maybe_start"].append(time.perf_counter() - started)
        maintenance.wait()
        maintenance.close()
        found["packs_run"] = [len(maintenance.reports)]
    return found


def image_growth(root: Path, *, images: int = 20, image_size: int = 1 << 20,
                 writes: int = 100) -> dict[str, float]:
    """``.git`` growth in bytes for a session holding ``images`` images, then written
    ``writes`` times with one message more each time: blobs, and images inline."""

    class InlineSessions(SessionStore):
        def _log(self, agent_type: str, session_id: str) -> ChunkedJsonl:
            return ChunkedJsonl(f"{self.folder(agent_type, session_id)}/messages")

    rng = random.Random(3)
    pictures = [rng.randbytes(image_size) for _ in range(images)]
    growth = {}
    for label, store in (("blobs", SessionStore), ("inline", InlineSessions)):
        with Gitmem.open(root / f"images-{label}") as mem:
            sessions = store(mem.engine)
            before = _size(mem.engine.gitdir)
            messages: list[dict[str, Any]] = [
                {"id": f"m{i}", "role": "user", "content": "look",
                 "images": [{"id": f"i{i}", "mediaType": "image/png",
                             "data": base64.b64encode(data).decode()}]}
                for i, data in enumerate(pictures)]
            started = time.perf_counter()
            for i in range(writes):
                messages.append({"id": f"t{i}", "role": "assistant", "content": f"answer {i}"})
                sessions.write("claude-code", "images", messages)
            growth[f"{label}_seconds_per_write"] = (time.perf_counter() - started) / writes
            growth[label] = _size(mem.engine.gitdir) - before
    return growth


def import_throughput(root: Path, sessions: int) -> dict[str, float]:
    """Sessions per second of ``gitmem import nui`` on a generated folder, first and second run."""
    folder = root / "nui-data"
    make_nui_data(folder, sessions=sessions, messages=10, image_every=20)
    result = {}
    with Gitmem.open(root / "imported") as mem:
        for label in ("first", "second"):
            started = time.perf_counter()
            plan = import_nui(mem, folder)
            result[label] = sessions / (time.perf_counter() - started)
            result[f"{label}_changes"] = len(plan.changes)
    return result


def suite(root: Path, *, quick: bool = False) -> list[dict[str, Any]]:
    """Every measurement of this module (see the module doc)."""
    root.mkdir(parents=True, exist_ok=True)
    writes, latency_writes, sessions = (1_000, 600, 100) if quick else (10_000, 2_000, 1_000)
    images = (5, 20) if quick else (20, 100)
    size = repository_size(root, writes)
    latency = write_latency(root, latency_writes)
    growth = image_growth(root, images=images[0], writes=images[1])
    throughput = import_throughput(root, sessions)
    ms = [{"name": f"history: .git after {writes:,} mixed writes, background maintenance",
           "value": size["git"] / MB, "unit": "MB", "baseline": "final content (files at HEAD)",
           "baseline_value": size["content"] / MB},
          {"name": f"history: .git after {writes:,} mixed writes, then git gc --aggressive",
           "value": size["git_gc_aggressive"] / MB, "unit": "MB"},
          {"name": f"history: loose objects left after {writes:,} writes (threshold "
                   f"{LOOSE_THRESHOLD:,})", "value": size["loose"],
           "unit": "objects", "baseline": "background packs run", "baseline_value": size["packs_run"]}]
    for stat, pick in (("median", statistics.median), ("p99", _p99), ("max", max)):
        ms.append({"name": f"history: write {stat}, background packing every ~300 objects "
                           f"({latency['packs_run'][0]} packs)",
                   "value": pick(latency["with"]) * 1000, "unit": "ms",
                   "baseline": "no maintenance", "baseline_value": pick(latency["without"]) * 1000})
    ms.append({"name": "history: Maintenance.maybe_start() per write, max", "unit": "ms",
               "value": max(latency["maybe_start"]) * 1000})
    ms.append({"name": f"history: .git growth, session of {images[0]} x 1 MB images written "
                       f"{images[1]} times", "value": growth["blobs"] / MB, "unit": "MB",
               "baseline": "images inline", "baseline_value": growth["inline"] / MB})
    ms.append({"name": "history: session write with those images", "unit": "ms",
               "value": growth["blobs_seconds_per_write"] * 1000, "baseline": "images inline",
               "baseline_value": growth["inline_seconds_per_write"] * 1000})
    ms.append({"name": f"history: import nui, {sessions:,} sessions", "unit": "sessions/s",
               "value": throughput["first"], "baseline": "second import (no change)",
               "baseline_value": throughput["second"]})
    return ms


# -- helpers ------------------------------------------------------------------------


def _mixed_writes(mem: Gitmem, count: int, maintenance: Maintenance | None, rng: random.Random) -> None:
    for i in range(count):
        _one_mixed_write(mem, i, rng)
        if maintenance is not None:
            maintenance.maybe_start()


def _one_mixed_write(mem: Gitmem, i: int, rng: random.Random) -> None:
    """Half session writes (nui: the whole list, one message more), a quarter memory
    appends, the rest thread events and memory replaces."""
    roll = rng.random()
    if roll < 0.5:
        session = f"s{rng.randrange(20)}"
        messages, _ = mem.sessions.read("claude-code", session)
        messages.append(_message(rng, i, len(messages), 0))
        mem.sessions.write("claude-code", session, messages, f"resume-{session}", "/home/me/p")
    elif roll < 0.75:
        mem.memory.write(f"- learned fact {i}", agent_id=f"agent-{rng.randrange(5)}", mode="append")
    elif roll < 0.9:
        mem.threads.append_events(f"t{rng.randrange(10)}", "planner",
                                  [{"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}",
                                    "delta": f"token {n} " * 5} for n in range(5)])
    else:
        mem.memory.write(f"user notes, version {i}\n" * 20)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _content_size(repo: Path) -> int:
    return sum(p.stat().st_size for p in repo.rglob("*")
               if p.is_file() and ".git" not in p.relative_to(repo).parts)


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def report(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        line = f"{r['name']}: {r['value']:.2f} {r['unit']}"
        if "baseline_value" in r:
            line += f"  ({r['baseline']}: {r['baseline_value']:.2f})"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitmem.bench_history",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gitmem-bench-history-") as scratch:
        results = suite(Path(scratch), quick=args.quick)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
