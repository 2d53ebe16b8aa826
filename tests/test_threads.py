"""kaboo's ThreadStore contract, run against the store in-process and against a real
``gitmem serve`` through its pipes; then what only one side has (layout, commits,
wire errors, a SIGKILLed server, ``gitmem kaboo init``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import gitmem
from conftest import SUBPROCESS_ENV, run_gitmem
from gitmem.errors import InvalidInput
from gitmem.stores.jsonl import MAX_LINES
from gitmem.stores.threads import UNSET, AsyncThreadStore

ADAPTER = Path(__file__).resolve().parents[1] / "templates" / "kaboo"


def gitmem_command() -> list[str]:
    """How to run gitmem: ``$GITMEM_CMD`` (split like a shell would), else this Python's."""
    return shlex.split(os.environ.get("GITMEM_CMD", "")) or [sys.executable, "-m", "gitmem"]


class WireError(Exception):
    def __init__(self, error: dict):
        super().__init__(error["message"])
        self.code = error["code"]
        self.data = error.get("data")


class Wire:
    """The ThreadStore API as calls to a real ``gitmem serve`` over its stdin/stdout."""

    def __init__(self, repo: Path):
        self.repo = repo
        self.ids = itertools.count(1)
        self.process = subprocess.Popen(
            [*gitmem_command(), "serve", "--create", "--repo", str(repo), "--max-response", "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=SUBPROCESS_ENV)

    def call(self, method: str, params: dict | None = None):
        request_id = next(self.ids)
        request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        assert answer["id"] == request_id
        if "error" in answer:
            raise WireError(answer["error"])
        return answer["result"]

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=20) == 0

    def append_events(self, thread_id, agent_id, events, owner_id=UNSET):
        params = {"threadId": thread_id, "agentId": agent_id, "events": events}
        if owner_id is not UNSET:
            params["ownerId"] = owner_id
        assert self.call("threads.appendEvents", params) == {"ok": True}

    def read_events(self, thread_id):
        return self.call("threads.readEvents", {"threadId": thread_id})["events"]

    def read_state(self, thread_id):
        return self.call("threads.readState", {"threadId": thread_id})["state"]

    def save_messages(self, thread_id, messages):
        assert self.call("threads.saveMessages", {"threadId": thread_id, "messages": messages}) == {"ok": True}

    def read_messages(self, thread_id):
        return self.call("threads.readMessages", {"threadId": thread_id})["messages"]

    def list_threads(self, owner_id=UNSET):
        params = {} if owner_id is UNSET else {"filter": {"ownerId": owner_id}}
        return self.call("threads.list", params)["threads"]

    def clear(self, thread_id=UNSET):
        params = {} if thread_id is UNSET else {"threadId": thread_id}
        assert self.call("threads.clear", params) == {"ok": True}


@pytest.fixture(scope="module")
def shared_wire(tmp_path_factory):
    """One ``gitmem serve`` for the contract tests (starting one takes a few hundred ms)."""
    wire = Wire(tmp_path_factory.mktemp("wire") / "repo")
    yield wire
    wire.close()


@pytest.fixture(params=["store", "wire"])
def threads(request):
    """The store in-process on a fresh repository, or the shared server with no threads left."""
    if request.param == "store":
        return request.getfixturevalue("mem").threads
    wire = request.getfixturevalue("shared_wire")
    wire.clear()
    return wire


def run_events(run: int, count: int = 3) -> list[dict]:
    return [{"type": "RUN_STARTED", "runId": f"r{run}"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{run}", "delta": f"word {i} "}
              for i in range(count - 2)),
            {"type": "RUN_FINISHED", "runId": f"r{run}"}]


def snapshot(state) -> dict:
    return {"type": "STATE_SNAPSHOT", "snapshot": state}


def ids(listing: list[dict]) -> list[str]:
    return [thread["id"] for thread in listing]


# -- the contract, on both sides ----------------------------------------------------

ODD_EVENTS = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "timestamp": 1700000000000},
    {"type": "SOMETHING_NEW", "unknownField": {"nested": [1, 2.5, None, True, "x"]}, "z": 1, "a": 2},
    {"type": "TEXT_MESSAGE_CONTENT", "delta": "héllo 世界 🎉 \u2028 \u0000 \"quoted\" \\ \n\t"},
    {"type": "CUSTOM", "name": "big", "value": 2 ** 80, "negative": -(2 ** 70), "float": 1e-300},
    {"type": "CUSTOM", "name": "deep", "value": json.loads("[" * 200 + "]" * 200)},
    {"type": "CUSTOM", "name": "deep-objects", "value": json.loads('{"a":' * 150 + "1" + "}" * 150)},
    {"type": "RAW", "event": {}, "source": ""},
    {"type": "ACTIVITY_SNAPSHOT", "messageId": "a1", "content": {"steps": [{"done": False}]}},
]


