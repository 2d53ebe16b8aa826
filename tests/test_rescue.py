"""A history rewrite by hand (``git commit --amend``, ``git reset``) that takes gitmem's
commits off ``main``: ``gitmem status`` lists them, they survive ``git gc`` and reflog
expiry once gitmem noticed them, and ``gitmem rescue`` merges them back.

The oracle in each: every write gitmem acknowledged is readable through gitmem and in
``git show main:<path>``, every line the person committed is too, and ``git fsck`` is
clean. Real repositories, the real CLI, the real ``git`` and a real ``gitmem serve``.
"""

from __future__ import annotations

import json
import sys
import threading

import pytest

from conftest import SUBPROCESS_ENV, Git
from gitmem.edits.rewrites import LOOK_FIRST
from nui_client import NuiHost

AGENT_FILE = "memory/agents/reviewer.md"
USER_FILE = "memory/user.md"


@pytest.fixture
def cli(cli):
    """The CLI on a repository ``gitmem init`` made."""
    cli("init")
    return cli


def dropped(cli) -> list[dict]:
    """The dropped commits ``gitmem status --json`` lists."""
    return json.loads(cli("status", "--json").stdout)["dropped"]


def rescue_refs(git: Git) -> list[str]:
    return git("for-each-ref", "--format=%(refname)", "refs/gitmem/rescue/").split()


def write_then_reset(cli, git, *appends: str) -> str:
    """Write user memory "one", append each of ``appends``, then take those appends off
    main with ``git reset --hard``; returns the newest commit dropped."""
    cli("memory", "write", "--user", input="one")
    for block in appends:
        cli("memory", "write", "--user", "--append", input=block)
    newest = git("rev-parse", "main").strip()
    git("reset", "-q", "--hard", f"HEAD~{len(appends)}")
    return newest


def in_main(git: Git, commit: str) -> bool:
    """True when ``commit`` is in main's history."""
    return commit in git("rev-list", "main").split()


def amend(git: Git) -> bool:
    """``git commit -a --amend --no-edit``; False when git refused (main moved meanwhile,
    or serve's index refresh held the index). Success is an amend in main's reflog: git
    may fail writing the index after the commit is made, and serve may move main too."""
    def amends() -> int:
        return git("reflog", "show", "--format=%gs", "main").count("commit (amend)")

    before = amends()
    git("commit", "-q", "-a", "--amend", "--no-edit", check=False)
    return amends() > before


def test_amend_with_an_older_file_then_rescue_brings_the_write_back(repo_path, cli, git):
    for block in ("first", "second", "third"):
        cli("memory", "write", "--agent", "reviewer", "--append", input=block)
    third = git("rev-parse", "main").strip()
    # The person's editor still had the file as it was before "third" and saves their
    # line into it, then amends gitmem's last commit with it.
    (repo_path / AGENT_FILE).write_text("first\n\nsecond\n\nchecked by hand\n")
    git("commit", "-q", "-a", "--amend", "-m", "reviewer: a note of my own")
    assert "third" not in git.show(f"main:{AGENT_FILE}")

    listed = dropped(cli)
    assert [d["commit"] for d in listed] == [third]
    assert listed[0]["summary"] == "memory: append to agent reviewer"
    text = cli("status").stdout
    assert third[:10] in text and "gitmem rescue" in text

    out = cli("rescue").stdout
    assert f"merged back {third[:10]}" in out
    content = cli("memory", "read", "--agent", "reviewer").stdout
    for line in ("first", "second", "third", "checked by hand"):
        assert line in content
    assert git.show(f"main:{AGENT_FILE}") == content
    assert in_main(git, third)
    assert git("log", "-1", "--format=%s", "main^1").strip() == "reviewer: a note of my own"
    assert dropped(cli) == [] and rescue_refs(git) == []
    assert git.status() == ""
    git.fsck()


