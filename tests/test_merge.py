"""The merge rules on bytes: JSONL union, metadata field by field, markdown keeping both
versions, edit against delete, and a property test over random three-way histories."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.records.merge import merge_changes, merge_file, merge_jsonl, merge_meta, merge_text

MARKERS = (b"<<<<<<<", b"=======", b">>>>>>>")


def jsonl(*values) -> bytes:
    return b"".join(json.dumps(v).encode() + b"\n" for v in values)


def values(data: bytes) -> list:
    return [json.loads(line) for line in data.splitlines()]


# -- JSONL -------------------------------------------------------------------------------


def test_jsonl_appends_on_both_sides_give_base_then_ours_then_theirs():
    base = jsonl(1, 2)
    merged = merge_jsonl(base, jsonl(1, 2, "a1", "a2"), jsonl(1, 2, "b1"))
    assert values(merged) == [1, 2, "a1", "a2", "b1"]


def test_jsonl_merge_is_deterministic_and_keeps_a_common_addition_once():
    base, ours, theirs = jsonl(1), jsonl(1, "same", "a"), jsonl(1, "same", "b")
    assert merge_jsonl(base, ours, theirs) == merge_jsonl(base, ours, theirs)
    assert values(merge_jsonl(base, ours, theirs)) == [1, "same", "a", "b"]


def test_jsonl_chunk_created_on_both_sides_is_merged_the_same_way():
    merged, spots = merge_file("threads/t/events/000001.jsonl", None, jsonl("a1", "a2"), jsonl("b1"))
    assert values(merged) == ["a1", "a2", "b1"] and spots == []


def test_jsonl_edit_in_place_and_append_keep_their_places():
    merged = merge_jsonl(jsonl(1, 2, 3), jsonl(1, "two", 3), jsonl(1, 2, 3, 4))
    assert values(merged) == [1, "two", 3, 4]


def test_jsonl_both_sides_rewriting_the_same_line_keep_both_versions():
    merged = merge_jsonl(jsonl(1, 2, 3), jsonl(1, "ours", 3), jsonl(1, "theirs", 3))
    assert values(merged) == [1, "ours", "theirs", 3]


# -- metadata ----------------------------------------------------------------------------


def test_meta_takes_earliest_created_latest_updated_and_the_newer_sides_fields():
    ours = json.dumps({"agentId": "old", "createdAt": 200, "updatedAt": 300, "mine": 1}).encode()
    theirs = json.dumps({"agentId": "new", "createdAt": 100, "updatedAt": 400, "theirs": 2}).encode()
    merged, spots = merge_meta("threads/t/meta.json", None, ours, theirs)
    assert json.loads(merged) == {"agentId": "new", "createdAt": 100, "updatedAt": 400,
                                  "mine": 1, "theirs": 2}
    assert spots == []


def test_meta_field_changed_on_one_side_only_comes_from_that_side_even_if_older():
    base = json.dumps({"workingDir": "/a", "agentSessionId": "r1", "updatedAt": 100}).encode()
    ours = json.dumps({"workingDir": "/a", "agentSessionId": "r2", "updatedAt": 300}).encode()
    theirs = json.dumps({"workingDir": "/b", "agentSessionId": "r1", "updatedAt": 100}).encode()
    merged = json.loads(merge_meta("sessions/a/s/meta.json", base, ours, theirs)[0])
    assert merged == {"workingDir": "/b", "agentSessionId": "r2", "updatedAt": 300}


def test_meta_compares_rfc3339_times_as_times():
    ours = json.dumps({"workingDir": "/a", "createdAt": "2024-05-01T10:00:00.000Z",
                       "updatedAt": "2024-05-03T10:00:00.000+02:00"}).encode()
    theirs = json.dumps({"workingDir": "/b", "createdAt": "2024-05-01T09:00:00.000+00:00",
                         "updatedAt": "2024-05-03T09:00:00.000Z"}).encode()
    merged = json.loads(merge_meta("sessions/a/s/meta.json", None, ours, theirs)[0])
    # ours was updated at 08:00Z, theirs at 09:00Z: theirs is newer
    assert merged == {"workingDir": "/b", "createdAt": "2024-05-01T09:00:00.000+00:00",
                      "updatedAt": "2024-05-03T09:00:00.000Z"}


def test_meta_that_does_not_parse_keeps_ours_and_says_so():
    merged, spots = merge_meta("sessions/a/s/meta.json", None, b'{"a": 1}', b"not json")
    assert merged == b'{"a": 1}'
    assert len(spots) == 1 and "kept ours" in spots[0].note


# -- markdown ----------------------------------------------------------------------------


def test_markdown_appends_on_both_sides_keep_both_blocks_without_a_spot():
    merged, spots = merge_text("memory/user.md", b"likes tea\n", b"likes tea\n\nfrom a\n",
                               b"likes tea\n\nfrom b\n")
    assert merged == b"likes tea\n\nfrom a\n\nfrom b\n"
    assert spots == []


def test_markdown_same_lines_changed_keep_ours_blank_theirs_and_report_the_spot():
    base = b"# Notes\nprefers tea\nlives in Oslo\n"
    merged, spots = merge_text("memory/user.md", base, b"# Notes\nprefers coffee\nlives in Oslo\n",
                               b"# Notes\nprefers water\nlives in Oslo\n")
    assert merged == b"# Notes\nprefers coffee\n\nprefers water\nlives in Oslo\n"
    assert [(s.path, s.line, s.text) for s in spots] == [("memory/user.md", 2,
                                                           "prefers coffee\n\nprefers water")]
    assert not any(marker in merged for marker in MARKERS)


def test_markdown_changes_to_different_lines_both_apply():
    merged, spots = merge_text("m.md", b"a\nb\nc\nd\n", b"A\nb\nc\nd\n", b"a\nb\nc\nD\n")
    assert merged == b"A\nb\nc\nD\n" and spots == []
    merged, spots = merge_text("m.md", b"a\nb\n", b"A\nb\n", b"a\nB\n")  # adjacent lines
    assert merged == b"A\nB\n" and spots == []


def test_markdown_without_final_newline_and_invalid_utf8_survive():
    merged, _ = merge_text("m.md", b"x", b"x\n\xff ours", b"x\n\xfe theirs")
    assert b"\xff ours" in merged and b"\xfe theirs" in merged


# -- files and records ---------------------------------------------------------------------


def test_edit_against_delete_the_edit_wins():
    assert merge_file("memory/user.md", b"a\n", None, b"a\nb\n") == (b"a\nb\n", [])
    assert merge_file("memory/user.md", b"a\n", b"a\nb\n", None) == (b"a\nb\n", [])
    assert merge_file("memory/user.md", b"a\n", None, b"a\n") == (None, [])


class Blobs(dict):
    """Blob id -> bytes, as the engine's read_blob; ``add`` returns the id."""

    def add(self, data: bytes | None) -> str | None:
        if data is None:
            return None
        blob_id = hashlib.sha1(data).hexdigest()
        self[blob_id] = data
        return blob_id


