"""User and agent memory through the Python API, on real repositories."""

from __future__ import annotations

import pytest

from conftest import python_script
from gitmem.records.ids import encode
from gitmem.repository import Gitmem


def test_read_of_nothing_is_empty(mem):
    assert mem.memory.read() == ""
    assert mem.memory.read("reviewer") == ""
    assert mem.memory.agents() == []


def test_replace_user_and_agent_memory(mem, git):
    assert mem.memory.write("likes tea") is not None
    mem.memory.write("# Reviewer\n\nbe strict\n\n\n", agent_id="reviewer")
    assert mem.memory.read() == "likes tea\n"
    assert mem.memory.read("reviewer") == "# Reviewer\n\nbe strict\n"  # one final newline
    assert (mem.engine.workdir / "memory/user.md").read_text() == "likes tea\n"
    assert (mem.engine.workdir / "memory/agents/reviewer.md").read_text() == "# Reviewer\n\nbe strict\n"
    mem.memory.write("likes coffee", mode="replace")
    assert mem.memory.read() == "likes coffee\n"
    assert git.show("HEAD~1:memory/user.md") == "likes tea\n"


def test_append_joins_blocks_with_one_blank_line(mem):
    mem.memory.write("  first  ", "a", mode="append")  # nothing yet: the content as given
    assert mem.memory.read("a") == "  first  \n"
    mem.memory.write("\n\n  second\n\n", "a", mode="append")
    assert mem.memory.read("a") == "  first\n\nsecond\n"
    mem.memory.write("third", "a", mode="append")
    assert mem.memory.read("a") == "  first\n\nsecond\n\nthird\n"


def test_append_to_blank_memory_takes_the_new_content(mem):
    mem.memory.write("\n \n", "a")
    mem.memory.write("only", "a", mode="append")
    assert mem.memory.read("a") == "only\n"


def test_fifty_appends_make_fifty_commits(mem, git):
    blocks = [f"block {i}: remember {i * i}" for i in range(50)]
    before = git.count()
    for block in blocks:
        assert mem.memory.write(block, "reviewer", mode="append") is not None
    assert git.count() == before + 50
    assert git.count("memory/agents/reviewer.md") == 50
    assert mem.memory.read("reviewer") == "\n\n".join(blocks) + "\n"
    assert git.log("memory/agents/reviewer.md", fmt="%s")[0] == "memory: append to agent reviewer"


def test_an_identical_write_makes_no_commit_and_succeeds(mem, git):
    mem.memory.write("same", "a")
    count = git.count()
    assert mem.memory.write("same", "a") is None
    assert mem.memory.write("same\n\n", "a") is None  # the stored form is the same
    assert mem.memory.write("", "a", mode="append") is None
    assert git.count() == count


def test_delete(mem, git):
    mem.memory.write("u")
    mem.memory.write("a", "agent")
    assert mem.memory.delete("agent") is not None
    assert mem.memory.read("agent") == ""
    assert not (mem.engine.workdir / "memory/agents").exists()
    assert mem.memory.delete() is not None
    assert mem.memory.read() == ""
    count = git.count()
    assert mem.memory.delete() is None and mem.memory.delete("agent") is None
    assert mem.memory.delete("never-written") is None
    assert git.count() == count


def test_commit_messages_and_trailers(mem, git):
    mem.memory.write("x", "ext:corp/reviewer", mode="append",
                     trailers={"Gitmem-Handler": "agent-memory"})
    mem.memory.write("y")
    mem.memory.delete("ext:corp/reviewer")
    assert git.log(fmt="%s")[:3] == ["memory: delete agent ext:corp/reviewer",
                                     "memory: replace user memory",
                                     "memory: append to agent ext:corp/reviewer"]
    trailers = [git("log", "-1", f"--skip={n}", "--format=%(trailers:only,unfold)").strip().splitlines()
                for n in range(3)]
    assert trailers == [
        ["Gitmem-Op: memory.delete", "Gitmem-Id: agent:ext:corp/reviewer"],
        ["Gitmem-Op: memory.replace", "Gitmem-Id: user"],
        ["Gitmem-Op: memory.append", "Gitmem-Handler: agent-memory",
         "Gitmem-Id: agent:ext:corp/reviewer"],
    ]


def test_bad_mode_is_refused(mem, git):
    count = git.count()
    with pytest.raises(ValueError, match="mode must be .replace. or .append., not .prepend."):
        mem.memory.write("x", mode="prepend")
    assert git.count() == count


@pytest.mark.parametrize("agent_id", ["../../etc/passwd", "ext:corp/reviewer", "CON", "a/b\\c",
                                      "a/b\\\\c", "x" * 300, "\0\n\ud800", ".", ".."])  # "" is refused
