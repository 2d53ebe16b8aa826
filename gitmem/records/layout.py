"""Where each record lives in the repository (a public contract: see docs/layout.md).

    memory/user.md
    memory/agents/<agentId>.md
    memory/<path>        a note: any other file under memory/ (what a model keeps with
                         Claude's memory tool as /memories/<path>; see gitmem.stores.memory_tree)
    sessions/<agentType>/<sessionId>/meta.json, messages/NNNNNN.jsonl,
        messages/blobs/<sha256>.<ext> (images, see gitmem.stores.blobs)
    threads/<threadId>/meta.json, events/NNNNNN.jsonl, messages/NNNNNN.jsonl
    store/<namespace part>/.../<key>.json   an item of a key-value store (LangGraph's
                         BaseStore: gitmem.langgraph), one file each (see gitmem.records.items)

Ids are encoded with :mod:`gitmem.records.ids`. Records are named the same way in every
history command: ``user``, ``agent:<id>``, ``note:<path>`` (``memory/<path>``),
``session:<agentType>/<sessionId>``, ``thread:<threadId>``, ``store:<namespace>/<key>``
(the namespace's parts and the key joined by ``/``); a memory file may also be
named by its memory-tool path, ``/memories/<path>``, and a session or thread by its path
(``sessions/claude-code/a%2fb``), and an item by its path (``store/a%2fb/k.json``): a listing names a record by its ids when that name leads
back to it (:func:`record_name`), else by its path.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Sequence

from gitmem.errors import GitmemError, InvalidInput
from gitmem.records.ids import EmptyId, UndecodableId, check, decode, encode

MEMORY = "memory"
USER_MEMORY = "memory/user.md"
AGENT_MEMORY = "memory/agents"
MEMORIES = "/memories"  # the folder memory/ as Claude's memory tool names it
SESSIONS = "sessions"
THREADS = "threads"
STORE = "store"  # the items of key-value stores: store/<namespace part>/.../<key>.json
ITEM_SUFFIX = ".json"  # of an item's file
META = "meta.json"
JSONL_SUFFIX = ".jsonl"  # of a log's chunks
MESSAGES = "messages"  # the folder of a session's or a thread's messages, in the record's folder
EVENTS = "events"  # the folder of a thread's AG-UI events, in its folder
NAMESPACE = "gitmem:"  # how a string gitmem puts into a log starts (an image's blob reference)
TOP_FOLDERS = (MEMORY, SESSIONS, THREADS, STORE)
ALLOW_SECRETS_FILE = ".gitmem-allow-secrets"  # at the top: values `gitmem sync` may push (gitmem.sync.secrets)


def agent_memory_path(agent_id: str) -> str:
    """Raises :class:`~gitmem.records.ids.EmptyId` for an empty id, as the other paths do, naming
    the parameter of the Python API that takes it (``agent_id``; the wire names its own)."""
    return f"{AGENT_MEMORY}/{encode(check(agent_id, 'agent_id'))}.md"


def session_dir(agent_type: str, session_id: str) -> str:
    return (f"{SESSIONS}/{encode(check(agent_type, 'agent_type'))}/"
            f"{encode(check(session_id, 'session_id'))}")


def thread_dir(thread_id: str) -> str:
    return f"{THREADS}/{encode(check(thread_id, 'thread_id'))}"


def item_path(namespace: Sequence[str], key: str) -> str:
    """The file of item ``key`` in ``namespace`` (one or more parts, none empty; the key may
    be any string, "" too): each part a folder, the key the file's name, all encoded."""
    if isinstance(namespace, str) or not namespace:
        raise InvalidInput(f"namespace must be a tuple of one or more strings, not {namespace!r}")
    for part in namespace:
        if not isinstance(part, str) or not part:
            raise InvalidInput(f"namespace parts must be strings, none empty: {tuple(namespace)!r}")
    if not isinstance(key, str):
        raise InvalidInput(f"key must be a string, not {type(key).__name__}")
    return f"{STORE}/{'/'.join(encode(part) for part in namespace)}/{encode(key)}{ITEM_SUFFIX}"


