"""LangGraph's long-term memory store in git (``gitmem.langgraph.Store``), on real
repositories: each put a commit that ``gitmem log`` lists and ``gitmem restore`` undoes, as
real subprocesses; what LangGraph's ``InMemoryStore`` guarantees (gets, filters, paging,
namespace listings, a batch's reads before its writes), each checked beside it; a LangGraph
graph whose threads are in ``InMemorySaver`` and whose memory is gitmem's.

The upstream tests of ``InMemoryStore`` run against ``Store`` in tests/test_upstream_suites.py.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import pytest

from conftest import Git, run_gitmem

pytest.importorskip("langgraph")  # the test extra holds it; `pip install 'gitmem[langgraph]'`
from langgraph.store.base import (BaseStore, GetOp, InvalidNamespaceError,  # noqa: E402
                                  ListNamespacesOp, MatchCondition, PutOp, SearchOp)
from langgraph.store.memory import InMemoryStore  # noqa: E402

from gitmem.langgraph import Store  # noqa: E402

ODD_NAMESPACES = [("users", "Ada Lovelace"), ("a/b", "c"), ("CON", "nul"), ("ü", "日本", "x y"),
                  ("-", "%", "~")]
ODD_KEYS = ["prefs", "", "../up", "a/b", "Key.JSON", "k" * 300, "line\nbreak", "%41"]


@pytest.fixture
def store(repo_path):
    with Store(repo=repo_path) as opened:
        yield opened


def both(repo_path):
    """gitmem's store and LangGraph's InMemoryStore, to be given the same calls."""
    return Store(repo=repo_path), InMemoryStore()


def keys(items) -> list[tuple[tuple[str, ...], str]]:
    return [(item.namespace, item.key) for item in items]


def test_an_item_is_a_file_of_the_repository_and_its_times_are_kept(store, repo_path):
    git = Git(repo_path)
    store.put(("users", "alice"), "prefs", {"theme": "dark", "size": 3})
    first = store.get(("users", "alice"), "prefs")
    assert first.value == {"theme": "dark", "size": 3}
    assert first.created_at == first.updated_at and first.created_at.tzinfo is not None
    on_disk = json.loads((repo_path / "store/users/alice/prefs.json").read_text())
    assert on_disk["value"] == {"theme": "dark", "size": 3} and on_disk["namespace"] == ["users", "alice"]
    store.put(("users", "alice"), "prefs", {"theme": "light", "size": 3})
    second = store.get(("users", "alice"), "prefs")
    assert second.value["theme"] == "light"
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert store.get(("users", "alice"), "prefs") == second  # read again: the same item
    assert git.status() == ""
    second.value["theme"] = "changed in hand"  # the caller's copy, not the store's
    assert store.get(("users", "alice"), "prefs").value["theme"] == "light"


@pytest.mark.parametrize("namespace", ODD_NAMESPACES, ids=repr)
def test_odd_namespaces_and_keys_map_to_safe_names_and_back(store, repo_path, namespace):
    for number, key in enumerate(ODD_KEYS):
        store.put(namespace, key, {"n": number})
    for number, key in enumerate(ODD_KEYS):
        assert store.get(namespace, key).value == {"n": number}, key
    assert sorted(keys(store.search(namespace, limit=100))) == sorted((namespace, k) for k in ODD_KEYS)
    assert store.list_namespaces() == [namespace]
    for path in (repo_path / "store").rglob("*"):
        name = path.relative_to(repo_path / "store").as_posix()
        assert name.isascii() and name == name.lower() and ".." not in name.split("/"), name
        assert len(path.name.encode()) <= 255
    with Store(repo=repo_path) as again:  # a new process's reading: from the files alone
        assert sorted(keys(again.search(namespace, limit=100))) == sorted((namespace, k) for k in ODD_KEYS)


def test_every_put_and_delete_is_one_commit_and_no_change_makes_none(store, repo_path):
    git = Git(repo_path)
    before = git.count()
    store.put(("docs",), "a", {"text": "one"})
    store.put(("docs",), "b", {"text": "two"})
    assert git.count() == before + 2
    store.put(("docs",), "a", {"text": "one"})  # the value it holds
    store.delete(("docs",), "missing")
    assert git.count() == before + 2
    store.delete(("docs",), "b")
    assert git.count() == before + 3 and store.get(("docs",), "b") is None
    subject, trailers = git("log", "-1", "--format=%s%n%(trailers)").split("\n", 1)
    assert subject == "store: delete docs/b"
    assert "Gitmem-Op: store.delete" in trailers and "Gitmem-Id: store:docs/b" in trailers
    assert "Gitmem-Handler: gitmem-langgraph" in trailers
    store.batch([PutOp(("docs",), "c", {"text": "three"}), PutOp(("docs",), "d", {"text": "four"}),
                 PutOp(("docs",), "a", None)])
    assert git.count() == before + 4
    assert git("log", "-1", "--format=%s").strip() == "store: 2 puts, 1 delete"


def test_a_batch_reads_before_it_writes_as_the_in_memory_store_does(repo_path):
    for one in both(repo_path):
        one.put(("n",), "k", {"v": 1})
        found = one.batch([PutOp(("n",), "k", {"v": 2}), GetOp(("n",), "k"),
                           SearchOp(("n",)), ListNamespacesOp(), PutOp(("n",), "k", {"v": 3}),
                           PutOp(("m",), "new", {"v": 1})])
        assert found[0] is None and found[1].value == {"v": 1}
        assert [item.value for item in found[2]] == [{"v": 1}] and found[3] == [("n",)]
        assert one.get(("n",), "k").value == {"v": 3} and one.get(("m",), "new").value == {"v": 1}


def test_filters_select_as_in_the_in_memory_store(repo_path):
    values = [{"n": 1, "colour": "red", "meta": {"tag": "a", "deep": {"x": 1}}, "list": [1, 2]},
              {"n": 5, "colour": "blue", "meta": {"tag": "b"}, "list": [1]},
              {"n": 9.5, "colour": "red", "meta": {"tag": "b"}},
              {"n": 0, "colour": "green"}]
    filters = [{"colour": "red"}, {"n": {"$gt": 1}}, {"n": {"$gte": 5, "$lt": 9.5}},
               {"n": {"$lte": 5}}, {"colour": {"$ne": "red"}}, {"colour": {"$eq": "blue"}},
               {"meta": {"tag": "b"}}, {"meta": {"deep": {"x": 1}}}, {"list": [1, 2]},
               {"colour": "red", "n": {"$gt": 2}}, {"missing": None}]
    gitmem_store, in_memory = both(repo_path)
    with gitmem_store:
        for one in (gitmem_store, in_memory):
            for number, value in enumerate(values):
                one.put(("items",), f"k{number}", value)
        for wanted in filters:
            found = sorted(keys(gitmem_store.search(("items",), filter=wanted)))
            assert found == sorted(keys(in_memory.search(("items",), filter=wanted))), wanted
        assert keys(gitmem_store.search(("items",), filter={"n": {"$gt": 100}})) == []
        gitmem_store.put(("bare",), "k", {"colour": "red"})  # InMemoryStore raises TypeError here
        assert gitmem_store.search(("bare",), filter={"n": {"$lt": 5}}) == []


def test_search_pages_cover_every_item_once_newest_first(store):
    for namespace in [("a",), ("a", "b"), ("ab",), ("a", "c", "d")]:
        for number in range(5):
            store.put(namespace, f"k{number}", {"i": number, "even": number % 2 == 0})
    full = store.search(("a",), limit=100)
    assert {item.namespace for item in full} == {("a",), ("a", "b"), ("a", "c", "d")}
    assert len(full) == 15 and [item.updated_at for item in full] == sorted(
        (item.updated_at for item in full), reverse=True)
    paged = [found for offset in range(0, 15, 4) for found in keys(store.search(("a",), limit=4, offset=offset))]
    assert paged == keys(full)
    even = keys(store.search(("a",), filter={"even": True}, limit=100))
    assert keys(store.search(("a",), filter={"even": True}, limit=3, offset=2)) == even[2:5]
    assert store.search(("nothing",)) == []


def test_a_query_ranks_by_gitmems_search_and_the_index_says_what_it_reads(store):
    store.put(("notes",), "tea", {"text": "Ada drinks green tea every morning"})
    store.put(("notes",), "code", {"text": "Ada writes the parser in Rust"})
    store.put(("notes",), "hidden", {"text": "green tea is secret here"}, index=False)
    store.put(("notes",), "title", {"title": "tea ceremony", "body": "nothing else"}, index=["body"])
    store.put(("other",), "tea", {"text": "tea outside the namespace"})
    found = store.search(("notes",), query="green tea")
    assert found[0].key == "tea" and found[0].score > 0
    assert [item.score for item in found[1:]] == [None, None, None]  # found by no word: after
    assert {item.key for item in found} == {"tea", "code", "hidden", "title"}
    assert store.search(("notes",), query="parsers")[0].key == "code"  # stems
    assert store.search(("notes",), query="ceremony")[0].score is None  # index=["body"]
    assert store.search(("notes",), query="tea", filter={"text": {"$ne": None}}, limit=1)[0].key == "tea"
    assert [item.key for item in store.search(("notes",), query="tea", limit=2, offset=1)] != ["tea"]


def test_namespaces_are_listed_by_prefix_suffix_depth_and_page(repo_path):
    namespaces = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
                  ("a", "c", "f"), ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"),
                  ("admin", "users", "789")]
    asked = [dict(), dict(prefix=("a", "b")), dict(suffix=("f",)), dict(prefix=("a",), suffix=("f",)),
             dict(prefix=("a", "*", "f")), dict(suffix=("*", "f")), dict(prefix=("users",)),
             dict(max_depth=2), dict(prefix=("a",), max_depth=3), dict(limit=3),
             dict(limit=3, offset=2), dict(prefix=("zzz",)), dict(prefix=("*", "users"))]
    gitmem_store, in_memory = both(repo_path)
    with gitmem_store:
        for one in (gitmem_store, in_memory):
            for number, namespace in enumerate(namespaces):
                one.put(namespace, f"id{number}", {"n": number})
        for options in asked:
            assert gitmem_store.list_namespaces(**options) == in_memory.list_namespaces(**options), options
        conditions = (MatchCondition("prefix", ("a",)), MatchCondition("suffix", ("f",)))
        assert gitmem_store.batch([ListNamespacesOp(conditions, max_depth=2)]) == \
            in_memory.batch([ListNamespacesOp(conditions, max_depth=2)])
        gitmem_store.delete(("users", "123"), "id6")  # a namespace lives while it holds an item
        assert ("users", "123") not in gitmem_store.list_namespaces()


def test_a_put_is_in_gitmem_log_and_gitmem_restore_puts_it_back(store, repo_path):
    store.put(("users", "alice"), "prefs", {"theme": "dark"})
    store.put(("users", "alice"), "prefs", {"theme": "light"})
    logged = json.loads(run_gitmem("log", "store:users/alice/prefs", "--json", repo=repo_path).stdout)
    assert [entry["message"].split("\n")[0] for entry in logged] == ["store: put users/alice/prefs"] * 2
    assert [entry["trailers"]["Gitmem-Op"] for entry in logged] == ["store.put"] * 2
    run_gitmem("restore", "store:users/alice/prefs", "--at", "@~1", repo=repo_path)
    restored = store.get(("users", "alice"), "prefs")
    assert restored.value == {"theme": "dark"}
    shown = json.loads(run_gitmem("show", "store:users/alice/prefs", "--json", repo=repo_path).stdout)
    assert shown["item"]["value"] == {"theme": "dark"}
    store.delete(("users", "alice"), "prefs")
    run_gitmem("restore", "store:users/alice/prefs", "--at", "@~1", repo=repo_path)
    assert store.get(("users", "alice"), "prefs").value == {"theme": "dark"}
    hits = json.loads(run_gitmem("search", "dark", "--json", repo=repo_path).stdout)
    assert [(hit["record"], hit["unit"]) for hit in hits] == [("store:users/alice/prefs", "item")]
    read = json.loads(run_gitmem("unit", "store:users/alice/prefs", str(hits[0]["unit_id"]), "--json",
                                 repo=repo_path).stdout)
    assert [(unit["unit"], unit["text"], unit["value"]["value"]) for unit in read] == [
        ("item", "dark", {"theme": "dark"})]


def test_an_item_whose_name_cannot_be_split_is_named_by_its_path(store, repo_path):
    store.put(("a/b",), "k", {"text": "a walrus"})
    path = "store/a%2fb/k.json"
    assert (repo_path / path).is_file()
    logged = json.loads(run_gitmem("log", path, "--json", repo=repo_path).stdout)
    assert len(logged) == 1
    hits = json.loads(run_gitmem("search", "walrus", "--json", repo=repo_path).stdout)
    assert [hit["record"] for hit in hits] == [path]
    assert f"closest: {path}" in run_gitmem("log", "store:a/b/k", repo=repo_path).stderr


def test_a_file_broken_by_hand_is_left_out_and_a_put_replaces_it(store, repo_path):
    store.put(("docs",), "ok", {"v": 1})
    broken = repo_path / "store/docs/bad.json"
    broken.write_text('{"value": "not an object"}\n')
    assert keys(store.search(("docs",))) == [(("docs",), "ok")]
    assert store.get(("docs",), "bad") is None
    store.put(("docs",), "bad", {"v": 2})
    assert store.get(("docs",), "bad").value == {"v": 2}


def test_what_langgraph_refuses_is_refused_and_nothing_is_written(store, repo_path):
    git = Git(repo_path)
    before = git.count()
    for namespace in [(), ("a.b",), ("a", ""), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})
    with pytest.raises(NotImplementedError):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(NotImplementedError):
        store.batch([PutOp(("a",), "k", {"v": 1}, ttl=5.0)])
    with pytest.raises(ValueError, match="not JSON"):
        store.put(("a",), "k", {"v": float("nan")})
    with pytest.raises(ValueError, match="mapping"):
        store.batch([PutOp(("a",), "k", ["not", "a", "dict"])])
    assert git.count() == before and store.list_namespaces() == []


def test_a_closed_store_refuses_every_call(repo_path):
    store = Store(repo=repo_path)
    store.put(("a",), "k", {"v": 1})
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.get(("a",), "k")
    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(store.aput(("a",), "k", {"v": 2}))


def test_the_async_calls_run_the_same_batches(store):
    async def run():
        await store.aput(("a",), "k", {"text": "async tea"})
        found = await store.aget(("a",), "k")
        hits = await store.asearch(("a",), query="tea")
        listed = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return found, hits, listed, await store.aget(("a",), "k")
    found, hits, listed, gone = asyncio.run(run())
    assert found.value == {"text": "async tea"} and hits[0].key == "k" and hits[0].score > 0
    assert listed == [("a",)] and gone is None
    assert isinstance(found.updated_at, datetime)


def test_a_langgraph_graph_keeps_threads_in_the_saver_and_memory_in_gitmem(repo_path):
    from typing import TypedDict

    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        said: str
        answer: str

    def remember(state: State, config: RunnableConfig, *, store: BaseStore) -> dict:
        user = ("memories", config["configurable"]["user_id"])
        if state["said"].startswith("remember "):
            store.put(user, f"fact-{len(store.search(user))}", {"text": state["said"][len("remember "):]})
            return {"answer": "noted"}
        found = store.search(user, query=state["said"], limit=1)
        return {"answer": found[0].value["text"] if found and found[0].score else "I do not know"}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    with Store(repo=repo_path) as store:
        app = graph.compile(checkpointer=InMemorySaver(), store=store)
        ada = {"user_id": "ada"}
        app.invoke({"said": "remember Ada drinks green tea"}, {"configurable": {"thread_id": "t1", **ada}})
        app.invoke({"said": "remember Ada writes Rust"}, {"configurable": {"thread_id": "t1", **ada}})
        answer = app.invoke({"said": "what tea?"}, {"configurable": {"thread_id": "t2", **ada}})
        assert answer["answer"] == "Ada drinks green tea"
        other = asyncio.run(app.ainvoke({"said": "what tea?"},
                                        {"configurable": {"thread_id": "t3", "user_id": "bob"}}))
        assert other["answer"] == "I do not know"
    logged = json.loads(run_gitmem("log", "--json", repo=repo_path).stdout)
    assert [entry["message"].split("\n")[0] for entry in logged[:2]] == [
        "store: put memories/ada/fact-1", "store: put memories/ada/fact-0"]
    assert Git(repo_path).status() == ""


def test_two_clones_synced_keep_both_sides_items_and_the_later_value(synced, tmp_path):
    repo, remote = synced
    run_gitmem("clone", str(remote), str(tmp_path / "other"))
    other = tmp_path / "other"
    with Store(repo=repo) as here:
        here.put(("users", "ada"), "shared", {"text": "first"})
    run_gitmem("sync", repo=repo)
    run_gitmem("sync", repo=other)
    with Store(repo=repo) as here, Store(repo=other) as there:
        created = here.get(("users", "ada"), "shared").created_at
        here.put(("users", "ada"), "here", {"text": "put here"})
        there.put(("users", "ada"), "there", {"text": "put there"})
        here.put(("users", "ada"), "shared", {"text": "changed here"})
        there.put(("users", "ada"), "shared", {"text": "changed there, later"})
    run_gitmem("sync", repo=repo)
    run_gitmem("sync", repo=other)
    run_gitmem("sync", repo=repo)
    for clone in (repo, other):
        with Store(repo=clone) as store:
            assert sorted(item.key for item in store.search(("users", "ada"))) == ["here", "shared", "there"]
            shared = store.get(("users", "ada"), "shared")
            assert shared.value == {"text": "changed there, later"} and shared.created_at == created
