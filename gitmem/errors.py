"""The errors every layer shares, and the one way an error is said in one line.

:class:`GitmemError` is the base of every error gitmem raises to its caller (the engine's
included: this module imports nothing, so ``gitmem/git/`` may import it too), so
``except GitmemError`` catches gitmem's refusals and failures and nothing else.

An empty id or a non-finite number is refused the same way wherever it comes in:
one line on the CLI, a ``ValueError`` from the Python API, -32602 on the wire.
:func:`one_line` is how each face says an error in one line (the CLI's stderr, a
JSON-RPC error's message, an MCP tool's error, the site's error page).
"""

from __future__ import annotations


class GitmemError(Exception):
    """The base of gitmem's own errors; the message says what went wrong."""


class InvalidInput(GitmemError, ValueError):
    """Input the caller can correct; the message says what is wrong with it."""


class BrokenFile(GitmemError, ValueError):
    """A committed file of a record that does not parse (plain git let it in): ``path`` and
    ``line`` (None: the file as a whole) name it. gitmem never writes over it; a person
    fixes it."""

    def __init__(self, path: str, line: int | None, reason: str):
        where = f"{path} line {line}" if line else path
        super().__init__(f"{where}: {reason}; gitmem does not write over it: fix it by hand "
                         "(`gitmem status` lists it)")
        self.path, self.line, self.reason = path, line, reason


class HistoryError(GitmemError, ValueError):
    """A time or record that history cannot work with; the message says why."""


def one_line(error: BaseException) -> str:
    """``error``'s message on one line (its line breaks and runs of blanks one space; its
    class's name when it has none); a file system error as the file and the cause, without
    errno's "[Errno 17]"."""
    if isinstance(error, OSError) and error.strerror:
        cause = error.strerror[0].lower() + error.strerror[1:]
        return f"{error.filename}: {cause}" if error.filename else cause
    return " ".join(str(error).split()) or type(error).__name__
