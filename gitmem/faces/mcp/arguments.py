"""The MCP tools' arguments, checked: each a value of its kind, or a :class:`ToolError`
saying what to give instead (the one line of the tool's error result).

    query = string_of(args, "query")   # ToolError: '"query" is empty: give query a value'
"""

from __future__ import annotations

MAX_LIMIT = 1000
MAX_CONTEXT = 50


class ToolError(Exception):
    """A call the model can correct: its message is the one line the result holds."""


def string_of(args: dict, name: str) -> str:
    """A string argument, required, not empty, and text (no lone surrogate)."""
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f'"{name}" is required, as a string')
    if not value.strip():
        raise ToolError(f'"{name}" is empty: give {name} a value')
    try:  # stored as UTF-8: a lone surrogate is not text
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolError(f'"{name}" holds a lone surrogate at character {error.start}') from None
    return value


def path_of(args: dict, name: str) -> str:
    """A memory-tool path: any string (the tree says what is wrong with one)."""
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f'"{name}" is required, as a path under /memories')
    return value


def text_of(args: dict, name: str) -> str:
    """Text a command writes: any string, empty ones too (an emptied file, a removal)."""
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f'"{name}" is required, as a string')
    return value


def context_of(args: dict, default: int) -> int:
    """The units around a hit asked for: 0 to MAX_CONTEXT (``default`` when not given)."""
    context = args.get("context", default)
    if isinstance(context, bool) or not isinstance(context, int) or not 0 <= context <= MAX_CONTEXT:
        raise ToolError(f'"context" must be a whole number from 0 to {MAX_CONTEXT}, not {context!r}')
    return context


def limit_of(args: dict) -> int:
    """How many answers at most: 1 to MAX_LIMIT (20 when not given)."""
    limit = args.get("limit", 20)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ToolError(f'"limit" must be a whole number from 1 to {MAX_LIMIT}, not {limit!r}')
    return limit


PAGE = 1 << 20
"""Characters of a record one answer carries at most (1 MiB of text; as JSON at most 6 bytes
a character, so no answer line goes over 8 MiB): a longer record is read in pages."""


def page_of(args: dict) -> tuple[int, int]:
    """``(offset, limit)``: where a page of a record's text starts (0 when not given) and how
    many characters it holds at most (1 to :data:`PAGE`, PAGE when not given)."""
    offset, limit = args.get("offset", 0), args.get("limit", PAGE)
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ToolError(f'"offset" must be a whole number from 0, not {offset!r:.40}')
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= PAGE:
        raise ToolError(f'"limit" must be a whole number from 1 to {PAGE}, not {limit!r:.40}')
    return offset, limit


def flag(args: dict, name: str) -> bool:
    """A true-or-false argument, false when not given."""
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise ToolError(f'"{name}" must be true or false')
    return value
