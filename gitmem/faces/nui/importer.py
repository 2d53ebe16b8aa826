"""Moving in from nui's built-in storage, and back: ``gitmem import nui``, ``gitmem export nui``.

nui keeps (see ``shared/reference/nui-host-behaviour.md``):

    $NUI_DATA_DIR/data.json          {"sessions": [{id, name, workingDir, agentType, createdAt, ...}],
                                      "agentSessions": {"<sessionId>": "<agentSessionId>",
                                                        "<sessionId>#<subAgentId>": "..."},
                                      "sessionMessages": {"<sessionId>": [message, ...]}}
    $NUI_DATA_DIR/memory/user.md
    $NUI_DATA_DIR/memory/agents/<name>.md   name = the agent id with every run of
                                            [^a-zA-Z0-9._-] replaced by "-" (lossy)

A session is imported with its agent type, messages, agentSessionId and workingDir;
its ``sessions`` entry is kept verbatim in the session metadata (``nuiSession``) and
its sub-agent resume ids in ``subAgentSessions``. An agent memory file goes to the
agent id, seen in data.json or in the repository, whose sanitised form is its name;
without one the file name is the id, and the import says so.

Each changed record is one commit; a record that already holds the same content is
left alone, so a second import adds nothing, and an import of an export is a no-op.

    plan = import_nui(mem, "~/.nui", dry_run=True)
    for action in plan.changes:
        print(action)                 # "add session claude-code/6f1c... (12 messages)"
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitmem.errors import GitmemError
from gitmem.git.files import write_private
from gitmem.records import strictjson
from gitmem.records.counts import counted
from gitmem.stores.memory import normalise

if TYPE_CHECKING:
    from gitmem.repository import Gitmem

ENV_DATA_DIR = "NUI_DATA_DIR"
DATA_FILE = "data.json"
USER_MEMORY = "memory/user.md"
AGENT_MEMORY = "memory/agents"
SESSION_ENTRY = "nuiSession"
SUB_AGENTS = "subAgentSessions"
_UNSAFE_RUN = re.compile(r"[^a-zA-Z0-9._-]+")
_PLURALS = {"session": "sessions", "user memory": "user memory", "agent memory": "agent memories"}

Progress = Callable[[int, int], None]


class NuiDataError(GitmemError, ValueError):
    """A nui data folder that cannot be read; the message names the file and the problem."""


def default_data_dir() -> Path:
    """``$NUI_DATA_DIR``, else ``~/.nui``."""
    return Path(os.environ.get(ENV_DATA_DIR) or Path.home() / ".nui").expanduser()


def sanitise(agent_id: str) -> str:
    """nui's file name for an agent's memory (without ``.md``)."""
    return _UNSAFE_RUN.sub("-", agent_id)


@dataclasses.dataclass
class Action:
    """One record an import adds or updates (or finds unchanged)."""

    kind: str  # "session", "user memory" or "agent memory"
    name: str  # how the CLI names the record
    change: str  # "add", "update" or "unchanged"
    detail: str = ""
    apply: Callable[[], Any] = dataclasses.field(default=lambda: None, repr=False, compare=False)

    def __str__(self) -> str:
        name = f" {self.name}" if self.name else ""
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.change} {self.kind}{name}{detail}"


@dataclasses.dataclass
class ImportPlan:
    """What an import does (or, in a dry run, would do), and what it wants the user to know."""

    actions: list[Action] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def changes(self) -> list[Action]:
        return [a for a in self.actions if a.change != "unchanged"]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for action in self.changes:
            counts[action.kind] = counts.get(action.kind, 0) + 1
        parts = [counted(n, kind, _PLURALS[kind]) for kind, n in counts.items()]
        unchanged = len(self.actions) - len(self.changes)
        return f"{', '.join(parts) or 'nothing'} ({unchanged} unchanged)"


# -- import -----------------------------------------------------------------------


def import_nui(mem: Gitmem, data_dir: str | os.PathLike | None = None, *, dry_run: bool = False,
               progress: Progress | None = None) -> ImportPlan:
    """Import nui's sessions, user memory and agent memory from ``data_dir`` (default
    :func:`default_data_dir`); with ``dry_run`` only work out what would change."""
    plan = plan_import(mem, data_dir)
    if not dry_run:
        todo = plan.changes
        for done, action in enumerate(todo, 1):
            action.apply()
            if progress is not None:
                progress(done, len(todo))
    return plan


def plan_import(mem: Gitmem | None, data_dir: str | os.PathLike | None = None) -> ImportPlan:
    """What :func:`import_nui` would do, without writing anything (``mem`` None: into a
    repository that does not exist yet)."""
    folder = data_folder(data_dir)
    data = _load_data(folder / DATA_FILE)
    plan = ImportPlan()
    snapshot = mem.engine.snapshot() if mem is not None else None
    trailers = {"Gitmem-Op": "import.nui", "Gitmem-Source": str(folder)}
    agent_types = _plan_sessions(mem, snapshot, data, plan, trailers)
    _plan_memory(mem, snapshot, folder, agent_types, plan, trailers)
    return plan


def data_folder(data_dir: str | os.PathLike | None = None) -> Path:
    """nui's data folder ``data_dir`` (default :func:`default_data_dir`); raises
    :class:`NuiDataError` when it is missing or holds none of nui's files (a mistyped path
    imports nothing, and says so)."""
    folder = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    if not folder.is_dir():
        raise NuiDataError(f"no nui data folder at {folder}")
    if not any((folder / name).exists() for name in (DATA_FILE, USER_MEMORY, AGENT_MEMORY)):
        raise NuiDataError(f"{folder} holds no nui data (no {DATA_FILE}, {USER_MEMORY} or "
                           f"{AGENT_MEMORY}/): give nui's data folder (${ENV_DATA_DIR}, else ~/.nui)")
    return folder


def _load_data(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = strictjson.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise NuiDataError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise NuiDataError(f"{path} does not hold a JSON object")
    for key, kind in (("sessions", list), ("agentSessions", dict), ("sessionMessages", dict)):
        if data.get(key) is not None and not isinstance(data[key], kind):
            raise NuiDataError(f"{path}: {key!r} is not a JSON {kind.__name__}")
    return data


def _plan_sessions(mem: Gitmem | None, snapshot, data: Mapping[str, Any], plan: ImportPlan,
                   trailers: dict[str, str]) -> set[str]:
    """Add an action per session; returns the agent types data.json mentions."""
    resume_ids = data.get("agentSessions") or {}
    all_messages = data.get("sessionMessages") or {}
    entries: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(data.get("sessions") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            plan.notes.append(f"sessions[{i}] has no string id; skipped")
            continue
        entries[entry["id"]] = entry
    for session_id in all_messages:
        if session_id not in entries:
            plan.notes.append(f"session {session_id} has messages but no entry in 'sessions' "
                              "(so no agent type); skipped")
    subs: dict[str, dict[str, str]] = {}
    for key, value in resume_ids.items():
        session_id, sep, sub = key.partition("#")
        if sep:
            subs.setdefault(session_id, {})[sub] = value
    agent_types = set()
    for session_id, entry in entries.items():
        agent_type = entry.get("agentType")
        if not isinstance(agent_type, str) or not agent_type.strip() or not session_id.strip():
            plan.notes.append(f"session {session_id!r} has no agent type or an empty id; skipped")
            continue
        agent_types.add(agent_type)
        messages = all_messages.get(session_id) or []
        if not isinstance(messages, list):
            plan.notes.append(f"session {session_id}: its messages are not a list; skipped")
            continue
        source = {
            "messages": messages,
            "agentSessionId": str(resume_ids.get(session_id) or ""),
            "workingDir": str(entry.get("workingDir") or ""),
            "subs": subs.get(session_id, {}),
            "entry": entry,
        }
        plan.actions.append(_session_action(mem, snapshot, agent_type, session_id, source, trailers))
    return agent_types


def _session_action(mem: Gitmem | None, snapshot, agent_type: str, session_id: str,
                    source: dict[str, Any], trailers: dict[str, str]) -> Action:
    name = f"{agent_type}/{session_id}"
    meta = mem.sessions.meta(agent_type, session_id, snapshot=snapshot) if mem else None
    count = counted(len(source["messages"]), "message")
    if mem is None or meta is None:
        change = "add"
    else:
        stored, agent_session_id = mem.sessions.read(agent_type, session_id, snapshot=snapshot)
        same = (strictjson.same_json(stored, source["messages"])
                and agent_session_id == source["agentSessionId"]
                and meta.get("workingDir", "") == source["workingDir"]
                and strictjson.same_json(meta.get(SUB_AGENTS) or {}, source["subs"])
                and strictjson.same_json(session_entry(agent_type, session_id, meta), source["entry"]))
        change = "unchanged" if same else "update"
    extra: dict[str, Any] = {SUB_AGENTS: source["subs"], SESSION_ENTRY: source["entry"]}

    def apply() -> None:
        assert mem is not None  # a plan made for no repository is shown, never applied
        mem.sessions.write(agent_type, session_id, source["messages"], source["agentSessionId"],
                           source["workingDir"], extra_meta=extra, trailers=trailers)

    return Action("session", name, change, count, apply)


def _plan_memory(mem: Gitmem | None, snapshot, folder: Path, agent_types: set[str], plan: ImportPlan,
                 trailers: dict[str, str]) -> None:
    user_file = folder / USER_MEMORY
    if user_file.is_file():
        plan.actions.append(_memory_action(mem, snapshot, None, _read_text(user_file),
                                           "user memory", "", trailers))
    agents_dir = folder / AGENT_MEMORY
    if not agents_dir.is_dir():
        return
    known = set(agent_types)
    if mem is not None:
        known |= set(mem.memory.agents(snapshot=snapshot)) | {
            agent_type for agent_type, _ in mem.sessions.list(snapshot=snapshot)}
    for file in sorted(agents_dir.glob("*.md")):
        if not file.stem.strip():
            plan.notes.append(f"agent memory {file.name!r} names no agent; skipped")
            continue
        agent_id = _agent_id(file.stem, known, plan)
        detail = f"from {file.name}" if agent_id != file.stem else ""
        plan.actions.append(_memory_action(mem, snapshot, agent_id, _read_text(file),
                                           "agent memory", detail, trailers))


def _agent_id(name: str, known: set[str], plan: ImportPlan) -> str:
    """The agent id whose sanitised form is ``name``; ``name`` itself when none or several."""
    if name in known:
        return name
    matches = sorted(agent_id for agent_id in known if sanitise(agent_id) == name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        plan.notes.append(f"agent memory {name}.md could be any of {', '.join(matches)}; "
                          f"imported as agent id {name!r}")
    else:
        plan.notes.append(f"agent memory {name}.md: no agent id seen in data.json or the "
                          f"repository sanitises to {name!r}; imported as agent id {name!r}")
    return name


def _memory_action(mem: Gitmem | None, snapshot, agent_id: str | None, content: str, kind: str,
                   detail: str, trailers: dict[str, str]) -> Action:
    current = mem.memory.read(agent_id, snapshot=snapshot) if mem else ""
    if normalise(content) == current:
        change = "unchanged"
    else:
        change = "update" if current else "add"

    def apply() -> None:
        assert mem is not None  # a plan made for no repository is shown, never applied
        mem.memory.write(content, agent_id, "replace", trailers=trailers)

    return Action(kind, agent_id or "", change, detail, apply)


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "surrogateescape")


def session_entry(agent_type: str, session_id: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The session's entry in data.json's ``sessions``: the imported one, updated with
    the stored workingDir, else one made from the metadata."""
    entry = dict(meta.get(SESSION_ENTRY) or {"id": session_id, "name": "",
                                             "workingDir": meta.get("workingDir", ""),
                                             "agentType": agent_type,
                                             "createdAt": meta.get("createdAt", "")})
    for key, value in (("id", session_id), ("workingDir", meta.get("workingDir", "")),
                       ("agentType", agent_type)):
        if key in entry or value:
            entry[key] = value
    return entry


