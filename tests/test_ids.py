"""The id encoding: reversible, one safe path segment, no collisions (also ignoring case)."""

from __future__ import annotations

import os
import posixpath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitmem.records.ids import MAX_SEGMENT, UndecodableId, decode, encode, is_shortened

WINDOWS_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(10)}

# Any unicode, with lone surrogates and the characters that matter for paths made likely.
chars = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),
    st.sampled_from("./\\:%~\0\n\r\t ACZaz09-_"),
)
ids = st.one_of(st.text(chars, max_size=40), st.text(chars, min_size=150, max_size=400))


def assert_safe_segment(name: str) -> None:
    """``name`` is one portable file name that stays inside the folder it is joined to."""
    assert name not in ("", ".", "..")
    assert name.isascii() and name.isprintable()
    assert not set(name) & set("/\\\0:*?\"<>| "), name
    assert not name.startswith(".") and not name.endswith(".")
    assert len(name.encode()) <= MAX_SEGMENT
    assert name.split(".", 1)[0].lower() not in WINDOWS_RESERVED
    base = "/repo/memory/agents"
    assert posixpath.dirname(posixpath.normpath(posixpath.join(base, name))) == base
    assert os.path.dirname(os.path.normpath(os.path.join(base, name))) == base


@settings(max_examples=500)
@given(ids)
def test_round_trip_and_safe_segment(id_):
    name = encode(id_)
    assert_safe_segment(name)
    assert name == name.lower()
    if is_shortened(name):
        assert len(id_) * 12 > MAX_SEGMENT  # only ids too long to escape in full are cut
        with pytest.raises(UndecodableId):
            decode(name)
    else:
        assert decode(name) == id_


@settings(max_examples=300)
@given(st.lists(ids, min_size=2, max_size=8, unique=True))
def test_no_collisions_even_ignoring_case(id_list):
    names = [encode(i).casefold() for i in id_list]
    assert len(set(names)) == len(names)


@given(st.text(chars, min_size=1, max_size=30))
def test_case_variants_stay_apart(id_):
    variants = {id_, id_.upper(), id_.lower(), id_.swapcase()}
    assert len({encode(v).casefold() for v in variants}) == len(variants)


@given(st.from_regex(r"[a-z0-9_-][a-z0-9._-]{0,40}", fullmatch=True))
def test_plain_ids_stay_readable(id_):
    stem = id_.split(".", 1)[0]
    if stem in WINDOWS_RESERVED or id_.endswith("."):
        assert encode(id_) != id_
    else:
        assert encode(id_) == id_


@given(st.text(st.sampled_from("%0123456789abcdefABC.~-_x/"), max_size=12))
def test_decode_accepts_only_canonical_names(name):
    try:
        id_ = decode(name)
    except UndecodableId:
        return
    assert encode(id_) == name


@pytest.mark.parametrize("id_, expected", [
    ("claude-code", "claude-code"),
    ("reviewer", "reviewer"),
    ("v1.2_beta", "v1.2_beta"),
    ("ext:corp/reviewer", "ext%3acorp%2freviewer"),
    ("../../etc/passwd", "%2e.%2f..%2fetc%2fpasswd"),
    ("CON", "%43%4f%4e"),
    ("con", "%63on"),
    ("nul.md", "%6eul.md"),
    ("a/b\\c", "a%2fb%5cc"),
    ("a/b\\\\c", "a%2fb%5c%5cc"),
    (".", "%2e"),
    ("..", "%2e%2e"),
    ("trailing.", "trailing%2e"),
    ("", "%"),
    ("%", "%25"),
    ("Ä\0\n", "%c3%84%00%0a"),
    ("\ud800", "%ed%a0%80"),
])
def test_examples(id_, expected):
    assert encode(id_) == expected
    assert_safe_segment(expected)
    assert decode(expected) == id_


def test_long_id_gets_a_hash_suffix():
    long_a, long_b = "a" * 300, "a" * 299 + "b"
    name_a, name_b = encode(long_a), encode(long_b)
    assert is_shortened(name_a) and is_shortened(name_b)
    assert name_a != name_b
    assert len(name_a) <= MAX_SEGMENT and name_a.startswith("a" * 100)
    assert encode(long_a) == name_a  # stable, so the same id finds the same file
    assert_safe_segment(encode("é" * 300))  # a cut never splits an escape


def test_decode_rejects_what_encode_never_makes():
    for name in ("ABC", "a/b", "%2", "%zz", "%2F", "..", "a~0123", "%ff"):
        with pytest.raises(UndecodableId):
            decode(name)
