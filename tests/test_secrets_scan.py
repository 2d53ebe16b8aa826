"""How the secret scan reads what commits add (issue 25): one ``git diff-tree`` for the
files each commit changed from each parent, the same answers as libgit2's tree diffs, and
a first pass that lets through every line holding one of the scan's words."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitmem.git.base import DamagedObject, EngineError
from gitmem.sync.secrets import scan, scan_line

from tests.test_secrets import GITHUB_TOKEN

FILLER = "".join(f"an ordinary line number {n} about tea and biscuits\n" for n in range(40))


def _commit_all(git, message: str) -> str:
    git("add", "-A")
    git("commit", "--quiet", "--allow-empty", "-m", message)
    return git("rev-parse", "HEAD").strip()


def test_the_changes_from_each_parent_are_libgit2s(mem, git):
    """Root, plain, empty, mode-only, deleting and merge commits (one merge the same as
    its first parent), made with plain git: each diff is what the engine's tree diff says."""
    work = mem.engine.workdir
    (work / "memory").mkdir(exist_ok=True)
    (work / "memory/a.md").write_text("a\n")
    (work / "memory/b.md").write_text("b\n")
    commits = [git("rev-list", "--max-parents=0", "HEAD").strip(), _commit_all(git, "two notes")]
    (work / "memory/a.md").chmod(0o755)
    commits.append(_commit_all(git, "a mode alone"))
    commits.append(_commit_all(git, "nothing at all"))
    git("checkout", "--quiet", "-b", "side")
    (work / "memory/b.md").unlink()
    (work / "notes.txt").write_text("side\n")
    side = _commit_all(git, "side drops b")
    git("checkout", "--quiet", "main")
    (work / "memory/a.md").write_text("a\nmore\n")
    commits.append(_commit_all(git, "main changes a"))
    git("merge", "--quiet", "--no-edit", "side")
    commits += [side, git("rev-parse", "HEAD").strip()]
    git("checkout", "--quiet", "-b", "other")
    (work / "memory/c.md").write_text("c\n")
    commits.append(_commit_all(git, "other adds c"))
    git("checkout", "--quiet", "main")
    git("merge", "--quiet", "--no-ff", "--no-edit", "-s", "ours", "other")  # main's tree kept
    commits.append(git("rev-parse", "HEAD").strip())
    git("checkout", "--quiet", "other")
    git("merge", "--quiet", "--no-ff", "--no-edit", "main")  # main's tree again
    commits.append(git("rev-parse", "HEAD").strip())
    assert len(set(commits)) == len(commits) == 10

    got = {c.id: c for c in mem.engine.log.changes_from_parents(commits)}
    for info in mem.engine.log.commit_infos(commits):
        expected = [mem.engine.log.changed_files(parent, info.id) for parent in info.parents or (None,)]
        if not any(expected):
            assert info.id not in got  # an empty commit, a mode changed alone
            continue
        assert got[info.id].parents == info.parents
        assert list(got[info.id].diffs) == [diff for diff in expected if diff]
        assert got[info.id].changed_from_every_parent() == all(expected)
    assert [c for c in got] == [c for c in commits if c in got]  # in the order asked


def test_a_commit_or_tree_missing_is_an_engine_error(mem, git):
    with pytest.raises(DamagedObject, match="missing"):
        scan(mem.engine, ["0123456789abcdef0123456789abcdef01234567"])
    (mem.engine.workdir / "notes.txt").write_text("notes\n")
    commit = _commit_all(git, "a note")
    tree = git("rev-parse", f"{commit}^{{tree}}").strip()
    (mem.engine.gitdir / "objects" / tree[:2] / tree[2:]).unlink()  # a loose tree, gone
    with pytest.raises(EngineError, match=f"cannot diff the commits: .*{tree}"):
        scan(mem.engine, [commit])


@pytest.mark.parametrize("line, kind", [
    ("-----BEGIN RSA PRIVATE KEY-----", "private key block"),
    ("id AKIAIOSFODNN7EXAMPLE", "AWS access key id"),
    ("id ASIAIOSFODNN7EXAMPLE", "AWS access key id"),
    *((f"t {prefix}_{GITHUB_TOKEN[4:]}", "GitHub token") for prefix in ("ghp", "gho", "ghu", "ghs", "ghr")),
    ("t github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD", "GitHub token"),
    ("OPENAI=sk-proj-4f8Ab29xQz7LmN3pR5tV8wY1", "API key (sk-...)"),
    *((f"{name} = Zx9kQ2mP7wL4rT8v", "high-entropy value assigned to a secret-like name")
      for name in ("TOKEN", "Secret", "password", "passwd", "PWD", "api_key", "Access-Key", "credentials")),
])
def test_every_word_of_the_first_pass_reaches_the_patterns(mem, line, kind):
    """Among ordinary lines, in a new file and in an append to it: found, at its line."""
    first = mem.memory.write(f"{FILLER}{line}\n{FILLER}", agent_id="ops")
    appended = mem.memory.write(f"{FILLER}{line}", agent_id="ops", mode="append")
    lines = mem.engine.worktree.path("memory/agents/ops.md").read_text().split("\n")
    numbers = [n for n, text in enumerate(lines, 1) if text == line]
    assert len(numbers) == 2
    # the same line again in the same file is one finding, from the first commit adding it
    assert {(f.commit, f.line, f.kind) for f in scan(mem.engine, [first, appended])} == {
        (first, numbers[0], kind)}
    assert {(f.commit, f.line, f.kind) for f in scan(mem.engine, [appended])} == {
        (appended, numbers[1], kind)}


