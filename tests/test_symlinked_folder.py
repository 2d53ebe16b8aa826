"""A folder of records moved to another disk and replaced by a symlink while ``gitmem
serve`` runs: gitmem never follows the symlink, and what it cannot see is not deleted.

Nothing under the folder is committed as deleted, ``gitmem status`` names the folder as
out of step, what main holds under it stays readable through gitmem, and putting the
folder back brings everything back in step. Real processes: the real ``gitmem serve``
(its watcher included), the real CLI, plain ``git``, files moved as a person moves them.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

import pytest

from conftest import SUBPROCESS_ENV
from nui_client import NuiHost

FOLDER = "sessions/claude-code"


def session(session_id: str, **extra) -> dict:
    return {"handlerId": "gitmem-sessions", "sessionId": session_id, "agentType": "claude-code",
            "workingDir": "/home/me/project", **extra}


def messages(session_id: str, count: int) -> list[dict]:
    return [{"id": f"{session_id}-m{i}", "role": "user", "content": f"question {i}"} for i in range(count)]


def serve(tmp_path, repo_path) -> NuiHost:
    return NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                   cwd=tmp_path, env=SUBPROCESS_ENV)


def deleted_under(git, folder: str) -> list[str]:
    """Every path under ``folder`` that a commit on main deleted."""
    return git("log", "--diff-filter=D", "--name-only", "--format=", "main", "--", folder).split()


@pytest.mark.parametrize("target", ["the moved folder", "an empty folder"])
def test_a_folder_replaced_by_a_symlink_is_out_of_step_never_deleted(tmp_path, repo_path, cli, git, target):
    cli("init")
    host = serve(tmp_path, repo_path)
    with host:
        for n in range(3):
            host.call("storage.session.write", {**session(f"s{n}"), "messages": messages(f"s{n}", 2)})
        # The person moves the folder to another disk (a copy, then the folder removed) and
        # puts a symlink in its place, as a person moving big data does.
        folder = repo_path / FOLDER
        moved = tmp_path / "other-disk" / "claude-code"
        shutil.copytree(folder, moved)
        shutil.rmtree(folder)
        empty = tmp_path / "other-disk" / "empty"
        empty.mkdir()
        os.symlink(moved if target == "the moved folder" else empty, folder)

        # serve goes on: reads, writes of a session there, new and old, and of other records
        assert host.call("storage.session.read", session("s1"))["messages"] == messages("s1", 2)
        host.call("storage.session.write", {**session("s1"), "messages": messages("s1", 3)})
        host.call("storage.session.write", {**session("s9"), "messages": messages("s9", 1)})
        host.call("storage.userMemory.write", {"handlerId": "gitmem-user-memory",
                                               "content": "likes tea", "writeMode": "append"})
        time.sleep(2.5)  # the watcher's debounce is 1 s: it has looked at the folder
        assert host.call("storage.session.read", session("s0"))["messages"] == messages("s0", 2)
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.wait() == 0, host.stderr()

    assert deleted_under(git, FOLDER) == []
    assert json.loads(cli("session", "read", "claude-code", "s1").stdout)["messages"] == messages("s1", 3)
    assert '"s9-m0"' in git.show(f"main:{FOLDER}/s9/messages/000000.jsonl")
    report = json.loads(cli("status", "--json").stdout)
    assert FOLDER in [o["path"] for o in report["out_of_step"]]
    assert report["pending"] == []
    text = cli("status").stdout
    assert f"out of step {FOLDER}: a symlink" in text
    assert deleted_under(git, FOLDER) == []  # status commits nothing either

    # The person puts the folder back: everything comes back in step.
    os.unlink(folder)
    shutil.move(moved, folder)
    host = serve(tmp_path, repo_path)
    with host:
        host.call("storage.info")
        deadline = time.monotonic() + 30
        while git.status() and time.monotonic() < deadline:  # the watcher's first look
            time.sleep(0.1)
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.wait() == 0, host.stderr()
    assert git.status() == ""
    report = json.loads(cli("status", "--json").stdout)
    assert report["out_of_step"] == [] and report["pending"] == []
    assert deleted_under(git, FOLDER) == []
    for n, count in ((0, 2), (1, 3), (2, 2), (9, 1)):
        on_disk = (folder / f"s{n}" / "messages" / "000000.jsonl").read_text()
        assert on_disk == git.show(f"main:{FOLDER}/s{n}/messages/000000.jsonl")
        assert on_disk.count('"role"') == count
    git.fsck()
