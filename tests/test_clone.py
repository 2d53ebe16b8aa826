"""A second machine in one command (issue 18): `gitmem clone`, and a plain `git clone`
made private the first time gitmem opens it."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from conftest import SUBPROCESS_ENV, Git, run_gitmem


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def bare_remote(tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    return remote


def test_clone_gives_a_private_repository_that_syncs_both_ways(tmp_path):
    remote = bare_remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    run_gitmem("init", str(a))
    run_gitmem("memory", "write", "--user", repo=a, input="from a")
    run_gitmem("session", "write", "claude-code", "s1", repo=a, input='{"messages": [{"n": 1}]}')
    run_gitmem("remote", "add", "origin", str(remote), repo=a)
    run_gitmem("sync", repo=a)

    done = run_gitmem("clone", str(remote), str(b))
    assert str(b) in done.stdout
    assert mode(b) == 0o700
    for path in [p for p in b.rglob("*") if ".git" not in p.relative_to(b).parts]:
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    git_b = Git(b)
    assert git_b.status() == "" and git_b("branch", "--list").split() == ["*", "main"]
    assert git_b("config", "branch.main.remote").strip() == "origin"
    assert run_gitmem("remote", "list", repo=b).stdout == f"origin\t{remote}\n"
    assert run_gitmem("memory", "read", "--user", repo=b).stdout == "from a\n"

    run_gitmem("memory", "write", "--agent", "reviewer", repo=b, input="from b")
    assert "out: 1 commit" in run_gitmem("sync", repo=b).stdout
    assert "fast-forward" in run_gitmem("sync", repo=a).stdout
    assert run_gitmem("memory", "read", "--agent", "reviewer", repo=a).stdout == "from b\n"
    # one history, one root: no merge of two first commits
    assert len(Git(a)("rev-list", "--max-parents=0", "HEAD").split()) == 1
    assert Git(a)("rev-list", "--merges", "HEAD") == ""


def test_clone_of_an_empty_remote_starts_the_repository(tmp_path):
    remote = bare_remote(tmp_path)
    b = tmp_path / "b"
    run_gitmem("clone", str(remote), str(b))
    assert Git(b).log(fmt="%s") == ["init: gitmem repository"]
    run_gitmem("sync", repo=b)
    assert Git(remote)("log", "--format=%s", "main").splitlines() == ["init: gitmem repository"]


def test_clone_refuses_a_used_folder_and_a_remote_that_is_not_gitmem(tmp_path):
    remote = bare_remote(tmp_path)
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("mine")
    done = run_gitmem("clone", str(remote), str(used), check=False)
    assert done.returncode == 1 and "not an empty folder" in done.stderr
    assert (used / "x").read_text() == "mine" and not (used / ".git").exists()

    code = tmp_path / "code"
    code.mkdir()
    git = Git(code)
    git("init", "-q", "--initial-branch=main")
    (code / "setup.py").write_text("x")
    git("add", "-A")
    git("commit", "-qm", "code")
    done = run_gitmem("clone", str(code), str(tmp_path / "c"), check=False)
    assert done.returncode == 1 and "not a gitmem repository" in done.stderr
    assert "setup.py" in done.stderr and not (tmp_path / "c").exists()
    missing = run_gitmem("clone", str(tmp_path / "missing.git"), str(tmp_path / "d"), check=False)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    assert not (tmp_path / "d").exists()


def test_a_plain_git_clone_is_made_private_when_gitmem_first_opens_it(tmp_path):
    remote = bare_remote(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    run_gitmem("init", str(a))
    run_gitmem("memory", "write", "--agent", "x", repo=a, input="secret-ish")
    run_gitmem("remote", "add", "origin", str(remote), repo=a)
    run_gitmem("sync", repo=a)
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True, env=SUBPROCESS_ENV)
    assert mode(b / "memory" / "agents" / "x.md") == 0o644  # git's umask default
    assert run_gitmem("memory", "read", "--agent", "x", repo=b).stdout == "secret-ish\n"
    assert mode(b) == 0o700 and mode(b / "memory") == 0o700
    assert mode(b / "memory" / "agents" / "x.md") == 0o600 and mode(b / "README.md") == 0o600
    assert Git(b).status() == ""
    (b / "README.md").chmod(0o644)  # the person's choice afterwards: left alone
    run_gitmem("memory", "read", "--user", repo=b)
    assert mode(b / "README.md") == 0o644
