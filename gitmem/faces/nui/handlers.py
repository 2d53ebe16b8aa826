"""nui's storage-handler list (`storage-handlers.yaml`).

Loads and validates it by nui's own rules, checks each call's handler against it,
and edits it (YAML round-trip) keeping the user's comments, order, quoting and
sequence indentation. The file may be JSON; one ending in `.json` is written as JSON.
"""

from __future__ import annotations

import io
import json
import os
from collections import namedtuple
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING

from gitmem.errors import GitmemError
from gitmem.faces.rpc import InvalidParams

if TYPE_CHECKING:  # ruamel.yaml is imported where a file is read or written: a server
    from ruamel.yaml import YAML  # without a handler list (kaboo's) never loads it

KINDS = ("sessionHistory", "agentMemory", "userMemory")
DEFAULT_FILE = "storage-handlers.yaml"

# The kinds that route by agent, and the call param nui matches against agentTypes.
_AGENT_PARAMS = {"sessionHistory": "agentType", "agentMemory": "agentId"}
# nui trims agent ids and agentTypes entries with Go's strings.TrimSpace before
# comparing them; these are the characters Go's unicode.IsSpace accepts.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


class HandlerConfigError(GitmemError):
    """A handler list that nui would refuse, or that cannot be read or edited."""


class Handler(namedtuple("Handler", "id kind agent_types", defaults=((),))):
    """One entry of the list: its ``id``, ``kind`` and ``agent_types`` (a tuple)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The entry as nui writes it (`agentTypes` only when there are some)."""
        entry: dict[str, Any] = {"id": self.id, "kind": self.kind}
        if self.agent_types:
            entry["agentTypes"] = list(self.agent_types)
        return entry


class HandlerTable:
    """The handlers a server takes calls for: `handlers`, or every one when that is None."""

    def __init__(self, handlers: Iterable[Handler] | None = None) -> None:
        self.handlers = None if handlers is None else tuple(handlers)

    def check(self, handler_id: str, kind: str, agent: str | None = None) -> None:
        """Raise `InvalidParams` unless a handler `handler_id` of `kind` serves `agent`.

        `agent` is the call's agentType (sessionHistory) or agentId (agentMemory),
        matched the way nui matches it; it is ignored for userMemory. Ids need not be
        unique in the list, so any entry with the id may fit.
        """
        if self.handlers is None:
            return
        same_id = [h for h in self.handlers if h.id == handler_id]
        if not same_id:
            raise InvalidParams(f"unknown handlerId {_quoted(handler_id)}", {"param": "handlerId"})
        fitting = [h for h in same_id if h.kind == kind]
        if not fitting:
            kinds = " and ".join(sorted({h.kind for h in same_id}))
            raise InvalidParams(
                f"handler {_quoted(handler_id)} is for {kinds}, not {kind}", {"param": "handlerId"}
            )
        name = _AGENT_PARAMS.get(kind)
        if name is not None and not any(_serves(h, agent) for h in fitting):
            raise InvalidParams(
                f"{name} {_quoted(agent)} is not in the agentTypes of handler {_quoted(handler_id)}",
                {"param": name},
            )


def load_handlers(path: str | os.PathLike[str]) -> HandlerTable:
    """Read and validate the handler list at `path`; raise `HandlerConfigError` naming the entry."""
    path = Path(path)
    return HandlerTable(_validate(_read(path)[0], path))


def find_handlers_file(explicit: str | os.PathLike[str] | None, env: Mapping[str, str] = os.environ) -> Path | None:
    """The handler list to use: `explicit` (from `--handlers`) if given; else, in
    the extension folder (`$NUI_EXTENSION_DIR`, or `$LOOP_EXTENSION_DIR` from loop-era
    nui builds), the file its `extension.yaml` names in
    `contributions.storage.source.file` or `storage-handlers.yaml`, whichever exists
    first; else None (no list: every handler id is accepted)."""
    if explicit:
        return Path(explicit)
    folder = env.get("NUI_EXTENSION_DIR") or env.get("LOOP_EXTENSION_DIR")
    if not folder:
        return None
    directory = Path(folder)
    names = [_manifest_source(directory), DEFAULT_FILE]
    return next((directory / name for name in names if name and (directory / name).is_file()), None)


def add_handler(
    path: str | os.PathLike[str], handler_id: str, kind: str, agent_types: Iterable[str] = ()
) -> Handler:
    """Append an entry to the list at `path` (created if missing) and return it.

    Comments, order and quoting of the rest of the file are kept. Raises
    `HandlerConfigError`, leaving the file as it was, if the id is already listed or
    the result would not be a valid list.
    """
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString
    path = Path(path)
    if path.exists():
        doc, style = _read(path)
    else:
        doc, style = CommentedMap(storageHandlers=CommentedSeq()), (None, None)
    entries = _entries(doc, path)
    if any(isinstance(e, Mapping) and e.get("id") == handler_id for e in entries):
        raise HandlerConfigError(f"{path}: handler {_quoted(handler_id)} is already listed")
    entry = CommentedMap(id=handler_id, kind=kind)
    agent_types = list(agent_types)
    if agent_types:
        # Quoted like nui's own example: a plain `[ext:corp/reviewer]` is not safe for
        # every YAML parser.
        entry["agentTypes"] = CommentedSeq(DoubleQuotedScalarString(t) for t in agent_types)
        entry["agentTypes"].fa.set_flow_style()
    entries.append(entry)
    return _write(path, doc, style)[-1]


