"""nui chat sessions through the Python API: verbatim round trips, chunked storage, metadata."""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.records.ids import encode
from gitmem.records.jsontexts import JsonTexts
from gitmem.repository import Gitmem
from gitmem.stores.jsonl import ChunkedJsonl, chunk_texts, dumps, parse_chunk
from nui_client import go_json

AGENT = "claude-code"
SESSION = "6f1c2a9e-0b7d-4c1e-9a57-3f2d1e0c9b8a"
FOLDER = f"sessions/{AGENT}/{SESSION}"


def message(i: int, **extra) -> dict:
    return {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i}", "createdAt": "2025-01-01T00:00:00.000Z", **extra}


def test_read_of_nothing(mem):
    assert mem.sessions.read(AGENT, SESSION) == ([], "")
    assert mem.sessions.read_json(AGENT, SESSION) == ("[]", "")
    assert mem.sessions.meta(AGENT, SESSION) is None
    assert mem.sessions.list() == []


def test_write_and_read_verbatim(mem):
    messages = [
        {"zeta": 1, "id": "m1", "role": "user", "content": "héllo ✓ \u2028", "unknownField": [1, 2.5, None]},
        {"role": "assistant", "id": "m2", "content": "", "parts": [
            {"type": "tool", "toolArgs": {"b": 1, "a": {"nested": True}}, "toolResult": "ok"}],
         "images": [{"id": "i", "mediaType": "image/png", "data": "iVBORw0KGgo="}]},
        {}, {"n": 42, "x": None},
    ]
    assert mem.sessions.write(AGENT, SESSION, messages, "resume-1", "/home/me/project") is not None
    read, agent_session_id = mem.sessions.read(AGENT, SESSION)
    assert read == messages and agent_session_id == "resume-1"
    assert [list(m) for m in read[:2]] == [list(m) for m in messages[:2]]  # key order kept
    text, _ = mem.sessions.read_json(AGENT, SESSION)
    assert json.loads(text) == messages


def test_none_messages_mean_an_empty_session(mem, git):
    mem.sessions.write(AGENT, SESSION, None, "resume", "/w")
    assert mem.sessions.read(AGENT, SESSION) == ([], "resume")
    assert git("ls-tree", "-r", "--name-only", "HEAD", "sessions").splitlines() == [f"{FOLDER}/meta.json"]


def test_metadata_file(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0)], "resume-1", "/home/me/a")
    meta = json.loads(git.show(f"HEAD:{FOLDER}/meta.json"))
    assert meta["agentType"] == AGENT and meta["sessionId"] == SESSION
    assert meta["agentSessionId"] == "resume-1" and meta["workingDir"] == "/home/me/a"
    assert meta["createdAt"] == meta["updatedAt"] and meta["createdAt"].endswith("Z")
    mem.sessions.write(AGENT, SESSION, [message(0)], "resume-2", "/home/me/b")
    again = mem.sessions.meta(AGENT, SESSION)
    assert again["createdAt"] == meta["createdAt"]
    assert again["updatedAt"] >= meta["updatedAt"]
    assert (again["agentSessionId"], again["workingDir"]) == ("resume-2", "/home/me/b")
    assert mem.sessions.read(AGENT, SESSION) == ([message(0)], "resume-2")


def test_an_identical_write_makes_no_commit(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0), message(1)], "r", "/w")
    count = git.count()
    assert mem.sessions.write(AGENT, SESSION, [message(0), message(1)], "r", "/w") is None
    assert git.count() == count


def test_delete(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(i) for i in range(3)], "r", "/w")
    mem.sessions.write(AGENT, "other", [message(0)])
    assert mem.sessions.delete(AGENT, SESSION) is not None
    assert mem.sessions.read(AGENT, SESSION) == ([], "")
    assert git("ls-tree", "-r", "--name-only", "HEAD", "sessions").splitlines() == [
        f"sessions/{AGENT}/other/meta.json", f"sessions/{AGENT}/other/messages/000000.jsonl"][::-1]
    assert not (mem.engine.workdir / FOLDER).exists()
    count = git.count()
    assert mem.sessions.delete(AGENT, SESSION) is None
    assert mem.sessions.delete("never", "written") is None
    assert git.count() == count


