"""The merge rules of ``gitmem sync``: nothing written on either side is lost, and no
file a reader parses ever holds conflict markers.

Pure functions on bytes (no git): the caller says which files each side changed
since the common base and how to read a blob; the answer is the changes to make on
top of our side and the spots a person may want to tidy.

- JSONL chunks (``*.jsonl``): a line-level three-way merge in which both sides'
  additions at the same place are kept, ours then theirs (for appends: base lines,
  our new lines, their new lines). A line added identically on both sides at the
  same place is kept once, as git's ``merge=union`` does. A chunk created on both
  sides under the same name is merged the same way (from an empty base).
- Metadata JSON (``*.json``): field by field: the earliest ``createdAt``, the latest
  ``updatedAt``, a field only one side changed since the base from that side, and a
  field both changed from the side updated later (ours on a tie).
- Markdown (and any other file): a line-level three-way merge. Where both sides
  changed the same lines, both versions are kept (ours, a blank line, theirs) and
  the place is reported as a :class:`Spot`; where both only inserted text at the
  same place, both insertions are kept the same way without a spot.
- An edit against a delete: the edit wins, for whole records too. A session or
  thread folder deleted (or shortened) on one side and changed on the other keeps
  every file the changing side still has.

    merged = merge_changes(ours_changed, theirs_changed, engine.read_blob)
    engine.commit_merge(ours, theirs, merged.changes, "sync: merge")
"""

from __future__ import annotations

import bisect
import json
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from gitmem.records import layout
from gitmem.records.meta import meta_bytes
from gitmem.records.strictjson import same_json

_GONE = object()  # a field missing from one side
SMALL_STRETCH = 250_000  # a stretch of lines x lines left to difflib (quadratic) below this
# {path: (blob id at the base, blob id on that side)}; None where there is no file.
Changed = Mapping[str, "tuple[str | None, str | None]"]
Lines = list[bytes]


class Spot(namedtuple("Spot", "path line text note",
                       defaults=("both versions kept (ours, a blank line, theirs)",))):
    """A place where both sides changed the same lines and both versions were kept: the
    ``path``, the 1-based ``line`` of the merged file where our version starts, the merged
    block's ``text`` (ours, blank line, theirs), to find it again later, and a ``note``."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.path} line {self.line}: {self.note}"


def spots_paragraph(spots: Sequence[Spot]) -> str:
    """The part of a merge commit's message that lists ``spots`` ("" when there are none)."""
    if not spots:
        return ""
    return ("\nBoth sides changed the same lines at these places; both versions were kept\n"
            "(ours, a blank line, theirs). Tidy them in an editor:\n"
            + "".join(f"- {spot}\n" for spot in spots))


class Merged:
    """The result of a merge: ``changes`` on top of our side (``{path: bytes}``, None:
    deleted), and the ``spots`` to tidy."""

    __slots__ = ("changes", "spots")

    def __init__(self, changes: dict[str, bytes | None], spots: list[Spot]):
        self.changes, self.spots = changes, spots


def merge_changes(ours_changed: Changed, theirs_changed: Changed,
                  read_blob: Callable[[str], bytes]) -> Merged:
    """Merge what each side changed since the base into changes on top of our side.

    ``ours_changed``/``theirs_changed`` map each file a side changed to its blob ids
    at the base and on that side; ``read_blob(id)`` gives a blob's bytes.
    """
    def read(blob_id: str | None) -> bytes | None:
        return None if blob_id is None else read_blob(blob_id)

    ours_records = {_record(p) for p, (_, new) in ours_changed.items() if new is not None}
    theirs_records = {_record(p) for p, (_, new) in theirs_changed.items() if new is not None}
    changes: dict[str, bytes | None] = {}
    spots: list[Spot] = []
    for path, (base_id, theirs_id) in sorted(theirs_changed.items()):
        if path in ours_changed:
            ours_id = ours_changed[path][1]
            if ours_id == theirs_id:
                continue
            ours = read(ours_id)
            data, found = merge_file(path, read(base_id), ours, read(theirs_id))
            if data != ours:
                changes[path] = data
            spots.extend(found)
        elif theirs_id is None and _record(path) in ours_records:
            continue  # they deleted a file of a record we changed: our edit wins
        else:
            changes[path] = read(theirs_id)
    for path, (base_id, ours_id) in sorted(ours_changed.items()):
        if ours_id is None and path not in theirs_changed and _record(path) in theirs_records:
            changes[path] = read(base_id)  # we deleted a file of a record they changed
    return Merged(changes, spots)


