"""The one error every entry shares: input the caller can correct.

An empty id or a non-finite number is refused the same way wherever it comes in:
one line on the CLI, a ``ValueError`` from the Python API, -32602 on the wire.
"""

from __future__ import annotations


class InvalidInput(ValueError):
    """Input the caller can correct; the message says what is wrong with it."""


class BadQuery(InvalidInput):
    """A search query that cannot be parsed (an unbalanced quote, a lone operator, nothing
    to search for); the message says what is wrong, in one line."""


class BrokenFile(ValueError):
    """A committed file of a record that does not parse (plain git let it in): ``path`` and
    ``line`` (None: the file as a whole) name it. gitmem never writes over it; a person
    fixes it."""

    def __init__(self, path: str, line: int | None, reason: str):
        where = f"{path} line {line}" if line else path
        super().__init__(f"{where}: {reason}; gitmem does not write over it: fix it by hand "
                         "(`gitmem status` lists it)")
        self.path, self.line, self.reason = path, line, reason


class HistoryError(ValueError):
    """A time or record that history cannot work with; the message says why."""