def test_list_and_odd_ids(mem, git, tmp_path):
    odd = ("ext:corp/reviewer", "../../etc/passwd")
    mem.sessions.write(AGENT, SESSION, [message(0)])
    mem.sessions.write(*odd, [message(1)], "resume")
    assert sorted(mem.sessions.list()) == sorted([(AGENT, SESSION), odd])
    assert mem.sessions.read(*odd) == ([message(1)], "resume")
    folder = f"sessions/{encode(odd[0])}/{encode(odd[1])}"
    assert (mem.engine.workdir / folder / "meta.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]


def test_commit_message_and_trailers(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0), message(1)], trailers={"Gitmem-Handler": "h1"})
    assert git.log(fmt="%s")[0] == f"session: write {AGENT}/{SESSION} (2 messages)"
    assert git("log", "-1", "--format=%(trailers:only,unfold)").strip().splitlines() == [
        "Gitmem-Op: session.write", "Gitmem-Handler: h1", f"Gitmem-Id: session:{AGENT}/{SESSION}"]
    mem.sessions.delete(AGENT, SESSION)
    assert git("log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "session.delete"


def test_extending_a_5000_message_session_touches_one_chunk(mem, git):
    messages = [message(i) for i in range(5000)]
    mem.sessions.write(AGENT, SESSION, messages, "r", "/w")
    chunks = git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/").splitlines()
    assert len(chunks) > 1
    for extra in (5000, 5001):
        messages.append(message(extra))
        mem.sessions.write(AGENT, SESSION, messages, "r", "/w")
        changed = git.changed()
        assert len(changed) == 2 and f"{FOLDER}/meta.json" in changed
        touched = changed[0]  # the last chunk, or a new one when it was full
        assert touched.startswith(f"{FOLDER}/messages/") and touched >= chunks[-1]
        assert mem.sessions.read(AGENT, SESSION)[0] == messages

    messages[10] = message(10, content="edited")
    mem.sessions.write(AGENT, SESSION, messages, "r", "/w")
    assert sorted(git.changed()) == [chunks[0], f"{FOLDER}/meta.json"]
    assert mem.sessions.read(AGENT, SESSION)[0] == messages


def go_style(value) -> bytes:
    """``value`` as nui (Go) encodes it, keys in the order given."""
    return go_json(value, sort_keys=False)


class Parsed(JsonTexts):
    """JsonTexts that remember which texts were parsed."""

    def __init__(self, values):
        super().__init__([go_style(value) for value in values], self.record)
        self.parsed = []

    def record(self, text):
        self.parsed.append(bytes(text))
        return json.loads(text)


def test_messages_as_json_texts_already_stored_are_not_parsed(mem, git):
    # What gitmem serve passes for nui's writes: the whole session as sent, Go escapes and all.
    messages = [message(i, content=f"<b>{i}</b> & \u2028") for i in range(2500)]
    mem.sessions.write(AGENT, SESSION, Parsed(messages), "r")
    assert mem.sessions.read(AGENT, SESSION) == (messages, "r")
    chunks = git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/").splitlines()
    first_chunk = git.show(f"HEAD:{chunks[0]}")
    assert len(chunks) > 2 and "<b>0</b> & \u2028" in first_chunk  # stored as characters

    messages.append(message(2500))
    texts = Parsed(messages)
    mem.sessions.write(AGENT, SESSION, texts, "r")
    assert texts.parsed == [go_style(message(2500))]  # the stored ones are taken as they are
    assert sorted(git.changed()) == [chunks[-1], f"{FOLDER}/meta.json"]

    messages[10] = message(10, content="<i>edited</i>")
    texts = Parsed(messages)
    mem.sessions.write(AGENT, SESSION, texts, "r")
    assert len(texts.parsed) == first_chunk.count("\n")  # the first chunk's only
    assert sorted(git.changed()) == [chunks[0], f"{FOLDER}/meta.json"]
    assert mem.sessions.read(AGENT, SESSION)[0] == messages

    texts = Parsed(messages)
    assert mem.sessions.write(AGENT, SESSION, texts, "r") is None and texts.parsed == []


@pytest.mark.parametrize("stored, sent", [
    ("a<b", "a\\u003cb"),          # text that reads like an escape is not one
    ("a\\<b", "a\\\\u003cb"),
    ("x\u2029", "x\\u2029"),
])
def test_a_text_is_taken_as_stored_only_when_it_is_the_same_value(mem, stored, sent):
    mem.sessions.write(AGENT, SESSION, [{"t": stored}])
    texts = Parsed([{"t": sent}])
    assert dumps({"t": stored}) != dumps({"t": sent})
    mem.sessions.write(AGENT, SESSION, texts)
    assert len(texts.parsed) == 1 and mem.sessions.read(AGENT, SESSION)[0] == [{"t": sent}]


PIECES = ["\\", "u", "003c", "0026", "2028", "<", "&", "\u2028", "a", '"']
tricky_text = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
tricky_values = st.recursive(st.integers(0, 2) | st.booleans() | tricky_text,
                             lambda children: st.lists(children, max_size=3)
                             | st.dictionaries(tricky_text, children, max_size=3), max_leaves=6)


def nearly(pieces: list[str]):
    """Texts one piece away from ``pieces`` (and the text itself)."""
    edits = [pieces[:i] + [piece] + pieces[i:] for i in range(len(pieces) + 1) for piece in PIECES]
    edits += [pieces[:i] + pieces[i + 1:] for i in range(len(pieces))]
    return st.sampled_from(["".join(edit) for edit in edits + [pieces]])


def assert_taken_only_when_same(stored, sent):
    data = dumps(stored).encode() + b"\n"
    chunk = parse_chunk(data)
    for text in (go_style(sent), dumps(sent).encode()):
        value, = JsonTexts([text]).values([(chunk, chunk_texts(data))])
        assert repr(value) == repr(sent)  # 1 and True apart, key order kept
        if repr(sent) == repr(stored):
            assert value is chunk.values[0]  # taken as stored, not parsed


@settings(max_examples=300, deadline=None)
@given(stored=tricky_values, sent=tricky_values)
def test_a_text_taken_as_stored_is_the_stored_value(stored, sent):
    assert_taken_only_when_same(stored, sent)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(PIECES), max_size=6), data=st.data())
