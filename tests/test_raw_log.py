"""The one reader of git's ``--raw -z`` output (:func:`gitmem.git.rawlog.raw_log`), which
the record index and the search index both read their history with: read as git writes
it, in pieces cut anywhere, with names git would quote, symlinks, a mode change alone,
an empty commit and a deletion."""

from __future__ import annotations

import os
import subprocess

import pytest

from conftest import SUBPROCESS_ENV, Git
from gitmem.git.rawlog import raw_log

FORMAT = "--format=%H %P %ct"


@pytest.fixture
def history(tmp_path):
    """A repository made with plain git, and its ``git log --raw -z`` output (children first)."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path)], check=True, env=SUBPROCESS_ENV)
    git = Git(tmp_path)
    odd = os.fsdecode(b"caf\xe9\nname \"x\".md")  # not UTF-8, a newline, quotes
    (tmp_path / "a.md").write_text("a\n")
    (tmp_path / odd).write_text("odd\n")
    git("add", "-A")
    git("commit", "-q", "-m", "first")
    os.symlink("a.md", tmp_path / "link")
    os.chmod(tmp_path / "a.md", 0o755)
    git("add", "-A")
    git("commit", "-q", "-m", "a link, a mode change alone")
    git("commit", "-q", "--allow-empty", "-m", "empty")
    (tmp_path / odd).unlink()
    git("add", "-A")
    git("commit", "-q", "-m", "odd deleted")
    out = subprocess.run(["git", "-C", str(tmp_path), "log", "--raw", "-r", "-z", "--root",
                          "--no-renames", "--no-abbrev", FORMAT], check=True, capture_output=True,
                         env=SUBPROCESS_ENV).stdout
    return git, os.fsencode(odd), out


def read(out: bytes, size: int) -> list:
    return list(raw_log(out[i:i + size] for i in range(0, len(out), size)))


def test_every_commit_and_change_as_git_wrote_them_in_pieces_of_any_size(history):
    git, odd, out = history
    whole = read(out, len(out))
    for size in (1, 2, 7, 41, 4096):
        assert read(out, size) == whole, size
    commits = git("log", "--format=%H").split()
    assert [header.split(b" ")[0].decode() for header, _ in whole] == commits
    deleted, empty, linked, first = (changes for _, changes in whole)
    assert [(path, fields[3], fields[4]) for fields, path in deleted] == [(odd, b"0" * 40, b"D")]
    assert empty == []
    by_path = {path: fields for fields, path in linked}
    assert set(by_path) == {b"a.md", b"link"}
    mode = by_path[b"a.md"]
    assert mode[:2] == [b":100644", b"100755"] and mode[2] == mode[3] and mode[4] == b"M"
    assert by_path[b"link"][:2] == [b":000000", b"120000"]
    assert sorted(path for _, path in first) == sorted([b"a.md", odd])
    assert all(fields[2] == b"0" * 40 and len(fields[3]) == 40 for fields, _ in first)


def test_output_cut_inside_an_entry_is_refused_not_read_short(history):
    _, odd, out = history
    cut = out.index(odd) + 3  # in the middle of a path
    with pytest.raises(ValueError, match="in the middle of an entry"):
        read(out[:cut], 64)
    meta = out.index(b"\0:") + 10  # in the middle of a ":modes ids status" entry
    with pytest.raises(ValueError, match="in the middle of an entry"):
        read(out[:meta], 64)
