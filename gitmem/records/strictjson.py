"""JSON without NaN, Infinity or numbers beyond a float's range, at every entry.

Python's json module reads and writes ``NaN`` and ``Infinity``, which are not JSON:
nui and kaboo could not read a record holding one. The wire refuses them while
parsing a request; the CLI, the import and the Python API stores refuse them with the
same words.

    loads('{"n": NaN}')        # NonFiniteNumber: NaN is not JSON
    dumps({"n": float("inf")}) # NonFiniteNumber: Infinity is not JSON
    same_json(1, True)         # False: Python's == says True, JSON's texts differ
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable
from typing import Any

from gitmem.errors import InvalidInput


class NonFiniteNumber(InvalidInput):
    """NaN, Infinity or a number beyond a float's range."""


def reject_constant(name: str) -> Any:
    """json's ``parse_constant`` hook: ``NaN``, ``Infinity`` and ``-Infinity`` are refused."""
    raise NonFiniteNumber(f"{name} is not JSON")


def finite_float(text: str) -> float:
    """json's ``parse_float`` hook: a number that overflows a float (``1e400``) is refused."""
    number = float(text)
    if math.isinf(number):
        brief = text if len(text) <= 80 else text[:80] + "..."
        raise NonFiniteNumber(f"number out of range: {brief}")
    return number


def loads(text: str | bytes) -> Any:
    """The JSON value in ``text``, refusing what is not JSON (json.JSONDecodeError) and
    non-finite numbers (:class:`NonFiniteNumber`)."""
    return json.loads(text, parse_constant=reject_constant, parse_float=finite_float)


def check_finite(value: Any) -> None:
    """Raise :class:`NonFiniteNumber` when ``value`` holds a NaN or an infinite float."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            name = "NaN" if math.isnan(item) else "Infinity" if item > 0 else "-Infinity"
            raise NonFiniteNumber(f"{name} is not JSON")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps(value, **options)`` refusing non-finite numbers with the words of
    :func:`loads` (checked only when json itself finds one, so it costs nothing)."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:
        check_finite(value)
        raise


def same_json(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same JSON: Python's ``==`` takes ``1``, ``1.0``
    and ``true`` for one another and ignores key order, and a store that asked it whether
    anything changed would not store such a change. Equal values are told apart by their
    encodings (msgspec's, ten times json's speed); lists of the very same objects, as
    the stores' fast paths hand them, are not encoded."""
    if a is b:
        return True
    if type(a) is list and type(b) is list and len(a) == len(b) and all(map(operator.is_, a, b)):
        return True
    if a != b:
        return False
    global _encode
    if _encode is None:
        import msgspec  # here: reads and memory writes never compare values
        _encode = msgspec.json.Encoder().encode
    try:
        return _encode(a) == _encode(b)
    except (TypeError, ValueError, OverflowError):  # not JSON: not the same, and dumps says why
        return False


_encode: Callable[[Any], bytes] | None = None
