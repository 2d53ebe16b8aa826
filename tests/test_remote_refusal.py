"""A remote's refusal keeps the remote's own words (issue 24): a pre-receive hook's
message reaches the person, not only git's ``[remote rejected] (pre-receive hook declined)``."""

from __future__ import annotations

import subprocess

from conftest import SUBPROCESS_ENV, run_gitmem


def test_a_pre_receive_hooks_message_is_kept(tmp_path):
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True,
                   env=SUBPROCESS_ENV)
    hook = origin / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'push refused by policy: repository is frozen' >&2\n"
                    "echo 'ask ops@example.org to thaw it' >&2\nexit 1\n")
    hook.chmod(0o755)
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--user", input="x", repo=repo)
    run_gitmem("remote", "add", "origin", str(origin), repo=repo)
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if "refused" in line]
    assert lines, done.stderr
    assert "push refused by policy: repository is frozen" in lines[0]
    assert "ask ops@example.org to thaw it" in lines[0]
    assert "pre-receive hook declined" in lines[0]