def merge_file(path: str, base: bytes | None, ours: bytes | None,
               theirs: bytes | None) -> tuple[bytes | None, list[Spot]]:
    """Three-way merge of one file by the rules for its kind; None means "no file"."""
    if ours == theirs or base == theirs:
        return ours, []
    if base == ours:
        return theirs, []
    if ours is None or theirs is None:  # an edit against a delete: the edit wins
        return (theirs if ours is None else ours), []
    if path.endswith(".jsonl"):
        return merge_jsonl(base or b"", ours, theirs), []
    if path.endswith(".json"):
        return merge_meta(path, base, ours, theirs)
    return merge_text(path, base or b"", ours, theirs)


def merge_jsonl(base: bytes, ours: bytes, theirs: bytes) -> bytes:
    """Union of two versions of a JSONL chunk (see the module doc); blank lines dropped."""
    b, o, t = (_jsonl_lines(x) for x in (base, ours, theirs))
    if o[:len(b)] == b and t[:len(b)] == b:  # both appended (the usual case): skip the diff
        merged = b + _union(o[len(b):], t[len(b):])
    else:
        merged = merge_lines(b, o, t, lambda _b, mine, other, _at: _union(mine, other))
    return b"".join(line + b"\n" for line in merged)


def merge_meta(path: str, base: bytes | None, ours: bytes,
               theirs: bytes) -> tuple[bytes, list[Spot]]:
    """Field-by-field merge of two metadata objects (see the module doc).

    When either side is not a JSON object, ours is kept and a spot says so (theirs
    stays in the merge's second parent).
    """
    try:
        mine, other = json.loads(ours), json.loads(theirs)
    except (ValueError, UnicodeDecodeError):
        mine = other = None
    if not isinstance(mine, dict) or not isinstance(other, dict):
        return ours, [Spot(path, 1, ours.decode("utf-8", "surrogateescape"),
                           "not mergeable JSON: kept ours, theirs is in the merge's second parent")]
    try:
        original = json.loads(base) if base is not None else {}
    except (ValueError, UnicodeDecodeError):
        original = {}
    original = original if isinstance(original, dict) else {}
    newer, older = (other, mine) if _later(other.get("updatedAt"), mine.get("updatedAt")) \
        else (mine, other)
    merged = {}
    for key in [*mine, *(k for k in other if k not in mine)]:
        side = newer
        for changed, unchanged in ((mine, other), (other, mine)):
            if not same_json(changed.get(key, _GONE), original.get(key, _GONE)) \
                    and same_json(unchanged.get(key, _GONE), original.get(key, _GONE)):
                side = changed  # only this side changed it
        if key in side:
            merged[key] = side[key]
        elif side is newer and key in older:
            merged[key] = older[key]
    for key, pick in (("createdAt", min), ("updatedAt", max)):
        times = [(at, side[key]) for side in (mine, other) if (at := _time_key(side.get(key))) is not None]
        if times:
            merged[key] = pick(times, key=lambda timed: timed[0])[1]
    return meta_bytes(merged), []


def merge_text(path: str, base: bytes, ours: bytes, theirs: bytes) -> tuple[bytes, list[Spot]]:
    """Line-level three-way merge that keeps both versions where both sides changed the
    same lines (ours, a blank line, theirs), never writing conflict markers."""
    b, _ = _text_lines(base)
    o, ours_newline = _text_lines(ours)
    t, theirs_newline = _text_lines(theirs)
    spots: list[Spot] = []

    def both(base_part: Lines, mine: Lines, other: Lines, at: int) -> Lines:
        prefix, mine, other, suffix = _trim(mine, other)
        if not mine or not other:
            return prefix + mine + other + suffix
        gap = [] if mine[-1] == b"" or other[0] == b"" else [b""]
        block = mine + gap + other
        if base_part:
            text = b"\n".join(block).decode("utf-8", "surrogateescape")
            spots.append(Spot(path, at + len(prefix) + 1, text))
        return prefix + block + suffix

    merged = merge_lines(b, o, t, both)
    newline = b"\n" if merged and (ours_newline or theirs_newline) else b""
    return b"\n".join(merged) + newline, spots


