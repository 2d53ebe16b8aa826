"""`gitmem search` (issue 26): every record and its history, from an index git derives.

Words are planted the ways the world writes them (a real `gitmem serve` spoken to as
nui and kaboo speak, an editor's save, plain `git commit`, a second clone synced
through a bare remote) and looked for with the real command.
"""

from __future__ import annotations

import base64
import json
import os
import pty
import random
import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import GITHUB_TOKEN, SUBPROCESS_ENV, Git, run_gitmem
from gitmem.git.lock import FileLock
from gitmem.repository import Gitmem
from gitmem.search.index import FILE, LOCK_FILE
from nui_client import NuiHost, install_as_nui
from test_cli import assert_one_line_error

SESSIONS = "gitmem-sessions"
AGENT_MEMORY = "gitmem-agent-memory"
USER_MEMORY = "gitmem-user-memory"


def search(repo: Path, query: str, *options: str) -> list[dict]:
    """``gitmem search QUERY OPTIONS --json`` on ``repo``."""
    done = subprocess.run([sys.executable, "-m", "gitmem", "--repo", str(repo), "search",
                           "--json", *options, "--", query], capture_output=True, text=True,
                          env=SUBPROCESS_ENV, timeout=120)
    assert done.returncode == 0, done.stderr
    # no progress bar on a pipe; only the notice of commits a person's reset took off main,
    # and the word that nothing was found
    assert [line for line in done.stderr.splitlines()
            if not line.startswith(("gitmem: main no longer holds gitmem commit",
                                    f"gitmem: no hits for {query!r}"))] == []
    assert (f"gitmem: no hits for {query!r}" in done.stderr) == (json.loads(done.stdout) == [])
    return json.loads(done.stdout)


def found_in(repo: Path, query: str, *options: str) -> list[tuple[str, str]]:
    return [(hit["record"], hit["unit"]) for hit in search(repo, query, *options)]


def index_terms(repo: Path) -> set[str]:
    """Every word the index holds (FTS5's own list of its terms)."""
    db = sqlite3.connect(repo / ".git" / "gitmem" / FILE)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, unit_search, 'row')")
        return {term for (term,) in db.execute("SELECT term FROM temp.terms")}
    finally:
        db.close()


def head(repo: Path) -> str:
    return Git(repo)("rev-parse", "HEAD").strip()


# -- words planted through the wire ----------------------------------------------------


