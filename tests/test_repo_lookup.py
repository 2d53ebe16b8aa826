"""Which repository a command uses (issue 24): ``--repo``, then ``$GITMEM_REPO``, then the
gitmem repository that holds the current folder, then the default; ``status`` says which."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, run_gitmem


def gitmem_in(folder, *args, env=None, input=None):
    """``gitmem ARGS`` run from ``folder`` with no ``--repo``."""
    clean = {k: v for k, v in SUBPROCESS_ENV.items() if k != "GITMEM_REPO"}
    done = subprocess.run([sys.executable, "-m", "gitmem", *args], cwd=folder, capture_output=True,
                          text=True, input=input, env={**clean, **(env or {})}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def repos(tmp_path):
    """A default repository (under XDG_DATA_HOME), one in ``here``, one in ``there``."""
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    default = tmp_path / "data" / "gitmem"
    for name, path in (("default", default), ("here", tmp_path / "here"),
                       ("there", tmp_path / "there")):
        run_gitmem("init", str(path))
        run_gitmem("memory", "write", "--user", input=f"{name}\n", repo=path)
    return env, default, tmp_path / "here", tmp_path / "there"


def test_a_command_inside_a_gitmem_repository_uses_it(repos, tmp_path):
    env, default, here, there = repos
    assert gitmem_in(here, "memory", "read", "--user", env=env) == "here\n"
    assert gitmem_in(here / "memory", "memory", "read", "--user", env=env) == "here\n"
    gitmem_in(here / "memory", "memory", "write", "--agent", "a", input="x", env=env)
    assert (here / "memory" / "agents" / "a.md").exists()
    assert gitmem_in(tmp_path, "memory", "read", "--user", env=env) == "default\n"


def test_repo_then_the_environment_come_first(repos):
    env, default, here, there = repos
    assert gitmem_in(here, "memory", "read", "--user", "--repo", str(there), env=env) == "there\n"
    assert gitmem_in(here, "memory", "read", "--user", env={**env, "GITMEM_REPO": str(there)}) == "there\n"


def test_a_project_repository_around_the_folder_is_not_taken(repos, tmp_path):
    env, default, here, there = repos
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True, env=SUBPROCESS_ENV)
    (project / "src").mkdir()
    assert gitmem_in(project / "src", "memory", "read", "--user", env=env) == "default\n"


def test_status_says_which_repository_and_why(repos, tmp_path):
    env, default, here, there = repos
    assert gitmem_in(here / "memory", "status", env=env).splitlines()[0] == \
        f"repository  {here} (the gitmem repository holding the current folder)"
    assert gitmem_in(tmp_path, "status", env=env).splitlines()[0] == f"repository  {default} (the default)"
    assert gitmem_in(tmp_path, "status", env={**env, "GITMEM_REPO": str(there)}).splitlines()[0] == \
        f"repository  {there} ($GITMEM_REPO)"
    assert gitmem_in(tmp_path, "status", "--repo", str(there), env=env).splitlines()[0] == \
        f"repository  {there} (--repo)"
    report = json.loads(gitmem_in(here, "status", "--json", env=env))
    assert report["repository"] == str(here) and report["chosen_by"] == \
        "the gitmem repository holding the current folder"