def remove_handler(path: str | os.PathLike[str], handler_id: str) -> int:
    """Remove every entry with `handler_id` from the list at `path`; return how many.

    Raises `HandlerConfigError` if there is none or the result would be invalid.
    """
    path = Path(path)
    doc, style = _read(path)
    entries = _entries(doc, path)
    doomed = [i for i, e in enumerate(entries) if isinstance(e, Mapping) and e.get("id") == handler_id]
    if not doomed:
        raise HandlerConfigError(f"{path}: no handler {_quoted(handler_id)}")
    for i in reversed(doomed):
        del entries[i]
    _write(path, doc, style)
    return len(doomed)


def _serves(handler: Handler, agent: str | None) -> bool:
    agent = (agent or "").strip(_GO_SPACE)
    return bool(agent) and any(t.strip(_GO_SPACE) == agent for t in handler.agent_types)


def _entries(doc: Any, source: Path) -> list:
    if not isinstance(doc, MutableMapping) or "storageHandlers" not in doc:
        raise HandlerConfigError(f"{source}: expected a top-level storageHandlers list")
    if doc["storageHandlers"] is None:  # `storageHandlers:` with every entry commented out
        from ruamel.yaml.comments import CommentedSeq
        doc["storageHandlers"] = CommentedSeq()
    if not isinstance(doc["storageHandlers"], list):
        raise HandlerConfigError(f"{source}: storageHandlers must be a list")
    return doc["storageHandlers"]


def _validate(doc: Any, source: Path) -> list[Handler]:
    handlers = []
    for i, entry in enumerate(_entries(doc, source)):
        where = f"{source}: storageHandlers[{i}]"
        if not isinstance(entry, Mapping):
            raise HandlerConfigError(f"{where}: expected a mapping with id and kind")
        handler_id, kind, agent_types = entry.get("id"), entry.get("kind"), entry.get("agentTypes")
        if not isinstance(handler_id, str) or not handler_id.strip(_GO_SPACE):
            raise HandlerConfigError(f"{where}: id is required and must be a string")
        where += f" (id {_quoted(handler_id)})"
        if kind not in KINDS:
            raise HandlerConfigError(f"{where}: kind must be one of {', '.join(KINDS)}, not {_quoted(kind)}")
        if agent_types is not None and not (
            isinstance(agent_types, list) and all(isinstance(t, str) for t in agent_types)
        ):
            raise HandlerConfigError(f"{where}: agentTypes must be a list of strings")
        if kind in _AGENT_PARAMS and not agent_types:
            raise HandlerConfigError(f"{where}: {kind} requires a non-empty agentTypes list")
        if kind == "userMemory" and agent_types:
            raise HandlerConfigError(f"{where}: userMemory must not have agentTypes")
        handlers.append(Handler(str(handler_id), str(kind), tuple(str(t) for t in agent_types or ())))
    return handlers


def _yaml() -> YAML:
    from ruamel.yaml import YAML
    yaml = YAML()  # round-trip: keeps comments, order and quotes
    yaml.preserve_quotes = True
    yaml.width = 4096  # never fold a long line
    return yaml


def _read(path: Path) -> tuple[Any, tuple[int | None, int | None]]:
    """The parsed file and its guessed YAML indentation (sequence indent, dash offset)."""
    from ruamel.yaml.error import YAMLError
    from ruamel.yaml.util import load_yaml_guess_indent
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise HandlerConfigError(f"{path}: cannot read: {error}") from None
    try:  # JSON is YAML too, for this purpose
        doc, indent, dash_offset = load_yaml_guess_indent(text, yaml=_yaml())
        return doc, (indent, dash_offset)
    except YAMLError as error:
        raise HandlerConfigError(f"{path}: cannot parse: {error}") from None


def _write(path: Path, doc: Any, style: tuple[int | None, int | None]) -> list[Handler]:
    """Write `doc` in place if its text reads back as the same valid list; return that list."""
    if path.suffix.lower() == ".json":
        text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    else:
        indent, dash_offset = style
        yaml = _yaml()
        yaml.indent(mapping=2, sequence=indent or 4, offset=2 if dash_offset is None else dash_offset)
        stream = io.StringIO()
        yaml.dump(doc, stream)
        text = stream.getvalue()
    expected = _validate(doc, path)
    if _validate(_yaml().load(text), path) != expected:
        raise HandlerConfigError(f"{path}: the edited file would not read back as written")
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return expected


def _quoted(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 100 else text[:100] + '..."'


def _manifest_source(directory: Path) -> str | None:
    """`contributions.storage.source.file` of the extension.yaml in `directory`, if any."""
    manifest = directory / "extension.yaml"
    if not manifest.is_file():
        return None
    source: Any = _read(manifest)[0]
    for key in ("contributions", "storage", "source", "file"):
        source = source.get(key) if isinstance(source, Mapping) else None
    return source if isinstance(source, str) and source else None