def test_events_come_back_verbatim_and_in_order(threads):
    threads.append_events("t1", "agent", ODD_EVENTS)
    threads.append_events("t1", "agent", run_events(2))
    back = threads.read_events("t1")
    assert back == ODD_EVENTS + run_events(2)
    assert [list(event) for event in back] == [list(event) for event in ODD_EVENTS + run_events(2)]
    assert json.dumps(back) == json.dumps(ODD_EVENTS + run_events(2))


PNG = base64.b64encode(bytes(range(256)) * 40).decode()
IMAGE_EVENTS = [
    {"type": "CUSTOM", "name": "upload", "value": {"mediaType": "image/png", "data": PNG}},
    {"type": "TEXT_MESSAGE_CONTENT", "delta": "gitmem:blob:not-a-reference"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"avatar": f"data:image/png;base64,{PNG}", "note": "gitmem:text:x"}},
]


def test_images_and_lookalike_strings_come_back_verbatim(threads):
    threads.append_events("t1", "agent", IMAGE_EVENTS)
    threads.append_events("t1", "agent", IMAGE_EVENTS[:1])
    messages = [{"id": "m1", "role": "user", "content": [{"type": "binary", "mimeType": "image/png", "data": PNG}]}]
    threads.save_messages("t1", messages)
    assert threads.read_events("t1") == IMAGE_EVENTS + IMAGE_EVENTS[:1]
    assert threads.read_state("t1") == IMAGE_EVENTS[2]["snapshot"]
    assert threads.read_messages("t1") == messages


def test_many_appends_across_chunks_keep_every_event_in_order(threads):
    batches = [[{"type": "CUSTOM", "n": n} for n in range(start, start + size)]
               for start, size in ((0, 700), (700, 700), (1400, 1), (1401, 900))]
    for batch in batches:
        threads.append_events("long", "agent", batch)
    assert threads.read_events("long") == [event for batch in batches for event in batch]


def test_unknown_thread_reads_as_empty(threads):
    assert threads.read_events("nope") == []
    assert threads.read_messages("nope") == []
    assert threads.read_state("nope") is None
    assert threads.list_threads() == []


def test_agent_id_is_set_on_every_append(threads):
    threads.append_events("t1", "first", run_events(1))
    threads.append_events("t1", "second", run_events(2))
    assert [(t["id"], t["agentId"]) for t in threads.list_threads()] == [("t1", "second")]


def test_owner_id_is_set_only_when_given(threads):
    threads.append_events("t1", "agent", run_events(1))
    assert threads.list_threads()[0]["ownerId"] is None
    threads.append_events("t1", "agent", run_events(2), "alice")
    threads.append_events("t1", "agent", run_events(3))
    threads.append_events("t1", "agent", run_events(4), None)
    assert threads.list_threads()[0]["ownerId"] == "alice"
    threads.append_events("t1", "agent", run_events(5), "bob")
    assert threads.list_threads()[0]["ownerId"] == "bob"


def test_timestamps(threads):
    threads.append_events("t1", "agent", run_events(1))
    first = threads.list_threads()[0]
    assert set(first) == {"id", "agentId", "ownerId", "createdAt", "updatedAt"}
    assert first["createdAt"] == first["updatedAt"] > 1_600_000_000_000
    seen = [first["updatedAt"]]
    for run in range(2, 6):  # faster than the clock ticks: still strictly later each time
        threads.append_events("t1", "agent", run_events(run))
        seen.append(threads.list_threads()[0]["updatedAt"])
    assert seen == sorted(set(seen))
    assert threads.list_threads()[0]["createdAt"] == first["createdAt"]


def test_list_is_most_recently_updated_first(threads):
    for thread_id in ("a", "b", "c"):
        threads.append_events(thread_id, "agent", run_events(1))
    assert ids(threads.list_threads()) == ["c", "b", "a"]
    threads.append_events("a", "agent", run_events(2))
    assert ids(threads.list_threads()) == ["a", "c", "b"]
    threads.save_messages("b", [{"id": "m1", "role": "user", "content": "hi"}])
    assert ids(threads.list_threads()) == ["b", "a", "c"]
    listing = threads.list_threads()
    assert [t["updatedAt"] for t in listing] == sorted((t["updatedAt"] for t in listing), reverse=True)


