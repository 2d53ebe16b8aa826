"""gitmem's own errors share one base, ``gitmem.errors.GitmemError``, and every face says an
error in one line the same way (``gitmem.errors.one_line``: the CLI's stderr, a JSON-RPC
error, an MCP tool's error, the site's error page)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

import gitmem
from conftest import SUBPROCESS_ENV
from gitmem.errors import GitmemError, InvalidInput, one_line
from gitmem.records.layout import parse_record


def test_the_refusals_of_the_engine_the_records_and_the_stores_are_gitmem_errors(tmp_path):
    with pytest.raises(GitmemError, match="no gitmem repository"):  # the engine's
        gitmem.open(tmp_path / "missing", create=False)
    code = tmp_path / "code"
    subprocess.run(["git", "init", "-q", str(code)], check=True, env=SUBPROCESS_ENV)
    (code / "main.c").write_text("int main;\n")
    subprocess.run(["git", "-C", str(code), "add", "."], check=True, env=SUBPROCESS_ENV)
    subprocess.run(["git", "-C", str(code), "commit", "-qm", "code"], check=True, env=SUBPROCESS_ENV)
    with pytest.raises(GitmemError, match="gitmem did not make"):  # the facade's
        gitmem.open(code)
    with pytest.raises(GitmemError):  # the records'
        parse_record("nope")
    with gitmem.open(tmp_path / "repo") as mem:
        with pytest.raises(InvalidInput) as refused:  # the stores'
            mem.memory.write("x", agent_id=" ")
    assert isinstance(refused.value, GitmemError) and isinstance(refused.value, ValueError)
    assert not issubclass(KeyError, GitmemError)


@pytest.mark.parametrize("error, line", [
    (FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), "/x/notes.md"), "/x/notes.md: no such file or directory"),
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "no space left on device"),
    (ValueError("bad value\n  at line 3\tcolumn 4"), "bad value at line 3 column 4"),
    (RuntimeError(), "RuntimeError"),
    (InvalidInput("   "), "InvalidInput"),
])
def test_one_line(error, line):
    assert one_line(error) == line