def test_words_written_through_serve_are_found_in_the_record_they_went_to(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    search(repo, "nothing")  # the index exists before the writes: they are caught up on
    extension = install_as_nui(tmp_path, repo)
    with NuiHost.spawn(extension) as host:
        def write(method: str, params: dict) -> None:
            assert host.call(method, params) == {"ok": True}

        write("storage.userMemory.write", {"handlerId": USER_MEMORY, "writeMode": "append",
                                           "content": "prefers Crème brûlée after lunch"})
        write("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                            "writeMode": "append", "content": "# Codex\nuse tabs"})
        write("storage.agentMemory.write", {"handlerId": AGENT_MEMORY, "agentId": "codex",
                                            "writeMode": "append",
                                            "content": "the deploy window is thursday"})
        write("storage.session.write", {
            "handlerId": SESSIONS, "agentType": "claude-code", "sessionId": "s/1",
            "agentSessionId": "a1", "workingDir": "/w",
            "messages": [{"role": "user", "content": "what about the zeppelin?"},
                         {"role": "assistant", "content": [{"type": "text", "text": "it flies"}]}]})
        write("threads.appendEvents", {
            "threadId": "t1", "agentId": "planner",
            "events": [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ordering quokkas"}]})
        host.close()
    assert found_in(repo, "creme BRULEE") == [("user", "block")]  # case and accents ignored
    assert found_in(repo, "thursday deploy") == [("agent:codex", "block")]
    assert found_in(repo, "tabs") == [("agent:codex", "block")]
    assert found_in(repo, "zeppelin") == [("sessions/claude-code/s%2f1", "message")]
    assert found_in(repo, "flies") == [("sessions/claude-code/s%2f1", "message")]
    assert found_in(repo, "quokkas") == [("thread:t1", "event")]
    hit = search(repo, "quokkas")[0]
    assert hit["snippet"] == "ordering **quokkas**"
    assert hit["added"] == head(repo) and hit["removed"] is None and hit["score"] > 0
    assert found_in(repo, "zeppelin", "--kind", "memory") == []
    assert found_in(repo, "tabs OR zeppelin", "--kind", "session") == [("sessions/claude-code/s%2f1", "message")]
    assert found_in(repo, "tabs OR zeppelin", "--record", "agent:codex") == [("agent:codex", "block")]
    assert len(search(repo, "tabs OR zeppelin OR quokkas", "--limit", "2")) == 2


def test_the_python_api_gives_the_same_hits_as_the_command(tmp_path):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        mem.memory.write("likes green tea", "reviewer", mode="append")
        mem.memory.write("likes black coffee", None, mode="append")
        hits = mem.search("likes", limit=5)
        assert {hit.record for hit in hits} == {"agent:reviewer", "user"}
        assert [h.as_json() for h in hits] == search(repo, "likes", "--limit", "5")
        assert hits[0].as_json().keys() >= {"record", "snippet", "score", "added", "removed"}
        assert [hit.record for hit in mem.search('"green')] == ["agent:reviewer"]  # read as words


# -- whoever wrote it -------------------------------------------------------------------


def test_a_hand_edit_and_a_plain_git_commit_are_found(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--user", repo=repo, input="likes tea")
    run_gitmem("memory", "write", "--agent", "ops", repo=repo, input="pager duty")
    assert search(repo, "tea")[0]["record"] == "user"
    with open(repo / "memory" / "user.md", "a") as file:  # saved a moment ago, not committed
        file.write("\nthe cat is called Pixel\n")
    hits = search(repo, "pixel")
    assert [(h["record"], h["snippet"]) for h in hits] == [("user", "the cat is called **Pixel**")]
    git = Git(repo)
    assert hits[0]["added"] == head(repo)
    assert git("log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "hand-edit"
    (repo / "memory" / "agents" / "ops.md").write_text("pager duty\n\nrotation is weekly\n")
    git("commit", "-qam", "ops: rotation")
    assert found_in(repo, "rotation weekly") == [("agent:ops", "block")]
    assert search(repo, "rotation")[0]["added"] == head(repo)


def test_a_clones_first_open_leaves_the_index_stat_data_fresh(tmp_path):
    """gitmem makes a clone's files private on its first open; the index is refreshed then,
    so that a search's look at the work tree (one status) hashes no file again."""
    source = tmp_path / "source"
    run_gitmem("init", str(source))
    run_gitmem("memory", "write", "--user", repo=source, input="likes tea")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True, env=SUBPROCESS_ENV)
    time.sleep(1.1)  # opened later than the clone's own second, as a person would
    assert found_in(clone, "tea") == [("user", "block")]
    assert (clone / "memory" / "user.md").stat().st_mode & 0o777 == 0o600
    assert Git(clone)("diff-files", "--name-only") == ""  # no entry stat-dirty


def test_a_change_synced_from_a_second_clone_and_a_clones_history(tmp_path):
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "--initial-branch=main", str(remote)],
                   check=True, env=SUBPROCESS_ENV)
    a, b = tmp_path / "a", tmp_path / "b"
    run_gitmem("init", str(a))
    run_gitmem("memory", "write", "--user", repo=a, input="the office is in Lisbon")
    run_gitmem("memory", "write", "--user", repo=a, input="the office is in Porto")  # Lisbon replaced
    run_gitmem("remote", "add", "origin", str(remote), repo=a)
    run_gitmem("sync", repo=a)
    assert found_in(a, "porto") == [("user", "block")]

    run_gitmem("clone", str(remote), str(b))  # the second machine: the whole history
    assert found_in(b, "porto") == [("user", "block")]
    assert found_in(b, "lisbon") == []
    gone = search(b, "lisbon", "--history")
    assert [(h["record"], h["removed"]) for h in gone] == [("user", head(a))]

    run_gitmem("memory", "write", "--agent", "travel", "--append", repo=b, input="book the albatross")
    run_gitmem("sync", repo=b)
    run_gitmem("memory", "write", "--agent", "local", repo=a, input="meanwhile on a")  # diverged
    run_gitmem("sync", repo=a)  # a merge of b's change
    assert found_in(a, "albatross") == [("agent:travel", "block")]
    assert found_in(a, "meanwhile") == [("agent:local", "block")]
    assert Git(a)("rev-list", "--count", "--merges", "HEAD").strip() == "1"
    # b takes a's merge (a fast-forward whose first-parent line is a's, not b's)
    run_gitmem("sync", repo=b)
    assert found_in(b, "meanwhile") == [("agent:local", "block")]
    assert found_in(b, "albatross") == [("agent:travel", "block")]
    assert [h["record"] for h in search(b, "albatross OR meanwhile OR porto", "--history")] \
        == [h["record"] for h in search(b, "albatross OR meanwhile OR porto")]  # nothing went


def test_a_merge_made_by_hand_where_this_machines_line_is_the_second_parent(tmp_path):
    a = tmp_path / "a"
    run_gitmem("init", str(a))
    run_gitmem("memory", "write", "--user", repo=a, input="base fact")
    git = Git(a)
    git("branch", "other")
    run_gitmem("memory", "write", "--agent", "mine", repo=a, input="ours says heron")
    assert found_in(a, "heron") == [("agent:mine", "block")]  # indexed up to here
    git("checkout", "-q", "other")
    (a / "memory" / "agents").mkdir(exist_ok=True)
    (a / "memory" / "agents" / "theirs.md").write_text("theirs says ibis\n")
    git("add", "-A")
    git("commit", "-qm", "theirs")
    git("merge", "-q", "--no-edit", "main")
    git("checkout", "-q", "main")
    git("merge", "-q", "--ff-only", "other")
    assert found_in(a, "heron") == [("agent:mine", "block")]
    assert found_in(a, "ibis") == [("agent:theirs", "block")]
    assert search(a, "heron", "--history")[0]["removed"] is None


# -- history ----------------------------------------------------------------------------


def test_a_damaged_version_in_the_history_stops_the_index_with_one_line_naming_it(tmp_path):
    """The index reads a history's versions through git cat-file; a version git cannot
    read is read through the engine, which names the damage as every command does."""
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    for n in range(3):
        run_gitmem("memory", "write", "--agent", "a", "--append", repo=repo, input=f"part {n} zanzibar")
    blob = Git(repo)("rev-parse", "HEAD~1:memory/agents/a.md").strip()
    loose = repo / ".git" / "objects" / blob[:2] / blob[2:]
    loose.chmod(0o600)
    loose.write_bytes(loose.read_bytes()[:10])  # truncated, as by a full disk
    done = run_gitmem("search", "zanzibar", repo=repo, check=False)
    assert_one_line_error(done, says=f"object {blob} is damaged")
    assert "gitmem fsck" in done.stderr


def test_a_word_replaced_away_is_found_only_in_history_with_the_commit_that_removed_it(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input="ship on fridays")
    added = head(repo)
    assert found_in(repo, "fridays") == [("agent:reviewer", "block")]
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input="ship on mondays")
    removed = head(repo)
    assert search(repo, "fridays") == []
    hits = search(repo, "fridays", "--history")
    git = Git(repo)
    assert [(h["record"], h["added"], h["removed"]) for h in hits] == \
        [("agent:reviewer", added, removed)]
    assert hits[0]["added_date"] == git("log", "-1", "--format=%cI", added).strip()
    assert hits[0]["removed_date"] == git("log", "-1", "--format=%cI", removed).strip()
    assert search(repo, "mondays", "--history")[0]["removed"] is None
    # --since/--until: when it came or went
    assert search(repo, "fridays", "--history", "--since", removed) != []
    assert search(repo, "fridays", "--history", "--until", "@0") == []
    assert search(repo, "fridays", "--history", "--since", "1 hour ago") != []
    # a session replaced with fewer messages: the dropped one is history
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": [{"role": "user", "content": "keep walrus"},
                                              {"role": "user", "content": "drop narwhal"}]}))
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": [{"role": "user", "content": "keep walrus"}]}))
    assert search(repo, "narwhal") == [] and len(search(repo, "narwhal", "--history")) == 1
    assert len(search(repo, "walrus", "--history")) == 1  # kept: not removed and added again


