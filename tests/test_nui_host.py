"""``gitmem serve`` under the way the nui host really uses a storage extension.

nui fires every write from a goroutine of its own, each queuing on the one connection's
mutex, so writes made back to back arrive in either order; it appends to memory by
reading, joining and replacing; it reads a session with a 4 MiB line limit and takes a
failed read for an empty session; and it kills the process right after the answer to
its shutdown call (see shared/reference/nui-host-behaviour.md). `Coordinator` stands
in for nui's coordinator: Python threads for the goroutines, one lock around each
request and its answer, as nui's client has.
"""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import SUBPROCESS_ENV
from gitmem.records import layout
from gitmem.repository import Gitmem
from nui_client import NUI_LINE_LIMIT, NuiHost, go_json, manifest_command
from test_serve import (AGENT_MEMORY, AGENT_TYPES, SESSIONS, USER_MEMORY, extension, image, message, repo_path,  # noqa: F401
                        session, spawn, stop)

AGENT = {"handlerId": AGENT_MEMORY, "agentId": "codex"}
OK = {"ok": True}


def started(spawn, *extra_args: str) -> NuiHost:
    """The extension started as nui starts it (``spawn`` from test_serve), ``storage.info`` sent."""
    host = spawn(extra_args=extra_args)
    host.call("storage.info")  # sent first, right after the spawn
    return host


class Coordinator:
    """nui's storage coordinator: writes fired from threads of their own (``asyncCall``),
    every request and its answer under one lock; ``arrivals`` lists the writes (by the
    label given) in the order they got the lock, that is, reached gitmem."""

    def __init__(self, host: NuiHost):
        self.host = host
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.failures: list[Any] = []
        self.arrivals: list[Any] = []

    def call(self, method: str, params: dict, label: Any = None) -> dict:
        """One request as nui's client sends it, waiting for the connection."""
        with self.lock:
            if label is not None:
                self.arrivals.append(label)
            response = self.host.request(method, params)
        if "error" in response:
            raise AssertionError(f"{method}: {response['error']}")
        return response["result"]

    def fire(self, writes: list[tuple[Any, str, dict]], *, jitter: float = 0.0) -> None:
        """Send each ``(label, method, params)`` from a thread of its own, the threads
        started in random order (and each waiting up to ``jitter`` seconds first)."""
        threads = [threading.Thread(target=self._write, args=(write, jitter)) for write in writes]
        random.shuffle(threads)
        for thread in threads:
            thread.start()
        self.threads += threads

    def settle(self) -> None:
        """Wait for every fired write; each must have been answered ``{"ok": true}``."""
        for thread in self.threads:
            thread.join(120)
            assert not thread.is_alive(), "a write was never answered"
        self.threads.clear()
        assert self.failures == []

    def _write(self, write: tuple[Any, str, dict], jitter: float) -> None:
        label, method, params = write
        if jitter:
            time.sleep(random.uniform(0, jitter))
        try:
            if self.call(method, params, label) != {"ok": True}:
                self.failures.append((label, "not ok"))
        except AssertionError as error:
            self.failures.append((label, str(error)))

    def append(self, block: str, label: Any) -> None:
        """``Coordinator.Update(..., "append")``: read the memory, join, fire a replace."""
        existing = self.call("storage.agentMemory.read", AGENT)["content"]
        content = existing.strip() + "\n\n" + block.strip() if existing.strip() else block
        self.fire([(label, "storage.agentMemory.write",
                    {**AGENT, "content": content, "writeMode": "replace"})], jitter=0.02)


def snapshot_write(session_id: str, messages: list[dict], label: Any = None) -> tuple[Any, str, dict]:
    return (label if label is not None else len(messages), "storage.session.write",
            session(session_id, messages=messages, agentSessionId="resume"))


