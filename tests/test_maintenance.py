"""A repository that stays small and sound: background packing, gc, fsck."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest

from conftest import python_script
from gitmem.upkeep.maintenance import Maintenance, fsck, pack

AGENT = "claude-code"
CHUNK = f"sessions/{AGENT}/s1/messages/000000.jsonl"


def count_objects(git) -> dict[str, int]:
    """``git count-objects -v`` as numbers."""
    found = {}
    for line in git("count-objects", "-v").splitlines():
        key, _, value = line.partition(": ")
        found[key] = int(value)
    return found


def write_many(mem, count: int, maintenance: Maintenance | None = None) -> None:
    for i in range(count):
        mem.memory.write(f"note {i}", agent_id=f"agent-{i % 7}")
        if maintenance is not None:
            maintenance.maybe_start()


@pytest.mark.parametrize("use_git", [True, False], ids=["git-cli", "libgit2"])
def test_writes_leave_fewer_loose_objects_than_the_threshold(mem, git, use_git):
    maintenance = Maintenance(mem.engine, threshold=300, check_every=20, idle=0.05, use_git=use_git)
    write_many(mem, 400, maintenance)  # about 5 objects a write
    assert maintenance.wait(timeout=120)
    maintenance.close()
    loose = mem.engine.pack.loose_objects()
    assert loose < 300 and count_objects(git)["count"] == loose
    assert maintenance.reports and {r.method for r in maintenance.reports} == {
        "git repack" if use_git else "libgit2"}
    assert count_objects(git)["in-pack"] > 1500
    git.fsck()
    assert mem.memory.read(agent_id="agent-0") == "note 399\n"
    assert git("config", "pack.windowMemory").strip() == "64m"
    assert git("config", "pack.threads").strip() == "1"


def test_no_pack_below_the_threshold(mem, git):
    maintenance = Maintenance(mem.engine, threshold=10_000, check_every=5, idle=0.01)
    write_many(mem, 30, maintenance)
    assert maintenance.wait(timeout=30)
    maintenance.close()
    assert maintenance.reports == [] and count_objects(git)["packs"] == 0


def test_packing_never_takes_the_writers_lock(mem, git, repo_path):
    """Another process holds the writers' lock the whole time: packing still runs."""
    write_many(mem, 30)
    holder = python_script(
        "import sys, time; from gitmem.git.lock import FileLock\n"
        "with FileLock(sys.argv[1]):\n"
        "    print('holding', flush=True); sys.stdin.readline()\n",
        str(mem.engine.private_dir / "lock"))
    try:
        assert holder.stdout.readline() == "holding\n"
        for use_git in (True, False):
            write_many_objects = mem.engine.pack.loose_objects()
            report = pack(mem.engine, use_git=use_git)
            assert report.loose_after == 0 and report.loose_before == write_many_objects
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    git.fsck()


@pytest.mark.parametrize("use_git", [True, False], ids=["git-cli", "libgit2"])
def test_a_full_pack_leaves_one_pack_and_no_loose_objects(mem, git, use_git):
    write_many(mem, 40)
    pack(mem.engine, use_git=use_git)
    write_many(mem, 40)
    pack(mem.engine, use_git=use_git)
    assert count_objects(git)["packs"] == 2
    report = pack(mem.engine, full=True, use_git=use_git)
    assert (report.packs_after, report.loose_after) == (1, 0)
    assert count_objects(git)["count"] == 0 and count_objects(git)["packs"] == 1
    git.fsck()
    assert mem.memory.read(agent_id="agent-3") == "note 38\n"


def test_gc_command(mem, cli, git):
    write_many(mem, 20)
    mem.close()
    out = cli("gc").stdout
    assert "loose objects" in out and "packs 0 -> 1" in out
    assert count_objects(git)["count"] == 0
    report = json.loads(cli("gc", "--json").stdout)
    assert report["loose_before"] == 0 and report["packs_after"] == 1
    git.fsck()


@pytest.mark.slow
def test_10000_writes_with_background_maintenance(mem, git):
    """The issue's numbers: 10,000 writes with the default threshold (takes about a minute)."""
    maintenance = Maintenance(mem.engine, idle=0.2)
    started = time.monotonic()
    write_many(mem, 10_000, maintenance)
    assert maintenance.wait(timeout=600)
    maintenance.close()
    loose = mem.engine.pack.loose_objects()
    print(f"\n10,000 writes in {time.monotonic() - started:.0f} s, {len(maintenance.reports)} packs "
          f"run, {loose} loose objects left, {count_objects(git)}")
    assert loose < maintenance.threshold and count_objects(git)["count"] == loose
    git.fsck()


