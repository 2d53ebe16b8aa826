"""Measurements of ``gitmem sync``, for ``gitmem bench`` (issue 6).

Two machines (clones of one bare remote) each make ``commits`` divergent commits
(memory appends, session writes, thread appends); then they sync: A pushes, B
fetches, merges and pushes, A fast-forwards. The baseline is plain git on copies of
the same repositories: ``git push``, ``git pull --no-rebase`` + ``git push``,
``git pull`` (``gitmem.bench.baselines.plain_git_sync``). Two workloads:

- ``disjoint``: each machine writes its own records, so plain git can do it too;
- ``shared``: both write the same user memory, session and thread; plain git stops
  at conflicts (their number is reported), gitmem merges.

Each is timed once (a sync of that size cannot be repeated on the same repositories).
``merge_large_markdown`` times the merge of one large diverged markdown file alone.
``secret_scan`` times sync's scan of 80 MB of new records against ``grep -E`` of the
same words over the same files, the first scan of the process on its own, and again
with everything remembered.
``sync_first_push``: the first sync of 40 MB of sessions to a new bare remote, and its
parts (the fetch, the secret scan, the push with its pack), against ``git push`` of the
same commits plus ``grep -E`` of the scan's words over the same files.
``sync_first_push_prose``: the same for 40 MB of memory whose every line names a key,
a token or a password (every line a candidate for the scan).
``sync_many_machines``: 12 clones append and sync at the same moment through one bare
remote, 10 rounds: every sync lands within its deadline, nothing is lost, one head.

    gitmem bench --only sync
"""

from __future__ import annotations

import multiprocessing
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from gitmem.bench.baselines import GREP_SECRETS, plain_git_sync, spawned
from gitmem.bench.core import Bench, Row
from gitmem.bench.workloads import AGENT_TYPE, git, nui_message, session_messages
from gitmem.records.merge import merge_text
from gitmem.repository import Gitmem
from gitmem.sync.exchange import SYNC_TIMEOUT, SyncError, sync
from gitmem.sync.secrets import SCAN_FILE, Scanner


def diverged_machines(root: Path, commits: int, shared: bool) -> Path:
    """``root/{remote.git,a,b}``: two clones of one remote, ``commits`` commits apart each."""
    root.mkdir(parents=True)
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", "remote.git")
    with Gitmem.open(root / "a") as a:
        a.engine.remotes.add("origin", str(root / "remote.git"))
        sync(a)
    git(root, "clone", "--quiet", "remote.git", "b")
    for name in ("a", "b"):
        with Gitmem.open(root / name, create=False) as mem:
            _write(mem, name, commits, shared)
    return root


def _write(mem: Gitmem, who: str, commits: int, shared: bool) -> None:
    """``commits`` writes: a third memory appends, a third session writes, a third thread appends."""
    record = "shared" if shared else who
    messages: list[dict[str, Any]] = []
    for i in range(commits):
        kind = i % 3
        if kind == 0:
            mem.memory.write(f"{who} noted item {i}", agent_id=None if shared else f"agent-{who}",
                             mode="append")
        elif kind == 1:
            messages.append({"id": f"{who}-{i}", "role": "user", "content": f"message {i} from {who}"})
            mem.sessions.write("claude-code", f"session-{record}", messages)
        else:
            mem.threads.append_events(f"thread-{record}", "planner",
                                      [{"type": "CUSTOM", "name": who, "value": i}])


def time_gitmem_sync(root: Path) -> float:
    """Seconds for A sync (push), B sync (fetch, merge, push), A sync (fast-forward)."""
    start = time.perf_counter()
    for name in ("a", "b", "a"):
        with Gitmem.open(root / name, create=False) as mem:
            sync(mem)
    return time.perf_counter() - start


def sync_diverged(bench: Bench) -> None:
    """Both workloads, gitmem against plain git on copies of the same repositories."""
    commits = bench.pick(10, 1_000)
    for workload in ("disjoint", "shared"):
        built = diverged_machines(bench.workdir / f"sync-{workload}-gitmem", commits, workload == "shared")
        copy = shutil.copytree(built, bench.workdir / f"sync-{workload}-git", symlinks=True)
        for name in ("a", "b"):
            git(copy / name, "remote", "set-url", "origin", str(copy / "remote.git"))
        setting = f"{commits:,} divergent commits each, {workload} records"
        gitmem = bench.add(Row("sync", setting, "gitmem sync: A, B, A", value=time_gitmem_sync(built),
                               unit="s"))
        git_seconds, conflicts = plain_git_sync(copy)
        plain = bench.add(Row("sync", setting, "git push; git pull --no-rebase + git push; git pull"
                              + (f" (stopped at {conflicts} conflicting files)" if conflicts else ""),
                              value=git_seconds, unit="s"))
        if not conflicts:
            bench.compare(gitmem, plain, what="gitmem / git")


