"""The times a question names: "in May 2023", "on 13 October, 2023", "in June", "last week".

A question's search ranks the units dated within a time it names (a message's or
event's own date, else the date of the commit that brought it) above the others
(:data:`gitmem.search.query.DATE_BOOST`). What is told of a time is often told a little
after it ("last Friday I ran a race"), so each period reaches :data:`TOLD_AFTER` past its
end. English only; a question naming no time gets no period.

    periods("What did Maria donate in December 2023?")   # [Period(start, end, None)]
    periods("When did Melanie go camping in June?")      # [Period(None, None, 6)]: any June
"""

from __future__ import annotations

import re
import time
from collections import namedtuple
from datetime import datetime, timedelta, timezone

DAY = 86_400
TOLD_AFTER = 7 * DAY  # what happened in a period is told up to a week after it

_MONTHS = ("january february march april may june july august september october november "
           "december").split()
_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|" \
         r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_YEAR = r"((?:19|20)\d\d)"
_DAY_NUMBER = r"(\d{1,2})(?:st|nd|rd|th)?"
# the longest forms first: a day of a month of a year, a month of a year, a year
_DAY_MONTH_YEAR = re.compile(rf"\b{_DAY_NUMBER}\s+(?:of\s+)?{_MONTH}\.?,?\s+{_YEAR}\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\.?\s+{_DAY_NUMBER},?\s+{_YEAR}\b", re.IGNORECASE)
_ISO_DAY = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b{_MONTH}\.?,?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)
_YEAR_ALONE = re.compile(rf"\b(?:in|of|during|since|from|until|by)\s+{_YEAR}\b", re.IGNORECASE)
# a month without a year: any year's; only after a word that makes it a time ("in May",
# not "May I")
_MONTH_ALONE = re.compile(rf"\b(?:in|during|since|until|by|early|late|mid|of|last|this)\s+"
                          rf"(?:-\s*)?{_MONTH}\b(?!\s+\d)", re.IGNORECASE)
_RELATIVE = re.compile(r"\b(yesterday|today|(?:last|this|past)\s+(?:week(?:end)?|month|year))\b",
                       re.IGNORECASE)


class Period(namedtuple("Period", "start end month")):
    """A time a question names: seconds since the epoch from ``start`` to ``end`` (the
    end open), or, for a month named without a year, ``month`` (1-12) of any year."""

    __slots__ = ()

    def holds(self, moment: float) -> bool:
        """True when ``moment`` (seconds since the epoch) lies in the period, or up to
        :data:`TOLD_AFTER` after it."""
        if self.month is None:
            return self.start <= moment < self.end + TOLD_AFTER
        day = datetime.fromtimestamp(moment, timezone.utc)
        told = datetime.fromtimestamp(moment - TOLD_AFTER, timezone.utc)
        return self.month in (day.month, told.month)


def periods(question: str, now: float | None = None) -> list[Period]:
    """The times ``question`` names (empty: none); relative ones ("last week") from
    ``now`` (default: the clock)."""
    found: list[Period] = []
    rest = question
    for pattern, period in ((_DAY_MONTH_YEAR, lambda m: _day(m[3], m[2], m[1])),
                            (_MONTH_DAY_YEAR, lambda m: _day(m[3], m[1], m[2])),
                            (_ISO_DAY, lambda m: _day(m[1], int(m[2]), m[3])),
                            (_MONTH_YEAR, lambda m: _month(int(m[2]), _month_number(m[1]))),
                            (_YEAR_ALONE, lambda m: _year(int(m[1]))),
                            (_MONTH_ALONE, lambda m: Period(None, None, _month_number(m[1])))):
        for match in pattern.finditer(rest):
            try:
                found.append(period(match))
            except ValueError:  # 31 February: no day
                continue
        rest = pattern.sub(" ", rest)  # a day's month and year are not named again alone
    now = time.time() if now is None else now
    for match in _RELATIVE.finditer(rest):
        found.append(_relative(match[1].lower().split()[-1], now))
    return found


def _month_number(name: str) -> int:
    return next(i for i, month in enumerate(_MONTHS, 1) if month.startswith(name.lower()[:3]))


def _day(year: str, month: str | int, day: str) -> Period:
    number = month if isinstance(month, int) else _month_number(month)
    start = datetime(int(year), number, int(day), tzinfo=timezone.utc)
    return _span(start, start + timedelta(days=1))


def _year(year: int) -> Period:
    return _span(datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc))


def _month(year: int, month: int) -> Period:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    return _span(start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc))


def _span(start: datetime, end: datetime) -> Period:
    # a day of a date written without a zone: from the first zone's start to the last one's end
    return Period(start.timestamp() - 14 * 3600, end.timestamp() + 12 * 3600, None)


def _relative(unit: str, now: float) -> Period:
    back = {"yesterday": 2 * DAY, "today": DAY, "week": 7 * DAY, "weekend": 7 * DAY,
            "month": 31 * DAY, "year": 366 * DAY}[unit]
    return Period(now - back, now, None)
