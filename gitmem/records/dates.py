"""Dates as people write them, and commit times as people read them.

    parse_time("3 days ago")       # seconds since the epoch; None: not a date
    parse_time("2026-11-01")       # the last second of that day, local time
    format_date(1793534400, 120)   # "2026-11-01T14:00:00+02:00": in the committer's zone

What ``parse_time`` does not read (``last friday``, ``noon yesterday``) git may:
:func:`gitmem.history.versions.resolve_when` asks it.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from gitmem.errors import HistoryError

_AGO = re.compile(r"(\d+)\s*(second|minute|hour|day|week|month|year)s?\s+ago")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400,
                 "month": 30 * 86400, "year": 365 * 86400}
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ].+)?")


def parse_time(text: str, *, now: float | None = None) -> float | None:
    """Seconds since the epoch for a date or relative time, None when ``text`` is neither.

    A date without a zone is local time, and a date without a time of day its end (as
    it was that day); ``N months ago`` counts 30 days a month. A date that cannot be
    (``2026-13-01``) raises :class:`~gitmem.errors.HistoryError`.
    """
    text = text.strip()
    now = time.time() if now is None else now
    lowered = text.lower()
    if lowered in ("now", "today"):
        return now
    if lowered == "yesterday":
        return now - 86400
    match = _AGO.fullmatch(lowered)
    if match:
        return now - int(match[1]) * _UNIT_SECONDS[match[2]]
    if text.startswith("@") and text[1:].isdigit():
        return float(text[1:])
    match = _ISO_DATE.fullmatch(text)
    if match:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise HistoryError(f"not a valid date: {text!r} ({exc})") from None
        if match[1] is None:  # a day: its last second (commit times are whole seconds)
            moment += timedelta(days=1, seconds=-1)
        return moment.timestamp()  # a naive datetime is taken as local time
    return None


def format_date(seconds: int, offset_minutes: int) -> str:
    """A commit time as ISO 8601 in the committer's zone."""
    zone = timezone(timedelta(minutes=offset_minutes))
    return datetime.fromtimestamp(seconds, zone).isoformat(timespec="seconds")