def merge_large_markdown(bench: Bench) -> None:
    """The merge of one large diverged markdown memory: 4,000 base blocks, 2,000 new blocks
    inserted at random places on each side (issue 16: 10.7 s with a quadratic diff)."""
    rng = random.Random(16)
    base = [f"## base note {i}\nSome text about item {i}.\n" for i in range(bench.pick(400, 4000))]

    def side(tag: str) -> bytes:
        blocks = list(base)
        for i in range(len(base) // 2):
            blocks.insert(rng.randrange(len(blocks) + 1), f"## {tag} note {i}\nNew text {i}.\n")
        return "\n".join(blocks).encode()

    ours, theirs, start = side("ours"), side("theirs"), "\n".join(base).encode()
    what = "merge_text, markdown"
    rows = bench.measure("sync merge", f"{len(base):,} blocks + {len(base) // 2:,} new on each side",
                         {what: lambda _i: merge_text("memory/user.md", start, ours, theirs)},
                         samples=bench.pick(5, 20))
    rows[what].target = 1000.0  # ms: well under a second


def secret_scan(bench: Bench) -> None:
    """Sync's secret scan of the commits not pushed yet: two sessions of 100,000 messages
    written whole and one appended to 300 times (about 80 MB; a tenth with --quick), against
    ``grep -c -i -E`` of the scan's words over the same files in the work tree; then the
    scan again, with every file version remembered from the first. The first scan of the
    process, which reads each blob from the object database (loose objects inflated and
    checked, as a sync in a new process does), is a row of its own; the samples after it
    (and grep's) are taken as :meth:`Bench.measure` takes them, after untimed runs."""
    count = bench.pick(10_000, 100_000)
    repo = bench.workdir / "secret-scan"
    with Gitmem.open(repo) as mem:
        pushed = mem.engine.head()
        messages = session_messages(count)
        for name in ("first", "second"):
            mem.sessions.write(AGENT_TYPE, name, [{**m, "id": f"{name}-{m['id']}"} for m in messages])
        for i in range(300):
            mem.sessions.append(AGENT_TYPE, "appended", [nui_message(1, i)])
        del messages
        head = mem.engine.head()
        assert pushed is not None and head is not None  # made with commits above
        commits = mem.engine.log.new_commits(head, [pushed])
        remembered = mem.engine.private_dir / SCAN_FILE
        files = [str(path) for path in (repo / "sessions").rglob("*.jsonl")]
        grep = ["grep", "-c", "-i", "-E", GREP_SECRETS, *files]

        def first_scan(_i: int = 0) -> int:
            remembered.unlink(missing_ok=True)
            return Scanner(mem.engine).scan(commits).scanned_bytes

        started = time.perf_counter()
        scanned = first_scan()
        cold = (time.perf_counter() - started) * 1000
        setting = f"{len(commits)} commits adding {scanned / 1e6:.0f} MB"
        bench.add(Row("secret scan", setting, "Scanner.scan, the first: blobs read from the object database",
                      value=cold, unit="ms"))
        rows = bench.measure("secret scan", setting, {
            "Scanner.scan of the new commits": first_scan,
            "grep -c -i -E, the same words": lambda _i: spawned(grep),
            "Scanner.scan again (all remembered)": lambda _i: Scanner(mem.engine).scan(commits)},
            samples=bench.pick(5, 10))
    bench.compare(rows["Scanner.scan of the new commits"], rows["grep -c -i -E, the same words"], 2.0,
                  what="scan / grep -E")


class NewRemote:
    """``call(mem, remote)`` against a new, empty bare remote each run (made untimed), the
    secret scan's memory of earlier runs forgotten: a first sync each time."""

    def __init__(self, mem: Gitmem, root: Path, call):
        self.mem, self.root, self.call, self.remote = mem, root, call, ""

    def prepare(self, i: int) -> None:
        if self.remote:  # the last run's: 40 MB a remote
            self.mem.engine.remotes.remove(self.remote)
            shutil.rmtree(self.root / f"{self.remote}.git")
        path = self.root / f"bench-{i}.git"
        git(self.root, "init", "-q", "--bare", "--initial-branch=main", str(path))
        self.remote = f"bench-{i}"
        self.mem.engine.remotes.add(self.remote, str(path))
        (self.mem.engine.private_dir / SCAN_FILE).unlink(missing_ok=True)

    def __call__(self, i: int) -> None:
        self.call(self.mem, self.remote)


def _scan(mem: Gitmem, remote: str) -> None:
    head = mem.engine.head()
    assert head is not None  # the bench's repository has commits
    Scanner(mem.engine).scan(mem.engine.log.new_commits(head, []))


def _push(mem: Gitmem, remote: str) -> None:
    head = mem.engine.head()
    assert head is not None  # the bench's repository has commits
    if not mem.engine.remotes.push(remote, head, interactive=False):
        raise RuntimeError(f"the push to {remote} was refused")


def _git_push(mem: Gitmem, remote: str) -> None:
    git(mem.engine.workdir, "push", "-q", remote, "main")


def sync_first_push(bench: Bench) -> None:
    """The first ``gitmem sync`` of about 40 MB of sessions (4 MB with --quick) to a new
    bare remote, its parts, and the floor: ``git push`` of the same commits plus ``grep -E``
    of the secret scan's words over the same files (issue 39: at most 3x)."""
    count = bench.pick(5_000, 50_000)
    root = bench.workdir / "first-push"
    root.mkdir()
    with Gitmem.open(root / "repo") as mem:
        messages = session_messages(count)
        for name in ("first", "second"):
            mem.sessions.write(AGENT_TYPE, name, [{**m, "id": f"{name}-{m['id']}"} for m in messages])
        del messages
        files = [str(path) for path in (root / "repo" / "sessions").rglob("*.jsonl")]
        size = sum(Path(f).stat().st_size for f in files)
        setting = f"{size / 1e6:.0f} MB of sessions, a new bare remote"
        _first_sync(bench, mem, root, setting, files, {
            "part: fetch from the empty remote": NewRemote(mem, root, lambda m, remote: m.engine.remotes.fetch(remote)),
            "part: secret scan of every commit": NewRemote(mem, root, _scan),
            "part: push (git packs and sends)": NewRemote(mem, root, _push)})


def _first_sync(bench: Bench, mem: Gitmem, root: Path, setting: str, files: list[str],
                parts: dict[str, NewRemote]) -> dict[str, Row]:
    """The first sync of ``mem`` to a new bare remote, its ``parts``, ``git push`` of the same
    commits and ``grep -E`` of the scan's words over ``files``; the sync against the floor
    (push + grep, <= 3x). The rows, the floor's among them."""
    grep = ["grep", "-c", "-i", "-E", GREP_SECRETS, *files]
    rows = bench.measure("first sync", setting, {
        "gitmem sync (sync())": NewRemote(mem, root, lambda m, remote: sync(m, remote)), **parts,
        "git push, the same commits": NewRemote(mem, root, _git_push),
        "grep -c -i -E, the scan's words, the same files": lambda _i: spawned(grep),
    }, samples=bench.pick(5, 5))
    rows["floor"] = bench.add(Row("first sync", setting, "floor: git push + grep -E",
                                  value=rows["git push, the same commits"].measured
                                  + rows["grep -c -i -E, the scan's words, the same files"].measured))
    bench.compare(rows["gitmem sync (sync())"], rows["floor"], 3.0)
    return rows


PROSE_LINES = ("The cache key ignores the lockfile, so a new dependency needs a new key.",
               "Rotate the API key on Fridays; the access key of the runner stays.",
               "The token budget of a turn is 4,096 and the refresh token lives a week.",
               "Keys of the map are sorted before the merge: the secret is in the order.",
               "Reset the password from the settings page, never over chat.")


def sync_first_push_prose(bench: Bench) -> None:
    """The first ``gitmem sync`` of about 40 MB of memory (4 MB with --quick) whose every
    line names a key, a token or a password (ordinary prose: every line a candidate for
    the secret scan), against ``git push`` plus ``grep -E`` of the scan's words (<= 3x)."""
    size = bench.pick(4_000_000, 40_000_000)
    root = bench.workdir / "first-push-prose"
    root.mkdir()
    rng = random.Random(45)
    with Gitmem.open(root / "repo") as mem:
        files = 40
        for n in range(files):
            lines = [rng.choice(PROSE_LINES) for _ in range(size // files // 60)]
            mem.memory.write("\n".join(lines), agent_id=f"notes-{n}")
        paths = [str(path) for path in (root / "repo" / "memory").rglob("*.md")]
        setting = f"{sum(Path(p).stat().st_size for p in paths) / 1e6:.0f} MB of memory, every line a candidate"
        rows = _first_sync(bench, mem, root, setting, paths,
                           {"part: secret scan of every commit": NewRemote(mem, root, _scan)})
    bench.compare(rows["part: secret scan of every commit"], rows["floor"], 3.0, what="secret scan / floor")


def sync_many_machines(bench: Bench) -> None:
    """12 clones of one bare remote (4 with --quick), each appending to its own memory, a
    shared memory and the user memory and then syncing, all at the same moment, for 10
    rounds (2): how many syncs failed, the slowest, what was lost, how many heads."""
    machines, rounds = bench.pick((4, 2), (12, 10))
    root = bench.workdir / "many-machines"
    root.mkdir()
    git(root, "init", "--quiet", "--bare", "--initial-branch=main", "remote.git")
    with Gitmem.open(root / "seed") as seed:
        seed.engine.remotes.add("origin", str(root / "remote.git"))
        sync(seed)
    names = [f"machine-{i:02d}" for i in range(machines)]
    for name in names:
        git(root, "clone", "--quiet", "remote.git", name)
    context = multiprocessing.get_context("spawn")  # no pygit2 state crosses a fork
    start_together = context.Barrier(machines)
    outcomes = context.Queue()
    workers = [context.Process(target=_machine_rounds, args=(root / name, name, rounds, start_together,
                                                             outcomes)) for name in names]
    for worker in workers:
        worker.start()
    results = [outcomes.get(timeout=rounds * (SYNC_TIMEOUT + 60)) for _ in range(machines * rounds)]
    for worker in workers:
        worker.join(timeout=60)
    for name in names:  # everyone takes in the last pushes of the others
        with Gitmem.open(root / name, create=False) as mem:
            sync(mem)
    heads = {git(root / name, "rev-parse", "main").stdout for name in names}
    with Gitmem.open(root / names[0], create=False) as mem:
        held: dict[str, Any] = {"own": {name: mem.memory.read(agent_id=name) for name in names},
                "shared": mem.memory.read(agent_id="shared"), "user": mem.memory.read()}
    lost = sum(f"{name} {what} {r}" not in (held["own"][name] if what == "own" else held[what])
               for name in names for r in range(rounds) for what in ("own", "shared", "user"))
    setting = f"{machines} machines x {rounds} rounds, one bare remote"
    failed = [error for _, error, _ in results if error]
    bench.add(Row("sync at once", setting, f"syncs that failed (of {len(results)})",
                  value=len(failed), unit="syncs", target=0))
    bench.add(Row("sync at once", setting, "slowest sync", value=max(s for _, _, s in results),
                  unit="s", target=SYNC_TIMEOUT))
    bench.add(Row("sync at once", setting, "attempts of a sync (median)",
                  value=statistics.median(a for a, _, _ in results), unit="attempts"))
    bench.add(Row("sync at once", setting, f"appends lost (of {len(names) * rounds * 3})", value=lost,
                  unit="appends", target=0))
    bench.add(Row("sync at once", setting, "heads after a last sync each", value=len(heads),
                  unit="heads", target=1))


def _machine_rounds(repo: Path, name: str, rounds: int, start_together, outcomes) -> None:
    """One machine of :func:`sync_many_machines`: ``rounds`` times, wait for the others,
    append to three memories, sync; put ``(attempts, error or "", seconds)`` on ``outcomes``."""
    with Gitmem.open(repo, create=False) as mem:
        for r in range(rounds):
            start_together.wait(timeout=SYNC_TIMEOUT + 60)
            mem.memory.write(f"{name} own {r}", agent_id=name, mode="append")
            mem.memory.write(f"{name} shared {r}", agent_id="shared", mode="append")
            mem.memory.write(f"{name} user {r}", mode="append")
            started = time.perf_counter()
            try:
                outcome = (sync(mem, interactive=False).attempts, "")
            except SyncError as exc:
                outcome = (0, str(exc))
            outcomes.put((*outcome, time.perf_counter() - started))


SCENARIOS = [sync_diverged, merge_large_markdown, secret_scan, sync_first_push, sync_first_push_prose,
             sync_many_machines]