def test_an_amend_and_a_reset_start_the_index_over(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("memory", "write", "--user", repo=repo, input="first")
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="oops lemur")
    assert found_in(repo, "lemur") == [("user", "block")]
    git = Git(repo)
    git("reset", "-q", "--hard", "HEAD~1")
    assert search(repo, "lemur") == [] and search(repo, "lemur", "--history") == []
    (repo / "memory" / "user.md").write_text("first\n\nfixed gecko\n")
    git("commit", "-qam", "fix")
    (repo / "memory" / "user.md").write_text("first\n\nfixed tapir\n")
    git("commit", "-q", "--amend", "-am", "fix, amended")
    assert search(repo, "gecko", "--history") == []
    assert found_in(repo, "tapir") == [("user", "block")]


# -- the query language -------------------------------------------------------------------


def test_the_query_language(tmp_path):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        mem.memory.write("red apples and green pears", "a")
        mem.memory.write("red cherries", "b")
        mem.memory.write("the quick brown fox", "c")
        mem.memory.write("Deployment notes: staging first", "d")
    records = lambda q: sorted(h["record"] for h in search(repo, q))  # noqa: E731
    ranked = lambda q: [h["record"] for h in search(repo, q)]  # noqa: E731
    assert records("red") == ["agent:a", "agent:b"]
    assert ranked("red pears") == ["agent:a", "agent:b"]  # plain words: any, the most first
    assert ranked("pears red") == ["agent:a", "agent:b"]
    assert ranked("which are the red pears?") == ["agent:a", "agent:b"]  # stopwords do not decide
    assert records("staged") == ["agent:d"]  # stemmed: staged, staging
    # operators, when the query uses them: every word, a word left out, OR, a phrase, a prefix
    assert records("red -pears") == ["agent:b"]
    assert records("cherries OR fox") == ["agent:b", "agent:c"]
    assert records('"quick brown"') == ["agent:c"] and records('"brown quick"') == []
    assert records('"red" pears') == ["agent:a"]
    assert records('"red apples" cherries') == [] and records('"red apples" cherries?') == [
        "agent:a", "agent:b"]  # a question: plain words
    assert records("deplo*") == ["agent:d"]
    assert records("notes: AND NOT -staging OR fox") == ["agent:c"]  # AND/NOT are words here
    for weird in ("a^b", "NEAR(red pears)", "col:red", "red)", "(red", "{red}", "red + pears",
                  "red... pears", "\"\" red", "red*pears", '"red"* fox', "AND", "NOT red"):
        search(repo, weird)  # never an FTS5 error: answered (often with nothing)
    assert records('"green pe"*') == ["agent:a"]


