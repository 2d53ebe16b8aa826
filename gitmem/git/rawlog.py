"""The one reader of git's ``--raw -z`` output: ``git log --raw``, ``git diff-tree``.

Used by the record index's walk (:meth:`gitmem.git.log.History.changed_commits`), a
record's changes (:meth:`gitmem.git.log.History.changes`), the search index's steps
(:mod:`gitmem.git.changes`) and the secret scan (:mod:`gitmem.git.parentdiffs`).

    for header, changes in raw_log(gitproc.stream(["log", "--raw", "-z", "--format=%H"])):
        for fields, path in changes:   # fields: [b":old_mode", new_mode, old_blob, new_blob, status]
            ...
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


# One entry of git's raw output: its fields [b":old_mode", new_mode, old_blob, new_blob,
# status] and its path, as bytes (plain lists and tuples: a history has many)
RawChange = tuple[list[bytes], bytes]


def raw_log(chunks: Iterable[bytes]) -> Iterator[tuple[bytes | None, list[RawChange]]]:
    """The commits of ``git log --raw -z`` output, read as it comes: each one's
    ``--format`` line (one that holds no NUL or tab and does not start with ``:``) and its
    changes; the entries of ``git diff-tree -r -z A B`` come under None. With
    ``--numstat``, a file's counts come as one more change, ``([added, removed], path)``
    (``-`` for a binary file). Raises ``ValueError`` when the output ends inside an entry."""
    header: bytes | None = None
    changes: list[RawChange] = []
    meta: bytes | None = None  # a ":modes ids status" entry: its path is the next token
    rest = b""
    for data in chunks:
        *tokens, rest = (rest + data).split(b"\0")
        for token in tokens:
            if meta is not None:
                changes.append((meta.split(b" "), token))
                meta = None
            elif (token := token.lstrip(b"\n")).startswith(b":"):
                meta = token
            elif b"\t" in token:
                added, removed, path = token.split(b"\t", 2)
                changes.append(([added, removed], path))
            elif token:
                if header is not None or changes:
                    yield header, changes
                header, changes = token, []
    if rest.strip() or meta is not None:
        raise ValueError("git's raw output ended in the middle of an entry")
    if header is not None or changes:
        yield header, changes
