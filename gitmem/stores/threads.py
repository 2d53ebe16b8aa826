"""kaboo threads: each thread's AG-UI event log, its message list and a little metadata.

The seven operations of kaboo's ``ThreadStore`` contract, one commit per write:
events are stored verbatim in an append-only chunked log (an append never rewrites
an earlier chunk), the messages as a chunked JSONL list, and ``meta.json`` holds
``threadId``, ``agentId``, ``ownerId``, ``createdAt`` and ``updatedAt`` (epoch ms).
Base64 images are kept once per content hash in each log's ``blobs/`` folder and put
back on read (:mod:`gitmem.stores.blobs`).

    threads = ThreadStore(engine)
    threads.append_events("t1", "planner", [{"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}])
    threads.read_state("t1")         # {"n": 1}
    threads.list_threads()           # [{"id": "t1", "agentId": "planner", "ownerId": None, ...}]
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gitmem.git.base import EngineError
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.snapshot import Snapshot
from gitmem.errors import InvalidInput
from gitmem.records import layout, strictjson
from gitmem.records.counts import counted
from gitmem.records.ids import UndecodableId, check, decode
from gitmem.records.jsontexts import JsonTexts
from gitmem.records.meta import meta_bytes, parse_meta, read_meta, record_trailers
from gitmem.stores.jsonl import ChunkedJsonl, dumps, objects
from gitmem.stores.request_keys import TRAILER, RequestKeys, checked_key

log = logging.getLogger("gitmem.threads")

STATE_SNAPSHOT = "STATE_SNAPSHOT"
_STATE_BYTES = STATE_SNAPSHOT.encode()
LISTING_FILE = "thread-listing.json"  # in .git/gitmem/: the last listing of threads/ (a cache)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
"""``list_threads(owner_id=UNSET)``: no owner filter (``None`` means "threads without owner")."""


def last_state_json(data: bytes) -> str | None:
    """The state kaboo's ``deriveState`` finds in one chunk, as JSON text; None when the
    chunk holds no ``STATE_SNAPSHOT`` event.

    Scans the lines from the end and parses only those that can hold the event type
    (it appears literally, or behind a ``\\u`` escape). A snapshot that is not an
    object or array (JavaScript's ``snapshot && typeof snapshot === "object"``) is
    ``"null"``: a later such event hides an earlier good one, as in kaboo.
    """
    for line in reversed(data.split(b"\n")):
        if _STATE_BYTES not in line and b"\\u" not in line:
            continue
        try:
            event = strictjson.loads(line)
        except ValueError:  # not JSON, not UTF-8, NaN: plain git let it in, and reads leave it out
            continue
        if isinstance(event, dict) and event.get("type") == STATE_SNAPSHOT:
            snapshot = event.get("snapshot")
            return dumps(snapshot) if isinstance(snapshot, (dict, list)) else "null"
    return None


class ThreadStore:
    """kaboo's ThreadStore on the git engine (see the module doc for the layout).

    ``save_messages`` on a thread that has no events yet saves the messages anyway
    (as kaboo's Postgres store does, so an acknowledged write is never dropped); the
    thread is listed from its first ``append_events`` on.
    """

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self._clock_lock = threading.Lock()
        self._last_stamp = 0
        self._listing: tuple[str | None, list[dict[str, Any]]] = (None, [])
        self._requests = RequestKeys(engine)

    @staticmethod
    def folder(thread_id: str) -> str:
        return layout.thread_dir(thread_id)

    def _events(self, thread_id: str) -> ChunkedJsonl:
        return ChunkedJsonl(f"{self.folder(thread_id)}/{layout.EVENTS}", blobs=True)

    def _messages(self, thread_id: str) -> ChunkedJsonl:
        return ChunkedJsonl(f"{self.folder(thread_id)}/{layout.MESSAGES}", blobs=True)

    def _snapshot(self, thread_id: str, snapshot: Snapshot | None) -> Snapshot:
        return snapshot or self.engine.snapshot(scope=self.folder(thread_id))

    def stamp(self, meta: Mapping[str, Any] | None) -> int:
        """Now in epoch ms, later than the thread's last ``updatedAt`` and this store's last stamp."""
        with self._clock_lock:
            stamp = max(time.time_ns() // 1_000_000, self._last_stamp + 1,
                        int((meta or {}).get("updatedAt", 0)) + 1)
            self._last_stamp = stamp
            return stamp

    # -- writing -----------------------------------------------------------------

    def append_events(self, thread_id: str, agent_id: str, events: Sequence[Mapping[str, Any]],
                      owner_id: str | None = None, *, trailers: Mapping[str, str] | None = None,
                      request_key: str | None = None) -> str | None:
        """Append ``events`` in order, creating the thread; returns the commit id.

        Sets ``agentId``, sets ``ownerId`` only when ``owner_id`` is not None, bumps
        ``updatedAt``. An empty list changes nothing and makes no commit. A write with a
        ``request_key`` that a recent commit holds already is not made again (None; see
        :mod:`gitmem.stores.request_keys`); so for every write here.
        """
        events = objects("events", events)
        check(agent_id, "agent_id")
        if owner_id is not None and not isinstance(owner_id, str):
            raise InvalidInput(f"owner_id must be a string or None, not {type(owner_id).__name__}")
        if not events:
            return None
        folder = self.folder(thread_id)
        events_log = self._events(thread_id)

        def changes(snapshot: Snapshot):
            old = self.meta(thread_id, snapshot=snapshot)
            stamp = self.stamp(old)
            meta = {**(old or {}), "threadId": thread_id, "agentId": agent_id,
                    "ownerId": owner_id if owner_id is not None else (old or {}).get("ownerId"),
                    "createdAt": (old or {}).get("createdAt", stamp), "updatedAt": stamp}
            changed: dict[str, bytes | None] = dict(events_log.append(snapshot, events))
            changed[f"{folder}/{layout.META}"] = meta_bytes(meta)
            return changed

        return self._update(changes, f"threads: append {counted(len(events), 'event')} to "
                            f"{_brief(thread_id)}",
                            record_trailers("threads.append", f"thread:{thread_id}", trailers),
                            folder, request_key)

    def save_messages(self, thread_id: str, messages: Sequence[Mapping[str, Any]] | JsonTexts, *,
                      trailers: Mapping[str, str] | None = None,
                      request_key: str | None = None) -> str | None:
        """Replace the thread's message list; returns the commit id (None: nothing changed).

        Bumps ``updatedAt`` of a thread that exists. On a thread without events the
        messages are saved all the same, and the thread is not listed until its first
        :meth:`append_events`. Messages received as JSON can be given as
        :class:`~gitmem.records.jsontexts.JsonTexts` (of objects, which the caller checks).
        """
        if not isinstance(messages, JsonTexts):
            messages = objects("messages", messages)
        folder = self.folder(thread_id)
        messages_log = self._messages(thread_id)

        def changes(snapshot: Snapshot):
            changed: dict[str, bytes | None] = dict(messages_log.replace(snapshot, messages))
            old = self.meta(thread_id, snapshot=snapshot)
            if changed and old is not None:
                changed[f"{folder}/{layout.META}"] = meta_bytes({**old, "updatedAt": self.stamp(old)})
            return changed

        return self._update(
            changes, f"threads: save {counted(len(messages), 'message')} of {_brief(thread_id)}",
            record_trailers("threads.messages", f"thread:{thread_id}", trailers), folder, request_key)

    def clear(self, thread_id: str | None = None, *, trailers: Mapping[str, str] | None = None,
              request_key: str | None = None) -> str | None:
        """Delete one thread, or every thread when ``thread_id`` is None; returns the commit id."""
        if thread_id is None:
            folder, message, record = layout.THREADS, "threads: clear all threads", None
        else:
            folder, message = self.folder(thread_id), f"threads: clear {_brief(thread_id)}"
            record = f"thread:{thread_id}"
        return self._update(lambda snapshot: {path: None for path in snapshot.files(folder)},
                            message, record_trailers("threads.clear", record, trailers), folder,
                            request_key)

    def _update(self, changes: Callable[[Snapshot], dict[str, bytes | None]], message: str,
                trailers: dict[str, str], folder: str, request_key: str | None) -> str | None:
        """The commit of ``changes``; none when ``request_key`` is in a commit already."""
        if request_key is None:
            return self.engine.update(changes, message, trailers, scope=folder)
        checked_key(request_key)

        def unless_made(snapshot: Snapshot):
            made = self._requests.committed(request_key, snapshot.id)
            if made is None:
                return changes(snapshot)
            log.info("request %s was committed already, in %s: not written again", request_key, made[:10])
            return None

        return self.engine.update(unless_made, message, {**trailers, TRAILER: request_key}, scope=folder)

    # -- reading -----------------------------------------------------------------

    def read_events(self, thread_id: str, *, snapshot: Snapshot | None = None) -> list[Any]:
        """The thread's events, verbatim and in order ([] for an unknown thread)."""
        return json.loads(b"".join(self.read_events_json(thread_id, snapshot=snapshot)))

    def read_events_json(self, thread_id: str, *, snapshot: Snapshot | None = None) -> list[bytes]:
        """Like :meth:`read_events`, as one JSON array in UTF-8, spliced from the stored lines
        and left in pieces (``b"".join`` them): an answer then copies a megabyte once, and
        each fresh megabyte costs a just-started process page faults."""
        return self._events(thread_id).read_json(self._snapshot(thread_id, snapshot))

    def read_messages(self, thread_id: str, *, snapshot: Snapshot | None = None) -> list[Any]:
        """The thread's last saved message list ([] when none)."""
        return json.loads(b"".join(self.read_messages_json(thread_id, snapshot=snapshot)))

    def read_messages_json(self, thread_id: str, *, snapshot: Snapshot | None = None) -> list[bytes]:
        """Like :meth:`read_messages`, as the pieces of one JSON array in UTF-8."""
        return self._messages(thread_id).read_json(self._snapshot(thread_id, snapshot))

    def read_state(self, thread_id: str, *, snapshot: Snapshot | None = None) -> Any:
        """kaboo's ``deriveState`` of the thread's events: the last ``STATE_SNAPSHOT``'s
        snapshot when it is an object (an array counts, as in JavaScript), else None (a
        fresh copy each call)."""
        return json.loads(self.read_state_json(thread_id, snapshot=snapshot))

    def read_state_json(self, thread_id: str, *, snapshot: Snapshot | None = None) -> str:
        """Like :meth:`read_state`, as JSON text. Chunks are scanned from the last one
        back, and what each holds is cached by blob id, so a warm call reads one chunk."""
        snapshot = self._snapshot(thread_id, snapshot)
        events = self._events(thread_id)
        for path in reversed(events.chunk_paths(snapshot)):
            found = snapshot.read_parsed(path, last_state_json)
            if found is not None:
                return events.restore_json(snapshot, found)
        return "null"

    def meta(self, thread_id: str, *, snapshot: Snapshot | None = None) -> dict[str, Any] | None:
        """The thread's ``meta.json`` (None for a thread without events)."""
        return read_meta(self._snapshot(thread_id, snapshot), self.folder(thread_id))

    def list_threads(self, owner_id: str | None = UNSET, *,
                     snapshot: Snapshot | None = None) -> list[dict[str, Any]]:
        """Every thread as ``{id, agentId, ownerId, createdAt, updatedAt}``, most recently
        updated first (ties by id); with ``owner_id`` (None included) only that owner's."""
        snapshot = snapshot or self.engine.snapshot()
        threads = self._all_threads(snapshot)
        return [dict(t) for t in threads if owner_id is UNSET or t["ownerId"] == owner_id]

    def _all_threads(self, snapshot: Snapshot) -> list[dict[str, Any]]:
        """The sorted listing, remembered for the tree id of ``threads/``; for the next
        process too, in LISTING_FILE with each thread's ``meta.json`` blob id, so that a
        new process reads only the ``meta.json`` files that changed since."""
        tree_id = snapshot.tree_id(layout.THREADS)
        cached_id, cached = self._listing
        if tree_id is not None and tree_id == cached_id:
            return cached
        saved_id, saved = self._saved_listing()
        if tree_id is not None and tree_id == saved_id:
            entries = saved
        else:
            entries = {}
            for name in snapshot.list(layout.THREADS):
                path = f"{layout.THREADS}/{name}/{layout.META}"
                blob_id = snapshot.blob_id(path)
                if blob_id is not None and saved.get(name, ("",))[0] == blob_id:
                    entries[name] = saved[name]
                    continue
                try:
                    meta = snapshot.read_parsed(path, parse_meta)
                except (ValueError, EngineError) as exc:  # one broken file hides no other
                    log.warning("skipping %s: %s", path, exc)
                    continue
                if meta is not None and blob_id is not None:  # a meta.json read: it has a blob id
                    entries[name] = (blob_id, _summary(name, meta))
            if tree_id is not None:
                self._save_listing(tree_id, entries)
        threads = sorted((summary for _blob_id, summary in entries.values()),
                         key=lambda t: (-t["updatedAt"], t["id"]))
        self._listing = (tree_id, threads)
        return threads

    def _saved_listing(self) -> tuple[str | None, dict[str, tuple[str, dict[str, Any]]]]:
        try:
            saved = json.loads((self.engine.private_dir / LISTING_FILE).read_bytes())
            return saved["tree"], {name: (blob_id, summary) for name, (blob_id, summary)
                                   in saved["threads"].items() if _SUMMARY_KEYS <= summary.keys()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):  # none, or damaged: read them
            return None, {}

    def _save_listing(self, tree_id: str, entries: Mapping[str, tuple[str, dict[str, Any]]]) -> None:
        data = json.dumps({"tree": tree_id, "threads": entries}).encode("ascii")  # ids may hold lone surrogates
        try:
            write_private(self.engine.private_dir / LISTING_FILE, data)
        except OSError:  # a read-only repository: the next process reads them again
            pass


_SUMMARY_KEYS = {"id", "agentId", "ownerId", "createdAt", "updatedAt"}


def _summary(name: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    thread_id = meta.get("threadId")
    if not isinstance(thread_id, str):
        try:
            thread_id = decode(name)
        except UndecodableId:
            thread_id = name
    updated = meta.get("updatedAt", 0)
    return {"id": thread_id, "agentId": meta.get("agentId", ""), "ownerId": meta.get("ownerId"),
            "createdAt": meta.get("createdAt", updated), "updatedAt": updated}


def _brief(thread_id: str) -> str:
    """The id for a commit summary: as it is when printable and short, else quoted and cut."""
    if thread_id.isprintable() and 0 < len(thread_id) <= 80:
        return thread_id
    quoted = json.dumps(thread_id, ensure_ascii=False)
    return quoted if len(quoted) <= 80 else quoted[:77] + "..."


class AsyncThreadStore:
    """The same store for asyncio code: each call runs in a worker thread.

    The method names mirror kaboo's contract (``appendEvents`` -> ``append_events``).

        threads = AsyncThreadStore(ThreadStore(engine))
        await threads.append_events("t1", "planner", events)
    """

    def __init__(self, store: ThreadStore):
        self.store = store

    async def append_events(self, thread_id: str, agent_id: str, events: Sequence[Mapping[str, Any]],
                            owner_id: str | None = None) -> None:
        await _in_thread(self.store.append_events, thread_id, agent_id, events, owner_id)

    async def read_events(self, thread_id: str) -> list[Any]:
        return await _in_thread(self.store.read_events, thread_id)

    async def read_state(self, thread_id: str) -> Any:
        return await _in_thread(self.store.read_state, thread_id)

    async def save_messages(self, thread_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        await _in_thread(self.store.save_messages, thread_id, messages)

    async def read_messages(self, thread_id: str) -> list[Any]:
        return await _in_thread(self.store.read_messages, thread_id)

    async def list_threads(self, owner_id: str | None = UNSET) -> list[dict[str, Any]]:
        return await _in_thread(self.store.list_threads, owner_id)

    async def clear(self, thread_id: str | None = None) -> None:
        await _in_thread(self.store.clear, thread_id)


async def _in_thread(call, *args):
    import asyncio  # here, not at the top: a CLI command that never awaits does not load it

    return await asyncio.to_thread(call, *args)