@pytest.mark.parametrize("query, found", [
    ('"open phrase red', ["agent:a"]),  # an unbalanced quote: plain words
    ("OR", []), ("red OR", ["agent:a"]), ("OR red", ["agent:a"]), ("red OR OR pears", ["agent:a"]),
    ("", []), ("   ", []), ("-", []), ("red -", ["agent:a"]), ("*", []), ("-red", ["agent:a"]),
    ("&& ...", []), ("red --", ["agent:a"]),
    ("Which fruit is red - apples or pears?", ["agent:a"]),  # a lone hyphen in a question
])
def test_no_query_is_refused(tmp_path, query, found):
    """What would make no sense as operators is read as plain words."""
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        mem.memory.write("red apples and green pears", "a")
        assert [hit.record for hit in mem.search(query)] == found
    done = subprocess.run([sys.executable, "-m", "gitmem", "--repo", str(repo), "search", "--",
                           query], capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert (done.stdout == "") == (found == [])
    assert (done.stderr == f"gitmem: no hits for {query!r}\n") == (found == [])


def test_no_query_reaches_fts5_unparsed(tmp_path):
    """Random queries of FTS5's own syntax: each is answered."""
    rng = random.Random(26)
    pieces = ['"', "*", "-", "(", ")", ":", "^", "+", "OR", "AND", "NOT", "NEAR", "tea", "é",
              "col", ",", ".", "{", "}", "''", "x*y", "--", "日本", "?"]
    with Gitmem.open(tmp_path / "repo") as mem:
        mem.memory.write("tea and NEAR things", "a")
        found = 0
        for _ in range(400):
            query = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
            found += bool(mem.search(query))
        assert 0 < found < 400


# -- the index: a cache -------------------------------------------------------------------


def test_deleting_the_index_gives_the_same_answers_and_it_is_never_committed(tmp_path):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        for i in range(30):
            mem.memory.write(f"note {i}: topic{i % 7} alpha", f"agent{i % 4}", mode="append")
            if i % 5 == 0:
                mem.memory.write(f"replaced {i} beta", f"agent{i % 4}")
        mem.sessions.write("claude-code", "s1", [{"role": "user", "content": f"beta {n}"} for n in range(5)])
    queries = [("alpha",), ("beta", "--history"), ("topic3 OR topic4",), ("note -alpha", "--history"),
               ("alpha", "--kind", "memory", "--limit", "3")]
    before = [search(repo, *q) for q in queries]
    index = repo / ".git" / "gitmem" / FILE
    assert index.exists() and (index.stat().st_mode & 0o777) == 0o600
    git = Git(repo)
    assert git.status() == "" and "search" not in git("ls-files")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    assert [search(repo, *q) for q in queries] == before
    index.write_bytes(b"not a database at all")  # damaged: made anew
    assert [search(repo, *q) for q in queries] == before
    data = bytearray(index.read_bytes())  # damaged inside: its second half
    data[len(data) // 2:] = b"\xff" * (len(data) - len(data) // 2)
    index.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        Path(f"{index}{suffix}").unlink(missing_ok=True)
    assert [search(repo, *q) for q in queries] == before
    index.unlink()  # an index of another format (an older gitmem's): made anew
    old = sqlite3.connect(index)
    old.executescript("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                      "INSERT INTO meta VALUES ('format', '1'), ('tip', 'HEAD');"
                      "CREATE TABLE units(id INTEGER PRIMARY KEY, body BLOB);")
    old.close()
    assert [search(repo, *q) for q in queries] == before


def test_a_write_never_waits_for_the_index(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    search(repo, "anything")
    lock = FileLock(repo / ".git" / "gitmem" / LOCK_FILE, timeout=1)
    db = sqlite3.connect(repo / ".git" / "gitmem" / FILE, isolation_level=None)
    with lock:
        db.execute("BEGIN EXCLUSIVE")  # held as if a long catch-up were writing
        run_gitmem("memory", "write", "--user", "--append", repo=repo, input="written anyway")
        extension = install_as_nui(tmp_path, repo)
        with NuiHost.spawn(extension) as host:
            assert host.call("storage.userMemory.write", {
                "handlerId": USER_MEMORY, "writeMode": "append", "content": "and this"},
                timeout=20) == {"ok": True}
            host.close()
        db.execute("ROLLBACK")
    db.close()
    assert found_in(repo, "written anyway") == [("user", "block")]


def test_two_searches_at_once_on_a_fresh_index_agree(tmp_path):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        for i in range(200):
            mem.memory.write(f"fact {i} mongoose", f"a{i % 9}", mode="append")
    command = [sys.executable, "-m", "gitmem", "--repo", str(repo), "search", "--json",
               "--limit", "100", "mongoose"]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=SUBPROCESS_ENV) for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    answers = [json.loads(out) for out, _ in outputs]
    assert len(answers[0]) == 100 and answers[1] == answers[0] == answers[2]


def test_a_progress_bar_on_a_terminal_only(tmp_path):
    repo = tmp_path / "repo"
    with Gitmem.open(repo) as mem:
        for i in range(20):
            mem.memory.write(f"fact {i}", "a", mode="append")
    search(repo, "fact")  # on a pipe: nothing on stderr (checked by search())
    (repo / ".git" / "gitmem" / FILE).unlink()
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gitmem", "--repo", str(repo), "search", "fact"],
                            stdout=subprocess.DEVNULL, stderr=child, env=SUBPROCESS_ENV)
    os.close(child)
    seen = b""
    while True:
        ready = select.select([main], [], [], 60)[0]
        if not ready:
            break
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    assert proc.wait(timeout=60) == 0
    assert b"indexing for search [" in seen and b"]" in seen


# -- secrets and images -------------------------------------------------------------------


def test_forget_takes_the_secret_out_of_the_index_too(synced):
    repo, _ = synced
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input=f"my token: {GITHUB_TOKEN}")
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="and green tea")
    assert found_in(repo, GITHUB_TOKEN[4:]) == [("user", "block")]
    secret_word = GITHUB_TOKEN[4:].lower()
    assert secret_word in index_terms(repo)
    done = run_gitmem("sync", repo=repo, check=False)
    mark = done.stderr.split("fingerprint ")[1][:16]
    run_gitmem("forget", "memory/user.md", "--secret", mark, repo=repo)
    index = repo / ".git" / "gitmem" / FILE
    assert not index.exists()  # dropped at once, not at the next search
    assert search(repo, GITHUB_TOKEN[4:], "--history") == []
    assert found_in(repo, '"green tea"') == [("user", "block")]
    assert secret_word not in index_terms(repo) and "green" in index_terms(repo)
    assert all(secret_word.encode() not in p.read_bytes() for p in index.parent.glob(f"{FILE}*"))


