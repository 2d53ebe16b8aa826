"""The activity page: what changed across all records in a window of time (today, this
week, or between two dates), and charts of the writes over time by record kind and by
client, drawn as SVG on the server.

A commit's client is what its trailers name (``Gitmem-Token``: a bearer token of
``/mcp``; ``Gitmem-Client``: an MCP client, or ``gitmem web``; ``Gitmem-Handler``: a nui
handler), else "hand edit" for a person's save, else its author. The commits and the records each changed come from the record
index (:mod:`gitmem.history.record_index`), so a window costs its own commits.
"""

from __future__ import annotations

import bisect
import dataclasses
import html
from collections import Counter
from datetime import datetime, timedelta

from gitmem.errors import HistoryError
from gitmem.faces.web.listing import KINDS
from gitmem.git.base import CommitInfo
from gitmem.records.dates import format_date, parse_time
from gitmem.records.layout import record_name
from gitmem.repository import Gitmem

KIND_COLOURS = {"user": "#4c78a8", "agent": "#f58518", "session": "#54a24b", "thread": "#b279a2"}
CLIENT_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")
MOST_CLIENTS = len(CLIENT_COLOURS) - 1  # the rest are drawn as "others"
SHOWN = 500  # commits listed at most (the charts count them all)


@dataclasses.dataclass(frozen=True)
class Change:
    """One commit of the window: what it is, the records it changed, and who made it."""

    commit: CommitInfo
    date: str
    records: tuple[str, ...]  # names, as gitmem log takes them
    kinds: tuple[str, ...]
    client: str


@dataclasses.dataclass(frozen=True)
class Activity:
    since: float
    until: float
    changes: list[Change]  # newest first
    buckets: list[tuple[float, str]]  # (start, label), oldest first
    by_kind: list[Counter]  # per bucket: writes by kind
    by_client: list[Counter]  # per bucket: writes by client


def window(choice: str, since: str = "", until: str = "", *, now: float | None = None) -> tuple[float, float]:
    """The window a page asks for: "today", "week" (the last seven days), or ``since`` to
    ``until`` (WHENs such as 2026-11-01 or "3 days ago"; ``until`` empty: now)."""
    moment = datetime.fromtimestamp(now) if now is not None else datetime.now()
    midnight = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if choice == "today":
        return midnight.timestamp(), moment.timestamp()
    if choice == "week":
        return (midnight - timedelta(days=6)).timestamp(), moment.timestamp()
    start = _moment(since, "since") if since else None
    end = _moment(until, "until") if until else moment.timestamp()
    if start is None:
        raise HistoryError("give the window's start: since, as 2026-11-01 or '3 days ago'")
    if start > end:
        raise HistoryError(f"since {since!r} is later than until {until or 'now'!r}: swap them")
    return start, end


def activity(mem: Gitmem, since: float, until: float) -> Activity:
    """The commits of main made from ``since`` to ``until`` (seconds since the epoch)."""
    indexed = mem.record_index.commits_between(since, until)
    infos = {c.id: c for c in mem.engine.log.commit_infos([c.id for c in indexed])}
    changes = []
    for found in indexed:
        info = infos[found.id]
        names = tuple(record_name(path) for path in found.records)
        changes.append(Change(info, format_date(info.time, info.offset), names,
                              tuple(sorted({_kind(name) for name in names}, key=KINDS.index)),
                              client_of(info)))
    buckets = _buckets(since, until)
    by_kind: list[Counter[str]] = [Counter() for _ in buckets]
    by_client: list[Counter[str]] = [Counter() for _ in buckets]
    starts = [start for start, _ in buckets]
    for change in changes:
        at = max(0, _bucket_of(starts, change.commit.time))
        by_kind[at].update(change.kinds)
        by_client[at][change.client] += 1
    return Activity(since, until, changes, buckets, by_kind, by_client)


