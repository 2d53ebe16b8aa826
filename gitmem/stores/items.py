"""The items of a key-value store (LangGraph's ``BaseStore``, :mod:`gitmem.langgraph`) in
``store/``: an item ``key`` in a ``namespace`` (a tuple of one or more parts) is the file
``store/<part>/.../<key>.json`` (:func:`gitmem.records.layout.item_path`), holding its value
and times (:mod:`gitmem.records.items`).

A :meth:`ItemStore.write` of one or more puts and deletes is one commit (``store: put
users/alice/prefs``; ``Gitmem-Op: store.put``, ``store.delete`` or ``store.write`` for
several, ``Gitmem-Id: store:<namespace>/<key>`` when it changed one item). A put keeps the
item's ``created_at`` and sets ``updated_at``; a put of the value (and index) the item holds,
or a delete of an item that is not there, changes nothing and makes no commit. Reads are of
HEAD, after a person's edit of the files is committed. A file under ``store/`` that is not an
item's (broken by hand) is left out of the reads, with a logged warning, and a put replaces it.

    items = ItemStore(engine)
    items.write([Write(("users", "alice"), "prefs", {"theme": "dark"})])
    items.get(("users", "alice"), "prefs").value     # {'theme': 'dark'}
    items.items(("users",))                          # every item below users/
"""

from __future__ import annotations

import logging
from collections import namedtuple
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from gitmem.errors import InvalidInput
from gitmem.git.engine import GitEngine
from gitmem.git.snapshot import Snapshot
from gitmem.records import layout
from gitmem.records.ids import UndecodableId, decode, encode, printable
from gitmem.records.items import StoredItem, item_bytes, parse_item
from gitmem.records.meta import record_trailers
from gitmem.records.strictjson import same_json

log = logging.getLogger("gitmem.items")


class Write(namedtuple("Write", "namespace key value index", defaults=(None,))):
    """A put of ``value`` (a mapping; None: a delete) at ``key`` in ``namespace``, with the
    ``index`` search reads it by (None, False or a list of field paths: see
    :mod:`gitmem.records.items`)."""

    __slots__ = ()


