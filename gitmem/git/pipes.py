"""Pipes that carry big texts: a request line of megabytes from a host, an answer of megabytes,
git's blobs read ahead.

A pipe holds 64 KiB by default, so a big text passes 64 KiB at a time, the writer waiting
for the reader to take each. Linux lets any process make a pipe hold up to
``/proc/sys/fs/pipe-max-size`` (1 MiB by default): the same text then passes in a
sixteenth of the turns (a 41 MB ``gitmem session read`` into a pipe: 195 ms down to 152 ms
on a 2-core box whose processes took turns slowly, no change when they took them quickly).

    widen_pipe(sys.stdout.fileno())
"""

from __future__ import annotations

import fcntl

PIPE_SIZE = 1 << 20  # bytes; Linux lets anyone set up to /proc/sys/fs/pipe-max-size (1 MiB)
DEFAULT_PIPE_SIZE = 1 << 16  # what a pipe holds unless widened


def widen_pipe(fd: int) -> None:
    """Let the pipe ``fd`` holds hold :data:`PIPE_SIZE` bytes, unless it holds more already;
    nothing for what is not a pipe, off Linux, or past the system's limit."""
    try:
        if fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ) < PIPE_SIZE:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except (AttributeError, OSError):  # not Linux, not a pipe, or above the system's limit
        pass
