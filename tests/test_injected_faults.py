"""System-call faults injected into the real processes with ``strace -e inject``, as a
disk or a kill does them: an fsync that fails after libgit2 moved ``main``, a log write
that fails under ``gitmem serve``, a writer killed while it holds git's lock files.

Each fault hits the system calls on one path only (``strace -P``), so the rest of the
process runs as it always does. Skipped where strace is missing or may not trace.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git
from gitmem.repository import Gitmem
from nui_client import NuiHost
from test_faults import HANG_GUARD, USER, gitmem, one_line_error


def strace(trace: Path, fault: str, *paths: Path) -> list[str]:
    """The command prefix that runs a program under strace, injecting ``fault`` (the value
    of ``-e inject=``) into the system calls on ``paths`` alone, and listing those calls
    in the file ``trace``."""
    found = shutil.which("strace")
    if found is None:
        pytest.skip("strace is not installed")
    if subprocess.run([found, "-o", "/dev/null", "true"], capture_output=True).returncode != 0:
        pytest.skip("strace may not trace here")
    syscall = fault.split(":", 1)[0]
    return [found, "-f", "-qq", "-o", str(trace), "-e", f"trace={syscall}", "-e", f"inject={fault}",
            *(f"-P{path}" for path in paths)]


def traced(trace: Path) -> list[str]:
    return trace.read_text().splitlines()


# -- fsync durability: an ok means main is on disk ----------------------------------------


@pytest.fixture
def heads(repo_path: Path) -> Path:
    """The folder of ``main``'s ref in a repository holding user memory."""
    with Gitmem.open(repo_path) as mem:
        mem.memory.write("likes tea")
    return repo_path / ".git" / "refs" / "heads"


def test_a_failed_sync_of_main_s_folder_is_synced_again(heads, repo_path, tmp_path):
    trace = tmp_path / "trace"
    done = subprocess.run(
        [*strace(trace, "fsync:error=EIO:when=1", heads), sys.executable, "-m", "gitmem",
         "--repo", str(repo_path), "memory", "write", "--user"],
        input="short answers", capture_output=True, text=True, env={**SUBPROCESS_ENV,
                                                                    "GITMEM_DURABILITY": "fsync"},
        timeout=HANG_GUARD * 3)
    assert done.returncode == 0, done.stderr
    syncs = [line for line in traced(trace) if "fsync(" in line]
    assert "EIO" in syncs[0] and "(INJECTED)" in syncs[0]
    assert len(syncs) == 2 and syncs[1].endswith("= 0")  # gitmem synced the folder again
    (line,) = done.stderr.splitlines()
    assert "synced again" in line and "Input/output error" in line
    assert Git(repo_path).show("main:memory/user.md") == "short answers\n"


def test_a_sync_of_main_s_folder_that_keeps_failing_fails_the_write(heads, repo_path, tmp_path):
    trace = tmp_path / "trace"
    env = {**SUBPROCESS_ENV, "GITMEM_DURABILITY": "fsync"}
    done = subprocess.run(
        [*strace(trace, "fsync:error=EIO:when=1+", heads), sys.executable, "-m", "gitmem",
         "--repo", str(repo_path), "memory", "write", "--user"],
        input="short answers", capture_output=True, text=True, env=env, timeout=HANG_GUARD * 3)
    error = one_line_error(done)
    assert "not on disk" in error and "Input/output error" in error, error

    server = [*strace(tmp_path / "serve-trace", "fsync:error=EIO:when=1+", heads), sys.executable,
              "-m", "gitmem", "serve", "--repo", str(repo_path), "--durability", "fsync"]
    with NuiHost(server, cwd=tmp_path, env=SUBPROCESS_ENV) as host:
        refused = host.error("storage.userMemory.write", {**USER, "content": "be brief"},
                             timeout=HANG_GUARD * 3)
        assert refused["code"] == -32603 and "not on disk" in refused["message"], refused
        host.close_stdin()
        assert host.wait(HANG_GUARD * 3) == 0


# -- the serve log goes on after a failed write ---------------------------------------------


def until(condition, what: str, guard: float = HANG_GUARD):
    """Poll ``condition`` until it is true; fail after ``guard`` seconds (a hang guard)."""
    deadline = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {guard} s"
        time.sleep(0.05)


def test_the_serve_log_goes_on_after_a_failed_write(repo_path, tmp_path):
    Gitmem.open(repo_path).close()
    log = repo_path / ".git" / "gitmem" / "serve.log"
    trace = tmp_path / "trace"
    server = [*strace(trace, "write:error=ENOSPC:when=2", log), sys.executable, "-m", "gitmem",
              "serve", "--repo", str(repo_path)]
    with NuiHost(server, cwd=tmp_path, env=SUBPROCESS_ENV) as host:
        host.call("storage.info")
        # each request's line goes out in a write of its own, a quarter second later
        until(lambda: host.call("storage.info") and "(INJECTED)" in trace.read_text(),
              "the log's second write failing")
        for n in range(3):
            request_id = host.send_request("storage.userMemory.write",
                                           {**USER, "content": f"note {n}", "writeMode": "append"})
            assert host.answer_to(request_id)["result"] == {"ok": True}
            until(lambda request_id=request_id: f"storage.userMemory.write id={request_id} " in log.read_text(),
                  "the request's line in serve.log while serve runs")
        host.call("storage.shutdown")
        assert host.wait(HANG_GUARD * 3) == 0
        stderr = host.stderr()
    assert "Traceback" not in stderr and "Exception" not in stderr, stderr
    (said,) = [line for line in stderr.splitlines() if str(log) in line]
    assert said.startswith("gitmem: ") and "No space left on device" in said
    assert "could not write" in log.read_text()  # the log says where lines may be missing


# -- git's lock files left by a killed writer ---------------------------------------------


@pytest.mark.parametrize("lock", ["index.lock", "refs/heads/main.lock"])
def test_status_says_a_killed_writer_left_a_git_lock(lock, heads, repo_path, tmp_path):
    held = repo_path / ".git" / lock
    killed = subprocess.run(
        [*strace(tmp_path / "trace", "rename:signal=KILL", held), sys.executable, "-m", "gitmem",
         "--repo", str(repo_path), "memory", "write", "--agent", "a1"],
        input="use tabs", capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=HANG_GUARD * 3)
    assert killed.returncode != 0 and held.exists()
    refused = subprocess.run(["git", "-C", str(repo_path), "commit", "--allow-empty", "-m", "by hand"],
                             capture_output=True, text=True, env=SUBPROCESS_ENV)
    assert refused.returncode != 0 and ".lock" in refused.stderr  # plain git is refused meanwhile

    done = gitmem(repo_path, "status")
    assert done.returncode == 0, done.stderr
    (said,) = [line for line in done.stdout.splitlines() if f".git/{lock}" in line]
    assert "killed" in said and "git commit" in said and "removed" in said, said
    assert not held.exists()
    Git(repo_path)("commit", "--allow-empty", "-m", "by hand")  # plain git works again
    assert gitmem(repo_path, "status").stdout.count(".lock") == 0
