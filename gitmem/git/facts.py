"""What a git work tree holds, looked at before gitmem opens it (nothing is written)."""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

import pygit2

from gitmem.git.base import EngineError
from gitmem.git.files import opened_by_gitmem
from gitmem.git.objects import LooseObjectDamaged, read_loose_object


class RepositoryFacts(namedtuple("RepositoryFacts", "branch has_commits top_names opened_by_gitmem")):
    """What a git work tree holds, looked at before gitmem opens it (nothing is written):
    the ``branch`` HEAD names ("master"; None when HEAD is detached), whether that branch
    ``has_commits``, the ``top_names`` at the top of HEAD's tree (a tuple), and whether it
    was ``opened_by_gitmem`` before (:func:`gitmem.git.files.opened_by_gitmem`)."""

    __slots__ = ()


def inspect_repository(path: str | os.PathLike) -> RepositoryFacts | None:
    """The facts of the git work tree whose top is ``path``; None when ``path`` is not one
    (missing, a plain folder, a bare repository, or a folder inside a work tree)."""
    repo = open_work_tree(path)
    if repo is None:
        return None
    head = repo.references.get("HEAD")
    target = head.target if head is not None else None
    branch = target[len("refs/heads/"):] if isinstance(target, str) and \
        target.startswith("refs/heads/") else None
    opened = opened_by_gitmem(repo.path)
    names: tuple[str, ...] = ()
    if not opened and not repo.head_is_unborn:
        names = _top_names(repo)
    return RepositoryFacts(branch, not repo.head_is_unborn, names, opened)


def open_work_tree(path: str | os.PathLike, *, or_git_folder: bool = False) -> pygit2.Repository | None:
    """The repository whose work tree's top is ``path`` (with ``or_git_folder``: or whose git
    folder, or bare repository, it is); None when there is none (missing, a plain folder,
    a folder inside a work tree). Raises as :func:`open_trusted`."""
    path = Path(path)
    found = pygit2.discover_repository(str(path)) if path.is_dir() else None
    tops = [(path / ".git").resolve(), *([path.resolve()] if or_git_folder else [])]
    return open_trusted(path) if found and Path(found).resolve() in tops else None


def open_trusted(path: Path) -> pygit2.Repository:
    """The repository at ``path``; :class:`EngineError` saying how to trust it when it
    belongs to another user (git refuses those too: their config could run commands)."""
    try:
        return pygit2.Repository(str(path))
    except pygit2.GitError as exc:
        if "not owned by current user" not in str(exc):
            raise
        raise EngineError(f"{path} belongs to another user, so git does not trust it; if you "
                          f"do, run `git config --global --add safe.directory {path.resolve()}`") from None


def _top_names(repo: pygit2.Repository) -> tuple[str, ...]:
    """The names at the top of HEAD's tree; () when its commit or tree is damaged (libgit2
    would spin on a truncated loose object; opening the engine names the damage)."""
    objects = Path(repo.path) / "objects"
    oid = str(repo.head.target)
    for _ in range(2):  # the commit, then its tree
        try:
            kind, content = read_loose_object(str(objects / oid[:2] / oid[2:]), oid)
        except FileNotFoundError:  # packed: libgit2 checks those itself
            break
        except LooseObjectDamaged:
            return ()
        if kind != b"commit":
            break
        oid = content.split(b"\n", 1)[0].split(b" ")[-1].decode()
    # pygit2 types a tree entry's name optional; it is never None
    return tuple(entry.name for entry in repo.head.peel(pygit2.Commit).tree)  # type: ignore[misc]
