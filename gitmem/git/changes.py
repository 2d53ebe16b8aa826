"""The files each commit of main's first-parent line changed, from one ``git log --raw``.

What the search index (:mod:`gitmem.search`) follows: the states ``main`` went through
on this machine, oldest first, each with the files that differ from the state before
it. git lists them faster than a walk in Python can diff trees, and without reading
a blob; its output is read as it comes (:func:`gitmem.git.gitproc.stream`), so the
caller reads the blobs it wants while git goes on.

    total = count_steps(gitdir, since=None, tip=head)
    for step in first_parent_steps(gitdir, since=None, tip=head):
        step.commit, step.time, step.date, step.files   # files: [(path, old blob, new blob)]

After ``since``, the steps are the commits of the first-parent line of ``tip`` that
descend from ``since``; the first one is diffed against ``since`` itself (a merge whose
first parent is another machine's line then counts what it brought to this one).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Iterator

from gitmem.git import gitproc

TIMEOUT = 600.0  # seconds: a whole history of tens of thousands of commits takes a few
READ_SIZE = 1 << 20
_NO_BLOB = "0" * 40
_FILE_MODES = ("100644", "100755")


class StepsUnavailable(Exception):
    """git could not list the history (``since`` is not in it, or git failed)."""


@dataclasses.dataclass(frozen=True)
class Step:
    """One commit of main's first-parent line and the files changed since the step before."""

    commit: str
    time: int  # committer time, seconds since the epoch
    date: str  # committer date, ISO 8601 in the committer's zone
    files: tuple[tuple[str, str | None, str | None], ...]  # (path, old blob, new blob); None: none


def _span(since: str | None, tip: str) -> list[str]:
    return ["--first-parent", tip] if since is None else \
        ["--first-parent", "--ancestry-path", f"{since}..{tip}"]


def count_steps(gitdir: str | os.PathLike, *, since: str | None, tip: str) -> int:
    """How many steps :func:`first_parent_steps` gives."""
    return int(_git(gitdir, ["rev-list", "--count", *_span(since, tip)]).strip() or 0)


def first_parent_steps(gitdir: str | os.PathLike, *, since: str | None, tip: str,
                       timeout: float = TIMEOUT) -> Iterator[Step]:
    """The steps from ``since`` (None: from the root) to ``tip``, oldest first."""
    args = ["--git-dir", str(gitdir), "log", "--reverse", "--raw", "-r", "--root", "--no-renames",
            "--no-abbrev", "-z", "--diff-merges=first-parent", "--format=%x01%H %P%x02%ct %cI",
            *_span(since, tip), "--"]
    first = True

    def step_of(record: bytes) -> Step:
        nonlocal first
        step, parent = _parse_step(record.decode("utf-8", "replace"))
        if first and since is not None and parent != since:
            step = dataclasses.replace(step, files=_parse_raw(_git(gitdir, [
                "diff-tree", "-r", "--no-renames", "--no-abbrev", "-z", since, step.commit, "--"])))
        first = False
        return step

    try:
        pending = b""
        for block in gitproc.stream(args, cwd=gitdir, timeout=timeout, chunk=READ_SIZE):
            *records, pending = (pending + block).split(b"\x01")
            for record in records:
                if record:
                    yield step_of(record)
        if pending:
            yield step_of(pending)
    except (gitproc.GitMissing, gitproc.GitTimeout) as exc:
        raise StepsUnavailable(str(exc)) from None
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines()
        raise StepsUnavailable(lines[-1] if lines else "git log failed") from None


def _parse_step(record: str) -> tuple[Step, str | None]:
    head, _, raw = record.partition("\0")
    ids, _, when = head.partition("\x02")
    commit, *parents = ids.split()
    time, date = when.split(" ")
    return Step(commit, int(time), date, _parse_raw(raw)), (parents[0] if parents else None)


def _git(gitdir: str | os.PathLike, args: list[str]) -> str:
    try:
        done = gitproc.run(["--git-dir", str(gitdir), *args], cwd=gitdir, timeout=TIMEOUT)
    except (gitproc.GitMissing, gitproc.GitTimeout) as exc:
        raise StepsUnavailable(str(exc)) from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise StepsUnavailable(lines[-1] if lines else f"git {args[0]} failed")
    return done.stdout


def _file_blob(mode: str, blob: str) -> str | None:
    """The blob of a regular file (None: no file, a symlink or a submodule)."""
    return blob if mode in _FILE_MODES and blob != _NO_BLOB else None


def _parse_raw(raw: str) -> tuple[tuple[str, str | None, str | None], ...]:
    """``:mode mode old new status\\0path\\0`` entries (``-z`` raw output)."""
    fields = raw.lstrip("\n").split("\0")
    found = []
    for meta, path in zip(fields[0::2], fields[1::2]):
        parts = meta.split(" ")
        if len(parts) < 5 or not meta.startswith(":"):
            continue
        found.append((path, _file_blob(parts[0][1:], parts[2]), _file_blob(parts[1], parts[3])))
    return tuple(found)
