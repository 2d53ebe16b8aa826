"""A repository that stays small and sound: background packing, ``gitmem gc``, ``gitmem fsck``.

Every commit adds a handful of loose objects (one file each). :class:`Maintenance`
packs them in the background once there are :data:`LOOSE_THRESHOLD` of them: a
write only bumps a counter; a background thread counts the loose objects (every
:data:`CHECK_EVERY` writes an estimate from a few folders, as ``git gc --auto`` does;
all of them when writes pause) and packs. It never takes the writers' lock, so a
request never waits for it.

Packing uses ``git repack -d -l --geometric=2`` when git 2.33 or later is installed
(new objects go into a small pack; small packs are merged into bigger ones as they
pile up, so the work per write stays bounded), and libgit2's pack builder through
the engine otherwise. Memory is bounded either way: ``pack.windowMemory``,
``pack.threads`` and ``pack.deltaCacheSize`` from :data:`PACK_LIMITS` are written
into the repository's config unless set already, so a plain ``git gc`` by hand is
bounded too (another project's unbounded repack of a 1.2 GB pack was OOM-killed).
git's prune step removes emptied ``objects/xx`` folders, which can race a write's
object creation; the engine writes the objects again when that happens.

    maintenance = Maintenance(engine)
    engine.commit(...); maintenance.maybe_start()     # after each write: a counter bump
    maintenance.close()                               # at exit: lets a running pack finish

    report = fsck(mem)                                # objects, JSONL lines, metadata
    print(report.problems)
"""

from __future__ import annotations

import functools
import json
import logging
import os
import posixpath
import re
import shutil
import threading
import time
from collections import namedtuple
from typing import TYPE_CHECKING, Any

from gitmem.git import gitproc
from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.git.lock import FileLock, LockTimeout
from gitmem.records import layout
from gitmem.stores import blobs
from gitmem.stores.jsonl import SUFFIX, parse_chunk

if TYPE_CHECKING:
    from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.upkeep.maintenance")

LOOSE_THRESHOLD = 2000
"""Loose objects that start a background pack (git's own ``gc.auto`` is 6700)."""
CHECK_EVERY = 64
"""Writes between two counts of the loose objects."""
SAMPLE_FOLDERS = 16
"""Of the 256 ``objects/xx`` folders, how many are counted to estimate the loose objects."""
IDLE_CHECK = 2.0
"""Seconds after the last write at which the loose objects are counted anyway."""
PACK_LIMIT = 16
"""Without the git CLI: more packs than this are merged into one."""
PACK_LIMITS = {"pack.windowMemory": "64m", "pack.threads": "1", "pack.deltaCacheSize": "32m",
               "pack.window": "50"}
"""Bounded memory, and a delta window wide enough to pair each chunk with its own
earlier versions: every session's first chunk is named ``000000.jsonl``, and git looks
for delta bases among objects of similar name (with git's default of 10, packs come out
about 1.6 times as big)."""
GIT_GEOMETRIC = (2, 33)  # the first git with ``repack --geometric``
GIT_TIMEOUT = 3600.0
PRUNE_AGE = "2.weeks.ago"  # unreachable objects younger than this are kept (a writer may need them)
_OBJECT_ID = re.compile(r"\b[0-9a-f]{40}\b")
_OBJECT_FILE = re.compile(r"objects/([0-9a-f]{2})/([0-9a-f]{38})\b")


class PackReport(namedtuple("PackReport",
                             "method loose_before loose_after packs_before packs_after seconds")):
    """What one packing run did: the ``method`` ("git repack", "git gc-like (full)",
    "libgit2", "libgit2 (all)" or "skipped"), the loose objects and packs before and
    after, and the ``seconds`` it took."""

    __slots__ = ()


@functools.lru_cache(maxsize=1)
def git_version() -> tuple[int, ...] | None:
    """The installed git's version, None when there is no git CLI."""
    if shutil.which("git") is None:
        return None
    try:
        out = gitproc.run(["version"], cwd=os.getcwd(), timeout=30).stdout
    except (OSError, gitproc.GitMissing, gitproc.GitTimeout):
        return None
    match = re.search(r"(\d+)\.(\d+)", out)
    return (int(match[1]), int(match[2])) if match else None


