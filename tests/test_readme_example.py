"""The Python example (docs/python.md, where the README sends a reader) runs as printed
(issue 24): from inside the clone and from any other folder; the folder that holds the
clone, where the clone's own folder shadows the installed package, is the one the page
says not to run it from."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from conftest import SUBPROCESS_ENV

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "python.md").read_text()
EXAMPLE_REPO = '"~/demo-memory"'


def python_example(repo: Path) -> str:
    code = re.search(r"```python\n(.*?)```", PAGE, re.S)[1]
    assert EXAMPLE_REPO in code
    return code.replace(EXAMPLE_REPO, repr(str(repo)))


def run_example(cwd: Path, repo: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in SUBPROCESS_ENV.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", python_example(repo)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=120)


def test_the_python_example_runs_inside_the_clone_and_elsewhere(tmp_path):
    for cwd in (ROOT, tmp_path):
        done = run_example(cwd, tmp_path / f"repo-{cwd.name}")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Checks types first.\n")


def test_the_readme_says_where_not_to_run_it(tmp_path):
    """A clone in a folder named ``gitmem``: from the folder above it, Python takes the
    clone's folder for the package. The page says so, with the error it gives."""
    (tmp_path / "gitmem").symlink_to(ROOT)
    done = run_example(tmp_path, tmp_path / "repo")
    if done.returncode != 0:
        assert "has no attribute 'open'" in done.stderr
        assert "the folder that holds the clone" in PAGE and "has no attribute 'open'" in PAGE