def merge_lines(base: Lines, ours: Lines, theirs: Lines,
                resolve: Callable[[Lines, Lines, Lines, int], Lines]) -> Lines:
    """diff3 on lists of lines: a change on one side is taken; where both sides changed
    the same stretch differently, ``resolve(base, ours, theirs, merged_so_far)`` decides."""
    merged: Lines = []
    b = o = t = 0
    for bs, be, os_, oe, ts, te in _sync_regions(base, ours, theirs):
        base_part, mine, other = base[b:bs], ours[o:os_], theirs[t:ts]
        if mine == other or other == base_part:
            merged += mine
        elif mine == base_part:
            merged += other
        else:
            both = _apply_disjoint(base_part, mine, other)
            merged += both if both is not None else resolve(base_part, mine, other, len(merged))
        merged += base[bs:be]
        b, o, t = be, oe, te
    return merged


def _sync_regions(base: Sequence, ours: Sequence, theirs: Sequence) -> list[tuple[int, ...]]:
    """Stretches where all three agree, as (base, ours, theirs) start/end pairs, ending
    with the empty stretch at the three ends."""
    mine = _matching_blocks(base, ours)
    other = _matching_blocks(base, theirs)
    regions: list[tuple[int, ...]] = []
    i = j = 0
    while i < len(mine) and j < len(other):
        mb, mo, mn = mine[i]
        ob, ot, on = other[j]
        start, end = max(mb, ob), min(mb + mn, ob + on)
        if start < end:
            regions.append((start, end, mo + start - mb, mo + end - mb,
                            ot + start - ob, ot + end - ob))
        if mb + mn < ob + on:
            i += 1
        else:
            j += 1
    regions.append((len(base), len(base), len(ours), len(ours), len(theirs), len(theirs)))
    return regions


def _apply_disjoint(base: Lines, mine: Lines, other: Lines) -> Lines | None:
    """Both sides' edits applied to ``base`` when they touch different lines (adjacent
    is fine, two insertions at one place are not); None when they overlap."""
    edits = sorted(_edits(base, mine) + _edits(base, other), key=lambda e: (e[0], e[1]))
    merged: Lines = []
    pos = 0
    previous = (-1, -1)
    for start, end, lines in edits:
        if start < pos or (start == end and previous == (start, end)):
            return None
        merged += base[pos:start] + lines
        pos, previous = end, (start, end)
    return merged + base[pos:]


def _edits(base: Lines, side: Lines) -> list[tuple[int, int, Lines]]:
    """(start, end, new lines) for each stretch of ``base`` that ``side`` replaced."""
    edits = []
    i = j = 0
    for bi, sj, n in _matching_blocks(base, side):
        if i < bi or j < sj:
            edits.append((i, bi, side[j:sj]))
        i, j = bi + n, sj + n
    return edits


