"""The files each commit of main's first-parent line changed, from one ``git log --raw``.

What the search index (:mod:`gitmem.search`) follows: the states ``main`` went through
on this machine, oldest first, each with the files that differ from the state before
it. git lists them faster than a walk in Python can diff trees, and without reading
a blob: the blobs are read afterwards, only for the files the caller wants.

    for step in first_parent_steps(gitdir, since=None, tip=head):
        step.commit, step.time, step.date, step.files   # files: [(path, old blob, new blob)]

After ``since``, the steps are the commits of the first-parent line of ``tip`` that
descend from ``since``; the first one is diffed against ``since`` itself (a merge whose
first parent is another machine's line then counts what it brought to this one).
"""

from __future__ import annotations

import dataclasses
import os

from gitmem.git import gitproc

TIMEOUT = 600.0  # seconds: a whole history of tens of thousands of commits takes a few
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


def first_parent_steps(gitdir: str | os.PathLike, *, since: str | None, tip: str,
                       timeout: float = TIMEOUT) -> list[Step]:
    """The steps from ``since`` (None: from the root) to ``tip``, oldest first."""
    span = [tip] if since is None else ["--ancestry-path", f"{since}..{tip}"]
    out = _git(gitdir, ["log", "--first-parent", "--reverse", "--raw", "-r", "--root",
                        "--no-renames", "--no-abbrev", "-z", "--diff-merges=first-parent",
                        "--format=%x01%H %P%x02%ct %cI", *span, "--"], timeout)
    steps, parents = [], []
    for chunk in out.split("\x01")[1:]:
        head, _, raw = chunk.partition("\0")
        ids, _, when = head.partition("\x02")
        commit, *parent_ids = ids.split()
        time, date = when.split(" ")
        steps.append(Step(commit, int(time), date, _parse_raw(raw)))
        parents.append(parent_ids[:1])
    if since is not None and steps and parents[0] != [since]:
        bridge = _git(gitdir, ["diff-tree", "-r", "--no-renames", "--no-abbrev", "-z",
                               since, steps[0].commit, "--"], timeout)
        steps[0] = dataclasses.replace(steps[0], files=_parse_raw(bridge))
    return steps


def _git(gitdir: str | os.PathLike, args: list[str], timeout: float) -> str:
    try:
        done = gitproc.run(["--git-dir", str(gitdir), *args], cwd=gitdir, timeout=timeout)
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
