"""Secrets taken back before they leave (issue 18): `gitmem forget PATH --secret FINGERPRINT`."""

from __future__ import annotations

import re

from conftest import GITHUB_TOKEN, Git, run_gitmem


def refused_fingerprint(repo) -> tuple[str, str]:
    """The refused sync's stderr and the fingerprint it names."""
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1 and "gitmem forget" in done.stderr
    return done.stderr, re.search(r"fingerprint ([0-9a-f]{16})", done.stderr)[1]


def test_forget_drops_an_unpushed_secret_keeps_the_rest_and_sync_goes_through(synced):
    repo, remote = synced
    git = Git(repo)
    pushed = git("rev-parse", "HEAD").strip()
    run_gitmem("memory", "write", "--user", "--append", repo=repo,
               input=f"my token: {GITHUB_TOKEN}\nprefers short answers")
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input="be kind")
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="and green tea")
    messages = git.log(fmt="%s%n%an %at")
    stderr, mark = refused_fingerprint(repo)
    assert "memory/user.md" in stderr

    done = run_gitmem("forget", "memory/user.md", "--secret", mark, repo=repo)
    assert "3 unpushed commits" in done.stdout and "refs/gitmem/forgotten/" in done.stdout
    assert GITHUB_TOKEN not in (repo / "memory/user.md").read_text()
    assert run_gitmem("memory", "read", "--user", repo=repo).stdout == \
        "likes tea\n\nprefers short answers\n\nand green tea\n"
    assert run_gitmem("memory", "read", "--agent", "reviewer", repo=repo).stdout == "be kind\n"
    assert git.log(fmt="%s%n%an %at") == messages  # the same commits, authors and dates
    assert git("rev-parse", "HEAD~3").strip() == pushed  # the pushed ones untouched
    for commit in git.log():
        assert GITHUB_TOKEN not in git("show", commit)
    assert git.status() == ""
    # the old commits are kept, until gc --prune-forgotten
    kept = git("for-each-ref", "--format=%(refname)", "refs/gitmem/forgotten").split()
    assert len(kept) == 1 and GITHUB_TOKEN in git("show", f"{kept[0]}~2:memory/user.md")

    assert "out: 3 commits" in run_gitmem("sync", repo=repo).stdout
    for commit in Git(remote)("rev-list", "main").split():
        assert GITHUB_TOKEN not in Git(remote)("show", commit)
    run_gitmem("gc", "--prune-forgotten", repo=repo)
    assert git("for-each-ref", "refs/gitmem/forgotten") == ""


def test_forget_takes_a_record_name_and_a_line_in_a_session(synced):
    repo, _ = synced
    body = ('{"messages": [{"role": "user", "content": "hi"}, '
            '{"role": "user", "content": "key %s"}, {"role": "assistant", "content": "ok"}]}'
            % GITHUB_TOKEN)
    run_gitmem("session", "write", "claude-code", "s1", repo=repo, input=body)
    _, mark = refused_fingerprint(repo)
    run_gitmem("forget", "session:claude-code/s1", "--secret", mark, repo=repo)
    read = run_gitmem("session", "read", "claude-code", "s1", repo=repo).stdout
    assert GITHUB_TOKEN not in read and '"hi"' in read and '"ok"' in read
    run_gitmem("sync", repo=repo)


def test_forget_passes_over_a_submodule_in_the_records_folder(synced):
    repo, _ = synced
    body = '{"messages": [{"role": "user", "content": "key %s"}]}' % GITHUB_TOKEN
    run_gitmem("session", "write", "claude-code", "s1", repo=repo, input=body)
    git = Git(repo)
    commit = git("rev-parse", "HEAD").strip()
    git("update-index", "--add", "--cacheinfo", f"160000,{commit},sessions/claude-code/s1/vendor")
    git("commit", "-qm", "a submodule: a commit in the tree, no file")
    _, mark = refused_fingerprint(repo)
    run_gitmem("forget", "session:claude-code/s1", "--secret", mark, repo=repo)
    assert GITHUB_TOKEN not in run_gitmem("session", "read", "claude-code", "s1", repo=repo).stdout
    assert git("ls-tree", "HEAD", "sessions/claude-code/s1/vendor").split()[:3] == ["160000", "commit", commit]


def test_forget_refuses_a_pushed_secret_and_changes_nothing(synced):
    repo, _ = synced
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input=f"token: {GITHUB_TOKEN}")
    _, mark = refused_fingerprint(repo)
    run_gitmem("sync", "--allow-secrets", repo=repo)
    run_gitmem("memory", "write", "--agent", "x", repo=repo, input="later")
    git = Git(repo)
    head = git("rev-parse", "HEAD")
    done = run_gitmem("forget", "memory/user.md", "--secret", mark, repo=repo, check=False)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "pushed" in done.stderr and "rotate" in done.stderr
    assert git("rev-parse", "HEAD") == head
    assert git("for-each-ref", "refs/gitmem/forgotten") == ""


def test_forget_with_nothing_to_forget_says_so(synced):
    repo, _ = synced
    done = run_gitmem("forget", "memory/user.md", "--secret", "0123456789abcdef", repo=repo,
                      check=False)
    assert done.returncode == 1 and "no commit waiting to be pushed" in done.stderr
    done = run_gitmem("forget", "../etc/passwd", "--secret", "0123456789abcdef", repo=repo,
                      check=False)
    assert done.returncode == 1 and "unsafe path" in done.stderr


def test_forget_of_a_block_leaves_no_blank_line_behind(synced):
    repo, _ = synced
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input=f"token: {GITHUB_TOKEN}")
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=repo, input="be kind")
    _, mark = refused_fingerprint(repo)
    run_gitmem("forget", "memory/agents/reviewer.md", "--secret", mark, repo=repo)
    assert (repo / "memory/agents/reviewer.md").read_text() == "be kind\n"
    assert run_gitmem("memory", "read", "--agent", "reviewer", repo=repo).stdout == "be kind\n"
