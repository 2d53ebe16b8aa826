"""Ids as path segments: one reversible encoding for agent, session and thread ids.

Plain ids (lower-case letters, digits, ``.``, ``_``, ``-``; not starting with a dot)
stay as they are, so ``claude-code`` is the folder ``claude-code``. Every other
character is percent-escaped as the lower-case hex of its UTF-8 bytes
(``ext:corp/reviewer`` -> ``ext%3acorp%2freviewer``). Upper-case letters are escaped
too, so an encoded name is all lower case and two ids can never collide on a
case-insensitive file system. Windows' reserved names (``con``, ``nul.md`` ...) get
their first letter escaped, and the empty id is ``%``. Stores refuse empty and
whitespace-only ids (:func:`check`) before they encode one.

An encoding longer than :data:`MAX_SEGMENT` is cut and given a hash suffix after a
``~`` (a character the encoding never produces otherwise); :func:`decode` cannot
restore such a name, so stores keep the full id beside it.

    >>> encode("ext:corp/reviewer")
    'ext%3acorp%2freviewer'
    >>> decode("ext%3acorp%2freviewer")
    'ext:corp/reviewer'
"""

from __future__ import annotations

import re

from gitmem.errors import GitmemError, InvalidInput

MAX_SEGMENT = 180  # bytes; leaves room for suffixes like ".jsonl" under a 255-byte name limit
_PLAIN = re.compile(r"[a-z0-9._-]")
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(10)}
_HASH_LEN = 16


class UndecodableId(GitmemError, ValueError):
    """A name that is not the encoding of any id, or a hashed one that lost its tail."""


class EmptyId(InvalidInput):
    """An id that is empty or only whitespace: no record can be named by it."""


def check(id_: str, what: str) -> str:
    """``id_`` itself, or :class:`EmptyId` naming ``what`` ("agent id", "session id" ...)
    when it is empty or only whitespace."""
    if not isinstance(id_, str):
        raise InvalidInput(f"{what} must be a string, not {type(id_).__name__}")
    if not id_.strip():
        raise EmptyId(f"{what} must not be empty" + (" or only whitespace" if id_ else ""))
    return id_


def encode(id_: str) -> str:
    """The path segment for ``id_``: readable when plain, escaped otherwise, never '.'/'..'/''."""
    if id_ == "":
        return "%"
    out = []
    for i, char in enumerate(id_):
        if _PLAIN.fullmatch(char) and not (i == 0 and char == "."):
            out.append(char)
        else:
            out.append("".join(f"%{b:02x}" for b in char.encode("utf-8", "surrogatepass")))
    name = "".join(out)
    if name.split(".", 1)[0] in _RESERVED or name.endswith("."):
        name = _escape_first_char(name) if not name.endswith(".") else name[:-1] + "%2e"
        if name.split(".", 1)[0] in _RESERVED:  # "con." was fixed at the end, not the start
            name = _escape_first_char(name)
    if len(name) > MAX_SEGMENT:
        name = _shorten(name, id_)
    return name


def decode(name: str) -> str:
    """The id whose encoding is ``name``. Raises :class:`UndecodableId` for a hashed name."""
    if name == "%":
        return ""
    if "~" in name:
        raise UndecodableId(f"{name!r} is a shortened id; its full id is kept beside it")
    raw = bytearray()
    i = 0
    while i < len(name):
        char = name[i]
        if char == "%":
            hex_ = name[i + 1:i + 3]
            if len(hex_) != 2 or not all(c in "0123456789abcdef" for c in hex_):
                raise UndecodableId(f"bad escape in {name!r}")
            raw.append(int(hex_, 16))
            i += 3
        elif _PLAIN.fullmatch(char):
            raw.extend(char.encode())
            i += 1
        else:
            raise UndecodableId(f"{name!r} is not an encoded id")
    try:
        id_ = raw.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise UndecodableId(f"{name!r} does not decode to UTF-8") from exc
    if encode(id_) != name:
        raise UndecodableId(f"{name!r} is not the canonical encoding of {id_!r}")
    return id_


def is_shortened(name: str) -> bool:
    """True for a name that was cut to fit and carries a hash suffix."""
    return "~" in name


def _escape_first_char(name: str) -> str:
    return f"%{ord(name[0]):02x}{name[1:]}"


def _shorten(name: str, id_: str) -> str:
    import hashlib  # only an id too long for a file name needs it: not on every start
    digest = hashlib.sha256(id_.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    keep = MAX_SEGMENT - _HASH_LEN - 1
    cut = name[:keep]
    # do not split a %xx escape
    last = cut.rfind("%")
    if last != -1 and last > keep - 3:
        cut = cut[:last]
    return f"{cut}~{digest}"


_CONTROL = re.compile("[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\\\]")
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\"}


def printable(text: str) -> str:
    """``text`` with control characters (newlines, tabs, escape sequences, U+2028) and
    backslashes escaped as Python writes them: one line, unambiguous."""
    return _CONTROL.sub(lambda m: _ESCAPES.get(m[0]) or (
        f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}"), text)
