"""Shared fixtures: real repositories in tmp_path, the real CLI, the real git.

    def test_something(mem, cli, git):
        mem.memory.write("likes tea")
        assert cli("memory", "read", "--user").stdout == "likes tea\\n"
        assert git.status() == ""
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import gitmem
from gitmem.repository import Gitmem

# Every Python child of the run (hundreds of gitmem processes) reads its bytecode from
# one cache outside the source tree, instead of compiling every module at each start
# where PYTHONDONTWRITEBYTECODE is set.
PYCACHE = tempfile.mkdtemp(prefix="gitmem-tests-pycache-")
atexit.register(shutil.rmtree, PYCACHE, ignore_errors=True)

# One environment for every subprocess: no user or system git config, so that
# identities and hooks on the machine running the tests cannot change what they see.
SUBPROCESS_ENV = {
    **{key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"},
    "PYTHONPYCACHEPREFIX": PYCACHE,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Test Person",
    "GIT_AUTHOR_EMAIL": "person@example.org",
    "GIT_COMMITTER_NAME": "Test Person",
    "GIT_COMMITTER_EMAIL": "person@example.org",
    # no vectors built behind every serve and mcp of the suite: the tests of search by
    # meaning name their provider (tests/test_meaning_background.py, test_search_meaning.py)
    "GITMEM_EMBEDDINGS": "off",
}


RAM_DISK = "/dev/shm"


def pytest_configure(config):
    """Temporary folders on the RAM disk where the machine has one and no --basetemp was
    given: the same files, git and processes, without waiting on a disk that other
    processes share (on a loaded machine the 10,000-write test took 129 s on the disk,
    36 s there). Removed at the end of the run."""
    if config.option.basetemp is None and os.path.isdir(RAM_DISK) and os.access(RAM_DISK, os.W_OK):
        config.option.basetemp = tempfile.mkdtemp(prefix="gitmem-tests-", dir=RAM_DISK)
        atexit.register(shutil.rmtree, config.option.basetemp, ignore_errors=True)


@pytest.fixture
def repo_path(tmp_path: Path) -> Path:
    """Where the test's repository lives (created by the ``mem`` fixture)."""
    return tmp_path / "repo"


@pytest.fixture
def mem(repo_path: Path):
    """A fresh gitmem repository (README and .gitattributes committed), closed afterwards."""
    with Gitmem.open(repo_path) as opened:
        yield opened


@pytest.fixture
def engine(mem: Gitmem):
    return mem.engine


class Git:
    """Runs plain ``git`` in one repository and reads what it reports."""

    def __init__(self, path: Path):
        self.path = path

    def __call__(self, *args: str, check: bool = True, input: str | None = None) -> str:
        done = subprocess.run(["git", "-C", str(self.path), *args], capture_output=True,
                              text=True, input=input, env=SUBPROCESS_ENV)
        if check and done.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def status(self, *, optional_locks: bool = True) -> str:
        """``git status --porcelain`` (untracked files included)."""
        prefix = () if optional_locks else ("--no-optional-locks",)
        return self(*prefix, "status", "--porcelain", "--untracked-files=all")

    def log(self, *paths: str, fmt: str = "%H") -> list[str]:
        """One formatted line per commit on HEAD (touching ``paths``), newest first."""
        out = self("log", f"--format={fmt}", "--", *paths) if paths else self("log", f"--format={fmt}")
        return out.splitlines()

    def count(self, *paths: str) -> int:
        return len(self.log(*paths))

    def changed(self, rev: str = "HEAD") -> list[str]:
        """The paths commit ``rev`` changed against its parent."""
        return self("diff-tree", "--no-commit-id", "--name-only", "-r", rev).splitlines()

    def fsck(self) -> str:
        """``git fsck --strict --full``; raises when git finds anything wrong.

        Dangling objects are fine: a writer that lost a race leaves its commit behind.
        """
        done = subprocess.run(["git", "-C", str(self.path), "fsck", "--strict", "--full"],
                              capture_output=True, text=True, env=SUBPROCESS_ENV)
        problems = [line for line in (done.stdout + done.stderr).splitlines()
                    if not line.startswith(("Checking", "notice:", "dangling "))]
        if done.returncode != 0 or problems:
            raise AssertionError("git fsck: " + "\n".join(problems or [done.stderr]))
        return done.stdout

    def show(self, rev_path: str) -> str:
        return self("show", rev_path)


@pytest.fixture
def git(repo_path: Path) -> Git:
    return Git(repo_path)


def run_gitmem(*args: str, repo: Path | None = None, input: str | None = None,
               env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``python -m gitmem ARGS [--repo REPO]`` as a real subprocess."""
    command = [sys.executable, "-m", "gitmem", *args]
    if repo is not None:
        command += ["--repo", str(repo)]
    done = subprocess.run(command, capture_output=True, text=True, input=input,
                          env={**SUBPROCESS_ENV, **(env or {})}, timeout=60)
    if check and done.returncode != 0:
        raise AssertionError(f"gitmem {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


# The command, then a last line on stderr saying whether it opened the repository (pygit2 loaded).
_REPORTING_OPENED = ("import sys\nfrom gitmem.cli import main\nrc = main(sys.argv[1:])\n"
                     "sys.stderr.write('opened: %s\\n' % ('pygit2' in sys.modules))\nsys.exit(rc)\n")


def gitmem_opening(*args: str, repo: Path, warning: str = "") -> tuple[bytes, bool]:
    """(stdout, whether it opened the repository) of ``gitmem --repo REPO ARGS``, which
    must exit 0 with nothing else on stderr (but lines holding ``warning``, when given)."""
    done = subprocess.run([sys.executable, "-c", _REPORTING_OPENED, "--repo", str(repo), *args],
                          capture_output=True, env=SUBPROCESS_ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    *warnings, opened = done.stderr.decode().splitlines()
    assert [line for line in warnings if not warning or warning not in line] == []
    return done.stdout, opened == "opened: True"


@pytest.fixture
def cli(repo_path: Path):
    """``cli(*args, input=None, check=True)`` runs the gitmem CLI on the test's repository."""

    def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
        return run_gitmem(*args, repo=repo_path, **kwargs)

    return run


# A token of GitHub's shape that the secrets check refuses to push (not a real one).
GITHUB_TOKEN = "ghp_" + "Zq8fK2mX9pL4vN7rT1wY6bH3jD5sG0cE8aU2"


@pytest.fixture
def synced(tmp_path: Path) -> tuple[Path, Path]:
    """A repository (the user likes tea) with a bare remote it has pushed to, and that remote."""
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--user", repo=repo, input="likes tea")
    run_gitmem("remote", "add", "origin", str(remote), repo=repo)
    run_gitmem("sync", repo=repo)
    return repo, remote


def python_script(source: str, *args: str, **popen_options) -> subprocess.Popen:
    """Start ``python -c SOURCE ARGS`` with gitmem importable; stdout/stdin are pipes."""
    root = str(Path(gitmem.__file__).resolve().parent.parent)
    env = {**SUBPROCESS_ENV, "PYTHONPATH": root}
    return subprocess.Popen([sys.executable, "-c", source, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, **popen_options)
