"""One unit of a record by its id, with its neighbours: what a search hit's ``unit_id``
reads back (``gitmem unit``, the MCP tool ``read_unit``, ``mem.read_unit``).

A unit's id is a message's own ``id``; else (a memory's block, a thread's event, a
message without one) its position in the record, from 0, as a search counts it.
In a thread, a text id names a message and a number an event.

    read_unit(units_of_record, "session:claude-code/s1", "m42", context=2)   # [UnitRead, ...]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from gitmem.errors import InvalidInput
from gitmem.records import layout
from gitmem.records.units import indexed_text, scrub, search_blocks, unit_date, value_text
from gitmem.stores.items import ItemStore

# (record, unit) -> the record's units of that kind at HEAD, in order: blocks as markdown,
# messages and events as JSON values
ReadUnits = Callable[[layout.Record, str], list[Any]]


class UnitRead(NamedTuple):
    """One unit read back: the one asked for (``asked``) or a neighbour."""

    record: str
    unit: str  # "block", "message", "event" or "item" (a store item: value, the item as its file holds it)
    unit_id: str | int
    date: str | None  # a message's or event's own date (None for a block: see gitmem log)
    text: str  # what search indexes of it
    value: Any  # the block's markdown, or the message or event as stored
    asked: bool

    def as_json(self) -> dict[str, Any]:
        """The object ``gitmem unit --json`` prints for this unit."""
        return self._asdict()


def read_unit(read_units: ReadUnits, record: str, unit_id: str | int, context: int = 0) -> list[UnitRead]:
    """The unit ``unit_id`` of ``record`` with up to ``context`` units on each side, in
    the record's order; :class:`InvalidInput` when the record holds no such unit."""
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise InvalidInput(f"context must be a whole number of at least 0, not {context!r}")
    if isinstance(unit_id, bool) or not isinstance(unit_id, (str, int)):
        raise InvalidInput(f"a unit id is a message's id or a position, not {unit_id!r}")
    parsed = layout.parse_record(record)
    kinds = {"session": ("message",), "thread": ("message", "event"),
             "store": ("item",)}.get(parsed.kind, ("block",))
    for unit in kinds:
        values = read_units(parsed, unit)
        at = _find(values, unit, unit_id, in_thread=parsed.kind == "thread")
        if at is not None:
            return [_read(parsed.name, unit, values[i], i, i == at)
                    for i in range(max(0, at - context), min(len(values), at + context + 1))]
    raise InvalidInput(f"{parsed.name} holds no unit {unit_id!r} (a search hit's unit_id: a "
                       "message's id, else a position from 0)")


def _find(values: list[Any], unit: str, unit_id: str | int, in_thread: bool) -> int | None:
    """Where ``unit_id`` is among ``values``: a message by its id first; in a thread a
    position names an event, elsewhere a unit."""
    if unit == "message" and isinstance(unit_id, str):
        found = next((i for i, value in enumerate(values) if _own_id(value) == unit_id), None)
        if found is not None or in_thread:
            return found
    if unit == "message" and in_thread:
        return None
    position = _position(unit_id)
    return position if position is not None and position < len(values) else None


def _position(unit_id: str | int) -> int | None:
    if isinstance(unit_id, int):
        return unit_id if unit_id >= 0 else None
    return int(unit_id) if unit_id.isascii() and unit_id.isdigit() else None


def _own_id(value: Any) -> str | None:
    found = value.get("id") if isinstance(value, dict) else None
    return found if isinstance(found, str) else None


def _read(record: str, unit: str, value: Any, position: int, asked: bool) -> UnitRead:
    if unit == "block":
        return UnitRead(record, unit, position, None, scrub(value), value, asked)
    if unit == "item":
        return UnitRead(record, unit, position, value["updated_at"],
                        indexed_text(value["value"], value["index"]), value, asked)
    return UnitRead(record, unit, own if unit == "message" and (own := _own_id(value)) is not None
                    else position, unit_date(value), value_text(value), value, asked)


def record_units(memory, sessions, threads, items: ItemStore) -> ReadUnits:
    """A :data:`ReadUnits` on the stores (:mod:`gitmem.stores`; the store items on the
    memory's repository unless ``items`` is given)."""

    def read(record: layout.Record, unit: str) -> list[Any]:
        if record.kind == "store":
            found = items.at(record.path)
            return [found._asdict()] if found is not None else []
        if record.kind in ("user", "agent"):
            return search_blocks(memory.read_file(record.path))  # no writer's read: a search is not one
        if record.kind == "session":
            return sessions.read(*record.ids)[0]
        if unit == "event":
            return threads.read_events(record.ids[0])
        return threads.read_messages(record.ids[0])
    return read
