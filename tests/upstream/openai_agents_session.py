"""A pytest plugin: the OpenAI Agents SDK's own session tests (``tests/memory/test_session.py``
of the ``openai-agents`` source package) run against ``gitmem.openai_agents.Session``. Each
``SQLiteSession(session_id, db_path)`` those tests make is a ``Session`` on a repository
beside ``db_path`` (``:memory:``: a repository of its own); the tests that probe SQLite alone
are deselected, each with its reason (docs/python.md lists them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitmem.openai_agents import Session
from upstream_common import deselect, made, said_made

_SQLITE = "probes what only an SQLite session has: "
_CONNECTIONS = _SQLITE + "reads _connections, SQLite connections per worker thread"
_CORRUPT = _SQLITE + ("writes corrupt rows through _locked_connection, a private SQLite method "
                      "(a line that is not JSON is left out of gitmem's reads too)")
_TABLES = _SQLITE + "opens the database file with sqlite3 and reads its tables"
NOT_APPLYING = {
    "test_sqlite_session_close_closes_worker_thread_connections": _CONNECTIONS,
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": _CONNECTIONS,
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _CONNECTIONS,
    "test_sqlite_session_keeps_connections_of_live_worker_threads": _CONNECTIONS,
    "test_sqlite_session_closed_rejects_empty_add_items": "matches the text 'SQLiteSession is closed'; "
    "gitmem raises the same RuntimeError as 'Session is closed'",
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": _CORRUPT,
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _CORRUPT,
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _CORRUPT,
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _CORRUPT,
    "test_sqlite_session_file_lock_is_shared_across_instances": _SQLITE + (
        "checks _lock identity and _file_lock_counts, SQLite's process-local lock per file "
        "(gitmem's writers share the repository's lock file)"),
    "test_sqlite_session_failed_add_items_releases_write_lock": _TABLES,
    "test_sqlite_session_failed_clear_session_rolls_back": _TABLES,
    "test_sqlite_session_failed_pop_item_releases_write_lock": _TABLES,
    "test_sqlite_session_rollback_failure_evicts_connection": _SQLITE + "a connection whose rollback fails",
    "test_sqlite_session_close_retries_quarantined_connection": _SQLITE + "a connection whose close fails",
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _SQLITE + (
        "pauses an SQLite commit through _connections_lock and a connection factory"),
}


class GitmemSession(Session):
    """``SQLiteSession(session_id, db_path)`` as the tests call it."""

    opened: list[Session] = []
    folders = None  # pytest's tmp_path_factory, set for each test

    def __init__(self, session_id, db_path=":memory:", create_tables=False, session_settings=None):
        if str(db_path) == ":memory:":
            repo = GitmemSession.folders.mktemp("session") / "repo"
        else:
            repo = Path(f"{db_path}.gitmem")
        super().__init__(session_id, repo=repo, session_settings=session_settings)
        GitmemSession.opened.append(self)
        made["count"] += 1


@pytest.fixture(autouse=True)
def _gitmem_session(request, monkeypatch, tmp_path_factory):
    GitmemSession.folders = tmp_path_factory
    if hasattr(request.module, "SQLiteSession"):
        monkeypatch.setattr(request.module, "SQLiteSession", GitmemSession)
    yield
    while GitmemSession.opened:
        GitmemSession.opened.pop().close()


def pytest_collection_modifyitems(config, items):
    deselect(config, items, NOT_APPLYING)


def pytest_terminal_summary(terminalreporter):
    said_made(terminalreporter)