def test_the_index_never_holds_image_data(tmp_path):
    repo = tmp_path / "repo"
    image = base64.b64encode(random.Random(1).randbytes(3000)).decode()
    run_gitmem("init", str(repo))
    run_gitmem("session", "write", "claude-code", "s1", repo=repo, input=json.dumps({"messages": [
        {"role": "user", "content": "look at this okapi",
         "images": [{"id": "i1", "mediaType": "image/png", "data": image}]},
        {"role": "user", "content": [{"type": "image_url",
                                      "image_url": {"url": f"data:image/png;base64,{image}"}},
                                     {"type": "text", "text": "and this ocelot"}]}]}))
    git = Git(repo)
    # pasted inline by hand, committed with plain git: no store took it out
    (repo / "memory").mkdir(exist_ok=True)
    (repo / "memory" / "user.md").write_text(f"a pasted gibbon ![x](data:image/png;base64,{image})\n"
                                             f"\nraw blob follows\n{image}\n")
    git("add", "-A")
    git("commit", "-qm", "paste")
    assert found_in(repo, "okapi") == [("session:claude-code/s1", "message")]
    assert found_in(repo, "ocelot") == [("session:claude-code/s1", "message")]
    assert found_in(repo, "gibbon") == [("user", "block")]
    terms = index_terms(repo)
    pieces = {piece.lower() for piece in re.split(r"[^A-Za-z0-9]+", image) if len(piece) >= 6}
    assert "okapi" in terms and pieces and not pieces & terms
    assert "base64" not in terms and not any(len(term) >= 40 for term in terms)


