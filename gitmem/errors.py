"""The one error every entry shares: input the caller can correct.

An empty id or a non-finite number is refused the same way wherever it comes in:
one line on the CLI, a ``ValueError`` from the Python API, -32602 on the wire.
"""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input the caller can correct; the message says what is wrong with it."""

