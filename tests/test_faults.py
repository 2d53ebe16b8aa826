"""Faults as a user's machine really has them: gitmem never hangs on them, never dies of
them silently, and says what is wrong in one line.

Real repositories, the real CLI and the real ``gitmem serve`` as subprocesses. A
subprocess timeout here is a guard against a hang only, never a measurement.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git
from gitmem.repository import Gitmem
from nui_client import NuiHost

HANG_GUARD = 20.0  # seconds; the operations under test answer at once
AGENT = {"handlerId": "gitmem-agent-memory", "agentId": "a1"}
USER = {"handlerId": "gitmem-user-memory"}


def gitmem(repo: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    """``python -m gitmem ARGS --repo REPO``, which must finish within HANG_GUARD."""
    return subprocess.run([sys.executable, "-m", "gitmem", *args, "--repo", str(repo)],
                          capture_output=True, text=True, input=input, env=SUBPROCESS_ENV,
                          timeout=HANG_GUARD)


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The error gitmem printed: a failure, one ``gitmem:`` line at the end, no traceback."""
    assert done.returncode != 0, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("gitmem: "), done.stderr
    return lines[-1]


def serve(repo: Path, tmp_path: Path, *extra: str) -> NuiHost:
    return NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo), *extra],
                   cwd=tmp_path, env=SUBPROCESS_ENV)


# -- a truncated loose object ------------------------------------------------------------


def truncate_object(git: Git, rev: str) -> str:
    """Cut the loose object file of ``rev`` to half its size, as a crash may leave it."""
    oid = git("rev-parse", rev).strip()
    path = git.path / ".git" / "objects" / oid[:2] / oid[2:]
    data = path.read_bytes()
    path.chmod(0o600)
    path.write_bytes(data[:len(data) // 2])
    return oid


@pytest.fixture
def memories(repo_path: Path) -> Git:
    """User memory, and agent memory written twice (its first version is HEAD~1's)."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("likes tea")
        mem.memory.write("use tabs", "a1")
        mem.memory.write("use spaces", "a1")
    return Git(repo_path)


# HEAD's commit, a folder at HEAD, and a blob that only history holds (the work tree has
# HEAD's version of every file, and a read takes a file from there when it is the same).
DAMAGED = {"commit": "HEAD", "tree": "HEAD:memory/agents", "blob": "HEAD~1:memory/agents/a1.md"}


@pytest.mark.parametrize("kind", DAMAGED)
def test_a_truncated_object_is_named_by_every_command_and_nothing_hangs(kind, memories, repo_path):
    oid = truncate_object(memories, DAMAGED[kind])

    fsck = gitmem(repo_path, "fsck")
    assert fsck.returncode == 1, fsck
    assert f"problem: object {oid}" in fsck.stdout
    assert "Traceback" not in fsck.stderr
    if kind == "tree":
        assert "(folder memory/agents at HEAD)" in fsck.stdout

    assert oid in one_line_error(gitmem(repo_path, "log"))
    shown = gitmem(repo_path, "show", "agent:a1", "--at", "HEAD~1")
    if kind == "tree":  # HEAD~1 has a folder of its own, sound
        assert shown.stdout == "use tabs\n"
    else:  # HEAD~1 is found through the damaged commit, or is the damaged blob
        assert oid in one_line_error(shown)
    read = gitmem(repo_path, "memory", "read", "--agent", "a1")
    if kind == "blob":
        assert read.stdout == "use spaces\n"
    else:
        assert oid in one_line_error(read)


def test_fsck_names_the_record_of_a_damaged_file_at_head(memories, repo_path):
    oid = truncate_object(memories, "HEAD:memory/agents/a1.md")
    fsck = gitmem(repo_path, "fsck")
    assert f"problem: object {oid} (memory/agents/a1.md at HEAD)" in fsck.stdout
    assert "(it belongs to record agent:a1)" in fsck.stdout


@pytest.mark.parametrize("kind", ["commit", "tree"])
def test_serve_answers_a_request_for_a_damaged_object_and_goes_on(kind, memories, repo_path,
                                                                   tmp_path):
    oid = truncate_object(memories, DAMAGED[kind])
    with serve(repo_path, tmp_path) as host:
        error = host.error("storage.agentMemory.read", AGENT, timeout=HANG_GUARD)
        assert error["code"] == -32603
        assert oid in error["message"]
        assert host.call("storage.info", timeout=HANG_GUARD)["name"] == "gitmem"
        assert oid in host.error("storage.userMemory.read", USER, timeout=HANG_GUARD)["message"]
        host.close_stdin()
        assert host.wait(HANG_GUARD) == 0


def test_serve_goes_on_serving_what_a_damaged_old_blob_does_not_touch(memories, repo_path, tmp_path):
    truncate_object(memories, DAMAGED["blob"])
    with serve(repo_path, tmp_path) as host:
        assert host.call("storage.agentMemory.read", AGENT, timeout=HANG_GUARD) == {
            "content": "use spaces\n"}
        assert host.call("storage.userMemory.write", {**USER, "content": "short answers",
                                                      "writeMode": "append"},
                         timeout=HANG_GUARD) == {"ok": True}
        host.close_stdin()
        assert host.wait(HANG_GUARD) == 0


def test_a_sound_repository_keeps_its_checked_root_for_the_next_process(mem, repo_path, cli):
    mem.memory.write("likes tea")
    assert cli("memory", "read", "--user").stdout == "likes tea\n"
    recorded = (repo_path / ".git" / "gitmem" / "sound-tree").read_text().strip()
    assert recorded == Git(repo_path)("rev-parse", "HEAD^{tree}").strip()
