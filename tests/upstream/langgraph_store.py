"""A pytest plugin: LangGraph's own tests of its ``InMemoryStore`` (``tests/test_store.py`` of
the ``langgraph-checkpoint`` source package) run against ``gitmem.langgraph.Store``. Each
``InMemoryStore()`` those tests make is a ``Store`` on a repository of its own; the tests that
do not apply are deselected, each with its reason (docs/python.md lists them).
"""

from __future__ import annotations

import pytest

from gitmem.langgraph import Store
from upstream_common import deselect, made, said_made

# test name (parameters left out): why it does not apply
NOT_APPLYING = {
    "test_vector_search_scores_every_item": "vector search: InMemoryStore(index={dims, embed}) embeds "
    "with the caller's embeddings; gitmem ranks a query by its own full-text search",
    "test_vector_store_initialization": "vector search (an embeddings index)",
    "test_vector_insert_with_auto_embedding": "vector search (an embeddings index)",
    "test_async_vector_insert_with_auto_embedding": "vector search (an embeddings index)",
    "test_vector_update_with_embedding": "vector search (an embeddings index)",
    "test_async_vector_update_with_embedding": "vector search (an embeddings index)",
    "test_vector_search_with_filters": "vector search (an embeddings index)",
    "test_async_vector_search_with_filters": "vector search (an embeddings index)",
    "test_async_batched_vector_search_concurrent": "vector search (an embeddings index)",
    "test_vector_search_pagination": "vector search (an embeddings index)",
    "test_async_vector_search_pagination": "vector search (an embeddings index)",
    "test_embed_with_path": "vector search (an embeddings index)",
    "test_non_ascii": "vector search (an embeddings index)",
}


class GitmemStore(Store):
    """``InMemoryStore()`` as the tests call it: a Store on a new repository each time."""

    opened: list[Store] = []
    folders = None  # pytest's tmp_path_factory, set for each test

    def __init__(self, *, index=None):
        if index is not None:
            raise TypeError("gitmem's Store takes no embeddings index")
        super().__init__(repo=GitmemStore.folders.mktemp("store") / "repo")
        GitmemStore.opened.append(self)
        made["count"] += 1


@pytest.fixture(autouse=True)
def _gitmem_store(request, monkeypatch, tmp_path_factory):
    GitmemStore.folders = tmp_path_factory
    if hasattr(request.module, "InMemoryStore"):
        monkeypatch.setattr(request.module, "InMemoryStore", GitmemStore)
    yield
    while GitmemStore.opened:
        GitmemStore.opened.pop().close()


def pytest_collection_modifyitems(config, items):
    deselect(config, items, NOT_APPLYING)


def pytest_terminal_summary(terminalreporter):
    said_made(terminalreporter)
