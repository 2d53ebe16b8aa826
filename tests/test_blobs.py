"""Images out of the logs: stored once per content hash beside the log, put back on read."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.stores import blobs
from gitmem.stores.jsonl import ChunkedJsonl, dumps
from gitmem.stores.sessions import SessionStore

AGENT = "claude-code"
SESSION = "s1"
BLOB_DIR = f"sessions/{AGENT}/{SESSION}/messages/blobs"


def image(size: int = 4000, seed: int = 0) -> bytes:
    return hashlib.sha256(str(seed).encode()).digest() * (size // 32)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def message(i: int, *images: bytes, **extra) -> dict:
    found = {"id": f"m{i}", "role": "user", "content": f"look at {i}", **extra}
    if images:
        found["images"] = [{"id": f"i{i}.{n}", "mediaType": "image/png", "data": b64(data)}
                           for n, data in enumerate(images)]
    return found


def name_of(data: bytes, ext: str = ".png") -> str:
    return hashlib.sha256(data).hexdigest() + ext


def test_a_session_with_images_reads_back_exactly_and_stays_small(mem, git):
    one, two = image(seed=1), image(seed=2)
    messages = [message(0, one), message(1, two, one),
                {"id": "m2", "role": "assistant", "content": "a data URL",
                 "parts": [{"type": "image_url", "url": "data:image/jpeg;base64," + b64(two)}]}]
    mem.sessions.write(AGENT, SESSION, messages)
    assert mem.sessions.read(AGENT, SESSION)[0] == messages
    text, _ = mem.sessions.read_json(AGENT, SESSION)
    assert text == "[" + ",".join(dumps(m) for m in messages) + "]"  # the very bytes
    # once per content hash, as the decoded file, named by its SHA-256
    assert sorted(git("ls-tree", "--name-only", "HEAD", BLOB_DIR + "/").split()) == sorted(
        [f"{BLOB_DIR}/{name_of(one)}", f"{BLOB_DIR}/{name_of(two)}", f"{BLOB_DIR}/{name_of(two, '.jpg')}"])
    assert (mem.engine.workdir / BLOB_DIR / name_of(one)).read_bytes() == one
    chunk = git.show(f"HEAD:sessions/{AGENT}/{SESSION}/messages/000000.jsonl")
    assert len(chunk) < 1200 and b64(one)[:100] not in chunk
    assert f'"data":"gitmem:blob:{name_of(one)}"' in chunk
    mem.engine.index.refresh()  # as the background refresher does once writes settle
    assert git.status() == ""
    git.fsck()


def test_a_replace_that_drops_the_last_reference_drops_the_file(mem, git):
    one, two = image(seed=1), image(seed=2)
    mem.sessions.write(AGENT, SESSION, [message(0, one), message(1, two)])
    mem.sessions.write(AGENT, SESSION, [message(0, one), message(1)])
    assert git("ls-tree", "--name-only", "HEAD", BLOB_DIR + "/").split() == [f"{BLOB_DIR}/{name_of(one)}"]
    assert mem.sessions.read(AGENT, SESSION)[0] == [message(0, one), message(1)]
    mem.sessions.delete(AGENT, SESSION)
    assert git("ls-tree", "-r", "HEAD", "sessions").strip() == ""
    assert not (mem.engine.workdir / "sessions").exists()


def test_appending_a_message_touches_only_the_last_chunk(mem, git):
    messages = [message(0, image(seed=1))]
    mem.sessions.write(AGENT, SESSION, messages)
    for i in range(1, 4):
        messages.append(message(i))
        mem.sessions.write(AGENT, SESSION, messages)
        assert git.changed() == [f"sessions/{AGENT}/{SESSION}/messages/000000.jsonl",
                                 f"sessions/{AGENT}/{SESSION}/meta.json"]
    messages.append(message(9, image(seed=9)))
    mem.sessions.write(AGENT, SESSION, messages)
    assert f"{BLOB_DIR}/{name_of(image(seed=9))}" in git.changed()


def test_what_is_left_inline(mem):
    not_canonical = b64(image()).rstrip("=")[:-1] + "B"  # decodes, but would not come back the same
    messages = [
        message(0, image(size=500)),  # short: below MIN_CHARS
        {"id": "m1", "data": not_canonical},
        {"id": "m2", "data": "not base64 at all " * 100},
        {"id": "m3", "note": b64(image())},  # base64, but not under "data" nor a data: URL
        {"id": "m4", "content": "gitmem:blob:" + "0" * 64 + ".png", "x": ["gitmem:text:y", "gitmem:"]},
    ]
    mem.sessions.write(AGENT, SESSION, messages)
    assert mem.engine.snapshot().list(BLOB_DIR) == []
    assert mem.sessions.read(AGENT, SESSION)[0] == messages


def test_the_thread_store_opt_in(engine):
    log = ChunkedJsonl("threads/t1/events", blobs=True)
    events = [{"type": "CUSTOM", "value": {"data": b64(image())}}]
    engine.commit(log.append(engine.snapshot(), events), "append")
    snapshot = engine.snapshot()
    assert snapshot.list("threads/t1/events/blobs") == [name_of(image(), ".bin")]
    assert log.read(snapshot) == events
    stored_line = snapshot.read("threads/t1/events/000000.jsonl").decode().strip()
    assert log.restore_json(snapshot, stored_line) == dumps(events[0])


def test_a_missing_blob_fails_the_read_rather_than_returning_something_else(mem, git):
    mem.sessions.write(AGENT, SESSION, [message(0, image())])
    mem.engine.index.refresh()
    git("rm", "-q", f"{BLOB_DIR}/{name_of(image())}")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "oops")
    try:
        mem.sessions.read(AGENT, SESSION)
    except blobs.MissingBlob as exc:
        assert name_of(image()) in str(exc)
    else:
        raise AssertionError("read a session whose image is gone")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
    | st.sampled_from(["gitmem:", "gitmem:blob:x", "gitmem:text:", "gitmem:text:gitmem:blob:y",
                       '"gitmem:text:', 'a\\"gitmem:blob:z', "\ud800 lone"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["data", "mediaType", "url", "k", "images"]), children, max_size=4),
    max_leaves=20)
payloads = st.sampled_from([b64(image(seed=1)), b64(image(size=800, seed=2)),
                            "data:image/png;base64," + b64(image(seed=3)),
                            "data:text/plain;charset=utf-8;base64," + b64(image(seed=4))])


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(json_values | payloads, lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(st.sampled_from(["data", "mediaType", "url", "k"]), children,
                                      max_size=4), max_leaves=12))
def test_extract_then_restore_gives_back_the_value(value):
    stored, files = blobs.extract(value)
    assert json.loads(dumps(stored)) == stored
    assert blobs.references(stored) == set(files)
    assert all(blobs.verify(name, data) for name, data in files.items())
    assert dumps(blobs.restore(stored, files.get)) == dumps(value)
    assert blobs.restore_json(dumps(stored), files.get) == dumps(value)  # without decoding


def test_images_written_100_times_grow_the_repository_by_less_than_30_mb(tmp_path):
    """20 images of 1 MB, then 100 writes each adding one message (nui sends the whole
    list each time). Inline images are measured beside it (printed with -s)."""
    from gitmem.repository import Gitmem

    class InlineSessions(SessionStore):
        def _log(self, agent_type, session_id):
            return ChunkedJsonl(f"{self.folder(agent_type, session_id)}/messages")

    pictures = [os.urandom(1 << 20) for _ in range(20)]
    growth = {}
    for label, store in (("blobs", SessionStore), ("inline", InlineSessions)):
        with Gitmem.open(tmp_path / label) as mem:
            sessions = store(mem.engine)
            before = git_size(mem.engine.gitdir)
            messages = [message(i, data) for i, data in enumerate(pictures)]
            for i in range(100):
                messages.append(message(100 + i))
                sessions.write(AGENT, SESSION, messages)
            assert sessions.read(AGENT, SESSION)[0] == messages
            growth[label] = git_size(mem.engine.gitdir) - before
    print(f"\n.git growth: blobs {growth['blobs'] / 1e6:.1f} MB, inline {growth['inline'] / 1e6:.1f} MB")
    assert growth["blobs"] <= 30e6


def git_size(gitdir: Path) -> int:
    return sum(p.stat().st_size for p in gitdir.rglob("*") if p.is_file())


def test_a_reference_to_a_stored_blob_comes_back_as_that_image(tmp_path):
    payload = base64.b64encode(os.urandom(3000)).decode()
    stored, files = blobs.extract({"data": payload})
    (name,) = files
    assert blobs.extract(stored, known={name})[0] == stored  # the reference, kept
    assert blobs.extract(stored)[0] == {"data": blobs.TEXT + stored["data"]}  # unknown: text
    line = dumps({"a": stored["data"], "b": blobs.TEXT + "gitmem:x"})
    assert json.loads(blobs.restore_json(line, None)) == {"a": stored["data"], "b": "gitmem:x"}