def now() -> str:
    """The current time as an item's times are kept: ISO 8601 in UTC, to the microsecond."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class ItemStore:
    """The items under ``store/`` of one repository."""

    def __init__(self, engine: GitEngine):
        self.engine = engine

    # -- reads --------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """HEAD, after a person's edits under ``store/`` are committed: what several reads
        share, to see one state."""
        return self.engine.snapshot(scope=layout.STORE)

    def get(self, namespace: Sequence[str], key: str, *,
            snapshot: Snapshot | None = None) -> StoredItem | None:
        """Item ``key`` of ``namespace`` (None: there is none)."""
        path = layout.item_path(namespace, key)
        head = snapshot or self.engine.snapshot(scope=path)
        item = _read(head, path)
        return item if item is not None and item[:2] == (tuple(namespace), key) else None

    def at(self, path: str, *, snapshot: Snapshot | None = None) -> StoredItem | None:
        """The item in file ``path`` (``store/.../<key>.json``; None: no item's file there)."""
        return _read(snapshot or self.engine.snapshot(scope=path), path)

    def items(self, prefix: Sequence[str] = (), *, snapshot: Snapshot | None = None) -> list[StoredItem]:
        """Every item whose namespace starts with the parts of ``prefix`` (none: every item),
        in the order of their files' paths."""
        folder = _folder(prefix)
        head = snapshot or self.engine.snapshot(scope=folder)
        found = (_read(head, path) for path in head.files(folder) if layout.record_path(path) == path)
        return [item for item in found if item is not None]

    def namespaces(self, *, snapshot: Snapshot | None = None) -> list[tuple[str, ...]]:
        """The namespaces that hold one item or more, sorted."""
        head = snapshot or self.engine.snapshot(scope=layout.STORE)
        found: set[tuple[str, ...]] = set()
        for path in head.files(layout.STORE):
            if layout.record_path(path) == path:
                try:
                    found.add(tuple(decode(part) for part in path.split("/")[1:-1]))
                except UndecodableId:  # a part cut to fit: the file holds the namespace
                    item = _read(head, path)
                    if item is not None:
                        found.add(item.namespace)
        return sorted(found)

    # -- writes -------------------------------------------------------------------

    def write(self, writes: Sequence[Write], *, trailers: Mapping[str, str] | None = None) -> str | None:
        """Make ``writes`` (puts and deletes, the last one of an item counting) as one commit;
        the commit's id, None when they change nothing."""
        latest: dict[str, Write] = {}
        for one in writes:
            _check_value(one.value, one.index)
            index = list(one.index) if isinstance(one.index, (list, tuple)) else one.index
            latest[layout.item_path(one.namespace, one.key)] = Write(tuple(one.namespace), one.key,
                                                                      one.value, index)
        if not latest:
            return None
        made: dict[str, Write] = {}
        said: dict[str, str] = {}  # the trailers, once the changes say what the commit holds

        def changes(head: Snapshot) -> dict[str, bytes | None]:
            made.clear()
            found: dict[str, bytes | None] = {}
            stamp = now()
            for path, one in latest.items():
                old = _read(head, path, quiet=True)
                if one.value is None:
                    if head.blob_id(path) is not None:
                        found[path] = None
                        made[path] = one
                    continue
                if old is not None and same_json(old.value, dict(one.value)) and old.index == one.index:
                    continue
                created = old.created_at if old is not None else stamp
                found[path] = item_bytes(one.namespace, one.key, one.value, created, stamp, one.index)
                made[path] = one
            said.clear()
            said.update(_trailers(made, trailers))
            return found

        scope = next(iter(latest)) if len(latest) == 1 else layout.STORE
        return self.engine.update(changes, lambda: _message(made), said, scope=scope)


def _message(made: Mapping[str, Write]) -> str:
    if len(made) == 1:
        (path, one), = made.items()
        name = _name(path, one)
        return f"store: {'delete' if one.value is None else 'put'} {printable(name.removeprefix('store:'))}"
    deletes = sum(one.value is None for one in made.values())
    parts = [f"{len(made) - deletes} put" + ("s" if len(made) - deletes != 1 else ""),
             f"{deletes} delete" + ("s" if deletes != 1 else "")]
    return f"store: {', '.join(part for part in parts if not part.startswith('0 '))}"


def _trailers(made: Mapping[str, Write], extra: Mapping[str, str] | None) -> dict[str, str]:
    if len(made) == 1:
        (path, one), = made.items()
        return record_trailers("store.delete" if one.value is None else "store.put",
                               _name(path, one), extra)
    return record_trailers("store.write", None, extra)


def _name(path: str, one: Write) -> str:
    return layout.record_name(path, (*one.namespace, one.key))


def _folder(prefix: Sequence[str]) -> str:
    if isinstance(prefix, str):
        raise InvalidInput(f"a namespace prefix is a tuple of strings, not {prefix!r}")
    for part in prefix:
        if not isinstance(part, str) or not part:
            raise InvalidInput(f"namespace parts must be strings, none empty: {tuple(prefix)!r}")
    return "/".join([layout.STORE, *(encode(part) for part in prefix)])


def _check_value(value: Any, index: Any) -> None:
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInput(f"an item's value must be a mapping (a dict), not {type(value).__name__}")
    if not (index is None or index is False or (isinstance(index, (list, tuple))
                                                and all(isinstance(path, str) for path in index))):
        raise InvalidInput(f"index must be None, False or a list of field paths, not {index!r}")


def _read(head: Snapshot, path: str, *, quiet: bool = False) -> StoredItem | None:
    """The item in file ``path`` of ``head``, its namespace and key those its path names
    (those the file holds when the path was cut to fit); None: no item's file there."""
    try:
        item = head.read_parsed(path, parse_item)
    except ValueError as exc:
        if not quiet:
            log.warning("%s is not a store item's file and is left out: %s", path, exc)
        return None
    if item is None:
        return None
    try:
        parts = tuple(decode(part) for part in path[len(layout.STORE) + 1:-len(layout.ITEM_SUFFIX)].split("/"))
    except UndecodableId:
        if layout.item_path(item.namespace, item.key) == path:
            return item
        if not quiet:
            log.warning("%s names a namespace and key whose file is elsewhere: left out", path)
        return None
    if parts[:-1] != item.namespace or parts[-1] != item.key:  # moved or renamed by hand
        return item._replace(namespace=parts[:-1], key=parts[-1])
    return item
