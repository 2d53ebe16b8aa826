"""Counts in words: ``1 message``, ``2 messages``, ``1 agent memory``, ``2 agent memories``.

    counted(1, "message")                          # "1 message"
    counted(3, "agent memory", "agent memories")   # "3 agent memories"
"""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun``, in the plural (``plural``, else ``noun`` + "s") unless it is 1."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"
