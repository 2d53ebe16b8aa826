"""The push-time secret scan: what it finds, what it ignores, that it reads only what new
commits add, that reports never hold the secret, and the allow-list file."""

from __future__ import annotations

import pytest

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.sync.secrets import (ALLOW_FILE, allowed, fingerprint, found_in, load_allow_list, refused, scan,
                                 scan_line)

OPENSSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
               "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
               "QyNTUxOQAAACDx8e3ExampleExampleExampleExampleExampleExampleAAAAA\n"
               "-----END OPENSSH PRIVATE KEY-----\n")
GITHUB_TOKEN = "ghp_" + "Zq8fK2mX9pL4vN7rT1wY6bH3jD5sG0cE8aU2"


@pytest.mark.parametrize("line, kind", [
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key block"),
    ('{"content":"here: -----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIB"}', "private key block"),
    ("-----BEGIN PRIVATE KEY-----", "private key block"),
    ("aws key AKIAIOSFODNN7EXAMPLE in the notes", "AWS access key id"),
    (f"export GH={GITHUB_TOKEN}", "GitHub token"),
    ("OPENAI_API_KEY=sk-proj-4f8Ab29xQz7LmN3pR5tV8wY1", "API key (sk-...)"),
    ('{"api_key": "9f8a7c6e5d4b3a2f1e0d9c8b"}', "high-entropy value assigned to a secret-like name"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "high-entropy value assigned to a secret-like name"),
    ("db password: Zx9kQ2mP7wL4rT8v", "high-entropy value assigned to a secret-like name"),
])
def test_each_kind_is_found(line, kind):
    assert kind in scan_line(line.encode())


@pytest.mark.parametrize("line", [
    "The user prefers short answers and likes tea.",
    "password: hunter2",
    "the token was refreshed at 2024-01-01T00:00:00",
    "secret_sauce = tomatoes_and_basil_2024",
    "we use sk-learn-and-scikit-learn-daily",
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Reset your password from the settings page"}',
    "-----BEGIN PUBLIC KEY-----",
    "api_key = ${OPENAI_API_KEY}",
])
def test_ordinary_text_is_not_a_finding(line):
    assert scan_line(line.encode()) == []


# pieces of the kinds, of their names and of what stops them, to be joined at random
_PIECES = ["-----BEGIN RSA PRIVATE KEY-----", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCD", "AKIAIOSFODNN7EXAMPLE", "xAKIAIOSFODNN7EXAMPLE", GITHUB_TOKEN,
           "sk-proj-4f8Ab29xQz7LmN3pR5tV8wY1", "api_key", "PASSWORD", "token", "secret", "credential",
           " = ", ": ", '"', "\\", "9f8a7c6e5d4b3a2f1e0d9c8b", "Zx9kQ2mP7wL4rT8v", "\n", " ", "\t",
           "the cache key ignores the lockfile", "_", "-", "é"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30))
def test_a_scan_of_the_whole_text_finds_what_a_scan_of_each_line_finds(pieces):
    text = "".join(pieces).encode()
    by_line = [(index, kind) for index, line in enumerate(text.split(b"\n")) for kind in scan_line(line)]
    assert found_in(text) == by_line


def test_prose_that_names_keys_and_tokens_holds_no_finding():
    line = b"The cache key ignores the lockfile; the token budget is 4096 and the api key rotates.\n"
    assert found_in(line * 10_000) == []


def test_findings_name_file_line_and_kind_never_the_secret(mem):
    commit = mem.memory.write(f"notes\n\n{OPENSSH_KEY}\ntoken: {GITHUB_TOKEN}\n", agent_id="ops")
    findings = scan(mem.engine, [commit])
    assert {(f.path, f.line, f.kind) for f in findings} == {
        ("memory/agents/ops.md", 3, "private key block"),
        ("memory/agents/ops.md", 8, "GitHub token"),
    }
    report = "\n".join(str(f) for f in findings)
    assert GITHUB_TOKEN not in report and "b3BlbnNzaC1rZXk" not in report
    assert "memory/agents/ops.md:3: private key block" in report