def test_any_agent_id_lands_inside_its_folder_and_reads_back(mem, git, tmp_path, agent_id):
    mem.memory.write(f"memory of {agent_id!r}", agent_id)
    assert mem.memory.read(agent_id) == f"memory of {agent_id!r}\n"
    folder = mem.engine.workdir / "memory/agents"
    files = [p for p in folder.iterdir()]
    assert [p.name for p in files] == [f"{encode(agent_id)}.md"]
    assert files[0].resolve().parent == folder.resolve()
    assert git("ls-tree", "-r", "--name-only", "HEAD", "memory").splitlines() == [
        f"memory/agents/{encode(agent_id)}.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # nothing beside the repo
    assert mem.memory.delete(agent_id) is not None
    assert mem.memory.read(agent_id) == ""


def test_agents_lists_the_ids(mem):
    for agent_id in ("reviewer", "ext:corp/reviewer", "CON"):
        mem.memory.write("x", agent_id)
    mem.memory.write("user memory is not an agent")
    assert sorted(mem.memory.agents()) == sorted(["reviewer", "ext:corp/reviewer", "CON"])


def test_reads_come_from_the_commit_not_the_work_tree(repo_path):
    with Gitmem.open(repo_path, hand_edits=False) as mem:  # hand edits: see gitmem.edits.handedits
        mem.memory.write("committed", "a")
        (mem.engine.workdir / "memory/agents/a.md").write_text("half-written")
        assert mem.memory.read("a") == "committed\n"


def test_a_second_gitmem_sees_the_first_ones_writes(repo_path, mem):
    mem.memory.write("from the first")
    with Gitmem.open(repo_path) as other:
        assert other.memory.read() == "from the first\n"
        other.memory.write("from the second", mode="append")
    assert mem.memory.read() == "from the first\n\nfrom the second\n"


APPENDER = """
import sys
import gitmem
name, repo = sys.argv[1], sys.argv[2]
with gitmem.open(repo) as mem:
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for i in range(200):
        mem.memory.write(f"{name} {i}", agent_id="shared", mode="append")
"""


def test_two_processes_appending_at_once_lose_nothing(repo_path, mem, git):
    mem.close()
    writers = [python_script(APPENDER, name, str(repo_path)) for name in ("left", "right")]
    for writer in writers:
        assert writer.stdout.readline() == "ready\n"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0
    assert git.count("memory/agents/shared.md") == 400
    blocks = git.show("HEAD:memory/agents/shared.md").rstrip("\n").split("\n\n")
    assert sorted(blocks) == sorted(f"{name} {i}" for name in ("left", "right") for i in range(200))
    for name in ("left", "right"):  # each writer's blocks in its own order
        assert [b for b in blocks if b.startswith(name)] == [f"{name} {i}" for i in range(200)]
    # a writer in a loop must not starve the other one until it is done
    assert len({b.split()[0] for b in blocks[:200]}) == 2, "one writer starved the other"
    git.fsck()
    assert git.status() == ""


def test_log_names_records_as_the_user_knows_them(mem):
    mem.memory.write("u")
    agent_commits = [mem.memory.write(f"a{i}", "ext:corp/reviewer") for i in range(2)]
    session_commit = mem.sessions.write("ext:corp/x", "s1", [{"role": "user"}])
    assert [c.id for c in mem.log("agent:ext:corp/reviewer")] == agent_commits[::-1]
    assert [c.id for c in mem.log("session:ext:corp/x/s1")] == [session_commit]  # split at the last /
    assert [c.summary for c in mem.log("user")] == ["memory: replace user memory"]
    assert mem.log("thread:none") == []
    assert len(mem.log()) == len(mem.log(limit=100)) == 5 and len(mem.log(limit=2)) == 2
    with pytest.raises(ValueError, match="not a record name"):
        mem.log("agent")


def test_a_replace_from_an_older_read_is_merged_and_an_unchanged_copy_dropped(mem, git):
    """Each writer's replace is made from the newest version it has seen (gitmem.stores.bases)."""
    mem.memory.write("# notes\n\nlikes tea", "codex")
    existing = mem.memory.read("codex", writer="a").strip()
    assert mem.memory.read("codex", writer="b").strip() == existing
    assert mem.memory.read("codex", writer="c").strip() == existing
    first, second = existing + "\n\nbe brief", existing + "\n\nuse tabs"  # both read `existing`
    assert mem.memory.write(second, "codex", writer="a") is not None
    merged = mem.memory.write(first, "codex", writer="b")
    # read with git: a read through the store would be the version the next replaces are made from
    assert git.show("main:memory/agents/codex.md") == "# notes\n\nlikes tea\n\nuse tabs\n\nbe brief\n"
    assert git("log", "-1", "--format=%s", merged) == "memory: merge a stale replace into agent codex\n"
    base = git("log", "-1", "--format=%(trailers:key=Gitmem-Merged-Base,valueonly)", merged).strip()
    assert git.show(f"{base}:memory/agents/codex.md") == "# notes\n\nlikes tea\n"
    commits = git.count()
    assert mem.memory.write(existing, "codex", writer="c") is None  # what it read, unchanged: nothing
    assert git.count() == commits
    assert mem.memory.write(existing, "codex", writer="a") is not None  # removes what it wrote only
    assert git.show("main:memory/agents/codex.md") == "# notes\n\nlikes tea\n\nbe brief\n"
    mem.memory.read("codex", writer="b")
    assert mem.memory.write(existing, "codex", writer="b") is not None  # it saw all it removes
    assert mem.memory.read("codex") == "# notes\n\nlikes tea\n"