def test_owner_filter_tells_no_filter_from_null_from_a_value(threads):
    threads.append_events("nobody", "agent", run_events(1))
    threads.append_events("alice-1", "agent", run_events(1), "alice")
    threads.append_events("bob-1", "agent", run_events(1), "bob")
    threads.append_events("alice-2", "agent", run_events(1), "alice")
    assert ids(threads.list_threads()) == ["alice-2", "bob-1", "alice-1", "nobody"]
    assert ids(threads.list_threads(None)) == ["nobody"]
    assert ids(threads.list_threads("alice")) == ["alice-2", "alice-1"]
    assert threads.list_threads("carol") == []


def test_clear_one_thread(threads):
    threads.append_events("keep", "agent", run_events(1))
    threads.append_events("drop", "agent", [snapshot({"x": 1})])
    threads.save_messages("drop", [{"id": "m1", "role": "user", "content": "hi"}])
    threads.clear("drop")
    assert ids(threads.list_threads()) == ["keep"]
    assert (threads.read_events("drop"), threads.read_messages("drop"), threads.read_state("drop")) == ([], [], None)
    assert threads.read_events("keep") == run_events(1)
    threads.clear("never-was")
    assert ids(threads.list_threads()) == ["keep"]


def test_clear_everything(threads):
    for thread_id in ("a", "b", "c"):
        threads.append_events(thread_id, "agent", run_events(1))
        threads.save_messages(thread_id, [{"id": "m", "role": "user", "content": thread_id}])
    threads.clear()
    assert threads.list_threads() == []
    assert threads.read_events("a") == [] and threads.read_messages("b") == []
    threads.append_events("a", "agent", run_events(2))
    assert threads.read_events("a") == run_events(2)


MESSAGES = [
    {"id": "m1", "role": "user", "content": "what's 2 + 2? 🤔"},
    {"id": "m2", "role": "assistant", "content": "",
     "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{\"a\":2}"}}]},
    {"id": "m3", "role": "tool", "toolCallId": "c1", "content": "4", "extra": {"unknown": [2 ** 64]}},
]


def test_messages_are_replaced_and_come_back_verbatim(threads):
    threads.append_events("t1", "agent", run_events(1))
    threads.save_messages("t1", MESSAGES)
    assert threads.read_messages("t1") == MESSAGES
    threads.save_messages("t1", MESSAGES[:1])
    assert threads.read_messages("t1") == MESSAGES[:1]
    threads.save_messages("t1", [])
    assert threads.read_messages("t1") == []
    assert threads.read_events("t1") == run_events(1)


def test_save_messages_on_an_unknown_thread_saves_them_unlisted(threads):
    threads.save_messages("early", MESSAGES)
    assert threads.read_messages("early") == MESSAGES
    assert threads.list_threads() == []
    threads.append_events("early", "agent", run_events(1), "alice")
    assert [(t["id"], t["ownerId"]) for t in threads.list_threads()] == [("early", "alice")]
    assert threads.read_messages("early") == MESSAGES


DERIVE_STATE_CASES = [  # (events, what kaboo's deriveState gives for them)
    ([], None),
    (run_events(1), None),
    ([snapshot({"a": 1})], {"a": 1}),
    ([snapshot({"a": 1}), *run_events(2), snapshot({"b": {"c": [1]}}), *run_events(3)], {"b": {"c": [1]}}),
    ([snapshot({"a": 1}), {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 2}]}],
     {"a": 1}),
    ([snapshot({"a": 1}), snapshot(None)], None),
    ([snapshot({"a": 1}), snapshot(5)], None),
    ([snapshot({"a": 1}), snapshot("text")], None),
    ([snapshot({"a": 1}), snapshot(True)], None),
    ([snapshot({"a": 1}), snapshot(0)], None),
    ([snapshot({"a": 1}), {"type": "STATE_SNAPSHOT"}], None),
    ([snapshot({"a": 1}), snapshot({})], {}),
    ([snapshot({"a": 1}), snapshot([1, {"x": 2}])], [1, {"x": 2}]),  # an array is an object in JS
    ([snapshot({"a": 1}), {"type": "TEXT_MESSAGE_CONTENT", "delta": "STATE_SNAPSHOT"},
      {"type": "CUSTOM", "name": "STATE_SNAPSHOT", "value": {"snapshot": {"no": 1}}}], {"a": 1}),
    ([snapshot({"a": 1}), {"type": "state_snapshot", "snapshot": {"b": 2}}], {"a": 1}),
    ([{"type": "STATE_SNAPSHOT", "snapshot": {"kaboo_session": {"pending": [{"tool": "rm", "é": "🎉"}]}},
      "timestamp": 5}], {"kaboo_session": {"pending": [{"tool": "rm", "é": "🎉"}]}}),
]


