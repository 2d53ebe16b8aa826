"""Concurrency suite: every kind of writer on one repository at once, and nothing lost.

Two ``gitmem serve`` processes (driven as nui drives them, one request in flight each),
a Python API user (``gitmem.open`` in a process of its own) and a person saving files
by hand under ``gitmem watch``: WRITES writes each, all at the same time. Serve and API
writers share user memory (appends) and a thread (``threads.*`` when serve answers
it), and have an agent memory and a session of their own; the person edits files of
their own. At the end every answered write is in HEAD, each one is exactly one commit
(counted by trailers), the hand edits are committed as the person's, ``git fsck`` and
``git status`` are clean.

    GITMEM_CONCURRENCY_WRITES=1000 pytest -m concurrency
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, python_script, run_gitmem
from gitmem.records import layout
from nui_client import NuiHost

pytestmark = [pytest.mark.concurrency, pytest.mark.slow]

WRITES = int(os.environ.get("GITMEM_CONCURRENCY_WRITES", "250"))
THREAD = "shared-thread"
HAND_FILES = [f"memory/agents/hand-{n}.md" for n in range(3)]

# The API user: one JSON line on stdout per write, once it returned.
API_SCRIPT = """
import json, sys
import gitmem

repo, count, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
messages = []
with gitmem.open(repo, create=False) as mem:
    for i in range(count):
        kind, token = kinds[i % len(kinds)], f"api.{i}"
        if kind == "agent":
            mem.memory.write(token, "agent-api", "append")
        elif kind == "user":
            mem.memory.write(token, None, "append")
        elif kind == "session":
            messages.append({"id": token, "role": "user", "content": token})
            mem.sessions.write("claude-code", "session-api", messages)
        else:
            mem.threads.append_events("THREAD", "api", [{"type": "CUSTOM", "value": token}])
        print(json.dumps([kind, token]), flush=True)
""".replace("THREAD", THREAD)


def serve_writer(host: NuiHost, actor: str, kinds: list[str], done: list) -> None:
    """WRITES writes through one ``gitmem serve``; appends ``(kind, token)`` of each answered one."""
    messages = []
    for i in range(WRITES):
        kind, token = kinds[i % len(kinds)], f"{actor}.{i}"
        if kind == "agent":
            method, params = "storage.agentMemory.write", {
                "agentId": f"agent-{actor}", "content": token, "writeMode": "append"}
        elif kind == "user":
            method, params = "storage.userMemory.write", {"content": token, "writeMode": "append"}
        elif kind == "session":
            messages.append({"id": token, "role": "user", "content": token})
            method, params = "storage.session.write", {
                "sessionId": f"session-{actor}", "agentType": "claude-code",
                "agentSessionId": "", "workingDir": "/w", "messages": messages}
        else:
            method, params = "threads.appendEvents", {
                "threadId": THREAD, "agentId": actor, "events": [{"type": "CUSTOM", "value": token}]}
        assert host.call(method, {"handlerId": actor, **params}, timeout=60) == {"ok": True}
        done.append((kind, token))


def edit_by_hand(repo: Path) -> list[str]:
    """A person saving WRITES times, by rename like most editors or in place like some;
    returns the lines added (one per save)."""
    added = []
    for i in range(WRITES):
        path = repo / HAND_FILES[i % len(HAND_FILES)]
        line = f"hand.{i}"
        path.parent.mkdir(parents=True, exist_ok=True)
        old = path.read_text() if path.exists() else ""
        if i % 2:
            path.write_text(old + line + "\n")
        else:
            partial = path.with_name(f".{path.name}.swp")
            partial.write_text(old + line + "\n")
            os.replace(partial, path)
        added.append(line)
        time.sleep(0.01)
    return added


def wait_for_line(stream, text: str, timeout: float) -> None:
    """Read ``stream`` until a line containing ``text``; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([stream], [], [], 0.1)[0]:
            line = stream.readline()
            if text in line:
                return
            assert line, "the process ended before it was ready"
    pytest.fail(f"no {text!r} within {timeout}s")


def trailers(git: Git) -> list[list[tuple[str, str]]]:
    """The trailers of every commit on HEAD, as (key, value) pairs."""
    out = git("log", "--format=%(trailers:only,unfold)%x00")
    return [[tuple(line.split(": ", 1)) for line in block.strip().splitlines()]
            for block in out.split("\0")[:-1]]