def test_a_text_one_piece_off_is_not_taken_as_stored(pieces, data):
    assert_taken_only_when_same("".join(pieces), data.draw(nearly(pieces)))


def test_a_text_that_does_not_parse_changes_nothing(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0)])
    head = git("rev-parse", "HEAD")
    with pytest.raises(ValueError):
        mem.sessions.write(AGENT, SESSION, JsonTexts([go_style(message(0)), b'{"id":'], json.loads))
    assert git("rev-parse", "HEAD") == head and mem.sessions.read(AGENT, SESSION)[0] == [message(0)]


def test_append_to_a_new_and_to_an_existing_session(mem, git):
    first = [{"zeta": 1, "id": "m1", "content": "héllo ✓"}, {}]
    assert mem.sessions.append(AGENT, SESSION, first) is not None
    assert mem.sessions.read(AGENT, SESSION) == (first, "")
    mem.sessions.write(AGENT, "other", [message(0)], "r", "/w")
    assert mem.sessions.append(AGENT, "other", [message(1), {"b": 1, "a": [2.5, True]}]) is not None
    read, agent_session_id = mem.sessions.read(AGENT, "other")
    assert read == [message(0), message(1), {"b": 1, "a": [2.5, True]}] and agent_session_id == "r"
    assert list(read[2]) == ["b", "a"]  # key order kept
    text, _ = mem.sessions.read_json(AGENT, "other")
    assert json.loads(text) == read


