"""A write's tail (issue 25): a write stages what it wrote with its stat data, so the
index refresher, which takes the writers' lock for an index write of its own, has
nothing left to do while writes stream in, and never holds the next write up.
"""

from __future__ import annotations

import re

from gitmem.git.index import STAT_ON_WRITE


def stat_of(git, path: str) -> tuple[str, str]:
    """The ctime and mtime the index holds for ``path`` (``0:0``: none yet)."""
    shown = git("ls-files", "--debug", "--", path)
    return re.search(r"ctime: (\S+)", shown)[1], re.search(r"mtime: (\S+)", shown)[1]


def test_a_write_stages_its_file_with_stat_data(mem, git):
    for n in range(3):
        mem.memory.write(f"fact {n}", agent_id="x", mode="append")
        mem.sessions.append("cc", "s1", [{"id": f"m{n}", "role": "user", "content": "hi"}])
        for path in ("memory/agents/x.md", "sessions/cc/s1/messages/000000.jsonl"):
            assert "0:0" not in stat_of(git, path), path  # not left for the refresher
        assert git.status(optional_locks=False) == ""


def test_a_big_file_is_left_to_the_refresher(mem, git):
    big = "x" * (STAT_ON_WRITE + 10)
    mem.memory.write(big, agent_id="big")
    assert stat_of(git, "memory/agents/big.md") == ("0:0", "0:0")  # hashed later, off the write
    mem.engine.index.refresher.flush()
    assert "0:0" not in stat_of(git, "memory/agents/big.md")
    assert git.status(optional_locks=False) == ""


def test_a_flush_returns_after_a_refresh_the_thread_had_begun():
    # seen in CI: the thread took the marked paths a moment before flush_index(), which
    # then found nothing pending and returned while the thread's refresh was still running
    import threading

    from gitmem.git.index import INDEX_IDLE, IndexRefresher

    begun, done = threading.Event(), []

    def slow_refresh(paths):
        begun.set()
        threading.Event().wait(0.5)
        done.extend(paths)

    refresher = IndexRefresher(slow_refresh)
    refresher.mark(["memory/agents/big.md"])
    assert begun.wait(INDEX_IDLE + 5)
    refresher.flush()
    assert done == ["memory/agents/big.md"]
    refresher.stop()