def pack(engine: GitEngine, *, full: bool = False, use_git: bool | None = None,
         wait: float = 0.0) -> PackReport:
    """Pack the loose objects now, in the calling thread (``full``: everything into one
    pack and unreachable objects older than two weeks dropped, as ``git gc`` does).

    ``use_git`` None picks the git CLI when it is recent enough. Runs one at a time per
    repository: when another run holds the maintenance lock for more than ``wait``
    seconds this one is skipped.
    """
    if use_git is None:
        version = git_version()
        use_git = version is not None and version >= GIT_GEOMETRIC
    for key, value in PACK_LIMITS.items():
        engine.set_config_default(key, value)
    started = time.monotonic()
    loose_before, packs_before = engine.pack.loose_objects(), len(engine.pack.pack_files())
    try:
        with FileLock(engine.private_dir / "maintenance-lock", timeout=wait):  # an flock file, like "lock"
            if use_git:
                method = _pack_with_git(engine, full)
            elif full or packs_before >= PACK_LIMIT:
                engine.pack.pack_all_objects()
                method = "libgit2 (all)"
            else:
                engine.pack.pack_loose_objects()
                method = "libgit2"
    except LockTimeout:
        method = "skipped"
    return PackReport(method, loose_before, engine.pack.loose_objects(), packs_before,
                      len(engine.pack.pack_files()), time.monotonic() - started)


def _pack_with_git(engine: GitEngine, full: bool) -> str:
    limits = [arg for key, value in PACK_LIMITS.items() for arg in ("-c", f"{key}={value}")]
    if full:
        _git(engine, *limits, "repack", "-A", "-d", "-l", "-n", "-q", f"--unpack-unreachable={PRUNE_AGE}")
        _git(engine, "prune", f"--expire={PRUNE_AGE}")
        return "git repack -A (full)"
    _git(engine, *limits, "repack", "-d", "-l", "-n", "-q", "--geometric=2")
    return "git repack"


def _git(engine: GitEngine, *args: str) -> None:
    try:
        done = gitproc.run(list(args), cwd=engine.workdir, timeout=GIT_TIMEOUT,
                           env={"GIT_DIR": str(engine.gitdir)}, nice=True)
    except gitproc.GitTimeout as exc:
        raise EngineError(str(exc)) from None
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        command = next(arg for arg in args if arg in ("repack", "prune"))
        raise EngineError(f"git {command} failed: {reason}")


class Maintenance:
    """Background packing for a long-running writer such as ``gitmem serve``.

    Call :meth:`maybe_start` after each write; it only counts and wakes a background
    thread, which counts the loose objects and packs when they reach ``threshold``.
    """

    def __init__(self, engine: GitEngine, *, threshold: int = LOOSE_THRESHOLD,
                 check_every: int = CHECK_EVERY, idle: float = IDLE_CHECK,
                 use_git: bool | None = None):
        self.engine = engine
        self.threshold = threshold
        self.check_every = check_every
        self.idle = idle
        self.use_git = use_git
        self.reports: list[PackReport] = []
        self._writes = 0
        self._last_write = 0.0
        self._busy = False
        self._stopping = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def maybe_start(self) -> None:
        """Note one write; packing, when due, happens on the background thread."""
        with self._cond:
            self._writes += 1
            self._last_write = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gitmem-maintenance",
                                                daemon=True)
                self._thread.start()
            if self._writes == 1 or self._writes >= self.check_every:
                self._cond.notify()  # the first write starts the idle timer

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every noted write has been checked (and any pack finished)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._writes or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left if left is not None else 0.1)
        return True

    def stop(self) -> None:
        """Start no more packs; a pack that fails from now on was ended on purpose (``gitmem
        serve`` calls this, then ends a running git repack: gitproc.stop_all)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def close(self, timeout: float | None = None) -> None:
        """:meth:`stop`, then wait for the thread once a running pack has finished (or
        ``timeout`` seconds): a killed repack leaves the repository as it was."""
        self.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    if self._writes >= self.check_every:
                        break
                    if self._writes:
                        due = self._last_write + self.idle - time.monotonic()
                        if due <= 0:
                            break
                        self._cond.wait(due)
                    else:
                        self._cond.wait()
                if self._stopping:
                    return
                # while writes go on an estimate will do; once they pause, count them all
                sample = SAMPLE_FOLDERS if self._writes >= self.check_every else 256
                self._writes = 0
                self._busy = True
            try:
                if self.engine.pack.loose_objects(sample=sample) >= self.threshold:
                    report = pack(self.engine, use_git=self.use_git)
                    self.reports.append(report)
                    log.info("packed: %s", report)
            except Exception as exc:  # the next check tries again
                if self._stopping:  # its git was ended by the shutdown: nothing went wrong
                    log.info("background packing ended by the shutdown (%s); the repository "
                             "is as it was", exc)
                else:
                    log.exception("background packing failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


# -- fsck -------------------------------------------------------------------------


class Problem(namedtuple("Problem", "where message")):
    """Something wrong (``message``), and ``where``: a path (``HEAD`` or ``work tree``) or
    an object id."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class FsckReport:
    """What ``fsck`` looked at and what it found: who checked git's objects, the JSONL files,
    their lines, the JSON files and blobs read, and the :class:`Problem` list."""

    __slots__ = ("objects_checked_by", "jsonl_files", "lines", "json_files", "blobs", "problems")

    def __init__(self) -> None:
        self.objects_checked_by = ""
        self.jsonl_files = self.lines = self.json_files = self.blobs = 0
        self.problems: list[Problem] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "objectsCheckedBy": self.objects_checked_by,
                "jsonlFiles": self.jsonl_files, "lines": self.lines, "jsonFiles": self.json_files,
                "blobs": self.blobs,
                "problems": [{"where": p.where, "message": p.message} for p in self.problems]}