VALUE = "Zx9kQ2mP7wL4rT8v"  # random enough to be a finding when assigned to a secret-like name


@pytest.mark.parametrize("name", ["PassWord", "PASSWORD", "Passwd", "pWd", "API_KEY", "Api-Key",
                                  "ACCESS_KEY", "ToKeN", "SeCrEt", "CREDENTIAL", "Credentials"])
def test_a_word_in_any_case_is_found_first_and_last_on_a_line_and_in_a_file(mem, git, name):
    """The word first on the file's first line, the value last on its last line with no
    newline after it; in a new file, in an append to it, and in a file rewritten."""
    work = mem.engine.workdir
    notes = work / "notes.txt"
    notes.write_bytes(f"{name}={VALUE}\n{FILLER}x {name}: {VALUE}".encode())
    new = _commit_all(git, "notes")
    with open(notes, "ab") as file:  # the unfinished last line ends, and another comes
        file.write(f"\n{FILLER}{name}={VALUE}".encode())
    appended = _commit_all(git, "more notes")
    notes.write_bytes(f"{name} = {VALUE}\n".encode() + notes.read_bytes().replace(b"x ", b"y "))
    rewritten = _commit_all(git, "notes rewritten")
    kind = "high-entropy value assigned to a secret-like name"
    assert {(f.line, f.kind) for f in scan(mem.engine, [new])} == {(1, kind), (42, kind)}
    assert {(f.line, f.kind) for f in scan(mem.engine, [appended])} == {(42, kind), (83, kind)}
    assert {(f.line, f.kind) for f in scan(mem.engine, [rewritten])} == {(1, kind), (43, kind)}


def _spellings(word: str) -> list[str]:
    return [word, word.upper(), word.title(), "".join(c.upper() if i % 2 else c for i, c in enumerate(word))]


def test_the_first_pass_lets_through_every_line_the_patterns_find(mem, git):
    """Every word in four spellings, in lines of many shapes, among lines holding the
    letters the first pass folds (c, g, w, k, A): the scan finds the lines that
    scan_line finds when given every line, no more and no fewer."""
    secrets = [f"{name}={VALUE}" for word in ("token", "secret", "password", "passwd", "pwd", "api_key",
                                              "apikey", "api-key", "access_key", "accesskey", "credential")
               for name in _spellings(word)]
    secrets += ["-----BEGIN EC PRIVATE KEY-----", "AKIAIOSFODNN7EXAMPLE", "ASIAIOSFODNN7EXAMPLE",
                GITHUB_TOKEN, "gho_" + GITHUB_TOKEN[4:], "sk-proj-4f8Ab29xQz7LmN3pR5tV8wY1",
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD"]
    near = ["akia", "asia", "Asia", "sekret", "passkord", "kredential", "PWD", "ken", "kkik", "gh_", "sk -",
            "github pat", "Access Key", "a KEY", "catalog of wigwams and kayaks"]
    lines = []
    for n, secret in enumerate(secrets):
        lines += [secret, f"  {secret}  ", f'{{"k":"{secret}","w":1}}', f"{near[n % len(near)]} {secret}"]
        lines += [f"{near[n % len(near)]} = {VALUE}", FILLER.split("\n")[n % 40]]
    (mem.engine.workdir / "notes.txt").write_text("\n".join(lines))  # no newline after the last
    commit = _commit_all(git, "many lines")
    first_of_each = {}  # a line found again (stripped, in the same file) is the same finding
    for n, line in enumerate(lines, 1):
        for kind in scan_line(line.encode()):
            first_of_each.setdefault((line.strip(), kind), n)
    assert len(first_of_each) > len(secrets) * 3
    assert {(f.line, f.kind) for f in scan(mem.engine, [commit])} == {
        (n, kind) for (_, kind), n in first_of_each.items()}


def _git_children() -> list[str]:
    """The command lines of this process's child git processes still running."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and "git" in command:
            found.append(command)
    return found


def test_a_scan_stopped_by_a_damaged_blob_leaves_no_git_running(mem, git):
    """2,000 commits of plain git (more than a pipe holds of git's answer), then one whose
    blob was cut short: the scan raises at once, and git's process is gone with it."""
    stream = ["reset refs/heads/many\n"]
    for n in range(2000):
        stream.append(f"commit refs/heads/many\nmark :{n + 1}\n"
                      f"committer A <a@example.org> {1_700_000_000 + n} +0000\ndata 2\nc\n"
                      + ("from refs/heads/main^0\n" if n == 0 else "")
                      + f"M 100644 inline memory/agents/a{n:04d}.md\ndata 5\nnote\n\n")
    subprocess.run(["git", "-C", str(mem.engine.workdir), "fast-import", "--quiet"],
                   input="".join(stream).encode(), check=True)
    many = git("rev-list", "--reverse", "many", "^main").split()
    (mem.engine.workdir / "notes.txt").write_text("a note that will be cut short\n")
    damaged = _commit_all(git, "a note")
    blob = git("rev-parse", f"{damaged}:notes.txt").strip()
    loose = mem.engine.gitdir / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o644)
    loose.write_bytes(loose.read_bytes()[:-4])
    with pytest.raises(DamagedObject):
        scan(mem.engine, [damaged, *many])
    assert _git_children() == []

