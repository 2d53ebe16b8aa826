"""Whether a folder may be opened as a gitmem repository or made one, and what opening
does first: the policy :meth:`gitmem.repository.Gitmem.open` and ``gitmem clone`` follow.

A git repository gitmem did not make (a project's code) is refused unless adopted, and then
only on ``main``; a new repository goes into a new or empty folder of its own, never a home
folder or a folder inside a gitmem repository; a missing one is an error naming the one
probably meant. The first opening makes git's files private and commits the README and
``.gitattributes`` of ``templates/repo/``.

    engine = open_engine("~/gitmem", create=False)   # what Gitmem.open wraps
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gitmem.edits.handedits import HandEdits
from gitmem.git.base import BRANCH, REF, EngineError, MissingRepository
from gitmem.git.engine import GitEngine
from gitmem.git.facts import RepositoryFacts, inspect_repository
from gitmem.opening.location import default_repo_path, gitmem_repository_holding
from gitmem.records import layout

ENV_DURABILITY = "GITMEM_DURABILITY"  # "fast" (default) or "fsync": see GitEngine


def template_files(name: str) -> dict[str, bytes]:
    """The files of ``templates/<name>/`` as {relative path: bytes}."""
    from importlib import resources  # only a new repository needs it: not on every start
    root = resources.files("gitmem.templates") / name
    found: dict[str, bytes] = {}

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            path = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, path + "/")
            elif child.name != "__init__.py":
                found[path] = child.read_bytes()

    walk(root, "")
    return found


class ForeignRepository(EngineError):
    """A git repository that is not gitmem's, opened without ``adopt``."""


class NotAGitmemRepository(EngineError):
    """A remote whose ``main`` holds more than gitmem's records (a project's code)."""


class NotAFolder(EngineError):
    """A repository path that names a file."""


class NotAFolderOfItsOwn(EngineError):
    """A new repository asked for in a home folder, or in a folder holding other files; or
    a folder inside a gitmem repository given as a repository."""


# What the top of a gitmem repository holds; a repository with anything else there
# (src/, setup.py ...) belongs to a project, not to gitmem.
LAYOUT_NAMES = frozenset({"README.md", ".gitattributes", layout.ALLOW_SECRETS_FILE, *layout.TOP_FOLDERS})


def refuse_a_foreign_remote(engine: GitEngine, remote: str, tip: str | None, *, named: str,
                            undone: str, interactive: bool = True, timeout: float | None = None) -> None:
    """Raise :class:`NotAGitmemRepository` unless ``remote`` (``named`` so in the message)
    holds gitmem's records only: its ``main``, fetched as ``tip``, holds nothing else at its
    top, and without a ``main`` it has no branch at all (``undone``: what was not done,
    "nothing cloned"). Clone and sync share it: neither mixes a project's code with records."""
    if tip is not None:
        foreign = _foreign_names(engine.snapshot(tip).list())
        if foreign:
            raise NotAGitmemRepository(f"{named} is not a gitmem repository (its main holds "
                                       f"{_listed(foreign)}); {undone}")
        return
    branches = engine.remotes.branches(remote, interactive=interactive, timeout=timeout)
    if branches:
        raise NotAGitmemRepository(f"{named} is not a gitmem repository (it holds branch "
                                   f"{_listed(branches)} and no main); {undone}")


def _foreign_names(names) -> list[str]:
    """The names at the top of a tree that gitmem's layout does not hold (src/, setup.py ...)."""
    return [name for name in names if name not in LAYOUT_NAMES]