def head_messages(git, session_id: str, agent_type: str = "claude-code") -> list[dict]:
    """The session's messages as ``main`` holds them, read with plain git (references left in)."""
    folder = f"{layout.session_dir(agent_type, session_id)}/messages"
    paths = git("ls-tree", "--name-only", "main", f"{folder}/").split()  # none: no messages
    lines = [line for path in sorted(paths) if path.endswith(".jsonl")
             for line in git.show(f"main:{path}").splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def serve_log(repo_path: Path) -> str:
    return (repo_path / ".git" / "gitmem" / "serve.log").read_text()


# -- late snapshots ----------------------------------------------------------------------


def test_back_to_back_snapshots_leave_the_newest_at_head(spawn, git, repo_path):
    nui = Coordinator(started(spawn))
    messages: list[dict] = []
    for pair in range(100):  # a turn: the user's message, then the assistant's, both snapshots
        older = messages + [message(2 * pair)]
        newer = older + [message(2 * pair + 1)]
        nui.fire([snapshot_write("pairs", older), snapshot_write("pairs", newer)])
        nui.settle()
        assert head_messages(git, "pairs") == newer
        messages = newer
    reversed_pairs = sum(nui.arrivals[i] > nui.arrivals[i + 1] for i in range(0, 200, 2))
    assert 0 < reversed_pairs < 100  # the older one came last in some pairs, not in all

    burst = [message(i) for i in range(50)]
    nui.arrivals.clear()
    nui.fire([snapshot_write("burst", burst[:n]) for n in range(1, 51)])
    nui.settle()
    assert nui.arrivals != sorted(nui.arrivals)
    assert head_messages(git, "burst") == burst
    assert nui.call("storage.session.read", session("burst"))["messages"] == burst
    stop(nui.host)
    late = [line for line in serve_log(repo_path).splitlines() if "late snapshot" in line]
    assert len([line for line in late if "pairs" in line]) == reversed_pairs


def test_a_late_snapshot_handled_after_a_burst_is_late_by_when_it_arrived(spawn, git, repo_path):
    """The newer snapshot, a burst of other sessions' writes, then the older snapshot, all
    sent at once: the older one is handled past the window after the newer, yet arrived
    with it, and is not applied."""
    window = 0.1
    host = started(spawn, "--late-window", str(window))
    messages = [message(i, f"{i}: " + "a long answer " * 300) for i in range(40)]  # 170 KB
    with Gitmem.open(repo_path, create=False) as api, api.engine.lock:  # the queue waits
        sent = [host.send_request("storage.session.write", session("turns", messages=messages[:4])),
                *[host.send_request("storage.session.write", session(f"other-{n}", messages=messages[n:]))
                  for n in range(4)],
                host.send_request("storage.session.write", session("turns", messages=messages[:3]))]
        time.sleep(window + 0.2)
    for request_id in sent:
        assert host.answer_to(request_id, timeout=120)["result"] == OK
    assert head_messages(git, "turns") == messages[:4]
    stop(host)
    assert "late snapshot of claude-code/turns" in serve_log(repo_path)


def test_a_truncation_outside_the_window_is_applied(spawn, git, repo_path):
    host = started(spawn, "--late-window", "0.3")
    first = [message(i) for i in range(4)]
    host.call("storage.session.write", session("cut", messages=first))
    time.sleep(0.5)  # past the window: a shorter list is a truncation
    host.call("storage.session.write", session("cut", messages=first[:2]))
    assert head_messages(git, "cut") == first[:2]
    other = [message(0), message(1, "a different answer")]  # not a prefix: applied at once
    host.call("storage.session.write", session("cut", messages=other))
    assert head_messages(git, "cut") == other
    time.sleep(0.5)
    host.call("storage.session.write", session("cut", messages=[]))  # and so is a clear
    assert head_messages(git, "cut") == []
    stop(host)
    assert "late snapshot" not in serve_log(repo_path)


# -- memory appends ----------------------------------------------------------------------


def test_back_to_back_appends_keep_every_block(spawn, git):
    nui = Coordinator(started(spawn))
    nui.call("storage.agentMemory.write", {**AGENT, "content": "# codex\n\nuse tabs", "writeMode": "replace"})
    blocks = ["use tabs"]
    for trial in range(20):
        new = [f"trial {trial}: note {k}" for k in range(5)]
        for k, block in enumerate(new):
            nui.append(block, (trial, k))
        nui.settle()
        blocks += new
        content = nui.call("storage.agentMemory.read", AGENT)["content"]
        assert content.startswith("# codex\n\n") and content.endswith("\n")
        assert sorted(content.rstrip("\n").split("\n\n")[1:]) == sorted(blocks)  # each block once
    assert git.show("main:memory/agents/codex.md") == content
    merges = git("log", "--format=%(trailers:key=Gitmem-Merged-Base,valueonly)", "--",
                 "memory/agents/codex.md").split()
    assert merges and all(len(commit) == 40 for commit in merges)
    stop(nui.host)


def test_back_to_back_appends_onto_an_empty_memory_keep_what_they_can_tell(spawn, git):
    """nui's first appends: a new agent's memory, then the same memory after each delete.

    Onto an empty memory nothing tells which read a racing replace was made from (any text
    extends the empty version), so the newest version its writer has seen is its base, as
    for one client writing in turn (docs/nui.md): blocks may be replaced, none doubled, none
    made up. The burst onto those blocks keeps every block: each replace extends the
    version it was made from."""
    nui = Coordinator(started(spawn))
    for trial in range(20):
        if trial:
            nui.call("storage.agentMemory.delete", AGENT)
            assert git("ls-tree", "main", "memory/agents/codex.md") == ""
        first = [f"trial {trial}: note {k} onto nothing" for k in range(5)]
        for k, block in enumerate(first):
            nui.append(block, (trial, "onto nothing", k))
        nui.settle()
        kept = nui.call("storage.agentMemory.read", AGENT)["content"].rstrip("\n").split("\n\n")
        assert kept and len(set(kept)) == len(kept) and set(kept) <= set(first)
        then = [f"trial {trial}: note {k} onto those" for k in range(5)]
        for k, block in enumerate(then):
            nui.append(block, (trial, "onto those", k))
        nui.settle()
        content = nui.call("storage.agentMemory.read", AGENT)["content"]
        assert sorted(content.rstrip("\n").split("\n\n")) == sorted(kept + then)  # each block once
        assert git.show("main:memory/agents/codex.md") == content
    stop(nui.host)


def test_a_replace_made_after_a_read_is_a_replace(spawn, git):
    """Read, replace with other text, read again: onto an empty memory and onto text, within
    the late window, right after appends."""
    nui = Coordinator(started(spawn))
    replace = {**AGENT, "writeMode": "replace"}
    for trial in range(20):
        if trial % 2:
            nui.call("storage.agentMemory.delete", AGENT)
        for k in range(trial % 3):
            nui.append(f"trial {trial}: note {k}", (trial, k))
        nui.settle()
        for text in (f"trial {trial}: first", f"trial {trial}: second, instead"):
            nui.call("storage.agentMemory.read", AGENT)
            nui.call("storage.agentMemory.write", {**replace, "content": text})
            assert nui.call("storage.agentMemory.read", AGENT)["content"] == text + "\n"
            assert git.show("main:memory/agents/codex.md") == text + "\n"
    stop(nui.host)


class SeedStore:
    """The in-memory store of nui's storage-handler docs (``InMemoryStorage`` of the seed):
    what one client's calls, made in order, must leave."""

    def __init__(self):
        self.memory: dict[str | None, str] = {}  # agent id (None: the user) -> content

    def read(self, agent: str | None) -> str:
        return self.memory.get(agent, "")

    def write(self, agent: str | None, content: str, mode: str) -> None:
        existing = self.memory.get(agent, "")
        if mode == "append" and existing:
            content = existing.rstrip() + "\n\n" + content.strip()
        self.memory[agent] = content

    def delete(self, agent: str | None) -> None:
        self.memory.pop(agent, None)


def client_in_turn(seed: int, steps: int, agents: list[str]) -> list[tuple[str, str | None, str]]:
    """A seeded sequence of ``(op, agent, text)`` over the user (None) and ``agents``: reads,
    appends, replaces (fresh text, text extending what the client read, or a version it
    read before: an undo) and deletes. The client reads and writes in turn: it reads a
    memory again only after writing it (a second read before a write is what nui's racing
    appends look like, see docs/nui.md)."""
    rng = random.Random(seed)
    last_op: dict[str | None, str] = {}
    calls = []
    for step in range(steps):
        agent = rng.choice([None, *agents])
        op = rng.choice(["read", "read", "append", "replace", "replace", "delete"])
        if op == "read" and last_op.get(agent) == "read":
            op = rng.choice(["append", "replace", "delete"])
        kind = rng.choice(["fresh", "extend", "undo"]) if op == "replace" else ""
        if kind in ("extend", "undo") and last_op.get(agent) != "read":
            kind = "fresh"  # extending or undoing what it read needs a read
        calls.append((f"{op} {kind}".strip(), agent, f"seed {seed} step {step}: note"))
        last_op[agent] = op
    return calls


def test_one_client_reading_and_writing_in_turn_leaves_what_the_seed_store_leaves(spawn, git):
    """A replace after the client's own read is a replace (of an empty memory too), an
    append after a read or a delete takes that read, and nothing else is merged in."""
    host = started(spawn)
    agents = AGENT_TYPES  # those the handler list serves

    def memory(agent: str | None) -> tuple[str, dict]:
        if agent is None:
            return "storage.userMemory", {"handlerId": USER_MEMORY}
        return "storage.agentMemory", {"handlerId": AGENT_MEMORY, "agentId": agent}

    for seed in range(12):
        oracle, seen = SeedStore(), {}  # seen: every version the client read, per memory
        for agent in [None, *agents]:  # each seed starts from nothing (a delete is a write)
            host.call(f"{memory(agent)[0]}.delete", memory(agent)[1])
        for op, agent, text in client_in_turn(seed, 40, agents):
            kind, params = memory(agent)
            if op == "read":
                got = host.call(f"{kind}.read", params)["content"]
                assert got.rstrip("\n") == oracle.read(agent).rstrip("\n"), (seed, op, agent)
                seen.setdefault(agent, []).append(got.strip())
            elif op == "delete":
                host.call(f"{kind}.delete", params)
                oracle.delete(agent)
            else:
                mode = op.split()[0]
                if op == "replace extend":
                    text = seen[agent][-1] + "\n\n" + text if seen[agent][-1] else text
                elif op == "replace undo":
                    text = seen[agent][0]
                assert host.call(f"{kind}.write", {**params, "content": text, "writeMode": mode}) == OK
                oracle.write(agent, text, mode)
        for agent in [None, *agents]:  # read with git: a read of the client's would be one more
            path = layout.USER_MEMORY if agent is None else layout.agent_memory_path(agent)
            stored = git("show", f"main:{path}", check=False)
            assert stored.rstrip("\n") == oracle.read(agent).rstrip("\n"), (seed, agent)
    stop(host)


def test_a_late_duplicate_is_dropped_and_a_client_that_does_not_read_replaces(spawn, git):
    host = started(spawn)
    write = {**AGENT, "writeMode": "replace"}
    host.call("storage.agentMemory.write", {**write, "content": "likes tea"})
    first = host.call("storage.agentMemory.read", AGENT)["content"]
    assert host.call("storage.agentMemory.read", AGENT)["content"] == first  # two racing appends
    host.call("storage.agentMemory.write", {**write, "content": "likes tea\n\nshort answers"})
    head = git("rev-parse", "main")
    host.call("storage.agentMemory.write", {**write, "content": "likes tea\n\n"})  # an empty block joined
    assert git("rev-parse", "main") == head
    host.call("storage.agentMemory.read", AGENT)
    host.call("storage.agentMemory.read", AGENT)
    host.call("storage.agentMemory.write", {**write, "content": "likes tea\n\nshort answers\n\nbe brief"})
    host.call("storage.agentMemory.write", {**write, "content": "likes tea\n\nshort answers\n\nuse tabs"})
    assert git.show("main:memory/agents/codex.md") == "likes tea\n\nshort answers\n\nbe brief\n\nuse tabs\n"
    base = git("log", "-1", "--format=%(trailers:key=Gitmem-Merged-Base,valueonly)").strip()
    assert git.show(f"{base}:memory/agents/codex.md") == "likes tea\n\nshort answers\n"
    assert git("log", "-1", "--format=%s") == "memory: merge a stale replace into agent codex\n"
    # no read since its own writes: each replace is a replace, an older version included
    host.call("storage.agentMemory.write", {**write, "content": "likes tea"})
    assert git.show("main:memory/agents/codex.md") == "likes tea\n"
    host.call("storage.agentMemory.write", {**write, "content": "something else"})
    assert git.show("main:memory/agents/codex.md") == "something else\n"
    stop(host)


def test_one_client_read_read_append_read_replace_gives_the_replace(spawn, git):
    """Issue 43: an older read of the empty memory is never taken over the newest read."""
    host = started(spawn)
    for kind, params in (("storage.agentMemory", AGENT), ("storage.userMemory", {"handlerId": USER_MEMORY})):
        host.call(f"{kind}.read", params)
        host.call(f"{kind}.read", params)
        host.call(f"{kind}.write", {**params, "content": "A", "writeMode": "append"})
        assert host.call(f"{kind}.read", params)["content"] == "A\n"
        host.call(f"{kind}.write", {**params, "content": "B", "writeMode": "replace"})
        assert host.call(f"{kind}.read", params)["content"] == "B\n"
    assert git.show("main:memory/user.md") == "B\n"
    assert "merge" not in git("log", "--format=%s")
    stop(host)


@pytest.mark.parametrize("held", ["", "# codex\n\nlikes tea"])
def test_a_replace_queued_behind_a_burst_keeps_the_appends_acknowledged_meanwhile(spawn, git, repo_path,
                                                                                 held):
    """nui reads, joins and sends its replace at once; gitmem handles it only after a burst
    of big session writes queued ahead of it, past the late window, and after another face
    appended. The replace is judged by when it arrived: every acknowledged block stays."""
    window = 0.5
    host = started(spawn, "--late-window", str(window))
    replace = {**AGENT, "writeMode": "replace"}
    if held:
        host.call("storage.agentMemory.write", {**replace, "content": held})
    existing = host.call("storage.agentMemory.read", AGENT)["content"]
    read_at = time.monotonic()
    big = [message(i, f"{i}: " + "a long answer " * 300) for i in range(40)]  # 170 KB
    joined = existing.strip() + "\n\n" + "from nui" if existing.strip() else "from nui"
    appended = [f"from the API {k}" for k in range(3)]
    with Gitmem.open(repo_path, create=False) as api, api.engine.lock:
        # The API's writes hold the writers' lock (it is this thread's: they take it again);
        # serve's first session write waits for it, the rest of the burst and the replace
        # queue behind it (all of it fits in the pipe), sent at once, as nui sends a replace
        # right after its read.
        burst = [host.send_request("storage.session.write", session(f"big-{n}", messages=big[n:]))
                 for n in range(4)]
        replace_id = host.send_request("storage.agentMemory.write", {**replace, "content": joined})
        for block in appended:
            assert api.memory.write(block, "codex", mode="append") is not None  # acknowledged
        time.sleep(max(0.0, read_at + window + 0.2 - time.monotonic()))  # past the window
    for request_id in burst:
        assert host.answer_to(request_id, timeout=120)["result"] == OK
    assert host.answer_to(replace_id, timeout=120)["result"] == OK
    subjects = git("log", "--format=%s", "--", "memory/agents/codex.md").splitlines()
    assert subjects[0].startswith("memory: merge") or subjects[0].startswith("memory: replace")
    assert all(subject.startswith("memory: append") for subject in subjects[1:4])  # handled after them
    blocks = git.show("main:memory/agents/codex.md").rstrip("\n").split("\n\n")
    assert sorted(blocks) == sorted(held.split("\n\n") * bool(held) + appended + ["from nui"])
    stop(host)


# -- sessions over 4 MiB -----------------------------------------------------------------


def test_a_session_with_two_3_mb_images_survives_a_read_and_the_next_turn(spawn, repo_path, git):
    host = started(spawn)
    nui = Coordinator(host)
    messages = [message(i) for i in range(40)]
    pictures = [image(3_000_000), image(3_000_000)]
    messages[10]["images"] = [{"id": "shot-1", "mediaType": "image/png", "data": pictures[0]}]
    messages[30]["images"] = [{"id": "shot-2", "mediaType": "image/png", "data": pictures[1]}]
    nui.call("storage.session.write", session("shots", messages=messages, agentSessionId="r"))

    got = nui.call("storage.session.read", session("shots"))
    assert len(host.lines[-1]) <= NUI_LINE_LIMIT
    assert len(got["messages"]) == 40 and got["agentSessionId"] == "r"
    sent = [m["images"][0]["data"] for m in (got["messages"][10], got["messages"][30])]
    assert any(data.startswith("gitmem:blob:") for data in sent)  # not both fit inline
    assert set(sent) - {data for data in sent if data.startswith("gitmem:blob:")} <= set(pictures)

    turn = got["messages"] + [message(40)]  # nui's cache is what it read
    nui.fire([snapshot_write("shots", turn), snapshot_write("shots", turn + [message(41)])])
    nui.settle()
    expected = messages + [message(40), message(41)]
    with Gitmem.open(repo_path, create=False) as mem:
        assert mem.sessions.read("claude-code", "shots") == (expected, "resume")
    stored = head_messages(git, "shots")
    assert [m["id"] for m in stored] == [m["id"] for m in expected]
    folder = f"{layout.session_dir('claude-code', 'shots')}/messages/blobs"
    assert len(git("ls-tree", "--name-only", f"main:{folder}").split()) == 2
    stop(host)


def test_a_session_whose_text_passes_4_mib_keeps_its_head_across_a_restart(spawn, repo_path):
    host = started(spawn)
    messages = [message(i, f"{i}: " + "long answer text " * 700) for i in range(400)]  # ~5 MB
    host.call("storage.session.write", session("long", messages=messages))
    got = host.call("storage.session.read", session("long"))["messages"]
    assert len(host.lines[-1]) <= NUI_LINE_LIMIT
    assert 0 < len(got) < 400 and got == messages[-len(got):]  # the newest that fit
    stop(host)

    nui = Coordinator(started(spawn))  # restarted: the cut is remembered on disk
    turn = got + [message(400)]
    nui.fire([snapshot_write("long", turn), snapshot_write("long", turn + [message(401)])])
    nui.settle()
    with Gitmem.open(repo_path, create=False) as mem:
        assert mem.sessions.read("claude-code", "long")[0] == messages + [message(400), message(401)]
    stop(nui.host)


# -- the log at shutdown -----------------------------------------------------------------


@pytest.mark.parametrize("method", ["storage.shutdown", "extension.shutdown"])
def test_the_log_holds_the_shutdown_lines_when_killed_right_after_the_answer(extension, repo_path, method):
    command, cwd = manifest_command(extension)
    env = {**SUBPROCESS_ENV, "NUI_EXTENSION_DIR": str(extension), "NUI_EXTENSION_NAME": "gitmem"}
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        requests = [("storage.info", {}),
                    ("storage.userMemory.write", {"handlerId": USER_MEMORY, "content": "x"}),
                    (method, {})]
        for number, (name, params) in enumerate(requests, 1):
            process.stdin.write(go_json({"id": number, "jsonrpc": "2.0", "method": name,
                                         "params": params}) + b"\n")
            process.stdin.flush()
            answer = process.stdout.readline()
            assert json.loads(answer)["result"]
        process.kill()  # as nui does, at once
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = serve_log(repo_path)
    assert "storage.userMemory.write id=2" in log
    assert "finishing:" in log and f"{method} id=3" in log


# -- what nui sends that is not a session ------------------------------------------------


@pytest.mark.parametrize("messages, index", [([1, 2], 0), ([message(0), "hi"], 1), ([message(0), None], 1)])
def test_messages_that_are_not_objects_are_refused(spawn, git, messages, index):
    host = started(spawn)
    head = git("rev-parse", "main")
    error = host.error("storage.session.write", session("bad", messages=messages))
    assert error["code"] == -32602 and error["data"] == {"param": "messages", "index": index}
    assert '"messages"' in error["message"] and f"item {index}" in error["message"]
    assert git("rev-parse", "main") == head
    assert git("ls-tree", "main", layout.session_dir("claude-code", "bad")) == ""
    stop(host)


def test_a_loop_era_host_finds_the_handler_list(extension, repo_path):
    command, cwd = manifest_command(extension)
    env = {k: v for k, v in SUBPROCESS_ENV.items() if not k.startswith("NUI_")}
    with NuiHost(command, cwd=cwd, env={**env, "LOOP_EXTENSION_DIR": str(extension)}) as host:
        assert host.call("storage.userMemory.write", {"handlerId": USER_MEMORY, "content": "x"}) == {"ok": True}
        assert host.error("storage.userMemory.write", {"handlerId": SESSIONS, "content": "x"})["code"] == -32602
        stop(host)
    assert f"handlers: {extension}" in serve_log(repo_path)
