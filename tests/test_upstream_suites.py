"""The SDKs' own tests, run against gitmem's classes: LangGraph's tests of its
``InMemoryStore`` against ``gitmem.langgraph.Store``, the OpenAI Agents SDK's session tests
against ``gitmem.openai_agents.Session``, the Anthropic SDK's tests of its local-filesystem
memory tool against ``gitmem.anthropic.MemoryTool`` and ``AsyncMemoryTool``.

Their files are not in this repository: .ci/run downloads each SDK's source package (the
version installed) with ``python tests/upstream/fetch.py`` into ``$GITMEM_UPSTREAM_TESTS``
(default ``~/.cache/gitmem-upstream``), and each suite runs there in a pytest of its own,
with a plugin of tests/upstream/ that swaps the class under test for gitmem's and leaves out,
saying why, the tests that do not apply (docs/python.md lists them). A suite whose package is
not downloaded is skipped, naming the command that downloads it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV

HERE = Path(__file__).resolve().parent
PLUGINS = HERE / "upstream"
FOLDER = Path(os.environ.get("GITMEM_UPSTREAM_TESTS") or Path.home() / ".cache" / "gitmem-upstream")

# suite: (distribution, the plugin that swaps the class for gitmem's, the test files, pytest's options)
SUITES = {
    "langgraph": ("langgraph-checkpoint", "langgraph_store", ["tests/test_store.py"], []),
    "openai-agents": ("openai-agents", "openai_agents_session",
                      ["tests/memory/test_session.py", "tests/memory/test_session_limit.py"], []),
    # its conftest.py needs the SDK's own test tools (an HTTP snapshot client): not loaded
    "anthropic": ("anthropic", "anthropic_memory_tool",
                  ["tests/lib/tools/memory_tools/test_filesystem.py"], ["--noconftest"]),
}


def source_of(distribution: str) -> Path:
    """The downloaded source package of ``distribution`` at its installed version (a skip
    when it is not there)."""
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{distribution} is not installed (the test extra holds it)")
    found = FOLDER / f"{distribution}-{version}"
    if not found.is_dir():
        pytest.skip(f"{distribution} {version}'s own tests are not downloaded to {FOLDER}: "
                    f"`python tests/upstream/fetch.py {FOLDER}` downloads them (.ci/run does)")
    return found


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_the_sdks_own_tests_pass_against_gitmems_class(suite, tmp_path):
    distribution, plugin, files, options = SUITES[suite]
    source = source_of(distribution)
    missing = [name for name in files if not (source / name).is_file()]
    assert not missing, f"{distribution}'s source package no longer holds {missing}"
    command = [sys.executable, "-m", "pytest", "-q", "-p", plugin, "-p", "no:cacheprovider",
               "-c", str(PLUGINS / "pytest.ini"), "--rootdir", str(source),
               "--basetemp", str(tmp_path / "tmp"), *options, *files]
    env = {**SUBPROCESS_ENV, "PYTHONPATH": os.pathsep.join(
        [str(PLUGINS), str(HERE.parent), SUBPROCESS_ENV.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900)
    lines = done.stdout.strip().splitlines() or [""]
    summary = lines[-1]
    assert done.returncode == 0, f"{suite}: {summary}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) > 0, summary
    made = re.search(r"^gitmem objects made: (\d+)$", done.stdout, re.MULTILINE)
    assert made and int(made.group(1)) > 0, f"{suite}: the tests never made gitmem's class"
    print(f"{suite} ({source.name}): {summary}")
