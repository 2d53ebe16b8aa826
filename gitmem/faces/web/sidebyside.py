"""A unified diff (what ``gitmem diff`` prints) laid out side by side: the old lines on
the left, the new on the right, a run of removed lines beside the run of added lines
that replaced it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$")


class Row(NamedTuple):
    """One line of the side-by-side table. ``kind`` is "file" (a file's header, in
    ``old``), "hunk" (where a hunk starts, in ``old``), "same", "removed", "added" or
    "changed"; a side without a line has number None and text ""."""

    kind: str
    old_number: int | None
    old: str
    new_number: int | None
    new: str


def side_by_side(patch: str) -> list[Row]:
    """The rows of ``patch`` (the unified diff of one or more files)."""
    rows: list[Row] = []
    removed: list[tuple[int, str]] = []
    added: list[tuple[int, str]] = []
    old = new = 0
    in_header = False  # between a file's "diff --git" line and its first hunk

    def flush() -> None:
        for i in range(max(len(removed), len(added))):
            left = removed[i] if i < len(removed) else (None, "")
            right = added[i] if i < len(added) else (None, "")
            kind = "changed" if left[0] is not None and right[0] is not None else \
                "removed" if left[0] is not None else "added"
            rows.append(Row(kind, left[0], left[1], right[0], right[1]))
        removed.clear()
        added.clear()

    for line in patch.splitlines():
        if line.startswith("diff --git "):
            flush()
            rows.append(Row("file", None, line.split(" b/", 1)[-1], None, ""))
            in_header = True
        elif (hunk := _HUNK.match(line)) is not None:
            flush()
            old, new = int(hunk[1]), int(hunk[2])
            rows.append(Row("hunk", None, line, None, ""))
            in_header = False
        elif in_header:
            if line.startswith("Binary files"):
                rows.append(Row("hunk", None, line, None, ""))
        elif line.startswith("-"):
            removed.append((old, line[1:]))
            old += 1
        elif line.startswith("+"):
            added.append((new, line[1:]))
            new += 1
        elif line.startswith("\\"):
            continue  # "\ No newline at end of file"
        else:
            flush()
            rows.append(Row("same", old, line[1:], new, line[1:]))
            old += 1
            new += 1
    flush()
    return rows