def client_of(commit: CommitInfo) -> str:
    """Who made ``commit``, as the activity page groups writes."""
    trailers = commit.trailers
    if trailers.get("Gitmem-Token"):  # an agent elsewhere, through gitmem web's /mcp
        return f"token {trailers['Gitmem-Token']}"
    for key in ("Gitmem-Client", "Gitmem-Handler"):
        if trailers.get(key):
            return trailers[key]
    if trailers.get("Gitmem-Op") == "hand-edit":
        return "hand edit"
    return commit.author


def chart(buckets: list[tuple[float, str]], counts: list[Counter], colours: dict[str, str],
          *, title: str) -> str:
    """A stacked bar chart as SVG text: one bar a bucket, one colour a series, a legend."""
    width, height, left, bottom, top = 720, 220, 36, 40, 12
    series = list(colours)
    highest = max((sum(c[s] for s in series) for c in counts), default=0) or 1
    slot = (width - left - 8) / max(1, len(buckets))
    scale = (height - bottom - top) / highest
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + 20}" '
           f'role="img" aria-label="{html.escape(title)}" class="chart">',
           f'<text x="{left}" y="10" class="axis">{html.escape(title)} (most in one bar: {highest})</text>',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - 4}" y2="{height - bottom}" class="base"/>']
    label_every = max(1, len(buckets) // 8)
    for i, ((_, label), count) in enumerate(zip(buckets, counts, strict=True)):
        x = left + i * slot + 1
        y: float = height - bottom
        for name in series:
            if count[name]:
                h = count[name] * scale
                y -= h
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(1.0, slot - 2):.1f}" '
                           f'height="{h:.1f}" fill="{colours[name]}"><title>{html.escape(label)}: '
                           f'{count[name]} by {html.escape(name)}</title></rect>')
        if i % label_every == 0:
            out.append(f'<text x="{x:.1f}" y="{height - bottom + 14}" class="axis">{html.escape(label)}</text>')
    x = left
    for name in series:
        out.append(f'<rect x="{x}" y="{height}" width="10" height="10" fill="{colours[name]}"/>'
                   f'<text x="{x + 14}" y="{height + 9}" class="axis">{html.escape(name)}</text>')
        x += 24 + 7 * len(name)
    out.append("</svg>")
    return "\n".join(out)


def kind_chart(found: Activity) -> str:
    return chart(found.buckets, found.by_kind, KIND_COLOURS, title="writes by record kind")


def client_chart(found: Activity) -> str:
    totals: Counter[str] = Counter()
    for count in found.by_client:
        totals.update(count)
    top = [name for name, _ in totals.most_common(MOST_CLIENTS)]
    counts = []
    for count in found.by_client:
        folded = Counter({name: count[name] for name in top})
        others = sum(n for name, n in count.items() if name not in top)
        if others:
            folded["others"] = others
        counts.append(folded)
    names = top + (["others"] if any(c["others"] for c in counts) else [])
    return chart(found.buckets, counts, dict(zip(names, CLIENT_COLOURS, strict=False)), title="writes by client")


def _kind(name: str) -> str:
    return name.split(":", 1)[0]


def _moment(text: str, what: str) -> float:
    found = parse_time(text)
    if found is None:
        raise HistoryError(f"{what} {text!r} is not a date: use 2026-11-01, 2026-11-01T14:00, "
                           "yesterday or '3 days ago'")
    return found


def _buckets(since: float, until: float) -> list[tuple[float, str]]:
    """Hours for a window of up to two days, days up to 62, else weeks."""
    span = until - since
    step, form = (3600, "%H:00") if span <= 2 * 86400 else \
        (86400, "%m-%d") if span <= 62 * 86400 else (7 * 86400, "%Y-%m-%d")
    start = datetime.fromtimestamp(since)
    start = start.replace(minute=0, second=0, microsecond=0) if step == 3600 else \
        start.replace(hour=0, minute=0, second=0, microsecond=0)
    found = []
    at = start
    while at.timestamp() <= until:
        found.append((at.timestamp(), at.strftime(form)))
        at += timedelta(seconds=step)
    return found or [(since, start.strftime(form))]


def _bucket_of(starts: list[float], when: float) -> int:
    return bisect.bisect_right(starts, when) - 1
