"""A person's ``git commit`` and ``git commit --amend`` racing a ``gitmem serve`` that
writes as fast as it can: every write gitmem answered stays on ``main``, with no
``gitmem rescue``; a ``git reset`` that drops gitmem's commits keeps them for ``gitmem
rescue``, and the CLI says so.

git (builtin/commit.c) reads HEAD, then the index, and moves HEAD with a compare-and-swap
against the HEAD it read; gitmem brings the work tree and the index to a commit before it
moves ``main`` there, so such a commit fails on git's own ref check or carries gitmem's
change. Real processes: the real ``gitmem serve`` over pipes, the real ``git``.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

from conftest import SUBPROCESS_ENV, Git
from nui_client import NuiHost

from gitmem.repository import Gitmem

USER_FILE = "memory/user.md"
AGENT_FILE = "memory/agents/reviewer.md"
PERSON_TRIES = 300  # git commits a person tries before giving up
PERSON_COMMITS = 25  # of each kind, per round


def moves(git: Git, kind: str) -> int:
    """How many moves of main by ``kind`` ("commit", "commit (amend)") its reflog holds."""
    return sum(1 for line in git("reflog", "show", "--format=%gs", "main").splitlines()
               if line.startswith(f"{kind}: "))


def person_commits(git: Git, kind: str, message: str) -> bool:
    """The person commits their memory file with plain git (amending the last commit, or a
    commit of its own with ``-a``); True when git made it (git refuses when main moved
    meanwhile, or gitmem holds the index for a moment)."""
    before = moves(git, "commit (amend)" if kind == "amend" else "commit")
    if kind == "amend":
        git("add", USER_FILE, check=False)
        git("commit", "-q", "--amend", "--no-edit", check=False)
        return moves(git, "commit (amend)") > before
    git("commit", "-q", "-a", "-m", message, check=False)
    return moves(git, "commit") > before


def test_plain_git_commits_and_amends_racing_serve_lose_no_answered_write(tmp_path, repo_path, cli, git):
    cli("init")
    cli("memory", "write", "--user", input="my notes")
    cli("memory", "write", "--agent", "reviewer", input="start")
    threads: list[str] = []  # thread creations answered ok
    appends: list[str] = []  # memory appends answered ok
    refused: list[str] = []
    person_lines: list[str] = []
    for round_ in range(2):
        stop = threading.Event()
        host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path)],
                       cwd=tmp_path, env=SUBPROCESS_ENV)

        def write_forever(round_=round_, host=host, stop=stop) -> None:
            for i in range(100_000):
                if stop.is_set():
                    return
                if i % 3 == 2:
                    token = f"r{round_}-append-{i}"
                    answer = host.request("storage.agentMemory.write", {
                        "handlerId": "gitmem-agent-memory", "agentId": "reviewer",
                        "writeMode": "append", "content": token})
                    done = appends
                else:
                    token = f"r{round_}-thread-{i}"
                    answer = host.request("threads.appendEvents", {
                        "threadId": token, "agentId": "agent",
                        "events": [{"type": "RUN_STARTED", "threadId": token, "runId": "r1"}]})
                    done = threads
                if answer.get("result") == {"ok": True}:
                    done.append(token)
                else:
                    refused.append(json.dumps(answer))

        writer = threading.Thread(target=write_forever)
        with host:
            writer.start()
            try:
                for kind in ("amend", "commit"):
                    for n in range(PERSON_COMMITS):
                        line = f"round {round_} {kind} {n}"
                        person_lines.append(line)
                        with open(repo_path / USER_FILE, "a") as file:  # an edit by hand
                            file.write(line + "\n")
                        # git refuses while gitmem moved main meanwhile: the person tries again
                        # (for a few seconds: on a busy machine git's own commit takes longer)
                        assert any(person_commits(git, kind, line)
                                   or stop.wait(0.005) for _ in range(PERSON_TRIES)), kind
            finally:
                stop.set()
                writer.join(timeout=120)
            assert not writer.is_alive() and refused == []
            assert host.call("storage.shutdown") == {"ok": True}
            assert host.wait() == 0, host.stderr()
    assert len(threads) > 40 and len(appends) > 20

    # A fresh gitmem reads every answered write, and so does plain git, with no rescue.
    listed = set(git("ls-tree", "--name-only", "main", "threads/").split())
    assert [t for t in threads if f"threads/{t}" not in listed] == []
    with Gitmem.open(repo_path, create=False) as mem:
        known = {t["id"] for t in mem.threads.list_threads()}
        assert [t for t in threads if t not in known] == []
        assert all(mem.threads.read_events(t) for t in threads[::25])
        content = mem.memory.read("reviewer")
    assert [token for token in appends if f"\n{token}\n" not in f"\n{content}"] == []
    assert content == git.show(f"main:{AGENT_FILE}")
    user = git.show(f"main:{USER_FILE}")
    assert [line for line in person_lines if line not in user] == []
    git.fsck()


def test_reset_hard_keeps_three_commits_for_rescue_and_the_cli_says_so(repo_path, cli, git):
    cli("init")
    cli("memory", "write", "--user", input="one")
    for block in ("two", "three", "four"):
        cli("memory", "write", "--user", "--append", input=block)
    newest = git("rev-parse", "main").strip()
    git("reset", "-q", "--hard", "HEAD~3")

    said = cli("memory", "read", "--user")  # any command notices it first
    assert said.stdout == "one\n"
    assert said.stderr.count("\n") == 1 and "gitmem rescue" in said.stderr
    assert newest[:10] in said.stderr
    assert cli("memory", "read", "--user").stderr == ""  # said once
    status = json.loads(cli("status", "--json").stdout)
    assert [d["commit"] for d in status["dropped"]] == [newest]
    assert "gitmem rescue" in cli("status").stdout
    cli("rescue")
    assert cli("memory", "read", "--user").stdout == "one\n\ntwo\n\nthree\n\nfour\n"


@pytest.mark.parametrize("amend", [False, True], ids=["commit", "amend"])
def test_a_commit_made_from_an_index_gitmem_had_not_updated_is_put_back(repo_path, cli, git, amend):
    """The index a person's git command read just before gitmem's last writes, written
    back by it afterwards (as ``git commit`` writes back what it read before taking
    ``index.lock``): the person's commit drops those writes; the next gitmem command puts
    them back by itself, and what the person committed stays."""
    cli("init")
    cli("memory", "write", "--user", input="my notes")
    cli("memory", "write", "--agent", "reviewer", input="start")
    index = repo_path / ".git" / "index"
    read_before = index.read_bytes()
    cli("memory", "write", "--agent", "reviewer", "--append", input="gitmem's append")
    cli("session", "write", "claude-code", "s1",
        input=json.dumps({"messages": [{"id": "m1", "role": "user", "content": "hi"}]}))
    index.write_bytes(read_before)
    with open(repo_path / USER_FILE, "a") as file:
        file.write("\nby hand\n")
    git("add", USER_FILE)
    git("commit", "-q", *(["--amend", "--no-edit"] if amend else ["-m", "my notes"]))
    assert "gitmem's append" not in git.show(f"main:{AGENT_FILE}")  # dropped by the commit

    said = cli("memory", "read", "--agent", "reviewer")
    assert said.stdout == "start\n\ngitmem's append\n"
    assert "put back" in said.stderr
    assert git.show(f"main:{AGENT_FILE}") == said.stdout
    assert '"m1"' in git.show("main:sessions/claude-code/s1/messages/000000.jsonl")
    assert git.show(f"main:{USER_FILE}") == "my notes\n\nby hand\n"
    assert git("log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)", "main").strip() == "put-back"
    assert cli("memory", "read", "--agent", "reviewer").stderr == ""  # put back once
    git.fsck()


def test_writes_wait_while_plain_git_holds_mains_lock(tmp_path, repo_path, cli, git):
    """Plain git takes ``main.lock`` for a moment on every move of main (here another
    process taking and dropping it as fast as it can, as git's lockfile code does): each
    gitmem write waits its turn, none fails, also when the lock is gone by the time gitmem
    looks at why libgit2 could not take it."""
    cli("init")
    cli("memory", "write", "--agent", "reviewer", input="start")
    stop = threading.Event()
    lock = repo_path / ".git" / "refs" / "heads" / "main.lock"

    def lock_main_forever() -> None:
        while not stop.is_set():
            try:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:  # libgit2's own, for gitmem's move
                continue
            os.unlink(lock)

    locker = threading.Thread(target=lock_main_forever)
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo_path), "--no-watch"],
                   cwd=tmp_path, env=SUBPROCESS_ENV)
    with host:
        locker.start()
        try:
            answers = [host.request("storage.agentMemory.write", {
                "handlerId": "gitmem-agent-memory", "agentId": "reviewer", "writeMode": "append",
                "content": f"block {i}"}) for i in range(300)]
        finally:
            stop.set()
            locker.join(timeout=60)
        assert host.call("storage.shutdown") == {"ok": True}
    assert [a for a in answers if a.get("result") != {"ok": True}] == []
    stored = git.show(f"main:{AGENT_FILE}")
    assert all(f"block {i}\n" in stored for i in range(300))
