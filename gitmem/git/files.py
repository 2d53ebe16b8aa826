"""gitmem's own files in ``.git/gitmem/`` (caches, states): replaced whole, atomically. No pygit2.

    write_private(private_dir / "thread-listing.json", data)
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

BRANCH = "main"
REF = f"refs/heads/{BRANCH}"
GITMEM_DIR = "gitmem"  # inside .git/: gitmem's own files
IN_FLIGHT_FILE = "in-flight"  # in .git/gitmem/: the commit whose files are being written, before main moves
FILE_MODE = 0o600


def write_private(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` atomically (a temporary file beside it, then a
    rename), as a 0600 file; raises OSError (a read-only repository, a full disk) with
    nothing left behind."""
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
