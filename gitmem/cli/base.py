"""What every command shares: its errors, its repository, its output.

    raise CliError("no such record")   # one line on stderr, exit 1
    with open_repo(args) as mem: ...   # the repository --repo names
    print_json(value)                   # --json
"""

from __future__ import annotations

import json
import os
import sys

from gitmem.errors import GitmemError, one_line


class CliError(GitmemError):
    """Bad input or an operation that cannot be done: printed as one line, exit 1."""


class UsageError(CliError):
    """A command given the wrong arguments, found after parsing: exit 2, as argparse's."""


def warn_on_stderr() -> None:
    """Send warnings (a refused hand edit, a packing failure) to stderr, one line each
    (``gitmem serve`` sends everything to its log file instead)."""
    import logging  # only here: a quick answer (quick_first) never loads it

    class OneLine(logging.Formatter):
        """``gitmem: message`` on one line; an exception logged with it is named on that
        line, never shown as a traceback."""

        def format(self, record: logging.LogRecord) -> str:
            text = " ".join(record.getMessage().split())
            if record.exc_info and record.exc_info[1] is not None:
                text += f": {one_line(record.exc_info[1])}"
            return f"gitmem: {text}"

    stderr = logging.StreamHandler()
    stderr.setFormatter(OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[stderr])  # once: then the root has one


def quick_first(run):
    """Mark command ``run`` as one that first tries to answer without opening the
    repository (and without logging); :func:`open_repo` sets up its warnings."""
    run.quick_first = True
    return run


def open_repo(args, *, create: bool = False):
    """The :class:`~gitmem.repository.Gitmem` named by ``--repo`` (or the default one); it
    must exist unless ``create``."""
    from gitmem.opening.location import locate_repo
    from gitmem.opening.policy import private_umask
    from gitmem.repository import Gitmem
    from gitmem.edits.rewrites import look
    warn_on_stderr()
    private_umask()
    mem = Gitmem.open(locate_repo(args.repo)[0], create=create)
    try:  # what a person's git commit or reset dropped: put back, or kept and said once
        look(mem.engine)
    except Exception as exc:  # a damaged repository: the command itself says what it finds
        import logging
        logging.getLogger("gitmem.cli").info("main's moves not looked at: %s", exc)
    return mem


def write_pieces(pieces: list[bytes]) -> None:
    """``pieces`` on stdout in order, handed to the kernel up to a thousand at a time
    (``writev``): a big answer is neither joined into one more copy nor written a piece a
    system call, and a pipe it goes into is widened first (:mod:`gitmem.git.pipes`)."""
    from gitmem.git.pipes import DEFAULT_PIPE_SIZE, widen_pipe
    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a caller's own stream)
        sys.stdout.buffer.writelines(pieces)
        sys.stdout.flush()
        return
    if sum(map(len, pieces)) > DEFAULT_PIPE_SIZE:  # a big answer: in a few turns with the reader
        widen_pipe(fd)
    for start in range(0, len(pieces), 1024):
        batch = [memoryview(piece) for piece in pieces[start:start + 1024] if piece]
        first = 0
        while first < len(batch):
            written = os.writev(fd, batch[first:])
            while first < len(batch) and written >= len(batch[first]):
                written -= len(batch[first])
                first += 1
            if written:  # the kernel took part of a piece
                batch[first] = batch[first][written:]


def print_json(value) -> None:
    """``value`` as indented JSON on stdout, for scripts (``--json``)."""
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