def _listed(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


def _is_gitmems(facts: RepositoryFacts) -> bool:
    if facts.opened_by_gitmem:
        return True
    if not facts.has_commits:
        return True  # nothing in it to mix records with
    return facts.branch == BRANCH and not _foreign_names(facts.top_names)


def _describe(facts: RepositoryFacts) -> str:
    names = _foreign_names(facts.top_names)
    return f"branch {facts.branch or '(detached)'}" + (f", holding {_listed(names)}" if names else "")


def make_private(workdir: Path, *, own_folder: bool = True, gitdir: Path | None = None) -> None:
    """Take group and other permissions off the records git wrote (0644 -> 0600, folders
    0700) and off everything in ``gitdir`` (objects, refs, the index...); when the folder
    is gitmem's ``own_folder``, off the folder itself and its README and ``.gitattributes``
    too (in an adopted folder those are the person's). Plain git keeps what it writes
    later private by ``core.sharedRepository=0600``, which :func:`open_engine` sets;
    libgit2 does not read it: gitmem's own processes write under a umask of 077
    (:func:`private_umask`)."""
    targets = [workdir / name for name in (LAYOUT_NAMES if own_folder else layout.TOP_FOLDERS)]
    if gitdir is not None:
        targets.append(gitdir)
    if own_folder:
        _chmod_private(workdir)
    for target in targets:
        if target.is_dir() and not target.is_symlink():
            for folder, _dirs, files in os.walk(target):
                _chmod_private(Path(folder))
                for name in files:
                    _chmod_private(Path(folder) / name)
        elif target.is_file() and not target.is_symlink():
            _chmod_private(target)


def private_umask() -> None:
    """Take group and other permissions off every file this process creates from now on
    (what libgit2 writes follows the umask alone). For processes that are gitmem's own
    (the command line, ``gitmem serve``), not for a program that imports gitmem."""
    os.umask(os.umask(0o077) | 0o077)


def _refuse_a_home_folder(path: Path) -> None:
    """A new git repository never goes into a home folder: every project below it would
    take it for its own."""
    if path.exists() and path.resolve() == Path.home().resolve():
        raise NotAFolderOfItsOwn(f"{path} is a home folder: every project below it would "
                                 "take it for its git repository; use a folder of its own, "
                                 f"like {default_repo_path()}")


def refuse_a_folder_inside_a_repository(path: Path) -> None:
    """A new repository never goes inside a gitmem repository: records would be nested in
    records, and each would take the other's files for hand edits."""
    holding = gitmem_repository_holding(Path(os.path.abspath(path)).parent)
    if holding is not None:
        raise NotAFolderOfItsOwn(f"{_shown(path)} is inside the gitmem repository {holding}: "
                                 f"use {holding} itself, or a folder outside it")


def _missing(path: Path) -> MissingRepository:
    """The error for no repository at ``path``: it names a gitmem repository whose name is
    close (a typo), else the default one, and how to create one there. A folder inside a
    gitmem repository is refused as that (:class:`NotAFolderOfItsOwn`)."""
    refuse_a_folder_inside_a_repository(path)
    nearest = _named_like(path)
    default = default_repo_path()
    if nearest is not None:
        hint = f" (did you mean {nearest}?)"
    elif _shown(default) != _shown(path) and gitmem_repository_holding(default) == default:
        hint = f" (the default one is {default})"
    else:
        hint = ""
    return MissingRepository(f"no gitmem repository at {_shown(path)}{hint}; `gitmem init "
                             f"{_shown(path)}` creates one")


def _named_like(path: Path) -> Path | None:
    """A gitmem repository beside the missing part of ``path`` whose name is close to its
    name (``agent-memroy`` for ``agent-memory``)."""
    path = Path(os.path.abspath(path))
    missing = path
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    try:
        names = [entry.name for entry in missing.parent.iterdir() if entry.name != missing.name]
    except OSError:  # not a folder, or not readable
        return None
    import difflib  # here: only a missing repository's error loads it
    by_lower = {name.lower(): name for name in names}
    for close in difflib.get_close_matches(missing.name.lower(), list(by_lower), n=3, cutoff=0.75):
        candidate = missing.parent / by_lower[close]
        if gitmem_repository_holding(candidate) == candidate:
            return candidate
    return None


def _shown(path: Path) -> Path:
    """``path`` as errors name it: absolute, as given (links not followed)."""
    return Path(os.path.abspath(path))


def _take_a_fetched_main(engine: GitEngine) -> None:
    """Start ``main`` from a remote's ``main`` already fetched, as `gitmem clone` does: a
    plain `git clone` of a remote whose HEAD names a branch it does not have (`git init
    --bare` names master) checks nothing out, and its memory would read as empty. Refused
    when that ``main`` holds more than gitmem's records."""
    for remote in engine.remotes.names():
        tip = engine.remotes.tip(remote)
        if tip is not None:
            refuse_a_foreign_remote(engine, remote, tip, named=remote, undone="nothing taken in")
            engine.fast_forward(None, tip)
            engine.set_config_default(f"branch.{BRANCH}.remote", remote)
            engine.set_config_default(f"branch.{BRANCH}.merge", REF)
            return


def _refuse_a_folder_of_its_own(path: Path) -> None:
    """A new repository goes into a new or empty folder (``adopt`` takes one as it is)."""
    names = sorted(entry.name for entry in path.iterdir() if entry.name != ".git") \
        if path.is_dir() else []
    if names:
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise NotAFolderOfItsOwn(f"{path} holds files of its own ({shown}): use a new or empty "
                                 f"folder, or `gitmem init --adopt {path}` to keep records "
                                 "beside them")


def _chmod_private(path: Path) -> None:
    mode = path.lstat().st_mode
    if mode & 0o077 and not stat.S_ISLNK(mode):
        path.chmod(stat.S_IMODE(mode) & 0o700)



def open_engine(path: str | os.PathLike | None = None, *, create: bool = True,
                hand_edits: bool = True, adopt: bool = False, **engine_options) -> GitEngine:
    """The engine of the repository at ``path`` (or the default one), opened (and, when
    ``create``, initialised) by the rules of :meth:`gitmem.repository.Gitmem.open`."""
    path = Path(path).expanduser() if path is not None else default_repo_path()
    if engine_options.get("durability") is None:
        engine_options["durability"] = os.environ.get(ENV_DURABILITY) or "fast"
    if path.exists() and not path.is_dir():
        raise NotAFolder(f"{path} is a file, not a folder: give the path of a folder "
                         "for the repository")
    facts = inspect_repository(path)
    new = facts is None or not (facts.has_commits or facts.opened_by_gitmem)
    if create and facts is None:
        _refuse_a_home_folder(path)
        refuse_a_folder_inside_a_repository(path)
    if create and new and not adopt:
        _refuse_a_folder_of_its_own(path)
    foreign = facts is not None and not _is_gitmems(facts)
    if facts is not None and foreign:
        if not adopt:
            raise ForeignRepository(
                f"{_shown(path)} is a git repository that gitmem did not make ({_describe(facts)}): "
                f"use another path, or `gitmem init --adopt {_shown(path)}` to keep records in it")
        if facts.branch != BRANCH:  # foreign: it has commits
            raise ForeignRepository(
                f"{_shown(path)} is on branch {facts.branch or '(detached HEAD)'}, and gitmem keeps "
                f"its records on {BRANCH}: rename the branch (`git -C {_shown(path)} branch -m "
                f"{facts.branch or 'NAME'} {BRANCH}`) and run again")
    try:
        engine = GitEngine.open(path, create=create, hand_edits=HandEdits if hand_edits else None,
                                **engine_options)
    except MissingRepository:
        raise _missing(path) from None
    if facts is not None and not facts.has_commits and facts.branch != BRANCH:
        engine.refs.point_head_at_main()  # no commit yet: no second branch, only a name
    if facts is not None and not facts.has_commits and engine.writable:
        _take_a_fetched_main(engine)
    if facts is None or not facts.opened_by_gitmem:
        if engine.writable:  # a read-only repository is only read
            engine.set_config_default("core.sharedRepository", "0600")
        make_private(engine.workdir, own_folder=not foreign and not adopt, gitdir=engine.gitdir)
        if engine.writable:
            # the chmods changed every file's ctime: with the index's stat data stale, each
            # later look at the work tree (a search, gitmem status) would hash every file
            engine.index.refresh()
    if create and engine.head() is None:
        commit_first_files(engine)
    return engine


def commit_first_files(engine: GitEngine) -> str | None:
    """Commit the repository README and ``.gitattributes`` from ``templates/repo/`` (a
    folder's own README stays its own); returns the commit id (None: nothing was missing)."""
    files = template_files("repo")
    snapshot = engine.snapshot()
    missing = {p: data for p, data in files.items()
               if not snapshot.exists(p) and not (engine.workdir / p).exists()}
    if not missing:
        return None
    info = engine.gitdir / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_bytes(files.get(".gitattributes", b""))
    return engine.commit(missing, "init: gitmem repository", {"Gitmem-Op": "init"})
