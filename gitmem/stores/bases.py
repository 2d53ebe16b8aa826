"""A writer's base: the version of a memory a write was made from.

Every face that writes memory is a *writer*: nui's one connection to ``gitmem serve``, an
MCP connection, the Python API and the CLI (one a process), the memory tool. A write is
merged three-way from its base onto the tip it commits to, so what others wrote since is
kept and what the writer removed from what it saw is removed. The rule (docs/nui.md):

- The base is the newest version the writer has seen: its latest read, or the version
  its own latest acknowledged write left it with (a replace: its text; an append: the
  version it had seen with the block joined on; a delete: nothing), whichever is newer.
  An older read is never preferred to a newer one because of what it held.
- One exception, for nui's racing appends (each a read, a join and a replace fired from a
  goroutine, so back-to-back appends read the same version and arrive in any order):
  within the late window, a replace whose text *is or extends* (the version, a blank
  line, more) the non-empty version of a read no write has taken yet was made from that
  read, and that read is its base. The empty version is never such a read: any text
  extends it, so it says nothing of where the text came from.
- A writer that has seen nothing (a CLI ``memory write``, a client that never read)
  replaces what is there: it is taken to have seen the tip.

Each write takes the read it was made from (or the newest it could have been), so a read
serves one write at most. A replace made from a base that is not the tip it commits onto
is merged onto that tip from it (:func:`replace_onto`), worked out again on every retry.

    bases = Bases()
    bases.read("conn", "memory/user.md", "likes tea\\n", commit)
    base, view = bases.base("conn", "memory/user.md", "likes tea\\n\\nuse tabs\\n", None, now)
    text, merged_from = replace_onto("memory/user.md", base, tip_text, "likes tea\\n\\nuse tabs\\n")
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Hashable

from gitmem.records.merge import merge_file

BLOCK = "\n\n"  # what nui puts between the blocks it appends
READS_KEPT = 32  # reads of one record remembered per writer
WRITERS_KEPT = 1024  # (writer, record) pairs remembered; the least recently used is forgotten
PROCESS = None  # the writer of a process's own API and CLI calls


class Seen:
    """A version a writer has seen: its text (stored form), the commit that held it (None:
    none yet, or not known), when (``time.monotonic()``), and whether a write took it."""

    __slots__ = ("text", "commit", "time", "taken")

    def __init__(self, text: str, commit: str | None, when: float):
        self.text, self.commit, self.time, self.taken = text, commit, when, False


class _Writer:
    __slots__ = ("reads", "wrote")

    def __init__(self) -> None:
        self.reads: deque[Seen] = deque(maxlen=READS_KEPT)
        self.wrote: Seen | None = None  # the view its own latest acknowledged write left


class Bases:
    """What each writer has seen of each record, and the base of its next write."""

    def __init__(self) -> None:
        self._writers: OrderedDict[tuple[Hashable, str], _Writer] = OrderedDict()
        self._lock = threading.Lock()

    def _writer(self, writer: Hashable, path: str) -> _Writer:
        key = (writer, path)
        found = self._writers.get(key)
        if found is None:
            found = self._writers[key] = _Writer()
            if len(self._writers) > WRITERS_KEPT:
                self._writers.popitem(last=False)
        else:
            self._writers.move_to_end(key)
        return found

    def read(self, writer: Hashable, path: str, text: str, commit: str | None,
             when: float | None = None) -> None:
        """``writer`` was answered ``text`` (stored form), read at ``commit``."""
        with self._lock:
            self._writer(writer, path).reads.append(
                Seen(text, commit, time.monotonic() if when is None else when))

    def base(self, writer: Hashable, path: str, new: str | None, late_window: float | None,
             arrived: float) -> tuple[Seen | None, Seen | None]:
        """``(base, view)`` of a write by ``writer`` that arrived at ``arrived`` (monotonic):
        the version it was made from, and the newest it has seen (the base but for a racing
        append's read); None: it has seen nothing. ``new``: a replace's text (stored form),
        None for an append or a delete. ``late_window``: seconds in which a racing append's
        read counts (see the module doc; None or 0: never). The read taken is marked so."""
        with self._lock:
            state = self._writer(writer, path)
            reads = [read for read in state.reads if read.time <= arrived]
            latest = reads[-1] if reads else None
            wrote = state.wrote
            view = wrote if wrote is not None and (latest is None or wrote.time >= latest.time) else latest
            base = view
            if new is not None and late_window:
                for read in reversed(reads):
                    if not read.taken and arrived - read.time <= late_window and _extends(new, read.text):
                        base = read
                        break
            if base is not None:
                base.taken = True
            return base, view

    def wrote(self, writer: Hashable, path: str, view: str | None, commit: str | None,
              arrived: float) -> None:
        """``writer``'s write that arrived at ``arrived`` was acknowledged: it has seen
        ``view`` since (None: it still knows no version, as after a blind append)."""
        with self._lock:
            self._writer(writer, path).wrote = None if view is None else Seen(view, commit, arrived)


def replace_onto(path: str, base: Seen | None, version: str, new: str) -> tuple[str, Seen | None]:
    """What a replace of ``path`` with ``new``, made from ``base``, leaves on ``version``
    (all in stored form), and the base it was merged from (None: not merged): ``new``
    itself when the writer has seen nothing or its base holds ``version``; else ``new``
    merged three-way onto ``version`` from the base, so that what others wrote since is
    kept and what the writer removed from its base is removed."""
    if base is None or base.text == version:
        return new, None
    merged, _ = merge_file(path, *(text.encode("utf-8", "surrogateescape") for text in (base.text, version, new)))
    return (merged or b"").decode("utf-8", "surrogateescape"), base


def _extends(new: str, version: str) -> bool:
    """True when ``new`` is the non-empty ``version`` or extends it (the version, a blank
    line, more: nui trims the version's whitespace before it joins)."""
    trimmed = version.strip()
    return bool(trimmed) and (new == version or new.startswith(trimmed + BLOCK))
