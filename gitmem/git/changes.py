"""The files each commit of main's first-parent line changed, from one ``git log --raw``.

What the search index (:mod:`gitmem.search.index`) follows: the states ``main`` went through
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

git's output is read by :func:`gitmem.git.rawlog.raw_log`, the one reader of it.
"""

from __future__ import annotations

import os
import subprocess
from collections import namedtuple
from collections.abc import Iterator

from gitmem.git import gitproc
from gitmem.git.rawlog import RawChange, raw_log

TIMEOUT = 600.0  # seconds: a whole history of tens of thousands of commits takes a few
READ_SIZE = 1 << 20
_NO_BLOB = b"0" * 40
_FILE_MODES = (b"100644", b"100755")


class StepsUnavailable(Exception):
    """git could not list the history (``since`` is not in it, or git failed)."""


class Step(namedtuple("Step", "commit time date files")):
    """One commit of main's first-parent line and the files changed since the step before:
    the ``commit``, its committer ``time`` (seconds since the epoch) and ``date`` (ISO 8601
    in the committer's zone), and ``files``, a tuple of ``(path, old blob, new blob)``
    (None: none)."""

    __slots__ = ()


def _span(since: str | None, tip: str) -> list[str]:
    return ["--first-parent", tip] if since is None else \
        ["--first-parent", "--ancestry-path", f"{since}..{tip}"]


def count_steps(gitdir: str | os.PathLike, *, since: str | None, tip: str) -> int:
    """How many steps :func:`first_parent_steps` gives."""
    return int(_git(gitdir, ["rev-list", "--count", *_span(since, tip)]).strip() or 0)


def first_parent_steps(gitdir: str | os.PathLike, *, since: str | None, tip: str,
                       timeout: float = TIMEOUT) -> Iterator[Step]:
    """The steps from ``since`` (None: from the root) to ``tip``, oldest first."""
    git = ["--git-dir", str(gitdir)]
    args = [*git, "log", "--reverse", "--raw", "-r", "--root", "--no-renames", "--no-abbrev",
            "-z", "--diff-merges=first-parent", "--format=%H %P%x02%ct %cI", *_span(since, tip), "--"]
    first = True

    def step_of(header: bytes | None, changes: list[RawChange]) -> Step:
        nonlocal first
        if header is None:  # changes before any commit's line: not git log's output
            raise ValueError("git log gave changes under no commit")
        ids, _, when = header.decode("utf-8", "replace").partition("\x02")
        commit, *parents = ids.split()
        time, date = when.split(" ")
        if first and since is not None and parents[:1] != [since]:
            diffed = gitproc.stream([*git, "diff-tree", "-r", "--no-renames", "--no-abbrev", "-z",
                                     since, commit, "--"], cwd=gitdir, timeout=timeout)
            changes = [change for _, found in raw_log(diffed) for change in found]
        first = False
        return Step(commit, int(time), date, _files(changes))

    try:
        logged = gitproc.stream(args, cwd=gitdir, timeout=timeout, chunk=READ_SIZE)
        for header, changes in raw_log(logged):
            yield step_of(header, changes)
    except (gitproc.GitMissing, gitproc.GitTimeout, ValueError) as exc:
        raise StepsUnavailable(str(exc)) from None
    except subprocess.CalledProcessError as exc:
        lines = (exc.stderr or "").strip().splitlines()
        raise StepsUnavailable(lines[-1] if lines else "git log failed") from None


def _git(gitdir: str | os.PathLike, args: list[str]) -> str:
    try:
        done = gitproc.run(["--git-dir", str(gitdir), *args], cwd=gitdir, timeout=TIMEOUT)
    except (gitproc.GitMissing, gitproc.GitTimeout) as exc:
        raise StepsUnavailable(str(exc)) from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise StepsUnavailable(lines[-1] if lines else f"git {args[0]} failed")
    return done.stdout


def _file_blob(mode: bytes, blob: bytes) -> str | None:
    """The blob of a regular file (None: no file, a symlink or a submodule)."""
    return blob.decode() if mode in _FILE_MODES and blob != _NO_BLOB else None


def _files(changes: list[RawChange]) -> tuple[tuple[str, str | None, str | None], ...]:
    """``(path, old blob, new blob)`` of each change."""
    return tuple((path.decode("utf-8", "replace"), _file_blob(fields[0][1:], fields[2]),
                  _file_blob(fields[1], fields[3])) for fields, path in changes)
