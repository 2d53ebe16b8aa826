"""LangGraph's long-term memory store kept in git: ``Store(repo=PATH)`` is a
``langgraph.store.base.BaseStore`` whose items are files of a gitmem repository, each put
a commit; see :mod:`gitmem.faces.langgraph.store`. Install LangGraph with
``pip install 'gitmem[langgraph]'``.
"""

from gitmem.faces.langgraph.store import Store

__all__ = ["Store"]