def test_only_lines_the_commits_add_are_scanned(mem):
    first = mem.memory.write(f"key:\n{OPENSSH_KEY}")
    later = mem.memory.write("an ordinary note", mode="append")
    assert [f.line for f in scan(mem.engine, [first])] == [2]
    assert scan(mem.engine, [later]) == []


def test_a_secret_added_then_removed_is_still_found(mem):
    added = mem.memory.write(f"oops {GITHUB_TOKEN}")
    removed = mem.memory.write("clean again")
    assert [f.kind for f in scan(mem.engine, [added, removed])] == ["GitHub token"]


def test_jsonl_lines_are_scanned_too(mem):
    commit = mem.sessions.write("nui", "s1", [{"role": "user", "content": OPENSSH_KEY}])
    [finding] = scan(mem.engine, [commit])
    assert finding.path == "sessions/nui/s1/messages/000000.jsonl" and finding.line == 1


def test_allow_list_by_fingerprint_or_path_glob(mem):
    commit = mem.memory.write(f"token: {GITHUB_TOKEN}", agent_id="ops")
    assert len(refused(mem.engine, [commit])) == 1
    [finding] = scan(mem.engine, [commit])
    assert finding.fingerprint == fingerprint("memory/agents/ops.md", f"token: {GITHUB_TOKEN}".encode())
    allow_file = mem.engine.worktree.path(ALLOW_FILE)
    allow_file.write_text(f"# test token from the docs\n{finding.fingerprint}  # ops notes\n")
    assert load_allow_list(mem.engine) == [finding.fingerprint]
    assert refused(mem.engine, [commit]) == []
    allow_file.write_text("path:memory/agents/*.md\n")
    assert refused(mem.engine, [commit]) == []
    allow_file.write_text("path:memory/user.md\n0000000000000000\n")
    assert not allowed(finding, load_allow_list(mem.engine))


def test_a_merge_adds_only_the_lines_neither_parent_has(mem, git):
    base = mem.memory.write("shared notes\n", agent_id="ops")
    git("checkout", "--quiet", "-b", "side")
    mem.engine.worktree.path("memory/agents/ops.md").write_text(f"shared notes\nside: {GITHUB_TOKEN}\n")
    git("commit", "--quiet", "-am", "a token on the side branch")
    side = git("rev-parse", "HEAD").strip()
    git("checkout", "--quiet", "main")
    mem.engine.worktree.path("memory/user.md").write_text("on main\n")
    git("add", "-A")
    git("commit", "--quiet", "-m", "main moves on")
    git("merge", "--quiet", "--no-ff", "--no-commit", "side")
    user = mem.engine.worktree.path("memory/user.md")
    user.write_text(user.read_text() + "db password: Zx9kQ2mP7wL4rT8v\n")  # new in the merge itself
    git("add", "-A")
    git("commit", "--quiet", "-m", "merge side, with a line of its own")
    merge = git("rev-parse", "HEAD").strip()
    assert {(f.path, f.line, f.kind, f.commit) for f in scan(mem.engine, [merge])} == {
        ("memory/user.md", 2, "high-entropy value assigned to a secret-like name", merge)}
    assert {(f.path, f.commit) for f in scan(mem.engine, [base, side, merge])} == {
        ("memory/agents/ops.md", side), ("memory/user.md", merge)}


def test_a_binary_file_and_an_unfinished_last_line(mem, git):
    path = mem.engine.worktree.path("memory/agents/ops.md")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"no newline at the end: {GITHUB_TOKEN[:8]}".encode())
    git("add", "-A")
    git("commit", "--quiet", "-m", "an unfinished line")
    path.write_bytes(path.read_bytes() + f"{GITHUB_TOKEN[8:]}\n".encode())  # the line goes on
    (mem.engine.workdir / "image.bin").write_bytes(b"\0\x89PNG\n" + GITHUB_TOKEN.encode())
    git("add", "-A")
    git("commit", "--quiet", "-m", "the line goes on, and a binary file")
    [finding] = scan(mem.engine, [git("rev-parse", "HEAD").strip()])
    assert (finding.path, finding.line, finding.kind) == ("memory/agents/ops.md", 1, "GitHub token")