def test_read_state_is_kaboos_derive_state(threads):
    expected = [state for _, state in DERIVE_STATE_CASES]
    for n, (events, _) in enumerate(DERIVE_STATE_CASES):
        threads.append_events(f"case-{n}", "agent", events)
    assert [threads.read_state(f"case-{n}") for n in range(len(expected))] == expected
    for n in range(len(expected)):  # a later event that is not a snapshot changes nothing
        threads.append_events(f"case-{n}", "agent", [{"type": "RUN_STARTED"}])
    assert [threads.read_state(f"case-{n}") for n in range(len(expected))] == expected


def test_read_state_finds_a_snapshot_many_chunks_back(threads):
    threads.append_events("t1", "agent", [snapshot({"old": True})] + [{"type": "CUSTOM", "n": n} for n in range(2500)])
    assert threads.read_state("t1") == {"old": True}
    threads.append_events("t1", "agent", [snapshot(["new"])])
    assert threads.read_state("t1") == ["new"]
    threads.append_events("t1", "agent", [snapshot(None)] + [{"type": "CUSTOM"}] * 1200)
    assert threads.read_state("t1") is None


def test_odd_thread_ids(threads):
    odd = ["../../etc/passwd", "ext:corp/reviewer", "CaSe", "case", ".hidden", "new\nline", "x" * 400, "😀"]
    for n, thread_id in enumerate(odd):
        threads.append_events(thread_id, "agent", [{"type": "CUSTOM", "n": n}])
    assert sorted(ids(threads.list_threads())) == sorted(odd)
    for n, thread_id in enumerate(odd):
        assert threads.read_events(thread_id) == [{"type": "CUSTOM", "n": n}]
    threads.clear("../../etc/passwd")
    assert len(threads.list_threads()) == len(odd) - 1


# -- the store in-process: layout, commits, copies ---------------------------------