def test_reset_hard_drops_three_writes_kept_through_gc_and_reflog_expiry(repo_path, cli, git):
    cli("memory", "write", "--user", input="likes tea")
    kept_tip = git("rev-parse", "main").strip()
    cli("memory", "write", "--agent", "reviewer", "--append", input="checks types")
    cli("session", "write", "claude-code", "s1",
        input=json.dumps({"messages": [{"id": "m1", "role": "user", "content": "hi"}]}))
    cli("memory", "write", "--user", "--append", input="and biscuits")
    newest = git("rev-parse", "main").strip()
    git("reset", "-q", "--hard", "HEAD~3")
    assert git("rev-parse", "main").strip() == kept_tip

    # One entry: the newest dropped commit; the two before it come along with it.
    assert [d["commit"] for d in dropped(cli)] == [newest]
    assert rescue_refs(git) == [f"refs/gitmem/rescue/{newest}"]
    git("reflog", "expire", "--expire=now", "--all")
    git("gc", "-q", "--prune=now")
    assert [d["commit"] for d in dropped(cli)] == [newest]  # noticed before, still kept
    git.fsck()

    cli("rescue")
    assert cli("memory", "read", "--user").stdout == "likes tea\n\nand biscuits\n"
    assert cli("memory", "read", "--agent", "reviewer").stdout == "checks types\n"
    session = json.loads(cli("session", "read", "claude-code", "s1").stdout)
    assert [m["id"] for m in session["messages"]] == ["m1"]
    assert git.show(f"main:{USER_FILE}") == "likes tea\n\nand biscuits\n"
    assert git.show(f"main:{AGENT_FILE}") == "checks types\n"
    assert '"m1"' in git.show("main:sessions/claude-code/s1/messages/000000.jsonl")
    assert in_main(git, newest)
    assert dropped(cli) == [] and rescue_refs(git) == []
    assert git.status() == ""
    git.fsck()


