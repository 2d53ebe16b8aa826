"""Claude's memory tool (``memory_20250818``) kept in a gitmem repository: a
``BetaAbstractMemoryTool`` of the Anthropic SDK that its tool runner uses as it is.

The commands work on the ``/memories`` tree (:mod:`gitmem.stores.memory_tree`): every
change is one commit, and the answers are those of the SDK's own local-filesystem
backend. A refused command is the SDK's ``ToolError`` (the runner sends it back with
``is_error``) and writes nothing.

    from anthropic import Anthropic
    from gitmem.anthropic import MemoryTool

    memory = MemoryTool(repo="~/gitmem")
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048, tools=[memory],
        messages=[{"role": "user", "content": "Remember that I prefer short answers."}])
    for message in runner: ...
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
import anyio.to_thread
from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError

from gitmem.records.layout import MEMORY
from gitmem.repository import Gitmem
from gitmem.stores.memory_tree import MemoryToolError

if TYPE_CHECKING:
    from anthropic.types.beta import (BetaCacheControlEphemeralParam, BetaMemoryTool20250818CreateCommand,
                                      BetaMemoryTool20250818DeleteCommand, BetaMemoryTool20250818InsertCommand,
                                      BetaMemoryTool20250818RenameCommand, BetaMemoryTool20250818StrReplaceCommand,
                                      BetaMemoryTool20250818ViewCommand)
    from gitmem.stores.memory_tree import Answer, MemoryTree

HANDLER = "gitmem-memory-tool"  # the Gitmem-Handler trailer of its commits
T = TypeVar("T")


class _Commands:
    """The six commands on one repository, each answer a string or a ``ToolError``."""

    def __init__(self, repo: str | os.PathLike | None, mem: Gitmem | None):
        self.mem = mem if mem is not None else Gitmem.open(repo)
        self._owned = mem is None
        self._lock = threading.Lock()  # the runner may call from a thread of its own
        self.trailers = {"Gitmem-Handler": HANDLER}
        if self.mem.engine.writable:  # as the SDK's backend makes its own: 0700 whatever the umask
            self.memory_root.mkdir(mode=0o700, exist_ok=True)
            self.memory_root.chmod(0o700)

    @property
    def base_path(self) -> Path:
        return Path(self.mem.engine.workdir)

    @property
    def memory_root(self) -> Path:
        return self.base_path / MEMORY

    def run(self, call: Callable[[MemoryTree], Answer]) -> str:
        with self._lock:
            try:
                return call(self.mem.memory_tree).text
            except MemoryToolError as error:
                raise ToolError(str(error)) from None

    def view(self, command) -> str:
        return self.run(lambda tree: tree.view(command.path, command.view_range))

    def create(self, command) -> str:
        return self.run(lambda tree: tree.create(command.path, command.file_text, trailers=self.trailers))

    def str_replace(self, command) -> str:
        return self.run(lambda tree: tree.str_replace(command.path, command.old_str, command.new_str,
                                                      trailers=self.trailers))

    def insert(self, command) -> str:
        return self.run(lambda tree: tree.insert(command.path, command.insert_line, command.insert_text,
                                                 trailers=self.trailers))

    def delete(self, command) -> str:
        return self.run(lambda tree: tree.delete(command.path, trailers=self.trailers))

    def rename(self, command) -> str:
        return self.run(lambda tree: tree.rename(command.old_path, command.new_path, trailers=self.trailers))

    def close(self) -> None:
        if self._owned:
            self.mem.close()


class MemoryTool(BetaAbstractMemoryTool):
    """The memory tool on the repository at ``repo`` (None: the default one, created when
    missing), or on an open ``mem``. ``clear_all_memory`` is not offered: delete
    ``/memories/<path>`` instead, each a commit ``gitmem restore`` can undo."""

    def __init__(self, repo: str | os.PathLike | None = None, *, mem: Gitmem | None = None,
                 cache_control: BetaCacheControlEphemeralParam | None = None):
        super().__init__(cache_control=cache_control)
        self._commands = _Commands(repo, mem)

    @property
    def mem(self) -> Gitmem:
        """The repository the commands are kept in."""
        return self._commands.mem

    @property
    def memory_root(self) -> Path:
        """The folder of the work tree that is ``/memories`` (``memory/``), as the SDK's
        backend names its own: a file saved there by hand is committed before it is read."""
        return self._commands.memory_root

    @property
    def base_path(self) -> Path:
        """The repository's folder, which holds ``memory/`` as the SDK's ``base_path`` holds
        ``memories/``."""
        return self._commands.base_path

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._commands.view(command)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._commands.create(command)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._commands.str_replace(command)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._commands.insert(command)

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._commands.delete(command)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._commands.rename(command)

    def close(self) -> None:
        """Close the repository (when this tool opened it)."""
        self._commands.close()

    def __enter__(self) -> MemoryTool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`MemoryTool` for the SDK's async runner: each command runs in a worker thread."""

    def __init__(self, repo: str | os.PathLike | None = None, *, mem: Gitmem | None = None,
                 cache_control: BetaCacheControlEphemeralParam | None = None):
        super().__init__(cache_control=cache_control)
        self._commands = _Commands(repo, mem)

    @property
    def mem(self) -> Gitmem:
        return self._commands.mem

    @property
    def memory_root(self) -> anyio.Path:
        """:attr:`MemoryTool.memory_root`, as the SDK's async backend gives it (an anyio path)."""
        return anyio.Path(self._commands.memory_root)

    @property
    def base_path(self) -> anyio.Path:
        return anyio.Path(self._commands.base_path)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await anyio.to_thread.run_sync(self._commands.rename, command)

    def close(self) -> None:
        self._commands.close()