# -- fsck -----------------------------------------------------------------------------


def populate(mem) -> None:
    image = {"id": "i", "mediaType": "image/png", "data": base64.b64encode(os.urandom(3000)).decode()}
    mem.sessions.write(AGENT, "s1", [{"id": "m0", "role": "user", "content": "hi", "images": [image]},
                                     {"id": "m1", "role": "assistant", "content": "hello"}])
    mem.threads.append_events("t1", "planner", [{"type": "RUN_STARTED"}])
    mem.memory.write("likes tea")
    mem.engine.index.refresh()


def test_fsck_of_a_sound_repository(mem, cli):
    populate(mem)
    out = cli("fsck").stdout
    assert "objects: ok (git fsck --full)" in out and out.endswith("ok\n")
    assert "2 JSONL files (3 lines), 2 JSON files, 1 blobs" in out
    assert fsck(mem, use_git=False).ok


def test_fsck_finds_a_hand_corrupted_chunk_and_says_which(mem, cli, git):
    populate(mem)
    path = mem.engine.worktree.path(CHUNK)
    path.write_bytes(path.read_bytes() + b'{"id": "m2", "content": \n')
    done = cli("fsck", check=False)
    assert done.returncode == 1
    assert f"problem: {CHUNK} (work tree): line 3: Expecting value" in done.stdout
    assert done.stdout.endswith("1 problem found\n")
    git("commit", "-qam", "a bad hand edit, committed with plain git")
    report = json.loads(cli("fsck", "--json", check=False).stdout)
    assert not report["ok"] and [p["where"] for p in report["problems"]] == [f"{CHUNK} (HEAD)"]


def test_fsck_finds_bad_metadata_and_a_wrong_or_missing_blob(mem, cli, git):
    populate(mem)
    folder = mem.engine.workdir / f"sessions/{AGENT}/s1"
    (folder / "meta.json").write_text("[1, 2]\n")
    blob = next((folder / "messages" / "blobs").iterdir())
    blob.write_bytes(b"not the image")
    (mem.engine.workdir / "threads/t1/meta.json").write_text("{oops")
    git("commit", "-qam", "hand edits")
    problems = [str(p) for p in fsck(mem).problems]
    assert sorted(problems) == sorted([
        f"sessions/{AGENT}/s1/meta.json (HEAD): not a JSON object",
        f"sessions/{AGENT}/s1/messages/blobs/{blob.name} (HEAD): content does not match its "
        "SHA-256 name",
        "threads/t1/meta.json (HEAD): not JSON: Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)"])
    git("rm", "-q", str(blob))
    git("commit", "-qm", "blob gone")
    assert [str(p) for p in fsck(mem).problems if "blob" in str(p)] == [
        f"{CHUNK} (HEAD): line 1: blob {blob.name} is missing"]


def test_fsck_passes_over_a_submodule_named_like_a_json_file(mem, cli, git):
    populate(mem)
    commit = git("rev-parse", "HEAD").strip()
    git("update-index", "--add", "--cacheinfo", f"160000,{commit},vendor/schema.json")
    git("commit", "-qm", "a submodule: a commit in the tree, no file")
    out = cli("fsck").stdout
    assert "2 JSONL files (3 lines), 2 JSON files, 1 blobs" in out and out.endswith("ok\n")


@pytest.mark.parametrize("use_git", [True, False], ids=["git-cli", "libgit2"])
def test_fsck_finds_a_corrupted_object_and_says_which(mem, cli, use_git):
    populate(mem)
    oid = mem.engine.snapshot().blob_id("memory/user.md")
    loose = mem.engine.gitdir / "objects" / oid[:2] / oid[2:]
    loose.chmod(0o600)
    loose.write_bytes(b"garbage")
    report = fsck(mem, use_git=use_git)
    assert not report.ok
    assert report.problems[0].where == f"object {oid} (memory/user.md at HEAD)"
    if use_git:
        done = cli("fsck", check=False)
        assert done.returncode == 1
        assert f"problem: object {oid} (memory/user.md at HEAD): " in done.stdout
        assert "objects: PROBLEMS" in done.stdout