def chunk_files(folder: str, paths: Iterable[str]) -> list[str]:
    """The chunk files of the log in ``folder`` among ``paths``: those right in it whose
    name ends :data:`JSONL_SUFFIX`, in the order they are read."""
    start = len(folder) + 1
    return sorted(path for path in paths if path.startswith(f"{folder}/") and "/" not in path[start:]
                  and path.endswith(JSONL_SUFFIX))


class BadRecordName(GitmemError, ValueError):
    """A record name that is none of the forms."""


class Record(namedtuple("Record", "kind ids path")):  # not typing's: 4 ms of a warm search
    """A record as history commands name it (``kind``: "user", "agent", "note", "session",
    "thread" or "store"; ``ids``, a tuple of its ids: a store item's namespace parts, then its
    key), and the ``path`` (file or folder) that holds it."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The name listings show and commands take (:func:`record_name`)."""
        if self.is_memory:  # memory_record chose the kind: the name leads back
            return _id_name(self.kind, self.ids)
        return record_name(self.path, self.ids)

    @property
    def is_memory(self) -> bool:
        """True for a markdown memory (user, agent or note): one file, not a folder."""
        return self.kind in ("user", "agent", "note")

    @property
    def is_file(self) -> bool:
        """True for a record held in one file (a memory, a store item), False for a folder."""
        return self.is_memory or self.kind == "store"


def _id_name(kind: str, ids: tuple[str, ...]) -> str:
    if kind == "user":
        return "user"
    if kind == "store":
        return f"store:{'/'.join(ids)}"
    return f"session:{ids[0]}/{ids[1]}" if kind == "session" else f"{kind}:{ids[0]}"


def parse_record(name: str) -> Record:
    """Parse ``user``, ``agent:<id>``, ``note:<path>``, ``session:<agentType>/<sessionId>``,
    ``thread:<id>`` or a memory-tool path ``/memories/<path>``.

    An agent type may itself hold a ``/`` (``ext:corp/reviewer``), so a session name is
    split at its last ``/``; a session whose id holds one is named by its path.
    """
    if name == "user":
        return Record("user", (), USER_MEMORY)
    if name.startswith(MEMORIES + "/"):
        return memory_record(name[len(MEMORIES) + 1:])
    if name.startswith((f"{SESSIONS}/", f"{THREADS}/")):
        return _record_at(name)
    if name.startswith(f"{STORE}/"):
        return _item_at(name)
    try:
        return _record_named(name)
    except EmptyId as exc:  # "agent:": said of the name, not of the Python API's parameter
        raise EmptyId(f"not a record name: {name!r} ({str(exc).replace('_', ' ')})") from None


def _record_named(name: str) -> Record:
    kind, sep, rest = name.partition(":")
    if sep and kind == "agent":
        return Record("agent", (rest,), agent_memory_path(rest))
    if sep and kind == "note":
        return memory_record(rest)
    if sep and kind == "thread":
        return Record("thread", (rest,), thread_dir(rest))
    if sep and kind == "session" and "/" in rest:
        agent_type, _, session_id = rest.rpartition("/")
        return Record("session", (agent_type, session_id), session_dir(agent_type, session_id))
    if sep and kind == "store" and "/" in rest:
        *namespace, key = rest.split("/")
        if all(namespace):
            return Record("store", (*namespace, key), item_path(namespace, key))
    raise BadRecordName(
        f"not a record name: {name!r} (use user, agent:<id>, note:<path>, "
        "session:<agentType>/<sessionId>, thread:<threadId>, store:<namespace>/<key> or a "
        "session's, thread's or store item's path, as listings show it)")


def record_name(path: str, ids: tuple[str, ...] | None = None) -> str:
    """The name of the record at ``path`` (as :func:`record_path` gives it) that
    :func:`parse_record` takes back to it: a memory file's (:func:`memory_record`); a
    session's or thread's by its ids (``ids``, else decoded from the path) when that name
    leads to ``path``, else ``path`` itself (an id too long for a folder name, a session id
    holding ``/``, a folder named by hand)."""
    if path.startswith(MEMORY + "/"):
        return memory_record(path[len(MEMORY) + 1:]).name
    if path.startswith(STORE + "/"):
        found = _item_at(path)
        name = _id_name("store", ids or found.ids) if ids or found.ids else path
        return name if _named_path(name) == path else path
    kind = _KINDS[path.split("/", 1)[0]]
    try:
        name = _id_name(kind, ids or tuple(decode(part) for part in path.split("/")[1:]))
        if parse_record(name).path == path:
            return name
    except (UndecodableId, ValueError):  # no id is encoded so (EmptyId is a ValueError too)
        pass
    return path


