"""The lines one file changed from each of its versions to the next, from one
``git diff-tree --stdin -p -U0``.

What ``gitmem blame`` of a big memory follows: git reads and diffs the versions, and
only the lines that changed come out, so the caller's work is what the changes cost,
not the file's length times its versions.

    for hunks in version_hunks(gitdir, "memory/agents/a.md", trees):   # oldest first
        for hunk in reversed(hunks):    # later ones first: earlier line numbers stay true
            lines[hunk.start:hunk.start + hunk.removed] = hunk.added

``trees`` are the root trees of the versions' commits. The first one's hunks make the
file from nothing; each other one's make it as that tree holds it from as the tree before
it in the list holds it (not from a parent: the list is the caller's own order of
versions, a merge's included). A version without the file has it empty.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from collections.abc import Iterator

from gitmem.git import gitproc

TIMEOUT = 600.0  # seconds for the whole run
READ_SIZE = 1 << 20
_HUNK = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_PAIR = re.compile(rb"[0-9a-f]{40} [0-9a-f]{40}")  # the two trees of the next diff
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_MODES = (b"100644", b"100755")
# the lines of a file's patch before its first hunk, as git writes them for a regular file
_HEADERS = (b"index ", b"--- ", b"+++ ", b"old mode ", b"new mode ")


class Hunk(namedtuple("Hunk", "start removed added")):
    """Lines ``start`` (0-based) to ``start + removed`` of the old version, replaced by
    ``added`` (the new lines, without their newlines)."""

    __slots__ = ()


def version_hunks(gitdir: str | os.PathLike, path: str, trees: list[str], *,
                  timeout: float = TIMEOUT) -> Iterator[list[Hunk]]:
    """For each of ``trees`` in order, the hunks that turn file ``path`` as the tree
    before it holds it (nothing, for the first) into ``path`` as it holds it. Raises as
    :func:`gitproc.stream` does, and ValueError when git's output is not a regular file's
    text patch (a symlink, a folder, a name git quotes): then read the versions whole."""
    pairs = "".join(f"{old} {new}\n" for old, new in zip([EMPTY_TREE] + trees, trees, strict=False)).encode()
    if not all(_PAIR.fullmatch(pair) for pair in pairs.splitlines()):
        raise ValueError("not a tree id")
    command = ["--git-dir", str(gitdir), "--literal-pathspecs", "diff-tree", "--stdin", "--always",
               "-p", "-U0", "--text", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color",
               "--inter-hunk-context=0", "--no-relative", "--src-prefix=a/", "--dst-prefix=b/",
               "--", path]
    lines = _lines(gitproc.stream(command, cwd=gitdir, timeout=timeout, input=pairs, chunk=READ_SIZE))
    yield from _parse(lines, path.encode(), len(trees))


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    rest = b""
    for chunk in chunks:
        *found, rest = (rest + chunk).split(b"\n")
        yield from found
    if rest:
        raise ValueError("git diff-tree's output ends inside a line")


def _parse(lines: Iterator[bytes], path: bytes, expected: int) -> Iterator[list[Hunk]]:
    names = {b"--- a/" + path, b"+++ b/" + path, b"--- /dev/null", b"+++ /dev/null"}
    hunks: list[Hunk] | None = None  # the current commit's, None before the first
    given = 0
    line = next(lines, None)
    while line is not None:
        if _PAIR.fullmatch(line):
            if hunks is not None:
                yield hunks
            hunks, given = [], given + 1
        elif hunks is None:
            raise ValueError("git diff-tree's output does not start with its trees")
        elif line.startswith(b"diff --git "):
            if hunks:
                raise ValueError("more than one file changed")
        elif line.startswith((b"new file mode ", b"deleted file mode ")):
            if line.rsplit(b" ", 1)[1] not in _MODES:
                raise ValueError("not a regular file")
        elif line.startswith(_HEADERS):
            if line.startswith((b"--- ", b"+++ ")) and line not in names:
                raise ValueError("a path git quoted or another file")
            if line.startswith((b"old mode ", b"new mode ")) and line.rsplit(b" ", 1)[1] not in _MODES:
                raise ValueError("not a regular file")
        elif match := _HUNK.match(line):
            old_start, old_count, _, new_count = (int(n) if n is not None else 1 for n in match.groups())
            removed = _take(lines, b"-", old_count)
            added = _take(lines, b"+", new_count)
            hunks.append(Hunk(old_start - 1 if old_count else old_start, len(removed), added))
        elif not line.startswith(b"\\"):  # "\ No newline at end of file" alone changes no line
            raise ValueError(f"unexpected line in git diff-tree's output: {line[:40]!r}")
        line = next(lines, None)
    if hunks is None or given != expected:
        raise ValueError("git diff-tree's output does not match what was asked")
    yield hunks


def _take(lines: Iterator[bytes], sign: bytes, count: int) -> list[bytes]:
    """``count`` lines that start with ``sign``, without it (a "\\ No newline" after any)."""
    found: list[bytes] = []
    while len(found) < count:
        line = next(lines, None)
        if line is None or not (line.startswith(sign) or line.startswith(b"\\")):
            raise ValueError("a hunk shorter than its header says")
        if line[:1] == sign:
            found.append(line[1:])
    return found
