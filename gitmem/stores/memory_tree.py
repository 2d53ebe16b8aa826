"""The ``/memories`` tree of Claude's memory tool (``memory_20250818``) over the folder
``memory/``: ``/memories/user.md`` is the user's memory, ``/memories/agents/<id>.md`` an
agent's, and any other file a model makes there is a note, ``memory/<path>``.

The six commands (``view``, ``create``, ``str_replace``, ``insert``, ``delete``,
``rename``) answer with the texts of the Anthropic SDK's local-filesystem backend
(``anthropic.tools.memory.BetaLocalFilesystemMemoryTool``): the same listings, line
numbers and error texts, except where git gives a reason to differ (see docs/python.md):
a folder exists while it holds a file (git keeps no empty folder), and its size is shown
as a folder's on a local disk, 4K; a symbolic link is never followed; a path is read
from HEAD, after a hand edit of it is committed.

Each change is one commit, ``memories: <command> <path>``, with the command in its
trailers (``Gitmem-Op: memories.<command>``, ``Gitmem-Path``, ``Gitmem-New-Path`` for a
rename, ``Gitmem-Line`` for an insert); a command that changes nothing makes none. A
refused command raises :class:`MemoryToolError` with the text the model is given, and
writes nothing.

    tree = MemoryTree(engine)
    tree.create("/memories/notes/plan.md", "- ship it\\n").text
    # 'File created successfully at: /memories/notes/plan.md'
    tree.view("/memories").text
"""

from __future__ import annotations

import os
import posixpath
from collections import namedtuple
from collections.abc import Callable, Mapping

from gitmem.errors import InvalidInput
from gitmem.git.engine import GitEngine
from gitmem.git.snapshot import Snapshot
from gitmem.records import layout
from gitmem.records.ids import printable
from gitmem.records.meta import record_trailers

ROOT = layout.MEMORIES
MAX_LINES = 999999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
FOLDER_SIZE = 4096  # what a folder on a local disk shows as its size; git keeps none
LINK_MODE = 0o120000
Changes = dict[str, "bytes | None"]


class MemoryToolError(InvalidInput):
    """A command refused: its message is the answer the model is given."""


class Answer(namedtuple("Answer", "text commit", defaults=(None,))):
    """What a command answers (``text``), and the ``commit`` it made (None: none, for a read
    or no change)."""

    __slots__ = ()