def _record_at(path: str) -> Record:
    """The session or thread whose path ``path`` is; its ids are decoded from it, none when
    its name is no id's encoding (a name cut to fit: its meta.json keeps them)."""
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or record_path(path) != path:
        raise BadRecordName(f"not the path of a session or thread: {path!r} "
                            "(sessions/<type>/<id>, threads/<id>)")
    try:
        return Record(_KINDS[parts[0]], tuple(decode(part) for part in parts[1:]), path)
    except UndecodableId:
        return Record(_KINDS[parts[0]], (), path)


_KINDS = {SESSIONS: "session", THREADS: "thread"}


def _named_path(name: str) -> str | None:
    """The path of the record ``name`` names (None: it names none)."""
    try:
        return parse_record(name).path
    except ValueError:  # BadRecordName, EmptyId, InvalidInput
        return None


def _item_at(path: str) -> Record:
    """The store item whose file is ``path``; its ids are decoded from the path, none when a
    part is no id's encoding (a name cut to fit: the file holds its namespace and key)."""
    if record_path(path) != path or not path.startswith(STORE + "/"):
        raise BadRecordName(f"not the path of a store item: {path!r} "
                            f"({STORE}/<namespace part>/.../<key>{ITEM_SUFFIX})")
    parts = path[len(STORE) + 1:-len(ITEM_SUFFIX)].split("/")
    try:
        return Record("store", tuple(decode(part) for part in parts), path)
    except UndecodableId:
        return Record("store", (), path)


def memory_record(relative: str) -> Record:
    """The record of file ``memory/<relative>``: ``user``, an agent's memory, or a note.
    ``relative`` must be a plain relative path (no empty, ``.`` or ``..`` part)."""
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts) or not note_name_ok(relative):
        raise BadRecordName(f"not a note: {relative!r} (use the path of a file under "
                            f"{MEMORIES}, like note:projects/plan.md)")
    path = f"{MEMORY}/{relative}"
    if path == USER_MEMORY:
        return Record("user", (), path)
    if len(parts) == 2 and parts[0] == "agents" and parts[1].endswith(".md"):
        try:
            agent = decode(parts[1][:-3])
        except UndecodableId:
            agent = None
        if agent is not None and agent_memory_path(agent) == path:
            return Record("agent", (agent,), path)
    return Record("note", (relative,), path)


def note_name_ok(path: str) -> bool:
    """False for a path no record can name: one holding a tab or line break (the record
    index's separators) or what UTF-8 cannot encode."""
    return not any(c in path for c in "\t\n\r\0") and _encodes(path)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Where records live: (folder, how many path segments name the record)
_RECORD_DEPTHS = ((SESSIONS, 3), (THREADS, 2))


def record_path(path: str) -> str | None:
    """The path of the record that file ``path`` belongs to (None: no record's)."""
    if path.startswith(MEMORY + "/"):  # user.md, agents/<id>.md or a note: a file each
        return path if note_name_ok(path) else None
    if path.startswith(STORE + "/"):  # an item a file, in a namespace of one part or more
        parts = path.split("/")
        plain = path.isascii() and not any(c in path for c in "\t\n\r")
        return path if (plain and len(parts) >= 3 and path.endswith(ITEM_SUFFIX)
                        and all(part not in ("", ".", "..") for part in parts)) else None
    for folder, depth in _RECORD_DEPTHS:
        if path.startswith(folder + "/"):
            parts = path.split("/", depth)
            if len(parts) < depth:
                return None
            found = "/".join(parts[:depth])
            # what a record name can never name (an encoded id is ASCII) stays out of the format
            return found if found.isascii() and not any(c in found for c in "\t\n\r") else None
    return None