def test_append_is_one_commit_and_an_empty_list_none(mem, git):
    mem.sessions.append(AGENT, SESSION, [message(0)], trailers={"Gitmem-Handler": "h1"})
    assert git.log(fmt="%s")[0] == f"session: append 1 message to {AGENT}/{SESSION}"
    assert git("log", "-1", "--format=%(trailers:only,unfold)").strip().splitlines() == [
        "Gitmem-Op: session.append", "Gitmem-Handler: h1", f"Gitmem-Id: session:{AGENT}/{SESSION}"]
    count = git.count()
    mem.sessions.append(AGENT, SESSION, [message(1), message(2)])
    assert git.count() == count + 1
    assert git.log(fmt="%s")[0] == f"session: append 2 messages to {AGENT}/{SESSION}"
    assert mem.sessions.append(AGENT, SESSION, [], "new-resume", "/elsewhere") is None
    assert mem.sessions.append(AGENT, "never", []) is None
    assert git.count() == count + 1
    assert mem.sessions.meta(AGENT, "never") is None
    assert mem.sessions.read(AGENT, SESSION) == ([message(0), message(1), message(2)], "")


def test_append_keeps_or_sets_the_metadata(mem, git):
    mem.sessions.append(AGENT, SESSION, [message(0)])
    meta = mem.sessions.meta(AGENT, SESSION)
    assert meta == {"agentType": AGENT, "sessionId": SESSION, "agentSessionId": "", "workingDir": "",
                    "createdAt": meta["createdAt"], "updatedAt": meta["createdAt"]}
    assert meta["createdAt"].endswith("Z")
    mem.sessions.append(AGENT, SESSION, [message(1)], "resume-1", "/home/me/a")
    again = mem.sessions.meta(AGENT, SESSION)
    assert (again["agentSessionId"], again["workingDir"]) == ("resume-1", "/home/me/a")
    mem.sessions.append(AGENT, SESSION, [message(2)], working_dir="/home/me/b",
                        extra_meta={"note": "x"})
    last = mem.sessions.meta(AGENT, SESSION)
    assert (last["agentSessionId"], last["workingDir"], last["note"]) == ("resume-1", "/home/me/b", "x")
    assert last["createdAt"] == meta["createdAt"] and last["updatedAt"] >= again["updatedAt"]
    assert list(json.loads(git.show(f"HEAD:{FOLDER}/meta.json"))) == [
        "agentType", "sessionId", "agentSessionId", "workingDir", "createdAt", "updatedAt", "note"]
    mem.sessions.append(AGENT, "new", [message(0)], "resume-2")
    assert mem.sessions.meta(AGENT, "new")["workingDir"] == ""
    assert mem.sessions.read(AGENT, "new") == ([message(0)], "resume-2")


def test_appending_to_a_5000_message_session_touches_one_chunk(mem, git, monkeypatch):
    messages = [message(i) for i in range(5000)]
    mem.sessions.write(AGENT, SESSION, messages, "r", "/w")
    chunks = git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/").splitlines()
    assert len(chunks) > 1
    monkeypatch.setattr(ChunkedJsonl, "replace", None)  # an append never compares the stored messages
    for extra in (5000, 5001):
        messages.append(message(extra))
        mem.sessions.append(AGENT, SESSION, [message(extra)])
        changed = git.changed()
        assert len(changed) == 2 and f"{FOLDER}/meta.json" in changed
        touched = changed[0]  # the last chunk, or a new one when it was full
        assert touched.startswith(f"{FOLDER}/messages/") and touched >= chunks[-1]
        assert mem.sessions.read(AGENT, SESSION) == (messages, "r")


