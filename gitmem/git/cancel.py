"""Calling off a write: until its commit is made, a write can be stopped by its caller.

A server that runs a write in a worker thread hands it the question "was this request
cancelled?" (:func:`cancellable`). The engine asks it once the new commit's objects are
written, before the work tree, the index and ``main`` are touched: a write stopped there
leaves nothing but objects that no ref holds (``git gc`` drops them). A write that got past
that point is made whole, cancelled or not.

    with cancellable(request_cancelled.is_set):
        mem.memory.write(text)    # WriteCancelled when request_cancelled.is_set() by then
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

from gitmem.git.base import EngineError

_CANCELLED: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "gitmem_write_cancelled", default=None)


class WriteCancelled(EngineError):
    """The write was called off before its commit: nothing was written."""


@contextlib.contextmanager
def cancellable(cancelled: Callable[[], bool]) -> Iterator[None]:
    """The writes made inside are stopped before their commit once ``cancelled()`` is true."""
    token = _CANCELLED.set(cancelled)
    try:
        yield
    finally:
        _CANCELLED.reset(token)


def stop_if_cancelled() -> None:
    """Raise :class:`WriteCancelled` when the caller has called the write off."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled():
        raise WriteCancelled("cancelled before its commit: nothing written")
