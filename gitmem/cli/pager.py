"""A pager and colours for output a person reads on a terminal, as git does them.

    with paged(enabled=not args.no_pager):      # stdout goes to $GIT_PAGER, $PAGER or less
        print(yellow(commit_id, use_colour(args.color)))

The pager runs only when stdout is a terminal; ``LESS=FRX`` (and ``LV=-c``) are set
unless already set, so ``less`` quits at once on output that fits the screen and lets
colours through. gitmem waits for the pager (the person reading) at most
:data:`PAGER_WAIT`, and ends it when gitmem itself is told to stop (SIGTERM, SIGHUP), so
no pager outlives gitmem.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping

PAGER_WAIT = 8 * 3600.0  # seconds a person may read before the pager is ended (a working day)
END_WAIT = 5.0  # seconds an ended pager has to exit before it is killed
PAGER_ENV = {"LESS": "FRX", "LV": "-c"}  # git's defaults, for a variable not set already
COLOURS = ("auto", "always", "never")
_ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_SHELL_SYNTAX = re.compile(r"[|&;<>()$`\\\"'*?\[#~=%\n]")  # else: a program and its arguments
_YELLOW, _RESET = "\x1b[33m", "\x1b[m"


def pager_command(env: Mapping[str, str]) -> str | None:
    """``$GIT_PAGER``, else ``$PAGER``, else ``less``; None for an empty one or ``cat``."""
    command = env.get("GIT_PAGER")
    if command is None:
        command = env.get("PAGER", "less")
    return None if command.strip() in ("", "cat") else command


def use_colour(when: str) -> bool:
    """``--color=WHEN``: ``always``, ``never``, or ``auto``: when stdout is a terminal that
    is not ``TERM=dumb``, as git decides (before the pager takes stdout)."""
    if when != "auto":
        return when == "always"
    term = os.environ.get("TERM")
    return sys.stdout.isatty() and bool(term) and term != "dumb"


def yellow(text: str, colour: bool) -> str:
    """``text`` in git's colour for commit ids, when ``colour``."""
    return f"{_YELLOW}{text}{_RESET}" if colour else text


@contextlib.contextmanager
def paged(enabled: bool = True) -> Iterator[None]:
    """Inside, ``sys.stdout`` writes to the pager, when ``enabled`` and stdout is a
    terminal; on the way out gitmem waits for the person to leave it. The person leaving
    the pager before the end is no error: the rest is not shown."""
    pager = _start(pager_command(os.environ)) if enabled and sys.stdout.isatty() else None
    if pager is None:
        yield
        return
    terminal = sys.stdout
    sys.stdout = io.TextIOWrapper(pager.stdin, encoding=terminal.encoding, errors=terminal.errors)
    ended: list[int] = []

    def end(signum, _frame) -> None:
        ended.append(signum)
        raise SystemExit(128 + signum)

    before = {signum: signal.signal(signum, end) for signum in _ENDING_SIGNALS}
    try:
        try:
            yield
            sys.stdout.flush()
        except BrokenPipeError:  # the pager has gone: nothing more to show
            pass
        finally:  # also after Ctrl-C: the pager shows what it has, as git's does
            into_pager, sys.stdout = sys.stdout, terminal
            with contextlib.suppress(BrokenPipeError):
                into_pager.close()  # the end of its input
            if not ended:
                # Ctrl-C now belongs to the pager (less takes it to stop a search).
                before.setdefault(signal.SIGINT, signal.signal(signal.SIGINT, signal.SIG_IGN))
                with contextlib.suppress(subprocess.TimeoutExpired):
                    pager.wait(PAGER_WAIT)
    finally:
        _end(pager)
        for signum, handler in before.items():
            signal.signal(signum, handler)


def _start(command: str | None) -> subprocess.Popen | None:
    """The pager running ``command`` (through ``sh`` only when it is shell syntax), its
    stdin a pipe; None when there is none to run or it cannot start."""
    if command is None:
        return None
    argv = ["/bin/sh", "-c", command] if _SHELL_SYNTAX.search(command) else command.split()
    sys.stdout.flush()
    try:
        return subprocess.Popen(argv, stdin=subprocess.PIPE,
                                env={**PAGER_ENV, **os.environ})
    except OSError:  # no such program: the output goes to the terminal, as git does
        return None


def _end(pager: subprocess.Popen) -> None:
    """Make sure ``pager`` has exited: asked to (SIGTERM), then killed."""
    if pager.poll() is not None:
        return
    pager.terminate()
    try:
        pager.wait(END_WAIT)
    except subprocess.TimeoutExpired:
        pager.kill()
        pager.wait(END_WAIT)
