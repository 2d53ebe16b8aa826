"""Private in fact (issue 24): after ``init`` in an existing 0755 folder, ``clone`` and
``--adopt``, no file or folder under ``.git`` or among the records is readable by other
users, and neither are the objects written later by gitmem or by a person's plain git.
``init`` refuses a home folder and a folder holding files of its own."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from test_cli import assert_one_line_error


@pytest.fixture(autouse=True)
def permissive_umask():
    """The umask most machines give a login shell: what git and gitmem run under here."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def readable_by_others(root: Path, *names: str) -> list[str]:
    """Every file and folder under ``root/NAME`` (and ``root`` itself when no names) with
    a group or other permission bit; symbolic links have none of their own."""
    found = []
    for top in [root / name for name in names] or [root]:
        for path in [top, *top.rglob("*")]:
            mode = path.lstat().st_mode
            if not stat.S_ISLNK(mode) and mode & 0o077:
                found.append(f"{oct(stat.S_IMODE(mode))} {path.relative_to(root)}")
    return found


def write_and_commit_by_hand(repo: Path) -> None:
    """Writes through gitmem, each followed by a check of everything; then a person's
    edit committed with plain git, and git's own packing: their objects and refs are
    private too (a file git writes outside those, like COMMIT_EDITMSG, follows the
    person's umask, in a .git that others cannot enter)."""
    run_gitmem("memory", "write", "--user", "--append", input="secret note", repo=repo)
    run_gitmem("session", "write", "pi", "s1", input='{"messages": [{"id": "m1"}]}', repo=repo)
    assert readable_by_others(repo, ".git", "memory", "sessions") == []
    with open(repo / "memory" / "user.md", "a") as file:  # an editor keeps the file's mode
        file.write("\nedited by hand\n")
    git = Git(repo)
    git("commit", "-q", "-a", "-m", "by hand")
    git("gc", "-q")
    run_gitmem("memory", "write", "--agent", "x", input="after gc", repo=repo)
    assert readable_by_others(repo, ".git/objects", ".git/refs", "memory", "sessions") == []
    assert stat.S_IMODE((repo / ".git").stat().st_mode) == 0o700


def test_init_in_an_existing_0755_folder_is_private(tmp_path):
    repo = tmp_path / "memory"
    repo.mkdir(mode=0o755)
    run_gitmem("init", str(repo))
    assert readable_by_others(repo) == []
    write_and_commit_by_hand(repo)


def test_a_clone_is_private(tmp_path):
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True,
                   env=SUBPROCESS_ENV)
    first = tmp_path / "first"
    run_gitmem("init", str(first))
    run_gitmem("memory", "write", "--user", input="shared", repo=first)
    run_gitmem("remote", "add", "origin", str(origin), repo=first)
    run_gitmem("sync", repo=first)
    (tmp_path / "second").mkdir(mode=0o755)
    run_gitmem("clone", str(origin), str(tmp_path / "second"))
    assert readable_by_others(tmp_path / "second") == []
    write_and_commit_by_hand(tmp_path / "second")


def test_an_adopted_repository_is_private_below_git_and_in_the_records(tmp_path):
    project = tmp_path / "project"
    project.mkdir(mode=0o755)
    git = Git(project)
    git("init", "-q", "-b", "main")
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("x = 1\n")
    (project / "memory").mkdir()
    (project / "memory" / "user.md").write_text("mine\n")
    git("add", "-A")
    git("commit", "-q", "-m", "code and memory")
    run_gitmem("init", "--adopt", str(project))
    assert readable_by_others(project, ".git", "memory") == []
    assert stat.S_IMODE((project / "src" / "app.py").stat().st_mode) == 0o644  # the project's own
    write_and_commit_by_hand(project)


def test_init_refuses_a_home_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    done = run_gitmem("init", str(home), env={"HOME": str(home)}, check=False)
    assert_one_line_error(done, code=1, says="home folder")
    assert not (home / ".git").exists()
    for args in (("init", "~"), ("init", "--adopt", str(home))):  # adopt takes a repository, not ~
        done = run_gitmem(*args, env={"HOME": str(home)}, check=False)
        assert_one_line_error(done, code=1, says="home folder")
        assert not (home / ".git").exists()


def test_init_refuses_a_folder_holding_files_of_its_own_and_adopt_keeps_them(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("my own readme\n")
    (folder / "todo.txt").write_text("buy milk\n")
    done = run_gitmem("init", str(folder), check=False)
    assert_one_line_error(done, code=1, says="README.md")
    assert "todo.txt" in done.stderr and "--adopt" in done.stderr
    assert not (folder / ".git").exists()
    run_gitmem("init", "--adopt", str(folder))
    assert (folder / "README.md").read_text() == "my own readme\n"
    assert (folder / "todo.txt").read_text() == "buy milk\n"
    git = Git(folder)
    assert "README.md" not in git("ls-tree", "--name-only", "HEAD").split()
    run_gitmem("memory", "write", "--user", input="x", repo=folder)
    assert (folder / "README.md").read_text() == "my own readme\n"


def test_init_of_an_empty_existing_folder_still_works(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir(mode=0o755)
    run_gitmem("init", str(folder))
    assert (folder / "README.md").exists() and stat.S_IMODE(folder.stat().st_mode) == 0o700
