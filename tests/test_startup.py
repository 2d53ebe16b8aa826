"""A start that does not grow with the repository: what a process looked at, the next
one does not look at again, and what came since is still checked.

Real repositories, the real CLI and the real ``git``; the counts are the engine's own
(commits checked before libgit2 walks them), never timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.git.base import GITMEM_DIR
from gitmem.git.files import IN_FLIGHT_FILE
from gitmem.repository import Gitmem
from nui_client import NuiHost

def commits_walked(repo_path: Path) -> int:
    """How many commits a fresh process checks to list main's whole history."""
    with Gitmem.open(repo_path, create=False) as mem:
        mem.log()
        return mem.engine._objects.commits_walked


def test_a_new_process_checks_only_the_commits_made_since_the_last_one(mem, repo_path):
    for i in range(30):
        mem.memory.write(f"fact {i}", "a1", mode="append")
    mem.close()
    assert commits_walked(repo_path) >= 30  # the first process checks it all
    for i in range(3):  # another process, then plain git
        run_gitmem("memory", "write", "--agent", "a2", repo=repo_path, input=f"note {i}\n")
    (repo_path / "notes.txt").write_text("by hand\n")
    Git(repo_path)("add", "notes.txt")
    Git(repo_path)("commit", "-qm", "by hand")

    assert commits_walked(repo_path) <= 4
    assert commits_walked(repo_path) == 0


def test_a_damaged_commit_made_since_is_still_found_and_nothing_hangs(mem, repo_path):
    mem.memory.write("likes tea")
    mem.close()
    assert commits_walked(repo_path) >= 1
    git = Git(repo_path)
    (repo_path / "notes.txt").write_text("by hand\n")
    git("add", "notes.txt")
    git("commit", "-qm", "by hand")
    run_gitmem("memory", "write", "--user", repo=repo_path, input="likes coffee\n")
    damaged = git("rev-parse", "HEAD~1").strip()  # the person's commit, under the new tip
    loose = repo_path / ".git" / "objects" / damaged[:2] / damaged[2:]
    data = loose.read_bytes()
    loose.chmod(0o600)
    loose.write_bytes(data[:len(data) // 2])

    shown = run_gitmem("log", repo=repo_path, check=False)  # its timeout guards a hang
    assert shown.returncode == 1
    assert damaged in shown.stderr and "Traceback" not in shown.stderr


def test_a_history_rewrite_after_a_start_is_still_found(mem, repo_path, tmp_path):
    mem.memory.write("likes tea")
    mem.close()
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                   cwd=tmp_path, env=SUBPROCESS_ENV)  # looks at main's moves as it starts
    host.call("storage.info")
    host.close()
    run_gitmem("memory", "write", "--user", repo=repo_path, input="likes coffee\n")
    dropped = Git(repo_path)("rev-parse", "HEAD").strip()
    Git(repo_path)("commit", "-q", "--amend", "-m", "reworded")

    status = run_gitmem("status", repo=repo_path)
    assert dropped[:10] in status.stdout


def listed(repo_path: Path) -> list[dict]:
    with Gitmem.open(repo_path, create=False) as mem:
        return mem.threads.list_threads()


def test_the_thread_listing_kept_for_the_next_process_follows_every_change(mem, repo_path):
    for n in range(5):
        mem.threads.append_events(f"t{n}", "planner", [{"type": "RUN_STARTED", "n": n}])
    mem.close()
    first = listed(repo_path)
    listing = repo_path / ".git" / "gitmem" / "thread-listing.json"
    assert listing.exists() and [t["id"] for t in first] == ["t4", "t3", "t2", "t1", "t0"]

    # another process appends, plain git changes a meta.json and removes a thread
    run_gitmem("thread", "list", repo=repo_path)
    with Gitmem.open(repo_path, create=False) as other:
        other.threads.append_events("t1", "planner", [{"type": "RUN_FINISHED"}])
    git = Git(repo_path)
    meta = repo_path / "threads" / "t2" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "agentId": "reviewer"}))
    git("rm", "-rq", "threads/t0")
    git("commit", "-qam", "by hand")
    after = listed(repo_path)
    assert [t["id"] for t in after] == ["t1", "t4", "t3", "t2"]
    assert {t["id"]: t["agentId"] for t in after}["t2"] == "reviewer"

    for damage in (b"", b"{not json", b'{"tree": 1, "threads": []}'):
        listing.write_bytes(damage)
        assert listed(repo_path) == after


def test_the_thread_listing_keeps_ids_json_can_only_escape(mem, repo_path):
    odd = "lone \ud800 surrogate"  # a JSON request can carry one ("\\ud800")
    mem.threads.append_events(odd, "planner", [{"type": "RUN_STARTED"}])
    mem.close()
    assert [t["id"] for t in listed(repo_path)] == [odd]
    assert [t["id"] for t in listed(repo_path)] == [odd]  # from the kept listing


def test_a_write_cut_short_after_a_clean_close_is_still_recovered(mem, repo_path):
    # A clean close notes that the index holds HEAD's tree; a writer killed after moving
    # main (its work-tree file and index entry still the older version) must not be
    # mistaken for that state by the next opening.
    mem.memory.write("likes tea")
    mem.close()
    run_gitmem("memory", "write", "--user", repo=repo_path, input="likes tea\n\nand toast\n")
    assert (repo_path / ".git" / "gitmem" / "index-in-step").exists()
    git = Git(repo_path)
    blob = git("hash-object", "-w", "--stdin", input="likes coffee\n").strip()
    aside = {**SUBPROCESS_ENV, "GIT_INDEX_FILE": str(repo_path / ".git" / "index-aside")}
    for args in (["read-tree", "HEAD"], ["update-index", "--cacheinfo", f"100644,{blob},memory/user.md"]):
        subprocess.run(["git", "-C", str(repo_path), *args], env=aside, check=True)
    tree = subprocess.run(["git", "-C", str(repo_path), "write-tree"], env=aside, check=True,
                          capture_output=True, text=True).stdout.strip()
    commit = git("commit-tree", tree, "-p", "HEAD", "-m", "memory: replace user memory").strip()
    git("update-ref", "refs/heads/main", commit)  # the index file itself untouched

    assert run_gitmem("memory", "read", "--user", repo=repo_path).stdout == "likes coffee\n"
    assert (repo_path / "memory" / "user.md").read_text() == "likes coffee\n"
    assert git("status", "--porcelain") == ""


def test_an_opening_walks_back_to_gitmem_s_last_write_once(mem, repo_path):
    """Commits made with plain git (or fast-import) after gitmem's last write: the first
    opening checks that the write landed, a walk from main's tip back to it; it notes
    main's tip, so that no later opening walks that history again."""
    mem.memory.write("likes tea")
    mem.close()
    git = Git(repo_path)
    for n in range(3):
        (repo_path / "notes.txt").write_text(f"by hand {n}\n")
        git("add", "notes.txt")
        git("commit", "-qm", f"by hand {n}")
    noted = repo_path / ".git" / GITMEM_DIR / IN_FLIGHT_FILE
    tip = git("rev-parse", "main").strip()
    assert noted.read_text().strip() != tip  # gitmem's write, three commits back
    Gitmem.open(repo_path, create=False).close()
    assert noted.read_text().strip() == tip