def test_layout_on_disk(mem, repo_path):
    mem.threads.append_events("ext:t/1", "agent", run_events(1), "alice")
    mem.threads.save_messages("ext:t/1", MESSAGES)
    folder = repo_path / "threads" / "ext%3at%2f1"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "events/000000.jsonl", "messages/000000.jsonl", "meta.json"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta == {"threadId": "ext:t/1", "agentId": "agent", "ownerId": "alice",
                    "createdAt": meta["createdAt"], "updatedAt": meta["updatedAt"]}
    lines = (folder / "events" / "000000.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in lines] == run_events(1)


def test_an_image_is_stored_once_beside_the_log(mem, repo_path):
    mem.threads.append_events("t1", "agent", IMAGE_EVENTS[:1])
    mem.threads.append_events("t1", "agent", IMAGE_EVENTS[:1])
    events = repo_path / "threads" / "t1" / "events"
    assert [p.name for p in (events / "blobs").iterdir()] == [hashlib.sha256(base64.b64decode(PNG)).hexdigest() + ".png"]
    assert PNG not in (events / "000000.jsonl").read_text()


def test_one_commit_per_write_with_trailers_and_none_for_nothing(mem, git):
    before = git.count()
    mem.threads.append_events("t1", "agent", run_events(1))
    mem.threads.save_messages("t1", MESSAGES)
    assert mem.threads.append_events("t1", "agent", []) is None
    assert mem.threads.save_messages("t1", MESSAGES) is None  # the same list again
    mem.threads.clear("t1")
    assert mem.threads.clear("t1") is None
    assert mem.threads.clear() is None
    commits = mem.log("thread:t1")
    assert git.count() == before + 3 == before + len(commits)
    assert [c.trailers for c in commits] == [
        {"Gitmem-Op": "threads.clear", "Gitmem-Id": "thread:t1"},
        {"Gitmem-Op": "threads.messages", "Gitmem-Id": "thread:t1"},
        {"Gitmem-Op": "threads.append", "Gitmem-Id": "thread:t1"}]
    assert commits[-1].summary == "threads: append 3 events to t1"


def test_an_append_never_rewrites_earlier_chunks(mem, git):
    mem.threads.append_events("t1", "agent", [{"type": "CUSTOM", "n": n} for n in range(MAX_LINES + 10)])
    first_chunk = git("rev-parse", "HEAD:threads/t1/events/000000.jsonl")
    mem.threads.append_events("t1", "agent", run_events(1))
    assert sorted(git.changed()) == ["threads/t1/events/000001.jsonl", "threads/t1/meta.json"]
    assert git("rev-parse", "HEAD:threads/t1/events/000000.jsonl") == first_chunk


def test_read_results_are_copies(mem):
    mem.threads.append_events("t1", "agent", [snapshot({"list": [1]})])
    mem.threads.read_state("t1")["list"].append(2)
    mem.threads.read_events("t1")[0]["snapshot"]["list"].append(3)
    mem.threads.list_threads()[0]["agentId"] = "changed"
    assert mem.threads.read_state("t1") == {"list": [1]}
    assert mem.threads.read_events("t1") == [snapshot({"list": [1]})]
    assert mem.threads.list_threads()[0]["agentId"] == "agent"


def test_read_state_sees_an_escaped_type_in_a_hand_written_chunk(mem):
    mem.threads.append_events("t1", "agent", [snapshot({"a": 1})])
    chunk = b'{"type":"STATE_SNAPSHOT","snapshot":{"a":1}}\n{"\\u0074ype":"\\u0053TATE_SNAPSHOT","snapshot":{"b":2}}\n'
    mem.engine.commit({"threads/t1/events/000000.jsonl": chunk}, "hand edit")
    assert mem.threads.read_state("t1") == {"b": 2}


def test_reads_take_blank_lines_and_crlf_in_a_hand_written_chunk(mem):
    mem.engine.commit({"threads/t1/events/000000.jsonl": b'{"type":"A"}\r\n\r\n  \n{"type":"B"}'}, "hand edit")
    assert mem.threads.read_events("t1") == [{"type": "A"}, {"type": "B"}]


def test_non_objects_are_refused(mem):
    with pytest.raises(InvalidInput, match=r"events\[1\] must be a JSON object"):
        mem.threads.append_events("t1", "agent", [{"type": "X"}, "no"])
    with pytest.raises(InvalidInput, match=r"messages\[0\]"):
        mem.threads.save_messages("t1", [[1]])
    assert mem.threads.read_events("t1") == []


def test_the_async_twin(mem):
    threads = AsyncThreadStore(mem.threads)

    async def run():
        await threads.append_events("t1", "agent", run_events(1), "alice")
        await threads.save_messages("t1", MESSAGES)
        await threads.append_events("t2", "agent", [snapshot({"s": 1})])
        found = (await threads.read_events("t1"), await threads.read_messages("t1"),
                 await threads.read_state("t2"), ids(await threads.list_threads()),
                 ids(await threads.list_threads(None)))
        await threads.clear("t2")
        return found, ids(await threads.list_threads())

    found, after_clear = asyncio.run(run())
    assert found == (run_events(1), MESSAGES, {"s": 1}, ["t2", "t1"], ["t2"])
    assert after_clear == ["t1"]


def test_concurrent_appends_from_two_processes_lose_nothing(mem, repo_path):
    wires = [Wire(repo_path), Wire(repo_path)]
    try:
        for n in range(10):
            for w, wire in enumerate(wires):
                wire.append_events("shared", f"agent-{w}", [{"type": "CUSTOM", "n": n, "w": w}])
                mem.threads.append_events("shared", "local", [{"type": "CUSTOM", "n": n, "w": "local"}])
    finally:
        for wire in wires:
            wire.close()
    events = mem.threads.read_events("shared")
    assert len(events) == 40
    assert [e["n"] for e in events] == sorted(e["n"] for e in events)


# -- the wire: errors, restarts ------------------------------------------------------


@pytest.fixture
def wire(mem, repo_path):
    server = Wire(repo_path)
    yield server
    server.close()


BAD_PARAMS = [  # (method, params, the param the error names)
    ("threads.appendEvents", {"agentId": "a", "events": []}, "threadId"),
    ("threads.appendEvents", {"threadId": 5, "agentId": "a", "events": []}, "threadId"),
    ("threads.appendEvents", {"threadId": "t", "events": []}, "agentId"),
    ("threads.appendEvents", {"threadId": "t", "agentId": "a"}, "events"),
    ("threads.appendEvents", {"threadId": "t", "agentId": "a", "events": {"type": "X"}}, "events"),
    ("threads.appendEvents", {"threadId": "t", "agentId": "a", "events": [{"type": "X"}, 3]}, "events"),
    ("threads.appendEvents", {"threadId": "t", "agentId": "a", "events": [], "ownerId": 7}, "ownerId"),
    ("threads.readEvents", {}, "threadId"),
    ("threads.readState", {"threadId": None}, "threadId"),
    ("threads.readMessages", {"threadId": ["t"]}, "threadId"),
    ("threads.saveMessages", {"threadId": "t"}, "messages"),
    ("threads.saveMessages", {"threadId": "t", "messages": ["hi"]}, "messages"),
    ("threads.saveMessages", {"threadId": "t", "messages": [{"id": "m1"}, ["{"], None]}, "messages"),
    ("threads.saveMessages", {"threadId": "t", "messages": None}, "messages"),
    ("threads.list", {"filter": "alice"}, "filter"),
    ("threads.list", {"filter": {"ownerId": 1}}, "filter.ownerId"),
    ("threads.clear", {"threadId": 1}, "threadId"),
    ("threads.clear", {"threadId": None}, "threadId"),
]


def test_bad_params_are_refused_naming_the_param(wire, git):
    before = git.count()
    for method, params, named in BAD_PARAMS:
        with pytest.raises(WireError) as refused:
            wire.call(method, params)
        assert (refused.value.code, refused.value.data["param"]) == (-32602, named), (method, params)
        assert f'"{named}"' in str(refused.value)
    assert git.count() == before
    assert wire.list_threads() == []


def test_optional_params_may_be_null_or_absent(wire):
    wire.call("threads.appendEvents", {"threadId": "t", "agentId": "a", "events": [{"type": "X"}],
                                       "ownerId": None})
    assert wire.call("threads.list", {"filter": None}) == wire.call("threads.list", {"filter": {}}) == {
        "threads": wire.list_threads()}
    assert len(wire.list_threads()) == 1


def test_empty_event_list_makes_no_commit(wire, git):
    before = git.count()
    wire.append_events("t1", "agent", [])
    assert git.count() == before
    assert wire.list_threads() == []


def test_a_log_larger_than_nuis_line_limit_is_read_whole(wire):
    events = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * 1000, "n": n} for n in range(6000)]
    wire.append_events("long", "agent", events)
    assert wire.read_events("long") == events