def test_rescue_names_one_commit_lists_and_refuses_others(repo_path, cli, git):
    two = write_then_reset(cli, git, "two")
    cli("memory", "write", "--agent", "reviewer", input="three")  # gitmem writes on the reset tip
    three = git("rev-parse", "main").strip()
    git("reset", "-q", "--hard", "HEAD~1")

    listed = json.loads(cli("rescue", "--list", "--json").stdout)
    assert [d["commit"] for d in listed] == [three, two]  # newest first
    assert cli("memory", "read", "--user").stdout == "one\n"  # --list merges nothing

    bad = cli("rescue", "0000000", check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert "no dropped commit matches" in bad.stderr

    cli("rescue", two[:8])
    assert cli("memory", "read", "--user").stdout == "one\n\ntwo\n"
    assert [d["commit"] for d in dropped(cli)] == [three]
    cli("rescue")
    assert cli("memory", "read", "--agent", "reviewer").stdout == "three\n"
    assert cli("rescue").stdout.startswith("nothing dropped")
    git.fsck()


def test_a_hand_edit_waiting_during_the_rescue_is_kept_too(repo_path, cli, git):
    write_then_reset(cli, git, "two")
    with open(repo_path / USER_FILE, "a") as file:  # saved, not committed yet
        file.write("\nthree, by hand\n")
    cli("rescue")
    assert git.show(f"main:{USER_FILE}") == "one\n\nthree, by hand\n\ntwo\n"
    assert (repo_path / USER_FILE).read_text() == git.show(f"main:{USER_FILE}")
    assert git.status() == ""
    git.fsck()


def test_a_commit_main_holds_again_is_released(repo_path, cli, git):
    two = write_then_reset(cli, git, "two")
    assert [d["commit"] for d in dropped(cli)] == [two]
    git("reset", "-q", "--hard", two)  # the person undoes the reset
    assert dropped(cli) == [] and rescue_refs(git) == []


def test_a_commit_let_go_is_listed_no_more_nor_its_history(repo_path, cli, git):
    meant = write_then_reset(cli, git, "a secret", "another")  # on purpose
    assert cli("rescue", "--let-go", check=False).returncode == 1
    out = cli("rescue", "--let-go", meant[:12]).stdout
    assert out.startswith(f"let go {meant[:10]}")
    assert dropped(cli) == [] and rescue_refs(git) == []  # its parent does not come up either
    cli("memory", "write", "--user", "--append", input="two")
    two = git("rev-parse", "main").strip()
    git("reset", "-q", "--hard", "HEAD~1")  # another drop is still noticed
    assert [d["commit"] for d in dropped(cli)] == [two]
    cli("rescue")
    assert git.show(f"main:{USER_FILE}") == "one\n\ntwo\n"
    git.fsck()


def test_only_gitmem_commits_are_kept(repo_path, cli, git):
    cli("memory", "write", "--user", input="one")
    (repo_path / "notes.txt").write_text("the person's own file\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "my own commit")
    git("reset", "-q", "--hard", "HEAD~1")  # the person drops their own commit: theirs to drop
    assert dropped(cli) == []


def test_an_untouched_history_has_nothing_dropped(mem, repo_path, git):
    for i in range(30):
        mem.memory.write(f"block {i}", mode="append")
    tips = [e.new for e in mem.engine.refs.reflog()]
    assert len(tips) == 31  # init and every write, newest first
    assert tips[0] == mem.engine.head()
    assert mem.engine.refs.dropped_tips(tips) == []
    assert len(mem.engine.refs.reflog(limit=5)) == 5
    assert rescue_refs(git) == []


def test_a_reset_behind_more_of_the_persons_commits_than_a_look_reads_first_is_found(repo_path, cli, git):
    """The reset lies further back in main's reflog than the first moves a look reads
    (rewrites.LOOK_FIRST), behind the person's own commits: it is still found."""
    cli("memory", "write", "--user", input="one")
    cli("memory", "write", "--user", "--append", input="two")
    newest = git("rev-parse", "main").strip()
    assert dropped(cli) == []  # gitmem's moves looked at: the next look starts after them
    git("reset", "-q", "--hard", "HEAD~1")
    notes = repo_path / "notes.txt"
    for i in range(LOOK_FIRST + 4):
        notes.write_text(f"note {i}\n")
        git("add", "notes.txt")
        git("commit", "-q", "-m", f"my note {i}")
    assert [d["commit"] for d in dropped(cli)] == [newest]
    assert rescue_refs(git) == [f"refs/gitmem/rescue/{newest}"]


def test_the_reflog_is_read_from_its_end(mem, repo_path):
    """A reflog longer than one read block: the newest entries, whole, in order."""
    for i in range(3):
        mem.memory.write(f"block {i}", mode="append")
    log_file = repo_path / ".git" / "logs" / "refs" / "heads" / "main"
    lines = log_file.read_bytes().splitlines(keepends=True)
    log_file.write_bytes(lines[0] * 2000 + b"".join(lines))  # 2,000 old entries before
    entries = mem.engine.refs.reflog(limit=1000)
    assert len(entries) == 1000
    assert [e.new for e in entries[:4]] == [line.split()[1].decode() for line in reversed(lines)]


def test_amend_while_serve_appends_keeps_every_acknowledged_append(tmp_path, repo_path, cli, git):
    """The person amends three times while a running ``gitmem serve`` appends (each amend
    takes serve's last commit off main, or fails and is tried again when serve moved main
    first), then rescues while serve goes on."""
    # Both files tracked and the index in step first: `git commit -a` stages tracked
    # files only (a file the index does not know yet is the index's matter, not this one's).
    cli("memory", "write", "--agent", "reviewer", input="start")
    cli("memory", "write", "--user", input="my notes")
    acked: list[str] = []
    refused: list[str] = []  # writes answered with an error
    stop = threading.Event()
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                   cwd=tmp_path, env=SUBPROCESS_ENV)
    params = {"handlerId": "gitmem-agent-memory", "agentId": "reviewer", "writeMode": "append"}

    def append_forever() -> None:
        for i in range(5000):
            if stop.is_set():
                return
            token = f"append-{i}"
            answer = host.request("storage.agentMemory.write", {**params, "content": token})
            if answer.get("result") == {"ok": True}:
                acked.append(token)
            else:
                refused.append(answer["error"]["message"])

    writer = threading.Thread(target=append_forever)
    with host:
        writer.start()
        try:
            for n in range(3):
                while len(acked) < 5 * (n + 1) and writer.is_alive():
                    stop.wait(0.01)
                with open(repo_path / USER_FILE, "a") as file:
                    file.write(f"my line {n}\n")
                # git refuses while serve holds a lock or moved main meanwhile: again
                assert any(amend(git) or stop.wait(0.01) for _ in range(200))
            while len(acked) < 25 and writer.is_alive():
                stop.wait(0.01)
            taken_off = [d["commit"] for d in dropped(cli)]
            assert taken_off  # an amend takes the commit it amends off main
            cli("rescue")  # while serve goes on appending
        finally:
            stop.set()
            writer.join(timeout=120)
        assert not writer.is_alive() and refused == []
        content = host.call("storage.agentMemory.read", {"handlerId": "gitmem-agent-memory",
                                                          "agentId": "reviewer"})["content"]
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.wait() == 0, host.stderr()
    in_git = git.show(f"main:{AGENT_FILE}")
    assert content == in_git
    assert [token for token in acked if f"\n{token}\n" not in f"\n{in_git}"] == []
    for n in range(3):
        assert f"my line {n}\n" in git.show(f"main:{USER_FILE}")
    assert all(in_main(git, commit) for commit in taken_off)
    assert dropped(cli) == []
    git.fsck()
