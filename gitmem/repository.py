"""A gitmem repository: the git engine with the record stores on top.

    with Gitmem.open("~/gitmem") as mem:
        mem.memory.write("prefers short answers", mode="append")
        mem.sessions.write("claude-code", "s1", [{"role": "user", "content": "hi"}])
        mem.log("user")   # commits that touched user memory, newest first
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.edits import quick_reads
from gitmem.edits.handedits import HandEdits
from gitmem.git.base import BRANCH, REF, CommitInfo, EngineError, MissingRepository
from gitmem.git.engine import GitEngine
from gitmem.git.facts import RepositoryFacts, inspect_repository
from gitmem.history import versions as history
from gitmem.history.record_index import RecordIndex
from gitmem.records import layout
from gitmem.records.location import default_repo_path, gitmem_repository_holding
from gitmem.stores import MemoryStore, SessionStore, ThreadStore
from gitmem.stores.memory_tree import MemoryTree

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gitmem.git.base import Identity
    from gitmem.history.blame import Blamed
    from gitmem.search.index import SearchHit, SearchIndex
    from gitmem.search.neighbours import UnitRead

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
    branches = engine.remote_branches(remote, interactive=interactive, timeout=timeout)
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
    later private by ``core.sharedRepository=0600``, which :meth:`Gitmem.open` sets;
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
    for remote in engine.remotes():
        tip = engine.remote_tip(remote)
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


class Gitmem:
    """One repository and its stores: ``memory``, ``memory_tree``, ``sessions`` and ``threads``."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self.memory = MemoryStore(engine)
        self.memory_tree = MemoryTree(engine)  # the /memories tree of Claude's memory tool
        self.sessions = SessionStore(engine)
        self.threads = ThreadStore(engine)
        self.record_index = RecordIndex(engine)  # read when a record's history is asked for
        self._search_index: SearchIndex | None = None  # made on the first search

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, create: bool = True,
             hand_edits: bool = True, adopt: bool = False, **engine_options) -> Gitmem:
        """Open (and, when ``create``, initialise) the repository at ``path`` or the default one.

        A git repository that gitmem did not make (a project's code) is refused with
        :class:`ForeignRepository` unless ``adopt``; even then only on branch ``main``.
        Nothing is written into a refused one. Without ``create`` a missing repository is
        :class:`MissingRepository`, naming the one probably meant; a folder inside a gitmem
        repository is never one (:class:`NotAFolderOfItsOwn`).
        The first time gitmem opens a repository (a plain ``git clone``), the files git
        created are made private (0600, folders 0700).

        ``durability`` (an engine option) defaults to ``$GITMEM_DURABILITY``, else "fast".
        ``hand_edits`` commits a person's uncommitted edit of a record before the record
        is read or written (:mod:`gitmem.edits.handedits`): the engine is opened with the
        hand-edit part, which the stores' reads and writes then go through.
        """
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
        if foreign and facts is not None and not adopt:
            raise ForeignRepository(
                f"{_shown(path)} is a git repository that gitmem did not make ({_describe(facts)}): "
                f"use another path, or `gitmem init --adopt {_shown(path)}` to keep records in it")
        if foreign and facts is not None and facts.branch != BRANCH:  # foreign: it has commits
            raise ForeignRepository(
                f"{_shown(path)} is on branch {facts.branch or '(detached HEAD)'}, and gitmem keeps "
                f"its records on {BRANCH}: rename the branch (`git -C {_shown(path)} branch -m "
                f"{facts.branch or 'NAME'} {BRANCH}`) and run again")
        try:
            engine = GitEngine.open(path, create=create, hand_edits=HandEdits if hand_edits else None,
                                    **engine_options)
        except MissingRepository:
            raise _missing(path) from None
        mem = cls(engine)
        if facts is not None and not facts.has_commits and facts.branch != BRANCH:
            mem.engine.refs.point_head_at_main()  # no commit yet: no second branch, only a name
        if facts is not None and not facts.has_commits and mem.engine.writable:
            _take_a_fetched_main(mem.engine)
        if facts is None or not facts.opened_by_gitmem:
            if mem.engine.writable:  # a read-only repository is only read
                mem.engine.set_config_default("core.sharedRepository", "0600")
            make_private(mem.engine.workdir, own_folder=not foreign and not adopt,
                         gitdir=mem.engine.gitdir)
            if mem.engine.writable:
                # the chmods changed every file's ctime: with the index's stat data stale, each
                # later look at the work tree (a search, gitmem status) would hash every file
                mem.engine.refresh_index()
        if create and mem.engine.head() is None:
            mem.init_files()
        return mem

    def init_files(self) -> str | None:
        """Commit the repository README and ``.gitattributes`` from ``templates/repo/``."""
        files = template_files("repo")
        snapshot = self.engine.snapshot()
        missing = {p: data for p, data in files.items()  # a folder's own README stays its own
                   if not snapshot.exists(p) and not (self.engine.workdir / p).exists()}
        if not missing:
            return None
        self._write_info_attributes(files.get(".gitattributes", b""))
        return self.engine.commit(missing, "init: gitmem repository", {"Gitmem-Op": "init"})

    def _write_info_attributes(self, attributes: bytes) -> None:
        info = self.engine.gitdir / "info"
        info.mkdir(exist_ok=True)
        (info / "attributes").write_bytes(attributes)

    def log(self, record: str | None = None, *, limit: int | None = None) -> list[CommitInfo]:
        """Commits that touched ``record`` (``user``, ``agent:<id>``, ...; None for all), newest first."""
        if record is None:
            return self.engine.history(None, limit=limit)
        return history.record_commits(self, layout.parse_record(record), limit=limit)

    # -- history (gitmem.history.versions; WHEN is a revision or a date such as "3 days ago") --

    def changes(self, record: str | None = None, *, limit: int | None = None) -> list[history.LogEntry]:
        """Like :meth:`log`, each commit with a one-line summary of what it changed there."""
        return history.log(self, record, limit=limit)

    def show(self, record: str, at: str) -> history.Shown:
        """``record`` as it was at WHEN ``at``."""
        return history.show(self, record, at)

    def diff(self, record: str, since: str | None = None, until: str | None = None) -> history.RecordDiff:
        """What changed in ``record`` between two WHENs (default: its beginning, now)."""
        return history.diff(self, record, since, until)

    def restore(self, record: str, at: str, *, trailers: Mapping[str, str] | None = None,
                author: Identity | None = None) -> history.Restored:
        """Write ``record`` back as it was at WHEN ``at``, as one new commit (with the
        caller's ``trailers`` and ``author``, when a face names itself and the person)."""
        return history.restore(self, record, at, trailers=trailers, author=author)

    def recent(self, since: str, *, limit: int = 50) -> list[history.RecentChange]:
        """What changed across every record since WHEN ``since``, newest first, each change
        with its diff; a person's edits waiting in the work tree are committed first."""
        hand_edits = self.engine.hand_edits
        if isinstance(hand_edits, HandEdits):
            hand_edits.before_access_all()
        return history.recent(self, since, limit=limit)

    def blame(self, record: str) -> list[Blamed]:
        """Each block of a memory, or each message and event of a session or thread, with
        the commit that introduced it."""
        from gitmem.history.blame import blame
        return blame(self, record)

    def session_json(self, agent_type: str, session_id: str) -> tuple[list[bytes], str]:
        """:meth:`SessionStore.read_json_pieces` after the session's hand edits are taken in;
        when the work tree then held HEAD's files of it, a stamp is kept so that the next
        process reads it from the work tree (:func:`gitmem.edits.quick_reads.session_json`)."""
        folder = self.sessions.folder(agent_type, session_id)
        hand_edits = self.engine.hand_edits
        look = hand_edits.settled_look(folder) if isinstance(hand_edits, HandEdits) else None
        head = self.engine.snapshot()
        found = self.sessions.read_json_pieces(agent_type, session_id, snapshot=head)
        if look is not None and self.engine.writable and head.id == look.head:
            quick_reads.keep_stamp(self.engine, folder, head, look.started_ns)
        return found

    @property
    def search_index(self) -> SearchIndex:
        """The search index (:mod:`gitmem.search.index`), loaded on first use."""
        if self._search_index is None:
            from gitmem.search.index import SearchIndex
            self._search_index = SearchIndex(self.engine)
        return self._search_index

    def search(self, query: str, history: bool = False, kind: str | None = None,
               record: str | None = None, since: str | None = None, until: str | None = None,
               limit: int = 20, at: str | None = None, context: int = 0, meaning: bool = False,
               progress=None, embed_at_most: int | None = None) -> list[SearchHit]:
        """The memory blocks, session messages and thread events matching ``query`` (any
        text: plain words, or operators, :mod:`gitmem.search.query`), best first; with
        ``history`` also text main no longer holds, with ``at`` (a WHEN) what main held
        then; ``context`` adds that many units on each side of a hit. ``meaning`` ranks by
        meaning too (:mod:`gitmem.search.meaning`; ``progress(done, total)`` hears of the
        units it embeds first, at most ``embed_at_most``, by default 2,000; the hits then
        say how many are left, ``hits.unembedded``)."""
        return self.search_index.search(query, history=history, kind=kind, record=record,
                                        since=since, until=until, at=at, context=context,
                                        limit=limit, meaning=meaning, progress=progress,
                                        embed_at_most=embed_at_most)

    def read_unit(self, record: str, unit_id: str | int, context: int = 0) -> list[UnitRead]:
        """The unit of ``record`` a search hit's ``unit_id`` names, at HEAD, with up to
        ``context`` units on each side (:mod:`gitmem.search.neighbours`)."""
        from gitmem.search.neighbours import read_unit, record_units
        return read_unit(record_units(self.memory, self.sessions, self.threads), record, unit_id,
                         context)

    def close(self) -> None:
        if self._search_index is not None:
            self._search_index.close()
        self.engine.close()

    def __enter__(self) -> Gitmem:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Gitmem", "EngineError", "ForeignRepository", "MissingRepository", "default_repo_path"]