def test_acknowledged_writes_survive_sigkill(mem, repo_path, git):
    events = ODD_EVENTS + run_events(1, 50) + [snapshot({"kaboo_session": {"pending": ["approve"]}})]
    server = Wire(repo_path)
    server.append_events("t1", "agent", events, "alice")
    server.save_messages("t1", MESSAGES)
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=10)
    again = Wire(repo_path)
    try:
        assert again.read_events("t1") == events
        assert again.read_messages("t1") == MESSAGES
        assert again.read_state("t1") == {"kaboo_session": {"pending": ["approve"]}}
        assert [(t["id"], t["ownerId"]) for t in again.list_threads()] == [("t1", "alice")]
    finally:
        again.close()
    git.fsck()


def test_a_request_key_makes_a_write_from_python_once(mem, git):
    before = git.count()
    for _ in range(2):
        mem.threads.append_events("t1", "a", [{"type": "RUN_STARTED"}], request_key="py-1")
    assert mem.threads.read_events("t1") == [{"type": "RUN_STARTED"}] and git.count() == before + 1
    with pytest.raises(ValueError, match="a request key is 1 to 200 visible ASCII characters"):
        mem.threads.save_messages("t1", [], request_key="line\nbreak")
    assert git.count() == before + 1


def test_a_write_sent_again_with_its_request_key_is_committed_once_across_a_restart(mem, repo_path, git):
    """A client whose gitmem serve died cannot know whether its write was committed: sent
    again with the same requestKey, to a new gitmem serve, it is answered without a second commit."""
    first_run = {"threadId": "t1", "agentId": "a", "events": [{"type": "RUN_STARTED"}], "requestKey": "run-1"}
    messages = {"threadId": "t1", "messages": [{"id": "m1", "role": "user"}], "requestKey": "save-1"}
    server = Wire(repo_path)
    assert server.call("threads.appendEvents", first_run) == {"ok": True}
    assert server.call("threads.saveMessages", messages) == {"ok": True}
    os.kill(server.process.pid, signal.SIGKILL)  # the answers may never have reached the client
    server.process.wait(timeout=10)
    commits = git.count()
    assert "Gitmem-Request: save-1" in git("log", "-1", "--format=%B")

    again = Wire(repo_path)
    try:
        assert again.call("threads.appendEvents", first_run) == {"ok": True}
        assert again.call("threads.saveMessages", {**messages, "messages": []}) == {"ok": True}
        assert git.count() == commits and again.read_events("t1") == [{"type": "RUN_STARTED"}]
        assert again.read_messages("t1") == messages["messages"]  # the first save stands
        again.call("threads.appendEvents", {**first_run, "requestKey": "run-2"})  # a new key: a new write
        assert again.read_events("t1") == [{"type": "RUN_STARTED"}] * 2
        again.call("threads.clear", {"threadId": "t1", "requestKey": "clear-1"})
        again.call("threads.appendEvents", {**first_run, "requestKey": "run-3"})
        again.call("threads.clear", {"threadId": "t1", "requestKey": "clear-1"})  # cleared once, not twice
        assert again.read_events("t1") == [{"type": "RUN_STARTED"}]
        for key in ["", "two words", "x" * 201, 7]:
            with pytest.raises(WireError) as refused:
                again.call("threads.appendEvents", {**first_run, "requestKey": key})
            assert (refused.value.code, refused.value.data["param"]) == (-32602, "requestKey"), key
    finally:
        again.close()
    assert git.count() == commits + 3