def _matching_blocks(a: Sequence, b: Sequence) -> list[tuple[int, int, int]]:
    """Stretches equal in ``a`` and ``b`` as ``(i, j, n)``, increasing in both, ending with
    ``(len(a), len(b), 0)``, as ``SequenceMatcher.get_matching_blocks`` gives them, in about
    n·log n: the common prefix and suffix are matched first, then lines found exactly once
    on each side anchor the rest in their longest common order (a patience diff), and each
    stretch between anchors is matched the same way. A stretch without such lines is left
    to SequenceMatcher when small (its cost is quadratic), else counted as changed."""
    found: list[tuple[int, int, int]] = []
    pending = [(0, len(a), 0, len(b))]
    while pending:
        alo, ahi, blo, bhi = pending.pop()
        start = 0
        while alo + start < ahi and blo + start < bhi and a[alo + start] == b[blo + start]:
            start += 1
        if start:
            found.append((alo, blo, start))
            alo, blo = alo + start, blo + start
        end = 0
        while alo < ahi - end and blo < bhi - end and a[ahi - 1 - end] == b[bhi - 1 - end]:
            end += 1
        if end:
            found.append((ahi - end, bhi - end, end))
            ahi, bhi = ahi - end, bhi - end
        if alo == ahi or blo == bhi:
            continue
        anchors = _unique_anchors(a, alo, ahi, b, blo, bhi)
        if not anchors:
            if (ahi - alo) * (bhi - blo) <= SMALL_STRETCH:
                from difflib import SequenceMatcher  # here: only a merge of two edits loads it
                matcher = SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
                found.extend((alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n)
            continue
        i, j = alo, blo
        for ai, bj in anchors:
            pending.append((i, ai, j, bj))
            found.append((ai, bj, 1))
            i, j = ai + 1, bj + 1
        pending.append((i, ahi, j, bhi))
    blocks: list[tuple[int, int, int]] = []
    for i, j, n in sorted(found):
        if blocks and blocks[-1][0] + blocks[-1][2] == i and blocks[-1][1] + blocks[-1][2] == j:
            blocks[-1] = (blocks[-1][0], blocks[-1][1], blocks[-1][2] + n)
        else:
            blocks.append((i, j, n))
    blocks.append((len(a), len(b), 0))
    return blocks


def _unique_anchors(a: Sequence, alo: int, ahi: int, b: Sequence, blo: int,
                    bhi: int) -> list[tuple[int, int]]:
    """``(i, j)`` of lines that occur once in ``a[alo:ahi]`` and once in ``b[blo:bhi]``,
    the longest run of them in the same order on both sides."""
    in_a: dict = {}
    for i in range(alo, ahi):
        in_a[a[i]] = -1 if a[i] in in_a else i
    in_b: dict = {}
    for j in range(blo, bhi):
        line = b[j]
        if in_a.get(line, -1) >= 0:
            in_b[line] = -1 if line in in_b else j
    pairs = sorted((in_a[line], j) for line, j in in_b.items() if j >= 0)
    # longest increasing run of j (patience sorting): tails[k] ends a run of length k+1
    tails: list[int] = []
    tail_at: list[int] = []
    before = [-1] * len(pairs)
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tails, j)
        if at == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[at] = j
            tail_at[at] = k
        before[k] = tail_at[at - 1] if at else -1
    run = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        run.append(pairs[k])
        k = before[k]
    return run[::-1]


def _union(mine: Lines, other: Lines) -> Lines:
    prefix, mine, other, suffix = _trim(mine, other)
    return prefix + mine + other + suffix


def _trim(mine: Lines, other: Lines) -> tuple[Lines, Lines, Lines, Lines]:
    """(common prefix, rest of mine, rest of other, common suffix)."""
    start = 0
    while start < min(len(mine), len(other)) and mine[start] == other[start]:
        start += 1
    end = 0
    while end < min(len(mine), len(other)) - start and mine[-1 - end] == other[-1 - end]:
        end += 1
    stop_mine, stop_other = len(mine) - end, len(other) - end
    return mine[:start], mine[start:stop_mine], other[start:stop_other], mine[stop_mine:]


def _jsonl_lines(data: bytes) -> Lines:
    return [line for line in data.split(b"\n") if line.strip()]


def _text_lines(data: bytes) -> tuple[Lines, bool]:
    """The lines of ``data`` without their newlines, and whether it ended with one."""
    if not data:
        return [], False
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
        return lines, True
    return lines, False


def _record(path: str) -> str:
    """The record a file belongs to: its session or thread folder, else the file itself."""
    parts = path.split("/")
    if parts[0] == layout.SESSIONS and len(parts) > 3:
        return "/".join(parts[:3])
    if parts[0] == layout.THREADS and len(parts) > 2:
        return "/".join(parts[:2])
    return path


def _time_key(value) -> float | None:
    """A time as epoch milliseconds: a number as it is, an RFC 3339 string parsed; else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000
        except ValueError:
            return None
    return None


def _later(a, b) -> bool:
    """True when time ``a`` is strictly later than time ``b`` (an unreadable time is earliest)."""
    ka, kb = _time_key(a), _time_key(b)
    return ka is not None and (kb is None or ka > kb)
