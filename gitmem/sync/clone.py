"""``gitmem clone URL [PATH]``: a second machine in one command.

The clone is made the way gitmem makes its repositories, not by ``git clone``: the
folder is private (0700, files 0600), ``main`` is the branch, the remote is
``origin`` (``branch.main.remote``), the work tree is written by the engine so the
hand-edit state starts in step, and a remote without a ``main`` yet gets gitmem's
first commit (pushed by the first ``gitmem sync``). So ``gitmem sync`` on the second
machine fast-forwards and pushes; it never merges two root commits.

    gitmem clone git@example.org:me/memory.git ~/gitmem
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.opening.location import default_repo_path
from gitmem.opening.policy import (ENV_DURABILITY, make_private, refuse_a_folder_inside_a_repository,
                                   refuse_a_foreign_remote)
from gitmem.repository import Gitmem

REMOTE = "origin"

log = logging.getLogger("gitmem.sync.clone")


class CloneError(EngineError):
    """A clone that could not be made; nothing is left behind."""


def clone(url: str, path: str | os.PathLike | None = None, *, remote: str = REMOTE,
          progress: Callable[[int, int], None] | None = None) -> Gitmem:
    """Clone the gitmem repository at ``url`` into ``path`` (default: the default
    repository) and build its record index (``progress(done, total)`` as the history
    is read); returns it open. Refuses a ``path`` that exists and is not an empty
    folder, and a remote that holds something other than gitmem's records."""
    target = Path(path).expanduser() if path is not None else default_repo_path()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise CloneError(f"{target} exists and is not an empty folder: clone into a new path")
    refuse_a_folder_inside_a_repository(target)
    made = not target.exists()
    try:
        engine = GitEngine.open(target, create=True,
                                durability=os.environ.get(ENV_DURABILITY) or "fast")
        try:
            engine.remotes.add(remote, url)
            engine.set_config_default("branch.main.remote", remote)
            engine.set_config_default("branch.main.merge", "refs/heads/main")
            engine.set_config_default("core.sharedRepository", "0600")  # plain git's writes too
            tip = engine.remotes.fetch(remote)
            refuse_a_foreign_remote(engine, remote, tip, named=url, undone="nothing cloned")
            if tip is not None:
                engine.fast_forward(None, tip)
        finally:
            engine.close()
        make_private(target, gitdir=target / ".git")  # an existing folder, git's own files
        mem = Gitmem.open(target, create=True)
    except BaseException:
        if made:
            shutil.rmtree(target, ignore_errors=True)
        else:  # the empty folder we were given stays, empty
            for child in target.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink()
        raise
    try:  # the first history command finds the index ready
        mem.record_index.progress = progress
        mem.record_index.catch_up()
    except EngineError as exc:  # a damaged object: the history commands say which
        log.warning("the record index was not built: %s", exc)
    finally:
        mem.record_index.progress = None
    return mem