# -- gitmem kaboo init -----------------------------------------------------------------


def test_kaboo_init_copies_the_adapter(tmp_path):
    target = tmp_path / "app" / "src"
    done = run_gitmem("kaboo", "init", str(target))
    assert sorted(p.name for p in target.iterdir()) == [
        "gitmem-thread-store.cjs", "gitmem-thread-store.d.cts", "gitmem-thread-store.d.mts", "gitmem-thread-store.mjs"]
    assert (target / "gitmem-thread-store.mjs").read_bytes() == (ADAPTER / "gitmem-thread-store.mjs").read_bytes()
    assert "GitMemThreadStore" in done.stdout
    (target / "gitmem-thread-store.mjs").write_text("// my change\n")
    refused = run_gitmem("kaboo", "init", str(target), check=False)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "--force" in refused.stderr
    assert (target / "gitmem-thread-store.mjs").read_text() == "// my change\n"
    run_gitmem("kaboo", "init", "--force", str(target))
    assert (target / "gitmem-thread-store.mjs").read_bytes() == (ADAPTER / "gitmem-thread-store.mjs").read_bytes()


def test_kaboo_path_is_the_npm_package_of_this_gitmem():
    folder = Path(run_gitmem("kaboo", "path").stdout.strip())
    package = json.loads((folder / "package.json").read_text())
    assert folder.resolve() == ADAPTER.resolve()
    assert package["name"] == "gitmem-kaboo" and package["version"] == gitmem.__version__
    assert not package.get("dependencies") and not package.get("peerDependencies")
    adapter = (folder / "gitmem-thread-store.cjs").read_text()
    assert f'const GITMEM_VERSION = "{gitmem.__version__}";' in adapter  # what the handshake expects
    assert (folder / "package-lock.json").is_file()  # the dev tools, for npm ci


# -- threads.* without a cap, and the version handshake --------------------------------


