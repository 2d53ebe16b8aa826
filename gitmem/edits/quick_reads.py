"""Reads answered from the work tree, without opening the repository, while a stamp vouches for it.

A full read first takes in the record's hand edits (:mod:`gitmem.edits.handedits`); when that
look found every file of the record holding HEAD's version, :func:`keep_stamp` keeps a
stamp of the record's folder (:mod:`gitmem.git.stamp`: stat data, main's commit, HEAD's
files there). While it holds, the next process reads the same bytes from the work tree
with no pygit2, no object inflated and no look: :func:`session_json` gives what
:meth:`gitmem.stores.SessionStore.read_json_pieces` gives, or None, and the caller
opens the repository. The stamp keeps the blob id of each file, and the quick read adds
to it the chunks it found written as gitmem writes them, with no image: those are spliced
without a look at their lines the next time, and in the stamps after it while their blob
is the same (a session's read after an append looks at its new chunk alone).

    found = session_json(Path("~/gitmem").expanduser(), "claude-code", "s1")
    if found is None:
        with Gitmem.open("~/gitmem") as mem:
            found = mem.session_json("claude-code", "s1")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gitmem.git import stamp
from gitmem.git.files import read_regular
from gitmem.records import layout
from gitmem.records.jsontexts import checked_run, json_array, written_run
from gitmem.records.meta import parse_meta

_REFERENCE = ('"' + layout.NAMESPACE).encode()  # an image's reference in a line: the full read restores it
_WRITTEN = "written_chunks"  # in a session's stamp: blob ids of chunks written as gitmem writes them, no image

if TYPE_CHECKING:
    from gitmem.git.engine import GitEngine
    from gitmem.git.snapshot import Snapshot


def keep_stamp(engine: GitEngine, folder: str, head: Snapshot, started_ns: int) -> None:
    """Keep a stamp of record ``folder`` at snapshot ``head`` (HEAD), for a look at it that
    started at ``started_ns`` and found every file holding HEAD's version."""
    from gitmem.edits.handedits import is_watched  # the full read's side: loaded there already
    files = {path: blob for path in sorted(head.files(folder)) if (blob := head.blob_id(path)) is not None}
    if head.id is None or not files or not all(map(is_watched, files)):  # a file no look compares
        return
    taken = stamp.take(engine.gitdir, engine.workdir, head.id, [folder], started_ns, files=files)
    if taken is not None:
        written = _written(stamp.kept(engine.gitdir, folder)).intersection(files.values())
        stamp.keep(engine.gitdir, folder, {**taken, _WRITTEN: sorted(written)})


def session_json(workdir: Path, agent_type: str, session_id: str) -> tuple[list[bytes], str] | None:
    """``(pieces of the messages' JSON array, agentSessionId)`` of a session, read from the
    work tree of the repository at ``workdir``; None when no stamp vouches for it now, or
    it holds images (they are restored from their blobs by the full read)."""
    folder = layout.session_dir(agent_type, session_id)
    try:
        workdir = workdir.resolve()
    except OSError:  # relative to a removed current folder: the full path says so
        return None
    gitdir = workdir / ".git"
    kept = stamp.kept(gitdir, folder)
    files = kept.get("files") if kept is not None else None
    if (kept is None or not isinstance(files, dict) or not all(isinstance(blob, str) for blob in files.values())
            or not stamp.holds(gitdir, workdir, kept)):  # none, or of another shape
        return None
    chunks = layout.chunk_files(f"{folder}/{layout.MESSAGES}", files)
    root = os.fspath(workdir)
    written = _written(kept)
    found_written = []
    try:
        runs = []
        for path in chunks:
            data = _read(root, path)
            if files[path] in written:  # its lines and its want of images known already
                runs.append(written_run(data, known=True))
                continue
            run, broken = checked_run(data)
            if broken:  # a line that is not JSON: the full read leaves it out, and says so
                return None
            if _REFERENCE in run:  # an image: the full read restores it
                return None
            as_written = written_run(data) is not None
            if as_written:
                found_written.append(files[path])
            runs.append(run)
        meta_path = f"{folder}/{layout.META}"
        meta = parse_meta(_read(root, meta_path)) if meta_path in files else {}
    except (OSError, ValueError):  # gone meanwhile, or what the full read says more of
        return None
    if not stamp.holds(gitdir, workdir, kept):  # changed while it was read
        return None
    if found_written:  # vouched for by the stamp that held all along
        stamp.keep(gitdir, folder, {**kept, _WRITTEN: sorted(written.union(found_written))})
    return json_array(runs), meta.get("agentSessionId", "")


def _written(kept: dict | None) -> set[str]:
    """The blob ids a session's stamp ``kept`` names as chunks written as gitmem writes
    them, with no image (none for no stamp, or one of another shape)."""
    found = kept.get(_WRITTEN) if kept is not None else None
    return {blob for blob in found if isinstance(blob, str)} if isinstance(found, list) else set()


def _read(root: str, path: str) -> bytes:
    """The regular file at ``path`` in the work tree at ``root``, never through a symbolic
    link at its end (the stamp vouches for the folders on the way); OSError when there is none."""
    found = read_regular(f"{root}/{path}")  # no Path made for each of hundreds of chunks
    if found is None:
        raise FileNotFoundError(path)
    return found[0]