class MemoryTree:
    """The memory tool's commands on ``memory/`` of one repository."""

    def __init__(self, engine: GitEngine):
        self.engine = engine

    # -- reads ------------------------------------------------------------------------

    def view(self, path: str, view_range: list[int] | None = None) -> Answer:
        """A folder's files two levels deep, or a file's lines numbered."""
        where = self._where(path)
        head = _unlinked(self.engine.snapshot(scope=where), where)
        kind = _kind(head, where)
        if kind is None:
            raise MemoryToolError(f"The path {path} does not exist. Please provide a valid path.")
        if kind == "tree":
            lines = [f"{_size(FOLDER_SIZE)}\t{path}"]
            lines += [f"{size}\t{path}/{name}" for size, name in _listing(head, where, "", 1)]
            return Answer(f"Here're the files and directories up to 2 levels deep in {path}, "
                          "excluding hidden items:\n" + "\n".join(lines))
        if kind != "blob":
            raise MemoryToolError(f"Unsupported file type for {path}")
        lines = _text(head, where, path).split("\n")
        if len(lines) > MAX_LINES:
            raise MemoryToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
        start = 1
        if view_range and len(view_range) == 2:
            first = max(1, view_range[0]) - 1
            end = len(lines) if view_range[1] == -1 else view_range[1]
            lines, start = lines[first:end], first + 1
        numbered = [f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines)]
        return Answer(f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered))

    # -- writes -----------------------------------------------------------------------

    def create(self, path: str, file_text: str, *, trailers: Mapping[str, str] | None = None) -> Answer:
        """A new file holding ``file_text`` as it is; an existing path is refused."""
        where = self._where(path)
        data = _encoded(file_text, "file_text")

        def changes(head: Snapshot) -> Changes:
            if _kind(head, where) is not None:
                raise MemoryToolError(f"File {path} already exists")
            _refuse_a_file_above(head, where, path)
            return {where: data}

        commit = self._commit("create", path, where, changes, trailers, scope=where,
                              record=_record(where))
        return Answer(f"File created successfully at: {path}", commit)

    def str_replace(self, path: str, old_str: str, new_str: str, *,
                    trailers: Mapping[str, str] | None = None) -> Answer:
        """``old_str``, which must occur once, replaced by ``new_str``; the lines around it
        are answered numbered."""
        where = self._where(path)
        _encoded(new_str, "new_str")
        found: list[str] = []

        def changes(head: Snapshot) -> Changes:
            content = self._file_text(head, where, path)
            count = content.count(old_str)
            if count == 0:
                raise MemoryToolError(f"No replacement was performed, old_str `{old_str}` did not "
                                      f"appear verbatim in {path}.")
            if count > 1:
                lines, start = [], 0
                while (at := content.find(old_str, start)) != -1:
                    lines.append(content[:at].count("\n") + 1)
                    start = at + 1
                raise MemoryToolError(f"No replacement was performed. Multiple occurrences of "
                                      f"old_str `{old_str}` in lines: {', '.join(map(str, lines))}. "
                                      "Please ensure it is unique")
            changed = content[:content.find(old_str)].count("\n")
            new = content.replace(old_str, new_str)
            found[:] = [new, str(changed)]
            return {where: new.encode("utf-8")}

        commit = self._commit("str_replace", path, where, changes, trailers, scope=where,
                              record=_record(where))
        new, changed = found[0], int(found[1])
        lines = new.split("\n")
        snippet = [f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{lines[n - 1]}"
                   for n in range(max(0, changed - 2) + 1, min(len(lines), changed + 3) + 1)]
        return Answer("The memory file has been edited. Here is the snippet showing the change "
                      "(with line numbers):\n" + "\n".join(snippet), commit)

    def insert(self, path: str, insert_line: int, insert_text: str, *,
               trailers: Mapping[str, str] | None = None) -> Answer:
        """``insert_text`` as lines after line ``insert_line`` (0: at the top)."""
        where = self._where(path)
        _encoded(insert_text, "insert_text")
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise MemoryToolError(f"Invalid `insert_line` parameter: {insert_line!r}. It should "
                                  "be a whole number.")

        def changes(head: Snapshot) -> Changes:
            lines = self._file_text(head, where, path).split("\n")
            if lines[-1] == "":
                lines.pop()
            if insert_line < 0 or insert_line > len(lines):
                raise MemoryToolError(f"Invalid `insert_line` parameter: {insert_line}. It should "
                                      f"be within the range [0, {len(lines)}].")
            lines.insert(insert_line, insert_text.rstrip("\n"))
            new = "\n".join(lines)
            return {where: (new if new.endswith("\n") else new + "\n").encode("utf-8")}

        commit = self._commit("insert", path, where, changes, trailers, scope=where,
                              record=_record(where), extra={"Gitmem-Line": str(insert_line)})
        return Answer(f"The file {path} has been edited.", commit)

    def delete(self, path: str, *, trailers: Mapping[str, str] | None = None) -> Answer:
        """A file, or a folder with everything in it."""
        where = self._where(path)
        if where == layout.MEMORY:
            raise MemoryToolError("Cannot delete the /memories directory itself")

        def changes(head: Snapshot) -> Changes:
            files = _files(head, where)
            if not files:
                raise MemoryToolError(f"The path {path} does not exist")
            return {file: None for file in files}

        one_file = _kind(self.engine.snapshot(), where) == "blob"
        commit = self._commit("delete", path, where, changes, trailers, scope=where,
                              record=_record(where) if one_file else None)
        return Answer(f"Successfully deleted {path}", commit)

    def rename(self, old_path: str, new_path: str, *,
               trailers: Mapping[str, str] | None = None) -> Answer:
        """A file or folder moved to ``new_path``, which must not exist yet."""
        old, new = self._where(old_path), self._where(new_path)
        if old == layout.MEMORY:
            raise MemoryToolError("Cannot rename the /memories directory itself")

        def changes(head: Snapshot) -> Changes:
            _unlinked(head, new)
            if _kind(head, new) is not None:
                raise MemoryToolError(f"The destination {new_path} already exists")
            files = _files(head, old)
            if not files:
                raise MemoryToolError(f"The path {old_path} does not exist")
            if new.startswith(old + "/"):
                raise MemoryToolError(f"Cannot move {old_path} into itself ({new_path})")
            _refuse_a_file_above(head, new, new_path)
            moved: Changes = {file: None for file in files}
            for file in files:
                moved[new + file[len(old):]] = head.read(file)
            return moved

        commit = self._commit("rename", old_path, old, changes, trailers, scope=layout.MEMORY,
                              record=None, extra={"Gitmem-New-Path": new_path},
                              subject=f"{old_path} to {new_path}")
        return Answer(f"Successfully renamed {old_path} to {new_path}", commit)

    # -- helpers ----------------------------------------------------------------------

    def _where(self, path: str) -> str:
        """The repository path of memory-tool path ``path``; a path outside ``/memories``
        is refused, as the SDK's local backend refuses it."""
        if not isinstance(path, str):
            raise MemoryToolError(f"Path must be a string, got: {path!r:.80}")
        if not path.startswith(ROOT) or path[len(ROOT):len(ROOT) + 1] not in ("", "/"):
            raise MemoryToolError(f"Path must start with /memories, got: {path}")
        relative = path[len(ROOT):].lstrip("/")
        if _escapes(relative):
            raise MemoryToolError(f"Path {path} would escape /memories directory")
        normal = posixpath.normpath(relative) if relative else "."
        where = layout.MEMORY if normal == "." else f"{layout.MEMORY}/{normal}"
        if "\\" in where or "\0" in where or ".git" in where.lower().split("/"):
            raise MemoryToolError(f"Path {path} is not a name git can keep (no backslash, NUL "
                                  "or .git)")
        try:
            where.encode("utf-8")
        except UnicodeEncodeError:
            raise MemoryToolError(f"path {path!r} is not valid utf-8") from None
        self._refuse_worktree_links(where, path)
        return where

    def _refuse_worktree_links(self, where: str, path: str) -> None:
        """A symbolic link on the way to ``where`` in the work tree (placed there, not yet
        committed) is refused as the SDK refuses one: with its text for a link that leads out
        of ``memory/``, and gitmem's own for one that stays inside (never followed)."""
        root = self.engine.worktree.path(layout.MEMORY)
        parts = where.split("/")
        for end in range(1, len(parts) + 1):
            current = self.engine.worktree.path("/".join(parts[:end]))
            if not os.path.islink(current):
                if not os.path.isdir(current):
                    return  # missing, or a file: the commands answer for it from HEAD
                continue
            inside, target = os.path.realpath(root), os.path.realpath(current)
            if end == 1 or os.path.commonpath([inside, target]) != inside:
                raise MemoryToolError(f"Path {path} would escape /memories directory")
            raise MemoryToolError("Path would escape /memories directory via symlink")

    def _file_text(self, head: Snapshot, where: str, path: str) -> str:
        kind = _kind(head, where)
        if kind is None:
            raise MemoryToolError(f"The path {path} does not exist. Please provide a valid path.")
        if kind != "blob":
            raise MemoryToolError(f"The path {path} is not a file.")
        return _text(head, where, path)

    def _commit(self, command: str, path: str, where: str, changes: Callable[[Snapshot], Changes],
                trailers: Mapping[str, str] | None, *, scope: str, record: str | None,
                extra: Mapping[str, str] | None = None, subject: str | None = None) -> str | None:
        """``changes`` made as one commit naming the command (and ``record``, the one file's
        record, in ``Gitmem-Id``); None: they change nothing."""
        return self.engine.update(
            lambda head: changes(_unlinked(head, where)),
            f"memories: {command} {printable(subject or path)}",
            record_trailers(f"memories.{command}", record,
                            {"Gitmem-Path": path, **(extra or {}), **(trailers or {})}),
            scope=scope)