def changed(blobs: Blobs, base: dict, side: dict) -> dict:
    return {p: (blobs.add(base.get(p)), blobs.add(side.get(p)))
            for p in set(base) | set(side) if base.get(p) != side.get(p)}


def apply(tree: dict, changes: dict) -> dict:
    out = dict(tree)
    for path, data in changes.items():
        if data is None:
            out.pop(path, None)
        else:
            out[path] = data
    return out


def test_a_record_deleted_on_one_side_and_changed_on_the_other_comes_back_whole():
    base = {"threads/t/meta.json": b'{"updatedAt": 1}', "threads/t/events/000000.jsonl": jsonl(1),
            "threads/t/events/000001.jsonl": jsonl(2), "memory/user.md": b"u\n"}
    ours = {"memory/user.md": b"u\n"}  # thread cleared
    theirs = {**base, "threads/t/events/000001.jsonl": jsonl(2, 3), "threads/t/meta.json": b'{"updatedAt": 2}'}
    blobs = Blobs()
    merged = merge_changes(changed(blobs, base, ours), changed(blobs, base, theirs), blobs.__getitem__)
    assert apply(ours, merged.changes) == theirs
    # and the other way round
    merged = merge_changes(changed(blobs, base, theirs), changed(blobs, base, ours), blobs.__getitem__)
    assert apply(theirs, merged.changes) == theirs


def test_a_delete_on_one_side_only_is_applied():
    base = {"memory/agents/a.md": b"a\n", "memory/user.md": b"u\n"}
    ours = {"memory/user.md": b"u\n"}
    theirs = {**base, "memory/user.md": b"u\nmore\n"}
    blobs = Blobs()
    merged = merge_changes(changed(blobs, base, ours), changed(blobs, base, theirs), blobs.__getitem__)
    assert apply(ours, merged.changes) == {"memory/user.md": b"u\nmore\n"}


# -- property: nothing lost, no markers ------------------------------------------------------

# Each side keeps, drops or replaces each base line and inserts new lines; every line
# is unique so that "present" means "kept".
edits = st.lists(st.tuples(st.sampled_from(["keep", "drop", "replace"]),
                           st.integers(min_value=0, max_value=2)), min_size=0, max_size=12)


def build(base: list[bytes], plan, side: str) -> list[bytes]:
    out = []
    for i, line in enumerate(base):
        action, inserts = plan[i] if i < len(plan) else ("keep", 0)
        if action == "keep":
            out.append(line)
        elif action == "replace":
            out.append(line + b" edited by " + side.encode())
        out += [b"%s new %d.%d" % (side.encode(), i, k) for k in range(inserts)]
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=10), edits, edits, st.booleans())
def test_property_nothing_written_is_lost_and_no_markers(size, ours_plan, theirs_plan, is_jsonl):
    base = [b"line %d" % i for i in range(size)]
    ours, theirs = build(base, ours_plan, "ours"), build(base, theirs_plan, "theirs")
    if is_jsonl:  # the same histories, as JSON strings
        base, ours, theirs = ([json.dumps(line.decode()).encode() for line in lines]
                              for lines in (base, ours, theirs))

    def text(lines):
        return b"".join(line + b"\n" for line in lines)

    path = "threads/t/events/000000.jsonl" if is_jsonl else "memory/user.md"
    merged, _ = merge_file(path, text(base), text(ours), text(theirs))
    lines = merged.splitlines() if merged else []
    new = (set(ours) | set(theirs)) - set(base)
    kept_by_both = set(ours) & set(theirs)
    assert new <= set(lines), "a line written on one side is missing"
    assert kept_by_both <= set(lines), "a line both sides kept is missing"
    assert set(lines) - {b""} <= set(ours) | set(theirs), "a line from nowhere"
    assert not any(marker in merged for marker in MARKERS)
    if is_jsonl:
        assert b"" not in lines
        for line in lines:
            json.loads(line)  # every line still parses
