"""Request keys: a write sent again with the key it was first sent with is not made twice.

A client whose gitmem process died before answering cannot tell whether its write was
committed. A write that names a key (kaboo's adapter gives each call one) carries it in
a ``Gitmem-Request`` trailer; sent again, to this process or to a new one, it finds that
commit among main's newest :data:`WINDOW` commits and is answered without a second one.

    keys = RequestKeys(engine)
    keys.committed("5f0c9e6a-1f7e-4c1e-9d6b-2f3a4b5c6d7e", snapshot.id)   # a commit id, or None
"""

from __future__ import annotations

import collections
import re
import threading

from gitmem.errors import InvalidInput
from gitmem.git.base import CommitInfo
from gitmem.git.engine import GitEngine

TRAILER = "Gitmem-Request"
WINDOW = 1000  # main's newest commits searched for a key: a retry follows its loss closely
_KEY = re.compile(r"[!-~]{1,200}")  # one word of visible ASCII: a trailer's value, one line


def checked_key(key: object) -> str:
    """``key`` if it can be a request key (1 to 200 visible ASCII characters), else InvalidInput."""
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise InvalidInput(f"a request key is 1 to 200 visible ASCII characters (a UUID, say), "
                           f"not {key!r:.40}")
    return key


class RequestKeys:
    """The request keys of main's newest :data:`WINDOW` commits, read once per commit."""

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self._lock = threading.Lock()
        self._tip: str | None = None
        self._window: collections.deque[tuple[str, str | None]] = collections.deque()  # (commit, key), oldest first
        self._keys: dict[str, str] = {}  # key -> the commit holding it

    def committed(self, key: str, tip: str | None) -> str | None:
        """The commit among the newest :data:`WINDOW` up to ``tip`` that holds ``key``, or None."""
        with self._lock:
            if tip != self._tip:
                self._read_up_to(tip)
            return self._keys.get(key)

    def _read_up_to(self, tip: str | None) -> None:
        new: list[CommitInfo] = []  # the commits since the last look, newest first, one read each
        at = tip
        while at is not None and at != self._tip and self._tip is not None and len(new) < WINDOW:
            info = self.engine.log.commit_infos([at])[0]
            new.append(info)
            at = info.parents[0] if info.parents else None
        if self._tip is None or at != self._tip:  # a first look, or main went elsewhere (a rewrite)
            self._window.clear()
            self._keys.clear()
            new = self.engine.log.history(rev=tip, limit=WINDOW) if tip is not None else []
        for info in reversed(new):
            key = info.trailers.get(TRAILER)
            self._window.append((info.id, key))
            if key is not None:
                self._keys[key] = info.id
        while len(self._window) > WINDOW:
            commit, key = self._window.popleft()
            if key is not None and self._keys.get(key) == commit:
                del self._keys[key]
        self._tip = tip