def _record(where: str) -> str | None:
    """The name of the record of file ``where`` (None: a name no record can have)."""
    try:
        return layout.memory_record(where[len(layout.MEMORY) + 1:]).name
    except layout.BadRecordName:
        return None


def _unlinked(head: Snapshot, where: str) -> Snapshot:
    """``head``, once no part of ``where`` is found to be a symbolic link: gitmem follows
    none (where a link points on another clone is anyone's guess)."""
    parts = where.split("/")
    for end in range(2, len(parts) + 1):
        if _kind(head, "/".join(parts[:end])) == "link":
            raise MemoryToolError("Path would escape /memories directory via symlink")
    return head


def _escapes(relative: str) -> bool:
    """True when ``relative`` climbs out of its root with ``..``."""
    depth = 0
    for part in relative.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def _kind(head: Snapshot, where: str) -> str | None:
    """"tree", "blob", "link" (a symbolic link) or another git type; None: nothing there.
    ``memory/`` itself is always there (an empty tree shows its root)."""
    if where == layout.MEMORY:
        return "tree"
    entry = head.entry(where)
    if entry is None:
        return None
    if getattr(entry, "filemode", None) == LINK_MODE:
        return "link"
    return entry.type_str


def _files(head: Snapshot, where: str) -> list[str]:
    """The files at ``where``: itself, or every file under the folder."""
    kind = _kind(head, where)
    if kind is None:
        return []
    if kind == "tree":
        return list(head.files(where))
    return [where]


