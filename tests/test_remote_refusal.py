"""A remote's refusal keeps the remote's own words (issue 24): a pre-receive hook's
message reaches the person, not only git's ``[remote rejected] (pre-receive hook declined)``.

And gitmem refuses a remote (issue 35): one holding a project's code, before anything
comes into main or goes out; one whose history is unrelated to ours, unless asked. The
README's remote (`git init --bare`, HEAD at master) is cloned by plain git, and `status`
shows the syncs of the remote it names, not another's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem


def test_a_pre_receive_hooks_message_is_kept(tmp_path):
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True,
                   env=SUBPROCESS_ENV)
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'push refused by policy: repository is frozen' >&2\n"
                    "echo 'ask ops@example.org to thaw it' >&2\nexit 1\n")
    hook.chmod(0o755)
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--user", input="x", repo=repo)
    run_gitmem("remote", "add", "origin", str(origin), repo=repo)
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert lines, done.stderr
    assert "push refused by policy: repository is frozen" in lines[0]
    assert "ask ops@example.org to thaw it" in lines[0]
    assert "pre-receive hook declined" in lines[0]


# -- a remote that is not gitmem's, or not this repository's (issue 35) -------------------


def code_remote(tmp_path: Path, branch: str = "main") -> Path:
    """A bare clone of a project's repository (the person's commits on ``branch``)."""
    code = tmp_path / "code"
    code.mkdir()
    git = Git(code)
    git("init", "-q", "-b", branch)
    (code / "main.py").write_text("print('hi')\n")
    git("add", "-A")
    git("commit", "-q", "-m", "code")
    subprocess.run(["git", "clone", "-q", "--bare", str(code), str(tmp_path / "code.git")],
                   check=True, env=SUBPROCESS_ENV)
    return tmp_path / "code.git"


def memory_repository(path: Path, text: str = "likes tea", *, host: str | None = None) -> Git:
    """``gitmem init`` and a write; ``host``: as on another machine (gitmem's identity names it)."""
    env = None
    if host is not None:  # libgit2 reads no GIT_CONFIG_GLOBAL: the identity goes in the XDG file
        config = path.parent / f"{host}-config" / "git" / "config"
        config.parent.mkdir(parents=True)
        config.write_text(f"[gitmem]\n\tname = gitmem ({host})\n\temail = gitmem@{host}\n")
        env = {"GIT_CONFIG_GLOBAL": str(config), "XDG_CONFIG_HOME": str(config.parent.parent)}
    run_gitmem("init", str(path), env=env)
    run_gitmem("memory", "write", "--user", input=text, repo=path, env=env)
    return Git(path)


@pytest.mark.parametrize("branch", ["main", "master"])
def test_sync_refuses_a_remote_holding_a_projects_code_before_anything_comes_in(tmp_path, branch):
    remote = code_remote(tmp_path, branch)
    code_tip = Git(remote)("rev-parse", branch)
    repo = tmp_path / "repo"
    git = memory_repository(repo)
    mine = git("rev-parse", "main")
    run_gitmem("remote", "add", "origin", str(remote), repo=repo)
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gitmem: origin is not a gitmem repository") and "nothing merged or pushed" in done.stderr
    assert git("rev-parse", "main") == mine and "main.py" not in git("ls-tree", "--name-only", "main")
    assert Git(remote)("for-each-ref", "--format=%(refname) %(objectname)").split() == \
        [f"refs/heads/{branch}", code_tip.strip()]  # nothing pushed into the project
    cloned = run_gitmem("clone", str(remote), str(tmp_path / "clone"), check=False)  # the same check
    assert cloned.returncode == 1 and f"{remote} is not a gitmem repository" in cloned.stderr


def test_sync_refuses_unrelated_histories_unless_asked(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, env=SUBPROCESS_ENV)
    first, second = tmp_path / "first", tmp_path / "second"
    memory_repository(first, "from the first")
    git = memory_repository(second, "from the second", host="laptop")
    for repo in (first, second):
        run_gitmem("remote", "add", "origin", str(remote), repo=repo)
    run_gitmem("sync", repo=first)
    pushed, mine = Git(remote)("rev-parse", "main"), git("rev-parse", "main")
    done = run_gitmem("sync", repo=second, check=False)
    assert done.returncode == 1 and "share no commit" in done.stderr
    assert "gitmem sync --allow-unrelated-histories origin" in done.stderr
    assert git("rev-parse", "main") == mine and Git(remote)("rev-parse", "main") == pushed
    assert "in: 2 commits from origin (merge)" in run_gitmem(
        "sync", "--allow-unrelated-histories", repo=second).stdout
    run_gitmem("sync", repo=first)
    assert run_gitmem("memory", "read", "--user", repo=first).stdout == "from the second\n\nfrom the first\n"


def test_the_readmes_remote_is_cloned_by_plain_git(tmp_path):
    """`git init --bare` names master; gitmem's first push points the remote's HEAD at main."""
    remote = tmp_path / "memory-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=SUBPROCESS_ENV)
    assert Git(remote)("symbolic-ref", "HEAD").strip() == "refs/heads/master"
    repo = tmp_path / "repo"
    memory_repository(repo)
    run_gitmem("remote", "add", "origin", str(remote), repo=repo)
    run_gitmem("sync", repo=repo)
    assert Git(remote)("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "-q", str(remote), str(clone)], capture_output=True, text=True,
                          env=SUBPROCESS_ENV, check=True)
    assert "warning" not in done.stderr and (clone / "memory" / "user.md").read_text() == "likes tea\n"
    assert run_gitmem("memory", "read", "--user", repo=clone).stdout == "likes tea\n"


def test_a_plain_clone_that_checked_nothing_out_reads_the_remotes_main(tmp_path):
    """A remote gitmem could not point at main (one pushed by plain git, or over the
    network): `git clone` checks nothing out, and gitmem starts main from what it fetched."""
    remote = tmp_path / "memory-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, env=SUBPROCESS_ENV)
    repo = tmp_path / "repo"
    memory_repository(repo)
    Git(repo)("push", "-q", str(remote), "main")
    clone = tmp_path / "clone"
    done = subprocess.run(["git", "clone", "-q", str(remote), str(clone)], capture_output=True, text=True,
                          env=SUBPROCESS_ENV, check=True)
    assert "unable to checkout" in done.stderr and not (clone / "memory").exists()
    assert run_gitmem("memory", "read", "--user", repo=clone).stdout == "likes tea\n"
    assert Git(clone)("rev-parse", "main") == Git(repo)("rev-parse", "main")
    assert Git(clone).status() == "" and (clone / "memory" / "user.md").stat().st_mode & 0o777 == 0o600
    run_gitmem("memory", "write", "--user", "--append", input="and coffee", repo=clone)
    assert "out: 1 commit to origin" in run_gitmem("sync", repo=clone).stdout


def test_status_shows_the_syncs_of_the_remote_it_names(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True, env=SUBPROCESS_ENV)
    repo = tmp_path / "repo"
    memory_repository(repo)
    run_gitmem("remote", "add", "origin", str(remote), repo=repo)
    run_gitmem("sync", repo=repo)
    synced = json.loads(run_gitmem("status", "--json", repo=repo).stdout)["sync"]
    assert synced["remote"] == "origin" and synced["last_sync"] and synced["last_error"] is None
    # origin pointed at the wrong remote: its last good sync was with another one
    run_gitmem("remote", "remove", "origin", repo=repo)
    run_gitmem("remote", "add", "origin", str(code_remote(tmp_path)), repo=repo)
    run_gitmem("sync", repo=repo, check=False)
    wrong = json.loads(run_gitmem("status", "--json", repo=repo).stdout)["sync"]
    assert wrong["last_sync"] is None and "not a gitmem repository" in wrong["last_error"]
    assert "last sync   never with origin" in run_gitmem("status", repo=repo).stdout
    # removed: its error goes with it
    run_gitmem("remote", "remove", "origin", repo=repo)
    text = run_gitmem("status", repo=repo).stdout
    assert "sync error" not in text and "last sync   never" in text
