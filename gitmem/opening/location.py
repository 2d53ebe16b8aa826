"""Which repository a command uses: ``--repo``, ``$GITMEM_REPO``, the one holding the
current folder, or the default. No git is read here.

    locate_repo(None)   # (Path("~/.local/share/gitmem"), "the default"), say
"""

from __future__ import annotations

import os
from pathlib import Path

from gitmem.git.files import opened_by_gitmem

ENV_REPO = "GITMEM_REPO"
THE_DEFAULT = "the default"  # why locate_repo chose default_repo_path()


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
    holding = gitmem_repository_holding(here) if here is not None else None
    if holding is not None:
        return holding, "the gitmem repository holding the current folder"
    return default_repo_path(), THE_DEFAULT


def gitmem_repository_holding(folder: Path) -> Path | None:
    """The top of the work tree holding ``folder`` (the nearest ``.git`` at or above it)
    when gitmem has opened that repository; None when there is no such work tree, or it
    is not gitmem's (a project's code)."""
    for top in (folder, *folder.parents):
        if (top / ".git").exists():
            return top if opened_by_gitmem(top / ".git") else None
    return None