def _refuse_a_file_above(head: Snapshot, where: str, path: str) -> None:
    """A file cannot be made below a file: the SDK's mkdir would fail there."""
    parts = where.split("/")
    for end in range(2, len(parts)):
        above = "/".join(parts[:end])
        if _kind(head, above) not in (None, "tree"):
            raise MemoryToolError(f"The path {ROOT}/{'/'.join(parts[1:end])} is not a directory: "
                                  f"{path} cannot be made below it")


def _text(head: Snapshot, where: str, path: str) -> str:
    try:
        return (head.read(where) or b"").decode("utf-8")
    except UnicodeDecodeError:
        raise MemoryToolError(f"path {path!r} is not valid utf-8") from None


def _encoded(text: str, name: str) -> bytes:
    if not isinstance(text, str):
        raise MemoryToolError(f"`{name}` must be a string, got: {text!r:.80}")
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise MemoryToolError(f"`{name}` holds a lone surrogate at character {error.start}") from None


def _listing(head: Snapshot, folder: str, prefix: str, depth: int) -> list[tuple[str, str]]:
    """(size, name) of what ``folder`` holds, hidden names and links left out, two levels
    deep, sorted by name: as the SDK lists a folder."""
    found: list[tuple[str, str]] = []
    for name in sorted(head.list(folder)):
        if name.startswith("."):
            continue
        child = f"{folder}/{name}"
        shown = f"{prefix}{name}"
        kind = _kind(head, child)
        if kind == "tree":
            found.append((_size(FOLDER_SIZE), f"{shown}/"))
            if depth < 2:
                found += _listing(head, child, f"{shown}/", depth + 1)
        elif kind == "blob":  # a pygit2 Blob; Snapshot.entry is typed as the Object it derives from, with no size
            found.append((_size(head.entry(child).size), shown))  # type: ignore[union-attr]
    return found


def _size(size: int) -> str:
    """A size as the SDK shows it: 0B, 17B, 1.5K, 4.0K, 2M."""
    if size == 0:
        return "0B"
    unit = min((size.bit_length() - 1) // 10, 3)
    scaled = size / (1024 ** unit)
    return f"{int(scaled)}{'BKMG'[unit]}" if scaled == int(scaled) else f"{scaled:.1f}{'BKMG'[unit]}"