def test_an_appended_image_round_trips(mem, git):
    png = base64.b64encode(bytes(range(256)) * 8).decode()
    mem.sessions.append(AGENT, SESSION, [message(0)])
    with_image = message(1, images=[{"id": "i1", "mediaType": "image/png", "data": png}])
    mem.sessions.append(AGENT, SESSION, [with_image])
    assert mem.sessions.read(AGENT, SESSION)[0] == [message(0), with_image]
    blob_files = git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/blobs/").splitlines()
    assert len(blob_files) == 1 and blob_files[0].endswith(".png")
    assert sorted(git.changed()) == sorted([*blob_files, f"{FOLDER}/messages/000000.jsonl",
                                            f"{FOLDER}/meta.json"])
    assert png not in git.show(f"HEAD:{FOLDER}/messages/000000.jsonl")
    mem.sessions.append(AGENT, SESSION, [message(2, images=[{"mediaType": "image/png", "data": png}])])
    assert f"{FOLDER}/messages/blobs/" not in " ".join(git.changed())  # stored once
    assert mem.sessions.read(AGENT, SESSION)[0][1:] == [
        with_image, message(2, images=[{"mediaType": "image/png", "data": png}])]


def test_shrinking_a_session_drops_its_tail_chunks(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(i) for i in range(2500)])
    mem.sessions.write(AGENT, SESSION, [message(i) for i in range(10)])
    assert git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/").splitlines() == [
        f"{FOLDER}/messages/000000.jsonl"]
    assert mem.sessions.read(AGENT, SESSION)[0] == [message(i) for i in range(10)]
    mem.sessions.write(AGENT, SESSION, [])
    assert mem.sessions.read(AGENT, SESSION)[0] == []


def test_the_files_are_plain_jsonl(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0), {"text": "line\nbreak ✓"}])
    lines = (mem.engine.workdir / FOLDER / "messages/000000.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [message(0), {"text": "line\nbreak ✓"}]


def test_a_change_of_type_or_key_order_is_stored(mem):
    mem.sessions.write(AGENT, SESSION, [{"flag": 1, "id": "m1"}])
    mem.sessions.write(AGENT, SESSION, [{"id": "m1", "flag": True}])
    read = mem.sessions.read(AGENT, SESSION)[0]
    assert read == [{"id": "m1", "flag": True}]
    assert list(read[0]) == ["id", "flag"] and read[0]["flag"] is True


@pytest.mark.parametrize("before, after", [
    (1, True), (True, 1), (0, False), (False, 0), (1, 1.0), (1.0, 1), (0.0, -0.0),
    ({"a": [1, {"b": 0}]}, {"a": [1, {"b": False}]}), ([[1]], [[1.0]]),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1})])
def test_a_change_only_json_text_shows_is_stored(mem, git, before, after):
    """1 == True == 1.0 in Python, but not in JSON: each write is a commit and reads back
    as given, in every chunk of a log (the earlier ones, the last one), from the texts
    the wire hands over too, and in a thread's messages."""
    earlier = [message(i) for i in range(3)]
    for write in (lambda m: mem.sessions.write(AGENT, SESSION, m),
                  lambda m: mem.sessions.write(AGENT, "texts", JsonTexts([json.dumps(v).encode() for v in m])),
                  lambda m: mem.threads.save_messages("t1", m)):
        assert write([*earlier, {"v": before}]) is not None
        commits = git.count()
        assert write([*earlier, {"v": after}]) is not None and git.count() == commits + 1
    for read in (mem.sessions.read(AGENT, SESSION)[0], mem.sessions.read(AGENT, "texts")[0],
                 mem.threads.read_messages("t1")):
        assert json.dumps(read[-1]) == json.dumps({"v": after})


def test_a_change_of_type_in_an_earlier_full_chunk_is_stored(repo_path, git):
    with Gitmem.open(repo_path) as mem:
        mem.sessions.write(AGENT, SESSION, [{"n": 1}] * 1200 + [{"n": 0}])
        assert len(git("ls-tree", "--name-only", "HEAD", f"{FOLDER}/messages/").split()) > 1
        assert mem.sessions.write(AGENT, SESSION, [{"n": True}] + [{"n": 1}] * 1199 + [{"n": False}]) is not None
        read = mem.sessions.read(AGENT, SESSION)[0]
        assert read[0]["n"] is True and read[-1]["n"] is False and read[1]["n"] is not True


