"""The long-running faces share one lifecycle (gitmem/faces/served.py): ``gitmem serve``,
``gitmem mcp`` and ``gitmem web`` ended while background packing runs all log what serve
logs, never an ERROR with a traceback.

Issue 44: mcp and web ended the git processes before telling packing to stop, so the
repack they ended was logged as ``ERROR ... background packing failed`` (in about 2 of
7 exits on a repository with 15,000 loose objects). Here each real server gets a
repository of LOOSE loose objects, makes one write (which wakes the packing thread), and
is ended as its client ends it once a ``git repack`` of its own is seen running.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.upkeep.maintenance import LOOSE_THRESHOLD
from nui_client import NuiHost

LOOSE = 3 * LOOSE_THRESHOLD  # a repack of these takes seconds: it is running at the exit
BLOB_WORDS = 300  # words of each blob: similar texts, so git looks for deltas among them
DEADLINE = 120.0  # seconds for the repack to start, on a busy machine


def loose_objects(folder: Path, count: int) -> None:
    """Put ``count`` loose objects, reachable from ``refs/bulk/blobs``, into the repository
    at ``folder``: ``git fast-import`` packs them in a scratch repository, ``git
    unpack-objects`` writes them out one file each."""
    scratch = folder.parent / "scratch.git"
    subprocess.run(["git", "init", "-q", "--bare", str(scratch)], check=True, env=SUBPROCESS_ENV)
    words = [f"w{n:03d}" for n in range(400)]
    stream = bytearray()
    for i in range(count):
        text = f"blob {i}\n{' '.join(words[(i * 7 + k * k) % len(words)] for k in range(BLOB_WORDS))}\n".encode()
        stream += b"blob\nmark :%d\ndata %d\n%s\n" % (i + 1, len(text), text)
    stream += b"commit refs/bulk/blobs\ncommitter T <t@example.org> 0 +0000\ndata 5\nbulk\n"
    stream += b"".join(b"M 100644 :%d f%05d\n" % (i + 1, i) for i in range(count)) + b"\n"
    subprocess.run(["git", "-C", str(scratch), "fast-import", "--quiet"], input=bytes(stream),
                   check=True, env=SUBPROCESS_ENV)
    (pack,) = scratch.glob("objects/pack/*.pack")
    with pack.open("rb") as objects:
        subprocess.run(["git", "-C", str(folder), "unpack-objects", "-q"], stdin=objects, check=True,
                       env=SUBPROCESS_ENV)
    bulk = Git(scratch)("rev-parse", "refs/bulk/blobs").strip()
    Git(folder)("update-ref", "refs/bulk/blobs", bulk)
    shutil.rmtree(scratch)


@pytest.fixture(scope="module")
def many_loose(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("loose") / "repo"
    run_gitmem("init", str(path))
    loose_objects(path, LOOSE)
    return path


@pytest.fixture
def repo(many_loose: Path, tmp_path: Path) -> Path:
    """A copy of the repository of many loose objects (a test's repack may pack them)."""
    copy = tmp_path / "repo"
    shutil.copytree(many_loose, copy, symlinks=True)
    return copy


def repacking(pid: int) -> bool:
    """Whether a child of process ``pid`` is a ``git repack``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):  # ended meanwhile
            continue
        if parent == pid and b"repack" in command:
            return True
    return False


def until_repacking(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while not repacking(pid):
        assert time.monotonic() < deadline, f"no git repack started within {DEADLINE} s"
        time.sleep(0.02)


def run_serve(repo: Path, tmp_path: Path) -> int:
    with NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)], cwd=tmp_path,
                 env=SUBPROCESS_ENV) as host:
        host.call("storage.userMemory.write", {"handlerId": "gitmem-user-memory", "content": "likes tea"})
        until_repacking(host.process.pid)
        host.close_stdin()  # nui's end: end of input
        return host.wait(60)


def run_mcp(repo: Path, tmp_path: Path) -> int:
    from test_mcp_wire import LineClient, tool_call
    client = LineClient(repo)
    try:
        client.send(tool_call(2, "memory_write", record="user", content="likes tea"))
        assert client.answer()["result"]["isError"] is False
        until_repacking(client.process.pid)
        client.close()  # the client's end: end of input, exit 0
        return client.process.returncode
    finally:
        if client.process.poll() is None:
            client.process.kill()


def run_web(repo: Path, tmp_path: Path) -> int:
    pytest.importorskip("starlette")
    from web_server import WebServer
    with WebServer.start(repo) as web:
        form = web.get("/edit?name=user", web.token)
        base = re.search(r'name="base" value="([0-9a-f]{40})"', form)[1]
        status, _, body = web.request("POST", "/edit", cookie=web.token, form={
            "token": web.token, "name": "user", "base": base, "content": "likes tea"})
        assert status == 303, body
        until_repacking(web.process.pid)
        code, _ = web.stop()  # Ctrl-C or SIGTERM
        return code


FACES: dict[str, Callable[[Path, Path], int]] = {"serve": run_serve, "mcp": run_mcp, "web": run_web}


@pytest.mark.parametrize("face", list(FACES))
def test_an_exit_during_background_packing_is_no_error(face, repo, tmp_path):
    pytest.importorskip("mcp")
    assert FACES[face](repo, tmp_path) == 0
    log = (repo / ".git" / "gitmem" / "serve.log").read_text()
    assert " ERROR " not in log and "Traceback" not in log, log
    assert "background packing ended by the shutdown" in log or "packed:" in log, log
    assert log.rstrip().endswith("stopped"), log[-2000:]
    assert run_gitmem("memory", "read", "--user", repo=repo).stdout == "likes tea\n"
