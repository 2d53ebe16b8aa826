"""What search sees of a record (gitmem/records/units.py): the units that a change removes and adds.

`unit_changes` takes a shortcut for an append of new texts; whatever the contents, it must
give what counting the units on both sides of the append's cut gives (the multiset
difference, in the order the counts list it), which the index's unit ids are made from.
"""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.records.units import unit_changes, units_of

TEXTS = st.sampled_from(["deploy on friday", "tabs", "the marmoset", "café", "tabs  ", "x" * 3])


def counted(unit: str, old: bytes, new: bytes) -> tuple[list[str], list[str]]:
    """The removed and added units, counted on both sides after the append's cut."""
    cut = 0
    if old and new.startswith(old):
        cut = max(old.rfind(b"\n\n"), 0) if unit == "block" else old.rfind(b"\n") + 1
    gone, came = Counter(units_of(unit, old[cut:])), Counter(units_of(unit, new[cut:]))
    return list((gone - came).elements()), list((came - gone).elements())


def memory(blocks: list[str]) -> bytes:
    return ("\n\n".join(blocks) + "\n").encode() if blocks else b""


def log(lines: list[str]) -> bytes:
    return b"".join(json.dumps({"role": "user", "content": text}).encode() + b"\n" for text in lines)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["block", "message"]), st.lists(TEXTS, max_size=5), st.lists(TEXTS, max_size=4),
       st.booleans())
def test_the_changes_are_what_counting_both_sides_gives(unit, before, after, appended):
    make = memory if unit == "block" else log
    old = make(before)
    new = make(before + after) if appended else make(after)
    assert unit_changes(unit, old, new) == counted(unit, old, new)