def test_a_memory_pasted_without_blank_lines_is_searched_in_parts_each_hit_read_back(tmp_path):
    # 2 MB in one block: FTS5's snippet() costs the square of its text (20 s a search); the
    # block is ranked and snippeted in parts of at most PART_CHARS, each a unit of its own
    from gitmem.bench.search import pasted_prose
    from gitmem.records.units import PART_CHARS

    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    text = pasted_prose(2_000_000) + "\nThe quetzalcoatl rollout waits for the freeze."
    run_gitmem("memory", "write", "--agent", "pasted", repo=repo, input=text)
    hits = search(repo, "quetzalcoatl rollout")
    assert hits[0]["record"] == "agent:pasted" and hits[0]["unit"] == "block"
    assert "**quetzalcoatl**" in hits[0]["snippet"]
    read = json.loads(run_gitmem("unit", "agent:pasted", str(hits[0]["unit_id"]), "--json",
                                 repo=repo).stdout)
    asked = next(unit for unit in read if unit["asked"])
    assert "quetzalcoatl rollout" in asked["text"] and len(asked["text"]) <= PART_CHARS
    assert hits[0]["unit_id"] >= 2_000_000 // PART_CHARS  # where in the block: at its end
    assert len(search(repo, "deploy friday", "--limit", "5")) == 5