# -- export -----------------------------------------------------------------------


@dataclasses.dataclass
class ExportReport:
    sessions: int = 0
    agent_memories: int = 0
    user_memory: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)


def export_nui(mem: Gitmem, out_dir: str | os.PathLike, *,
               progress: Progress | None = None, force: bool = False) -> ExportReport:
    """Write every session and memory to ``out_dir`` in nui's formats.

    An existing ``data.json`` keeps its other keys and the sessions gitmem does not
    hold; other files already in ``out_dir`` are left alone. A file export did not
    write (nui's own memory; a data.json session gitmem holds too, with another entry,
    other messages or another resume id)
    is never replaced: :class:`NuiDataError` names them all and nothing is written, or,
    with ``force``, each is kept beside the new one as ``NAME.before-export`` and a
    note says where. What an export wrote is listed in ``.gitmem-export.json`` (each
    file's SHA-256), so the next export replaces it while it is unchanged.
    """
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise NuiDataError(f"{out} is a file, not a folder: export into a folder")
    report = ExportReport()
    snapshot = mem.engine.snapshot()
    data_path = out / DATA_FILE
    data = _load_data(data_path)
    sessions = mem.sessions.list(snapshot=snapshot)
    exported: list[tuple[str, dict[str, Any]]] = []
    resume_ids: dict[str, str] = {}
    all_messages: dict[str, Any] = {}
    for done, (agent_type, session_id) in enumerate(sessions, 1):
        meta = mem.sessions.meta(agent_type, session_id, snapshot=snapshot) or {}
        messages, agent_session_id = mem.sessions.read(agent_type, session_id, snapshot=snapshot)
        entry = session_entry(agent_type, session_id, meta)
        exported.append((str(entry.get("createdAt") or meta.get("createdAt") or ""), entry))
        if agent_session_id:
            resume_ids[session_id] = agent_session_id
        for sub, value in (meta.get(SUB_AGENTS) or {}).items():
            resume_ids[f"{session_id}#{sub}"] = value
        all_messages[session_id] = messages
        if progress is not None:
            progress(done, len(sessions))
    ids = {entry["id"] for _, entry in exported}
    entries = {entry["id"]: entry for _, entry in exported}
    replaced = {k for k, v in (data.get("sessionMessages") or {}).items()
                if k in all_messages and not strictjson.same_json(v, all_messages[k])}
    replaced.update(s["id"] for s in data.get("sessions") or [] if isinstance(s, dict)
                    and s.get("id") in ids and not strictjson.same_json(s, entries[s["id"]]))
    replaced.update(k for k, v in (data.get("agentSessions") or {}).items()
                    if k in resume_ids and v != resume_ids[k])
    kept = [s for s in data.get("sessions") or [] if not (isinstance(s, dict) and s.get("id") in ids)]
    if kept:
        report.notes.append(f"kept {len(kept)} session(s) already in {data_path} that gitmem "
                            "does not hold")
    data["sessions"] = kept + [entry for _, entry in sorted(exported, key=lambda e: (e[0], e[1]["id"]))]
    data["agentSessions"] = {**{k: v for k, v in (data.get("agentSessions") or {}).items()
                                if k.partition("#")[0] not in ids}, **resume_ids}
    data["sessionMessages"] = {**{k: v for k, v in (data.get("sessionMessages") or {}).items()
                                  if k not in ids}, **all_messages}
    report.sessions = len(exported)
    files = {DATA_FILE: (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode(
        "utf-8", "surrogatepass")}

    user = mem.memory.read(None, snapshot=snapshot)
    if user:
        files[USER_MEMORY] = user.encode("utf-8", "surrogateescape")
        report.user_memory = True
    names, notes = _nui_file_names(mem.memory.agents(snapshot=snapshot))
    report.notes += notes
    for agent_id, name in names.items():
        content = mem.memory.read(agent_id, snapshot=snapshot)
        files[f"{AGENT_MEMORY}/{name}.md"] = content.encode("utf-8", "surrogateescape")
        report.agent_memories += 1
    _write_export(out, files, sorted(replaced), force, report)
    return report


def _nui_file_names(agent_ids: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """Each agent's memory file name in nui's folder (without ``.md``), and notes. nui's name
    (:func:`sanitise`) goes to the agent it names; the others sharing it, which nui cannot
    tell apart, get ``NAME.2``, ``NAME.3``... (the first free), so that none is lost."""
    groups: dict[str, list[str]] = {}
    for agent_id in sorted(agent_ids):
        groups.setdefault(sanitise(agent_id), []).append(agent_id)
    taken = set(groups)
    names: dict[str, str] = {}
    notes = []
    for name, ids in groups.items():
        ids.sort(key=lambda agent_id: agent_id != name)  # the agent whose id it is first
        names[ids[0]] = name
        moved, n = [], 1
        for agent_id in ids[1:]:
            n += 1
            while f"{name}.{n}" in taken:
                n += 1
            taken.add(f"{name}.{n}")
            names[agent_id] = f"{name}.{n}"
            moved.append(f"{agent_id!r} to {name}.{n}.md")
        if moved:
            notes.append(f"agents {', '.join(map(repr, ids))} share nui's file name {name}.md: "
                         f"wrote {ids[0]!r} there, {', '.join(moved)} (nui reads {name}.md for "
                         "every one of them)")
    return names, notes


EXPORT_LIST = ".gitmem-export.json"


def _write_export(out: Path, files: dict[str, bytes], replaced_sessions: list[str], force: bool,
                  report: ExportReport) -> None:
    """Write ``files`` (paths in ``out``), replacing only what an export wrote (see
    :func:`export_nui`); data.json, which an export merges into, counts as not its own
    when it would lose ``replaced_sessions``."""
    listed = _load_export_list(out / EXPORT_LIST)
    foreign = []
    for name, data in files.items():
        path = out / name
        if not path.is_file():
            continue
        old = path.read_bytes()
        if listed.get(name) == _sha256(old):  # as an export wrote it
            continue
        if name == DATA_FILE:
            if replaced_sessions:
                foreign.append(f"{path} (session{'s' if len(replaced_sessions) > 1 else ''} "
                               f"{', '.join(replaced_sessions)})")
        elif old != data:
            foreign.append(str(path))
    if foreign and not force:
        raise NuiDataError(f"export did not write {', '.join(foreign)}: nothing written (--force "
                           "keeps each beside the new one as NAME.before-export)")
    for entry in foreign:
        path = Path(entry.split(" (", 1)[0])
        kept = _free_name(path.with_name(path.name + ".before-export"))
        os.replace(path, kept)
        report.notes.append(f"kept the old {path} as {kept}")
    for name, data in files.items():
        _write(out / name, data)
    _write(out / EXPORT_LIST, (json.dumps({**listed, **{name: _sha256(data) for name, data in
                                                         files.items()}}, indent=2) + "\n").encode())


def _load_export_list(path: Path) -> dict[str, str]:
    try:
        listed = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return listed if isinstance(listed, dict) else {}


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _free_name(path: Path) -> Path:
    """``path``, or ``path.1``, ``path.2``... the first that does not exist."""
    found, n = path, 0
    while found.exists():
        n += 1
        found = path.with_name(f"{path.name}.{n}")
    return found


def _write(path: Path, data: bytes) -> None:
    """Write a file atomically, private to the user as nui's own files are."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_private(path, data)