def test_a_change_of_type_in_metadata_is_stored(mem):
    mem.sessions.write(AGENT, SESSION, [], extra_meta={"pinned": 1})
    assert mem.sessions.write(AGENT, SESSION, [], extra_meta={"pinned": True}) is not None
    assert mem.sessions.meta(AGENT, SESSION)["pinned"] is True


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(codec="utf-8") | st.characters(categories=["Cs"])),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.text(max_size=4), json_values, max_size=4), max_size=6))
def test_any_json_round_trips(mem, messages):
    mem.sessions.write(AGENT, "prop", messages, "r")
    assert mem.sessions.read(AGENT, "prop") == (messages, "r")


# -- nui's late snapshots and size-limited reads -----------------------------------------


def test_a_late_prefix_is_not_applied_within_the_window(mem, git):
    messages = [{"id": f"m{i}", "role": "user", "content": f"q{i}"} for i in range(4)]
    mem.sessions.write("pi", "s", messages, late_window=60)
    commits = git.count()
    assert mem.sessions.write("pi", "s", messages[:2], late_window=60) is None
    assert mem.sessions.write("pi", "s", JsonTexts([go_json(m, sort_keys=False) for m in messages[:3]]),
                              late_window=60) is None
    assert git.count() == commits and mem.sessions.read("pi", "s")[0] == messages
    changed = [messages[0], {**messages[1], "content": "edited"}]  # not a prefix: applied
    assert mem.sessions.write("pi", "s", changed, late_window=60) is not None
    assert mem.sessions.write("pi", "s", changed[:1]) is not None  # no window: applied
    assert mem.sessions.read("pi", "s")[0] == changed[:1]


def test_a_prefix_with_its_image_inline_is_late_too(mem, git):
    data = base64.b64encode(os.urandom(3000)).decode()
    messages = [{"id": "m0", "images": [{"mediaType": "image/png", "data": data}]}, {"id": "m1"}]
    mem.sessions.write("pi", "s", messages)
    assert mem.sessions.write("pi", "s", messages[:1], late_window=60) is None


def test_a_read_within_a_size_keeps_what_it_leaves_out(mem, git, repo_path):
    data = base64.b64encode(os.urandom(30_000)).decode()
    messages = [{"id": f"m{i}", "content": "x" * 1000} for i in range(20)]
    messages[3]["images"] = [{"mediaType": "image/png", "data": data}]
    messages[15]["images"] = [{"mediaType": "image/png", "data": data[::-1]}]
    mem.sessions.write("pi", "s", messages)
    whole = json.dumps(messages, separators=(",", ":")).encode()
    assert mem.sessions.read_json_within("pi", "s", len(whole))[0] == whole
    text, _ = mem.sessions.read_json_within("pi", "s", len(whole) - 1)  # the older image: a reference
    sent = json.loads(text)
    assert sent[3]["images"][0]["data"].startswith("gitmem:blob:") and sent[15] == messages[15]
    text, _ = mem.sessions.read_json_within("pi", "s", 10_000)  # the newest that fit
    sent = json.loads(text)
    assert len(text) <= 10_000 and 0 < len(sent) < 20
    assert [m["id"] for m in sent] == [m["id"] for m in messages[-len(sent):]]

    with Gitmem.open(repo_path, create=False) as again:  # the cut outlives the process
        assert again.sessions.write("pi", "s", sent + [{"id": "new"}]) is not None
        assert again.sessions.read("pi", "s")[0] == messages + [{"id": "new"}]
        assert again.sessions.write("pi", "s", [{"id": "other"}]) is not None  # starts elsewhere
        assert again.sessions.read("pi", "s")[0] == [{"id": "other"}]
