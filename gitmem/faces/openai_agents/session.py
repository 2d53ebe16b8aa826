"""An OpenAI Agents SDK session (the ``agents`` package's ``Session`` protocol) kept as a
gitmem session: ``sessions/openai-agents/<session_id>/``, one item a JSONL line.

``add_items`` is one commit (``session.append``), ``pop_item`` one (``session.pop``),
``clear_session`` one (``session.delete``); items come back verbatim, key order and
unknown fields kept, after a restart, a sync or a hand edit as well. The calls run in a
worker thread, so the event loop keeps going while git works.

    from agents import Agent, Runner
    from gitmem.openai_agents import Session

    session = Session("user-42", repo="~/gitmem")
    await Runner.run(Agent(name="Assistant"), "Hello", session=session)
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import TYPE_CHECKING, Any

from gitmem.repository import Gitmem

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import SessionSettings

AGENT_TYPE = "openai-agents"  # the sessions/<agentType>/ folder of these sessions
HANDLER = "gitmem-openai-agents"  # the Gitmem-Handler trailer of their commits


class Session:
    """The items of session ``session_id`` in the repository at ``repo`` (None: the default
    one, created when missing), or in an open ``mem``. ``session_settings`` (a
    ``SessionSettings`` or a dict of its fields; unknown ones are a TypeError) gives the
    default ``limit`` of :meth:`get_items`, as for the SDK's ``SQLiteSession``. After
    :meth:`close` every call raises RuntimeError."""

    def __init__(self, session_id: str, repo: str | os.PathLike | None = None, *,
                 mem: Gitmem | None = None,
                 session_settings: SessionSettings | dict[str, Any] | None = None,
                 agent_type: str = AGENT_TYPE):
        from agents.memory.session_settings import SessionSettings, coerce_session_settings
        self.session_id = session_id
        self.session_settings = (coerce_session_settings(session_settings)
                                 if session_settings is not None else SessionSettings())
        self.agent_type = agent_type
        self.mem = mem if mem is not None else Gitmem.open(repo)
        self._owned = mem is None
        self._closed = False
        self._lock = threading.Lock()  # one repository call at a time from this session
        self._trailers = {"Gitmem-Handler": HANDLER}

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items in order; with ``limit`` (or the settings' limit) N > 0, the last N
        (0: none; a negative limit: all, as the SDK's SQLite session reads it)."""
        from agents.memory.session_settings import resolve_session_limit
        limit = resolve_session_limit(limit, self.session_settings)
        items = await self._run(lambda: self.mem.sessions.read(self.agent_type, self.session_id)[0])
        if limit is None or limit < 0:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Add ``items`` after the stored ones, as one commit (none for an empty list)."""
        self._check_open()
        items = list(items)
        if items:
            await self._run(lambda: self.mem.sessions.append(self.agent_type, self.session_id,
                                                             items, trailers=self._trailers))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the last item (None when there is none), as one commit."""
        item, _ = await self._run(lambda: self.mem.sessions.pop(self.agent_type, self.session_id,
                                                                trailers=self._trailers))
        return item

    async def clear_session(self) -> None:
        """Remove every item, as one commit (none when the session holds nothing)."""
        await self._run(lambda: self.mem.sessions.delete(self.agent_type, self.session_id,
                                                         trailers=self._trailers))

    def close(self) -> None:
        """Close the session, and the repository when this session opened it (again: no-op)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._owned:
                    self.mem.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Session is closed")

    async def _run(self, call) -> Any:
        self._check_open()

        def locked():
            with self._lock:
                self._check_open()  # closed while the call waited for the lock
                return call()
        return await asyncio.to_thread(locked)
