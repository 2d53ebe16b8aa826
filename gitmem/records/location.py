"""Which repository a command uses: ``--repo``, ``$GITMEM_REPO``, the one holding the
current folder, or the default. No git is read here.

    locate_repo(None)   # (Path("~/.local/share/gitmem"), "the default"), say
"""

from __future__ import annotations

import os
from pathlib import Path

from gitmem.git.files import GITMEM_DIR

ENV_REPO = "GITMEM_REPO"


def default_repo_path() -> Path:
    """``$GITMEM_REPO``, else ``$XDG_DATA_HOME/gitmem``, else ``~/.local/share/gitmem``."""
    if os.environ.get(ENV_REPO):
        return Path(os.environ[ENV_REPO]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "gitmem"


def locate_repo(given: str | os.PathLike | None = None) -> tuple[Path, str]:
    """The repository a command uses, and why, as git finds its own: ``given`` (``--repo``),
    else ``$GITMEM_REPO``, else the gitmem repository holding the current folder (the
    nearest ``.git`` above it, when gitmem has opened it), else :func:`default_repo_path`."""
    if given:
        return Path(given).expanduser(), "--repo"
    if os.environ.get(ENV_REPO):
        return Path(os.environ[ENV_REPO]).expanduser(), f"${ENV_REPO}"
    try:
        here = Path.cwd()
    except OSError:  # the current folder was removed
        here = None
    for folder in (here, *here.parents) if here is not None else ():
        if (folder / ".git").exists():
            if (folder / ".git" / GITMEM_DIR).is_dir():
                return folder, "the gitmem repository holding the current folder"
            break
    return default_repo_path(), "the default"
