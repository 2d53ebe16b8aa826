"""The README and the pages in docs/ cannot rot: every shell and Python block runs.

Each page runs top to bottom in a home folder of its own (``HOME`` a temporary folder,
no ``$GITMEM_REPO``), as a person following it would: shell blocks with ``bash -e -o
pipefail``, Python blocks with this interpreter, in one working folder. A block right
after a ``<!-- not run by tests/test_docs.py: REASON -->`` line is left out. Every
relative link must name a file that exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!-- not run by tests/test_docs\.py: .+ -->$")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def blocks(page: Path) -> list[tuple[int, str, str]]:
    """``(line number, language, source)`` of each block that is run, in page order."""
    found, lines = [], page.read_text().split("\n")
    number, previous = 0, ""
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if not opening:
            if lines[number].strip():
                previous = lines[number].strip()
            number += 1
            continue
        language, start = opening.group(1), number + 1
        end = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
        if language in ("sh", "bash", "python") and not SKIP.match(previous):
            found.append((start, language, "\n".join(lines[start:end]) + "\n"))
        number, previous = end + 1, ""
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {key: value for key, value in SUBPROCESS_ENV.items() if not key.startswith("GITMEM")}
    env.update(HOME=str(home), PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
               GIT_CONFIG_GLOBAL=str(home / ".gitconfig"), PYTHONDONTWRITEBYTECODE="1")
    for line, language, source in blocks(page):
        command = ["bash", "-e", "-o", "pipefail", "-c", source] if language != "python" \
            else [sys.executable, "-c", source]
        done = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=180)
        assert done.returncode == 0, (f"{page.name}:{line}: the {language} block exited "
                                      f"{done.returncode}\n{done.stdout}\n{done.stderr}")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_names_a_file(page: Path):
    for target in LINK.findall(page.read_text()):
        if "://" not in target and not target.startswith("mailto:"):
            assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"


def test_the_readme_links_every_page():
    readme = (ROOT / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
