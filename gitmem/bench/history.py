"""``gitmem bench`` scenarios for issue 7 (history, import, a repository that stays small).

Single figures, each beside its baseline measured in the same run:

- repository size after N mixed writes with background maintenance, against the
  size of the final content and against ``git gc --aggressive`` of the same history;
- write latency while background packing runs, against the same writes without it
  (packing must never hold a request up by more than a few milliseconds);
- ``.git`` growth of a session holding 20 images of 1 MB written 50 times, images
  stored as blobs against images inline;
- import throughput (sessions per second) on a generated nui data folder of 1,000
  sessions, and the second (no-op) import.

    gitmem bench --only history
"""

from __future__ import annotations

import base64
import random
import shutil
import time
from pathlib import Path
from typing import Any

from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import git, make_nui_data, nui_message
from gitmem.faces.nui.importer import import_nui
from gitmem.repository import Gitmem
from gitmem.stores.jsonl import ChunkedJsonl
from gitmem.stores.sessions import SessionStore
from gitmem.upkeep.maintenance import LOOSE_THRESHOLD, Maintenance

MB = 1_000_000
IDLE = 0.2  # seconds without writes before maintenance checks: the bench waits for it at the end


# -- measurements -------------------------------------------------------------------


def repository_size(root: Path, writes: int) -> dict[str, float]:
    """``.git`` size after ``writes`` mixed writes (background maintenance on), the final
    content size, and ``.git`` after ``git gc --aggressive`` of a copy, in bytes."""
    path = root / "mixed"
    with Gitmem.open(path) as mem:
        maintenance = Maintenance(mem.engine, idle=IDLE)
        _mixed_writes(mem, writes, maintenance, random.Random(1))
        maintenance.wait()
        maintenance.close()
        loose = mem.engine.pack.loose_objects()
        packs = len(maintenance.reports)
    result: dict[str, float] = {"git": _size(path / ".git"), "content": _content_size(path), "loose": loose,
              "packs_run": packs}
    copy = root / "mixed-aggressive"
    shutil.copytree(path, copy, symlinks=True)
    git(copy, "gc", "--aggressive", "--prune=now", "-q")
    result["git_gc_aggressive"] = _size(copy / ".git")
    return result


def write_latency(root: Path, writes: int) -> dict[str, list[float]]:
    """Seconds per write to a repository whose background maintenance packs often
    (threshold 300 loose objects) and to one without maintenance, taking turns so that
    drift hits both alike; plus the cost of each ``maybe_start`` call."""
    found: dict[str, list[float]] = {"with": [], "without": [], "maybe_start": []}
    with Gitmem.open(root / "latency-without") as plain, Gitmem.open(root / "latency-with") as mem:
        maintenance = Maintenance(mem.engine, threshold=300, check_every=16, idle=IDLE)
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


def history_size(bench: Bench) -> None:
    """Repository size after N mixed writes, against the content and ``git gc --aggressive``."""
    writes = bench.pick(60, 10_000)
    size = repository_size(bench.workdir / "history-size", writes)
    setting = f"{writes:,} mixed writes"
    dotgit = bench.add(Row("repository size", setting, ".git, background maintenance on",
                           value=size["git"] / MB, unit="MB"))
    content = bench.add(Row("repository size", setting, "content: the files at HEAD",
                            value=size["content"] / MB, unit="MB"))
    aggressive = bench.add(Row("repository size", setting, ".git after git gc --aggressive",
                               value=size["git_gc_aggressive"] / MB, unit="MB"))
    bench.compare(dotgit, content, what=".git / content")
    bench.compare(dotgit, aggressive, what=".git / .git after git gc --aggressive")
    bench.add(Row("repository size", setting, f"loose objects left ({size['packs_run']} background "
                  f"packs, threshold {LOOSE_THRESHOLD:,})", value=size["loose"], unit="objects"))


def history_packing(bench: Bench) -> None:
    """Writes while background packing runs often, against the same writes without maintenance."""
    latency = write_latency(bench.workdir / "history-packing", bench.pick(60, 1_000))
    setting = f"{len(latency['with']):,} mixed writes"
    packs = latency["packs_run"][0]
    rows = {}
    for label, what in (("with", f"store: write, packing every ~300 objects ({packs} packs)"),
                        ("without", "store: write, no maintenance")):
        rows[label] = bench.add(Row("write while packing", setting, what,
                                    samples=[seconds * 1000 for seconds in latency[label]]))
    bench.compare(rows["with"], rows["without"], what="packing / no maintenance")
    for label, what in (("with", "longest write, packing"), ("without", "longest write, no maintenance")):
        bench.add(Row("write while packing", setting, what, value=max(latency[label]) * 1000))
    bench.add(Row("write while packing", setting, "Maintenance.maybe_start(), longest call",
                  value=max(latency["maybe_start"]) * 1000))


def history_images(bench: Bench) -> None:
    """``.git`` growth and write time of a session holding 1 MB images: blobs against inline."""
    images, writes = bench.pick((2, 3), (20, 50))
    growth = image_growth(bench.workdir / "history-images", images=images, writes=writes)
    setting = f"{images} x 1 MB images, written {writes} times"
    for unit, key, what in (("MB", "", ".git growth"), ("ms", "_seconds_per_write", "session write, mean")):
        scale = 1 / MB if unit == "MB" else 1000
        blobs = bench.add(Row("session images", setting, f"{what}, images as blobs",
                              value=growth[f"blobs{key}"] * scale, unit=unit))
        inline = bench.add(Row("session images", setting, f"{what}, images inline",
                               value=growth[f"inline{key}"] * scale, unit=unit))
        bench.compare(blobs, inline, what=f"{what}, blobs / inline")


def history_import(bench: Bench) -> None:
    """``gitmem import nui`` of a generated data folder, and the second (no-op) import."""
    sessions = bench.pick(20, 1_000)
    throughput = import_throughput(bench.workdir / "history-import", sessions)
    setting = f"{sessions:,} sessions x 10 messages"
    for label, what in (("first", "import nui"), ("second", "import nui again (nothing changed)")):
        bench.add(Row("import", setting, what, value=throughput[label], unit="sessions/s"))


SCENARIOS = [history_size, history_packing, history_images, history_import]


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
        messages.append(nui_message(i, len(messages)))
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