def test_threads_info_and_answers_of_any_size_whatever_the_max_response(tmp_path):
    """nui's 4 MiB cap is for nui's reader; kaboo reads threads.* whatever `serve` was told."""
    big = {"type": "CUSTOM", "value": "é" * (5 << 20)}
    server = subprocess.Popen([*gitmem_command(), "serve", "--create", "--repo", str(tmp_path / "repo")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=SUBPROCESS_ENV)
    ids = itertools.count(1)

    def call(method, **params):
        line = json.dumps({"jsonrpc": "2.0", "id": next(ids), "method": method, "params": params})
        server.stdin.write(line.encode() + b"\n")
        server.stdin.flush()
        return server.stdout.readline()

    try:
        assert json.loads(call("threads.info"))["result"] == {"name": "gitmem", "version": gitmem.__version__}
        assert json.loads(call("threads.appendEvents", threadId="t1", agentId="a", events=[big]))["result"]
        answer = call("threads.readEvents", threadId="t1")
        assert len(answer) > 10 << 20 and json.loads(answer)["result"]["events"] == [big]
        assert json.loads(call("threads.list"))["result"]["threads"][0]["id"] == "t1"
        # storage.* keeps the cap: a user memory of 5 MiB is refused on the way out
        assert json.loads(call("storage.userMemory.write", handlerId="me", content="x" * (5 << 20)))["result"]
        assert json.loads(call("storage.userMemory.read", handlerId="me"))["error"]["code"] == -32000
        assert json.loads(call("storage.info"))["result"]["version"] == gitmem.__version__
    finally:
        server.stdin.close()
        assert server.wait(timeout=60) == 0


# -- the TypeScript adapter ------------------------------------------------------------


def gitmem_executable(folder: Path) -> Path:
    """The gitmem console script of this Python (what `pip install` makes), or one like it."""
    script = Path(sys.executable).parent / "gitmem"
    if not script.is_file():
        script = folder / "gitmem"
        script.write_text(f"#!{sys.executable}\nimport sys\nfrom gitmem.cli import main\nsys.exit(main())\n")
        script.chmod(0o755)
    return script


BEFORE_THE_HANDSHAKE = "e874ff3"  # main before threads.info: gitmem 0.1.0 without it


@pytest.mark.parametrize("version", [gitmem.__version__, "0.0.5"])
def test_the_adapter_with_a_gitmem_from_before_the_handshake(tmp_path, version):
    """That gitmem's storage.info gives its version: the same x.y is worked with, another is refused."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    root = ADAPTER.parent.parent
    if subprocess.run(["git", "-C", str(root), "cat-file", "-e", f"{BEFORE_THE_HANDSHAKE}^{{commit}}"]).returncode:
        pytest.skip(f"no commit {BEFORE_THE_HANDSHAKE} here (a shallow clone?)")
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(root), "archive", BEFORE_THE_HANDSHAKE, "gitmem", "templates"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    (old / "templates").rename(old / "gitmem" / "templates")  # where its wheel put them
    init = old / "gitmem" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]*"', f'__version__ = "{version}"', init.read_text()))
    wrapper = tmp_path / "gitmem"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(old))} exec {shlex.quote(sys.executable)} -P -m gitmem "$@"\n')
    wrapper.chmod(0o755)
    script = (f"import {{ GitMemThreadStore }} from {json.dumps(str(ADAPTER / 'gitmem-thread-store.mjs'))};\n"
              f"const store = new GitMemThreadStore({{ repo: process.argv[1], gitmem: {json.dumps(str(wrapper))} }});\n"
              "try { await store.appendEvents('t1', 'a', [{ type: 'RUN_STARTED' }]);\n"
              "      console.log(JSON.stringify(await store.readEvents('t1'))); }\n"
              "catch (error) { console.log(error.message); }\n"
              "await store.close();\n")
    done = subprocess.run([node, "--input-type=module", "-e", script, str(tmp_path / "repo")], capture_output=True,
                          text=True, timeout=120, env=SUBPROCESS_ENV)
    assert done.returncode == 0, done.stderr
    if version == gitmem.__version__:
        assert json.loads(done.stdout) == [{"type": "RUN_STARTED"}]
    else:
        assert done.stdout.strip() == (
            f"gitmem-kaboo {gitmem.__version__} needs gitmem {gitmem.__version__.rsplit('.', 1)[0]}.x, but {wrapper} "
            "is gitmem 0.0.5: update gitmem "
            f"where it is installed (pip install --upgrade gitmem, or git pull in its checkout)")
        assert not (tmp_path / "repo" / "threads").exists()


def test_the_typescript_adapter_against_gitmem_serve(tmp_path):
    """templates/kaboo's ``node --test`` suite, with this gitmem as the server it starts."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (the kaboo adapter's tests need Node 18+)")
    assert (ADAPTER / "node_modules" / "typescript").is_dir(), "run `npm ci` in templates/kaboo first"
    tests = sorted(str(path.relative_to(ADAPTER)) for path in (ADAPTER / "test").glob("*.test.mjs"))
    done = subprocess.run([node, "--test", *tests], cwd=ADAPTER, capture_output=True, text=True,
                          timeout=1200, env={**SUBPROCESS_ENV, "GITMEM_CMD": shlex.join(gitmem_command()),
                                            "GITMEM": str(gitmem_executable(tmp_path))})
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# pass 0" not in done.stdout