def fsck(mem: Gitmem, *, use_git: bool | None = None) -> FsckReport:
    """Check git's objects (``git fsck --full``, else every object read back by libgit2),
    then every JSONL line, JSON metadata file and blob at HEAD, and the work-tree copy
    of each file that differs from HEAD."""
    engine = mem.engine
    report = FsckReport()
    if use_git is None:
        use_git = git_version() is not None
    object_problems = _git_fsck(engine) if use_git else engine.pack.check_objects()
    report.objects_checked_by = "git fsck --full" if use_git else "libgit2"
    if object_problems:
        where = engine.pack.locate_objects({oid for oid, _ in object_problems})
        for oid, message in object_problems:
            place = f" ({where[oid]} at HEAD)" if oid in where else ""
            record = _record_of(where.get(oid, ""))
            belongs = f" (it belongs to record {record})" if record else ""
            report.problems.append(Problem(f"object {oid}{place}", message + belongs))
    try:
        snapshot = engine.snapshot()
        paths = list(snapshot.files()) if snapshot.commit_id else []
    except Exception as exc:  # an object named above
        report.problems.append(Problem("HEAD", f"cannot list the files: {exc}"))
        return report
    bad_objects = {oid for oid, _ in object_problems}
    for path in paths:
        if snapshot.blob_id(path) in bad_objects:
            continue
        try:
            data = snapshot.read(path)
        except Exception as exc:  # an object git fsck did not name
            report.problems.append(Problem(f"{path} (HEAD)", f"cannot be read: {exc}"))
            continue
        if data is None:  # not a file: a submodule's commit
            continue
        _check_file(report, snapshot, path, data, "HEAD")
        if engine.worktree.file_id(path) not in (None, snapshot.blob_id(path)):
            on_disk = engine.worktree.read(path)
            if on_disk is not None:
                _check_file(report, snapshot, path, on_disk[0], "work tree")
    return report


def _record_of(where: str) -> str | None:
    """The name of the record a path (or "folder <path>") at HEAD belongs to, if any."""
    record = layout.record_path(where.removeprefix("folder "))
    return layout.record_name(record) if record is not None else None


def _git_fsck(engine: GitEngine) -> list[tuple[str, str]]:
    try:
        done = gitproc.run(["fsck", "--full", "--no-dangling", "--no-progress"], cwd=engine.workdir,
                           timeout=GIT_TIMEOUT, env={"GIT_DIR": str(engine.gitdir)})
    except gitproc.GitTimeout as exc:
        return [("objects", str(exc))]
    found: dict[str, list[str]] = {}
    for line in (done.stdout + done.stderr).splitlines():
        if not line.strip() or line.startswith(("Checking", "notice:", "dangling ")):
            continue
        match = _OBJECT_ID.search(line) or _OBJECT_FILE.search(line)
        oid = (match[1] + match[2] if match.re is _OBJECT_FILE else match[0]) if match else "objects"
        found.setdefault(oid, []).append(line.strip())
    if done.returncode != 0 and not found:
        found["objects"] = [f"git fsck exited {done.returncode}"]
    return [(oid, "; ".join(lines)) for oid, lines in found.items()]


def _check_file(report: FsckReport, snapshot, path: str, data: bytes, version: str) -> None:
    """Check one file's content; only HEAD's files are counted in the report."""
    where = f"{path} ({version})"
    counted = version == "HEAD"
    name = posixpath.basename(path)
    folder = posixpath.dirname(path)
    if name.endswith(SUFFIX):
        report.jsonl_files += counted
        try:
            chunk = parse_chunk(data)
        except (ValueError, UnicodeDecodeError) as exc:
            report.problems.append(Problem(where, str(exc)))
            return
        report.lines += len(chunk.lines) if counted else 0
        for number, line in enumerate(chunk.lines, 1):
            if blobs.MARK in line:
                for ref in blobs.references(chunk.values[number - 1]):
                    if not snapshot.exists(f"{folder}/{blobs.FOLDER}/{ref}"):
                        report.problems.append(Problem(where, f"line {number}: blob {ref} is missing"))
    elif name.endswith(".json"):
        report.json_files += counted
        try:
            value = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            report.problems.append(Problem(where, f"not JSON: {exc}"))
            return
        if not isinstance(value, dict):
            report.problems.append(Problem(where, "not a JSON object"))
    elif posixpath.basename(folder) == blobs.FOLDER and blobs.is_blob_name(name):
        report.blobs += counted
        if not blobs.verify(name, data):
            report.problems.append(Problem(where, "content does not match its SHA-256 name"))