def test_one_huge_message_gets_a_snippet_of_its_best_part(tmp_path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    from gitmem.bench.search import pasted_prose
    with Gitmem.open(repo) as mem:
        mem.sessions.append("cc", "s1", [{"id": "m1", "role": "user",
                                           "content": pasted_prose(3_000_000) + " zanzibar ferry"}])
    hits = search(repo, "zanzibar ferry")
    assert [(hit["record"], hit["unit_id"]) for hit in hits] == [("session:cc/s1", "m1")]
    assert "**zanzibar** **ferry**" in hits[0]["snippet"]


def test_a_turn_is_found_by_the_words_of_the_turn_before_it_though_that_one_ranks_too_low(tmp_path):
    """Asked a question, a message is found by its own words and, at a lower weight, by those
    of the message before it in its session (indexed with it): after a mention of saffron far
    down the ranking (sixty turns say it twice), "the quokka" outranks the same words after
    other words. A single word is looked for in a unit's own words only."""
    with Gitmem.open(tmp_path / "repo") as mem:
        mem.sessions.write("cc", "other", [
            {"id": "o1", "role": "user", "content": "We looked at the stalls there."},
            {"id": "o2", "role": "user", "content": "The quokka was asleep."}])
        mem.sessions.write("cc", "noise", [{"role": "user", "content": "saffron saffron"}] * 60
                           + [{"role": "user", "content": f"nothing to see {i}"} for i in range(200)])
        for said in ({"id": "t1", "role": "user", "content": "We bought saffron there."},
                     {"id": "t2", "role": "user", "content": "The quokka was asleep."}):
            mem.sessions.append("cc", "talk", [said])  # a commit each: the text before from the file
        assert [hit.unit_id for hit in mem.search("quokka saffron?", limit=1)] == ["t2"]
        assert [hit.unit_id for hit in mem.search("quokka")] == ["o2", "t2"]  # its own words: a tie


def test_a_question_naming_a_time_prefers_the_messages_of_that_time(tmp_path):
    """A message's own date (createdAt, not the commit's: all were written today) ranks it
    higher for a question naming its time; a question naming none ranks them by their words."""
    with Gitmem.open(tmp_path / "repo") as mem:
        mem.sessions.write("cc", "s1", [
            {"id": "july", "role": "user", "content": "We went camping by the lake with the kids.",
             "createdAt": "2023-07-10T09:00:00Z"},
            {"id": "may", "role": "user", "content": "We went camping by the lake with the dogs.",
             "createdAt": "2023-05-08T13:56:00Z"},
            {"id": "august", "role": "user", "content": "Camping again, by the lake!",
             "createdAt": "2023-08-20T09:00:00+02:00"}])
        asked = lambda question: [hit.unit_id for hit in mem.search(question)]  # noqa: E731
        assert asked("Where did they go camping?") == ["august", "may", "july"]
        assert asked("Where did they go camping in July 2023?")[0] == "july"
        assert asked("Where did they go camping on 8 May, 2023?")[0] == "may"
        assert asked("Where did they go camping on May 8th, 2023?")[0] == "may"
        assert asked("Where did they go camping in May?")[0] == "may"  # any year's May
        assert asked("Where did they go camping in 2024?") == ["august", "may", "july"]  # none then
        assert asked("camping, May?")[0] == "august"  # a month alone is no time ("May I?")


def test_the_times_a_question_names():
    from datetime import datetime, timezone

    from gitmem.search.when import periods

    def days(question: str) -> list[tuple[str, str] | int]:
        return [period.month if period.month else tuple(
            datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%d %H")
            for moment in (period.start, period.end)) for period in periods(question, now=0)]

    assert days("What did she donate in December 2023?") == [("2023-11-30 10", "2024-01-01 12")]
    assert days("Who came on October 13, 2023?") == [("2023-10-12 10", "2023-10-14 12")]
    assert days("who came on 1st of February, 2023") == [("2023-01-31 10", "2023-02-02 12")]
    assert days("since 2024-02-03?") == [("2024-02-02 10", "2024-02-04 12")]
    assert days("How often in 2023?") == [("2022-12-31 10", "2024-01-01 12")]
    assert days("When did she go camping in June?") == [6]
    assert days("What happened last week?") == [("1969-12-25 00", "1970-01-01 00")]
    assert days("May I ask what you did?") == days("the 31 February 2023") == days("room 2023") == []