def test_two_servers_an_api_user_and_a_person_at_once(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    hosts = {actor: NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)],
                            cwd=tmp_path, env=SUBPROCESS_ENV) for actor in ("A", "B")}
    watcher = subprocess.Popen(
        [sys.executable, "-m", "gitmem", "watch", "--repo", str(repo), "--debounce", "0.05",
         "--max-delay", "0.5"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=SUBPROCESS_ENV)
    api = None
    try:
        wait_for_line(watcher.stderr, "watching", 30)
        threads = all("error" not in host.request("threads.readEvents", {"threadId": THREAD})
                      for host in hosts.values())
        kinds = ["agent", "user", "session"] + (["thread"] if threads else [])
        answered = {actor: [] for actor in hosts}
        writers = [threading.Thread(target=serve_writer, args=(host, actor, kinds, answered[actor]))
                   for actor, host in hosts.items()]
        api_kinds = ["agent", "user", "session", "thread"]  # the API has threads either way
        api = python_script(API_SCRIPT, str(repo), str(WRITES), ",".join(api_kinds))
        for writer in writers:
            writer.start()
        hand_added = edit_by_hand(repo)
        for writer in writers:
            writer.join(timeout=300)
        api_out, _ = api.communicate(timeout=300)
        assert api.returncode == 0
        for actor, host in hosts.items():
            assert len(answered[actor]) == WRITES, f"serve {actor} stopped early"
            assert host.call("storage.shutdown") == {"ok": True}
            assert host.wait() == 0, host.stderr()
            assert host.problems == []
        watcher.send_signal(signal.SIGTERM)  # commits what is still pending, then exits
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read()
    finally:
        for host in hosts.values():
            host.close()
        for process in (watcher, api):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    answered["api"] = [tuple(json.loads(line)) for line in api_out.splitlines()]
    assert len(answered["api"]) == WRITES

    # Nothing lost: every answered write is in HEAD, once, in its writer's order.
    def blocks(path: str) -> list[str]:
        return [b.strip() for b in git.show(f"HEAD:{path}").split("\n\n")]

    def tokens(actor: str, kind: str) -> list[str]:
        return [token for k, token in answered[actor] if k == kind]

    user = blocks(layout.USER_MEMORY)
    assert Counter(user) == Counter(t for actor in answered for t in tokens(actor, "user"))
    events = _jsonl(git, f"{layout.thread_dir(THREAD)}/events")
    for actor in answered:
        assert [b for b in user if b.startswith(f"{actor}.")] == tokens(actor, "user")
        assert blocks(layout.agent_memory_path(f"agent-{actor}")) == tokens(actor, "agent")
        stored = _jsonl(git, f"{layout.session_dir('claude-code', f'session-{actor}')}/messages")
        assert [m["id"] for m in stored] == tokens(actor, "session")
        assert [e["value"] for e in events if e["value"].startswith(f"{actor}.")] == tokens(actor, "thread")
    for path in HAND_FILES:
        assert git.show(f"HEAD:{path}") == (repo / path).read_text()
    assert sorted(line for path in HAND_FILES for line in git.show(f"HEAD:{path}").split()) == \
        sorted(hand_added)

    # Each API write is exactly one commit (by its trailers: the operation, and the handler
    # for storage.* calls); the rest are the init and the person's commits.
    ops = {"agent": "memory.append", "user": "memory.append", "session": "session.write",
           "thread": "threads.append"}
    expected = Counter((ops[kind], actor if actor != "api" and kind != "thread" else None)
                       for actor in answered for kind, _ in answered[actor])
    commits = trailers(git)
    assert all([key for key, _ in pairs].count("Gitmem-Op") == 1 for pairs in commits)
    found = Counter((dict(pairs)["Gitmem-Op"], dict(pairs).get("Gitmem-Handler")) for pairs in commits)
    hand_edits = found.pop(("hand-edit", None), 0)
    assert found == expected + Counter({("init", None): 1})
    assert 1 <= hand_edits <= WRITES
    for line in git("log", "--format=%H %an|%cn", "--grep=Gitmem-Op: hand-edit").splitlines():
        commit, names = line.split(" ", 1)
        author, committer = names.split("|")
        assert author != committer  # the person's commit, made by gitmem
        assert set(git.changed(commit)) <= set(HAND_FILES)

    git.fsck()
    run_gitmem("fsck", repo=repo)
    assert git.status() == ""


def _jsonl(git: Git, folder: str) -> list:
    chunks = git("ls-tree", "--name-only", f"HEAD:{folder}", check=False).split()
    return [json.loads(line) for name in sorted(chunks) if name.endswith(".jsonl")
            for line in git.show(f"HEAD:{folder}/{name}").splitlines()]
