"""The texts fast path: reads splice the stored JSONL lines into one JSON array unparsed.

Whatever a committed chunk holds (a person's save with CRLF line ends, indented lines,
blank lines of any whitespace), every read path gives the values that the chunk's
lines parse to: in-process, and through a real ``gitmem serve`` as nui and kaboo read.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.records.jsontexts import checked_run, checked_values, json_array, written_run
from gitmem.stores.jsonl import parse_chunk, read_chunk
from nui_client import NuiHost, install_as_nui

SESSION_CHUNK = "sessions/claude-code/s1/messages/000000.jsonl"
EVENTS_CHUNK = "threads/t1/events/000000.jsonl"
MESSAGES_CHUNK = "threads/t1/messages/000000.jsonl"
SAVES = {  # how a person's editor may leave a chunk holding {"n":1} and {"n":2}
    "crlf": '{"n":1}\r\n{"n":2}\r\n',
    "blank lines": '{"n":1}\n\n \t\n{"n":2}\n',
    "unicode blank line": '{"n":1}\n\u3000\n\u00a0\n{"n":2}\n',
    "indented": '  {"n":1}\n\t{"n":2}  \n',
    "blank first line, no last newline": '\n{"n":1}\n{"n":2}',
}
VALUES = [{"n": 1}, {"n": 2}]


@pytest.fixture
def person(git):
    git("config", "user.name", "Pat Person")
    git("config", "user.email", "pat@example.org")


@pytest.mark.parametrize("text", SAVES.values(), ids=SAVES.keys())
def test_a_chunk_saved_by_hand_reads_back_through_every_path(mem, repo_path, tmp_path, person, text):
    mem.sessions.write("claude-code", "s1", [{"n": 0}])
    mem.threads.append_events("t1", "agent", [{"n": 0}])
    mem.threads.save_messages("t1", [{"n": 0}])
    for path in (SESSION_CHUNK, EVENTS_CHUNK, MESSAGES_CHUNK):
        mem.engine.worktree.path(path).write_bytes(text.encode())

    with NuiHost.spawn(install_as_nui(tmp_path, repo_path)) as host:  # it commits the saves
        read = host.call("storage.session.read", {"handlerId": "gitmem-sessions", "agentType": "claude-code",
                                                  "sessionId": "s1", "workingDir": "/w"})
        assert read["messages"] == VALUES
        assert host.call("threads.readEvents", {"threadId": "t1"}) == {"events": VALUES}
        assert host.call("threads.readMessages", {"threadId": "t1"}) == {"messages": VALUES}
        assert host.problems == []

    assert mem.engine.snapshot().read(SESSION_CHUNK) == text.encode()  # committed as saved
    assert mem.sessions.read("claude-code", "s1") == (VALUES, "")
    assert json.loads(mem.sessions.read_json("claude-code", "s1")[0]) == VALUES
    assert json.loads(mem.sessions.read_json_within("claude-code", "s1", 1000)[0]) == VALUES
    assert mem.threads.read_events("t1") == VALUES
    assert mem.threads.read_messages("t1") == VALUES


BLANKS = st.text(st.sampled_from(" \t\r\u3000\u00a0\u2028\x1c"), max_size=3)
PADDING = st.text(st.sampled_from(" \t"), max_size=2)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=5)
LINES = st.one_of(
    BLANKS,
    st.tuples(PADDING, JSON_VALUES, PADDING, st.sampled_from(["", "\r"])).map(
        lambda parts: parts[0] + json.dumps(parts[1], ensure_ascii=False) + "".join(parts[2:])))


# What plain git lets into a chunk: not one JSON value, not UTF-8 (a byte kept as a
# surrogate, as the file's bytes are decoded), NaN.
BROKEN_LINES = ("{broken", "[1,", '{"a":1} x', "1,2", "NaN", '{"n": Infinity}', "\udcff", '"\udcff"')
BROKEN = st.sampled_from(BROKEN_LINES)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(LINES, BROKEN), max_size=8), st.booleans())
def test_the_splice_of_a_chunk_is_the_values_it_parses_to(lines, last_newline):
    data = ("\n".join(lines) + ("\n" if last_newline else "")).encode("utf-8", "surrogateescape")
    chunk = read_chunk(data)
    run, broken = checked_run(data)
    assert b"\n" not in run and b"\r" not in run  # an answer line holds no line break
    assert json.loads(b"".join(json_array([run]))) == chunk.values
    assert [json.loads(text) for text in checked_values(data).texts] == chunk.values
    assert broken == checked_values(data).broken == chunk.broken
    assert [line.number for line in broken] == [
        number for number, line in enumerate(lines, 1) if line in BROKEN_LINES]
    stored = [line for line in data.decode("utf-8", "surrogateescape").split("\n") if line.strip()]
    assert [line.strip(" \t\r") for line in chunk.written()] == [
        line.strip(" \t\r") for line in stored]  # a write puts each broken line back in its place


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=8), st.booleans())
def test_a_chunk_known_as_written_splices_as_one_looked_at(lines, last_newline):
    """What a reader remembers of a chunk (its lines as gitmem writes them) gives the same
    run without a look at them."""
    data = ("\n".join(lines) + ("\n" if last_newline else "")).encode()
    try:
        parse_chunk(data)
    except ValueError:
        return
    run = written_run(data)
    if run is not None:
        assert written_run(data, known=True) == run == checked_run(data)[0]


@pytest.mark.parametrize("data", [b' {"a":1}\n', b'{"a":1}\r\n', b'{"a":1}\n\n{"b":2}\n', b"\n{}"])
def test_a_chunk_of_lines_gitmem_does_not_write_is_not_said_to_be_written(data):
    assert written_run(data) is None
    assert written_run(b'{"a":1}\n2\n"x"\n') == b'{"a":1},2,"x"'


def test_json_array_joins_runs_and_skips_empty_ones():
    assert b"".join(json_array([])) == b"[]"
    assert b"".join(json_array([b"", b'{"a":1},2', b"", b"3"])) == b'[{"a":1},2,3]'
