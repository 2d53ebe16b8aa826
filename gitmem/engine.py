"""The old home of the git engine, kept while callers move to :mod:`gitmem.git`.

Every name is re-exported from the module of :mod:`gitmem.git` that holds it now; the
functions that took an engine call the method that replaced them.
"""

from __future__ import annotations

from collections.abc import Callable

from gitmem.git.base import (BRANCH, DIR_MODE, DURABILITIES, FILE_MODE, GITMEM_DIR, REF,  # noqa: F401
                             BranchMoved, Changes, CommitInfo, DamagedObject, DiskFull, EngineError,
                             Identity, UnsafePath, check_path, default_identity, user_identity)
from gitmem.git.engine import (FULL_DISK_MARGIN, MAX_CAS_RETRIES, OBJECT_WRITE_RETRIES,  # noqa: F401
                               REF_LOCK_WAIT, STAT_CACHE_FILE, TREE_CACHE_LIMIT, GitEngine)
from gitmem.git.facts import RepositoryFacts, inspect_repository  # noqa: F401
from gitmem.git.index import INDEX_IDLE, INDEX_MAX_DELAY, STALE_GIT_LOCK_AGE  # noqa: F401
from gitmem.git.log import RECOVERY_DEPTH, FileDiff  # noqa: F401
from gitmem.git.objects import (CHECKED_LIMIT, SOUND_TREE_FILE, LooseObjectDamaged,  # noqa: F401
                                read_loose_object)
from gitmem.git.refs import BACKUP_REFS, REFLOG_SCAN, RESCUE_REFS, ReflogEntry  # noqa: F401
from gitmem.git.remote import NETWORK_TIMEOUT, scrub_credentials  # noqa: F401
from gitmem.git.snapshot import Snapshot  # noqa: F401
from gitmem.git.worktree import OWN_WRITE_AGE_NS  # noqa: F401


def reflog(engine: GitEngine, limit: int = REFLOG_SCAN) -> list[ReflogEntry]:
    return engine.refs.reflog(limit)


def dropped_tips(engine: GitEngine, candidates: list[str], settled: list[str] | None = None) -> list[str]:
    return engine.refs.dropped_tips(candidates, settled)


def committer_of(engine: GitEngine, commit: str) -> Identity:
    return engine.refs.committer_of(commit)


def rescue_refs(engine: GitEngine) -> dict[str, str]:
    return engine.refs.rescue_refs()


def keep_for_rescue(engine: GitEngine, commit: str) -> str:
    return engine.refs.keep_for_rescue(commit)


def release_rescued(engine: GitEngine, commit: str) -> None:
    engine.refs.release_rescued(commit)


def point_head_at_main(engine: GitEngine) -> None:
    engine.refs.point_head_at_main()


def refs_under(engine: GitEngine, prefix: str) -> list[str]:
    return engine.refs.refs_under(prefix)


def delete_ref(engine: GitEngine, name: str) -> None:
    engine.refs.delete_ref(name)


def remove_remote(engine: GitEngine, name: str) -> None:
    engine.remove_remote(name)


def rewrite_commits(engine: GitEngine, commits: list[str], scope: str,
                    rewrite: Callable[[str, bytes], bytes], keep_ref: str,
                    message: str) -> tuple[str, list[str]]:
    return engine.rewrite_commits(commits, scope, rewrite, keep_ref, message)
