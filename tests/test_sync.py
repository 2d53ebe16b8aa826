"""`gitmem sync` between machines: a bare repository in tmp_path is the remote, and
each machine is a repository of its own (a `git clone`, or a fresh `gitmem init`).

Both machines write independently, sync in either order, and end on the same commit
with everything either wrote; random divergent histories lose nothing; plain `git
pull` merges the JSONL logs; concurrent pushes are retried; an unreachable remote is
a clear error; a private key is refused at push time; `gitmem serve` syncs in the
background without making requests wait.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import pytest

from conftest import GITHUB_TOKEN, SUBPROCESS_ENV, Git, python_script, run_gitmem
from gitmem.git.base import EngineError, Identity
from gitmem.git.index import STAT_ON_WRITE
from gitmem.repository import Gitmem
from gitmem.sync.exchange import SecretsRefused, SyncError, UnrelatedHistories, read_state, sync
from test_write_tail import stat_of

MARKERS = (b"<<<<<<<", b">>>>>>>", b"|||||||")
OPENSSH_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
               "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
               "-----END OPENSSH PRIVATE KEY-----")


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch):
    """The git subprocesses gitmem starts see no user or system configuration."""
    for key in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL",
                "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, SUBPROCESS_ENV[key])


@pytest.fixture
def remote(tmp_path) -> Path:
    path = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)],
                   check=True, env=SUBPROCESS_ENV)
    return path


@pytest.fixture
def opened():
    """``opened(Gitmem)`` closes it at the end of the test."""
    with ExitStack() as stack:
        yield lambda mem: stack.enter_context(mem)


@pytest.fixture
def machines(tmp_path, remote, opened):
    """Machine A (`gitmem init`, pushed) and machine B (`git clone` of the remote)."""
    a = opened(Gitmem.open(tmp_path / "a"))
    a.engine.remotes.add("origin", str(remote))
    sync(a)
    subprocess.run(["git", "clone", "--quiet", str(remote), str(tmp_path / "b")], check=True,
                   env=SUBPROCESS_ENV)
    b = opened(Gitmem.open(tmp_path / "b", create=False))
    return a, b


def files_at_head(mem: Gitmem) -> dict[str, bytes]:
    snapshot = mem.engine.snapshot()
    return {path: snapshot.read(path) for path in snapshot.files()}


def assert_clean(mem: Gitmem) -> None:
    """No conflict markers in any markdown or JSONL file, every JSONL line parses, fsck clean."""
    for path, data in files_at_head(mem).items():
        if path.endswith((".md", ".jsonl")):
            assert not any(marker in data for marker in MARKERS), f"conflict marker in {path}"
        if path.endswith(".jsonl"):
            for line in data.splitlines():
                json.loads(line)
    Git(mem.engine.workdir).fsck()


# -- both machines write, sync in either order ------------------------------------------------


def write_everything(mem: Gitmem, who: str) -> None:
    """Memory appends and replaces, session writes, thread appends, and a hand edit."""
    mem.memory.write(f"{who} says hello", mode="append")
    mem.memory.write(f"{who} likes tea", mode="append")
    mem.memory.write(f"own memory of {who}", agent_id=f"agent-{who}")
    mem.memory.write(f"{who} reviewed the code", agent_id="shared", mode="append")
    mem.sessions.write("claude-code", f"session-{who}", [{"id": f"{who}-1", "content": "hi"}],
                       agent_session_id=f"resume-{who}", working_dir=f"/home/{who}")
    base, _ = mem.sessions.read("claude-code", "shared")
    mem.sessions.write("claude-code", "shared", base + [{"id": f"{who}-m", "content": who}])
    mem.threads.append_events("shared-thread", "planner", [{"type": "RUN_STARTED", "runId": who}])
    mem.threads.append_events(f"thread-{who}", "planner", [{"type": "CUSTOM", "value": who}])
    mem.threads.save_messages("shared-thread", [{"id": f"tm-{who}", "role": "user"}])
    # a person edits a memory file and commits it with plain git ...
    path = mem.engine.worktree.path("memory/agents/shared.md")
    path.write_text(path.read_text() + f"\nedited by hand on {who}\n")
    Git(mem.engine.workdir)("commit", "--quiet", "-m", f"hand edit on {who}", "--",
                            "memory/agents/shared.md")
    # ... and saves another one that nobody has committed yet
    path = mem.engine.worktree.path("memory/user.md")
    path.write_text(path.read_text() + f"\nsaved in an editor on {who}\n")


def assert_has_everything(mem: Gitmem, who: str) -> None:
    user = mem.memory.read()
    assert f"{who} says hello" in user and f"{who} likes tea" in user
    assert f"saved in an editor on {who}" in user
    assert mem.memory.read(agent_id=f"agent-{who}") == f"own memory of {who}\n"
    shared = mem.memory.read(agent_id="shared")
    assert f"{who} reviewed the code" in shared and f"edited by hand on {who}" in shared
    assert mem.sessions.read("claude-code", f"session-{who}") == (
        [{"id": f"{who}-1", "content": "hi"}], f"resume-{who}")
    assert {"id": f"{who}-m", "content": who} in mem.sessions.read("claude-code", "shared")[0]
    assert {"type": "RUN_STARTED", "runId": who} in mem.threads.read_events("shared-thread")
    assert mem.threads.read_events(f"thread-{who}") == [{"type": "CUSTOM", "value": who}]
    assert {"id": f"tm-{who}", "role": "user"} in mem.threads.read_messages("shared-thread")


@pytest.mark.parametrize("first", ["a", "b"])
def test_two_machines_write_independently_and_sync_in_either_order(machines, first):
    a, b = machines
    a.memory.write("shared start", agent_id="shared")
    a.sessions.write("claude-code", "shared", [{"id": "m0", "content": "start"}])
    a.threads.append_events("shared-thread", "planner", [{"type": "RUN_STARTED", "runId": "0"}])
    sync(a)
    assert sync(b).how == "fast-forward"
    write_everything(a, "a")
    write_everything(b, "b")

    one, other = (a, b) if first == "a" else (b, a)
    assert sync(one).outgoing > 0
    merged = sync(other)
    assert merged.how == "merge" and merged.incoming > 0
    assert sync(one).how == "fast-forward"

    assert a.engine.head() == b.engine.head()
    for mem in (a, b):
        assert_has_everything(mem, "a")
        assert_has_everything(mem, "b")
        assert mem.sessions.read("claude-code", "shared")[0][0] == {"id": "m0", "content": "start"}
        assert_clean(mem)
    # a merge commit names the remote, never its URL
    info = a.engine.log.commit_info(a.engine.head())
    assert info.trailers["Gitmem-Op"] == "sync.merge" and "remote.git" not in info.message


def test_reads_through_gitmem_serve_after_a_sync(machines):
    a, b = machines
    write_everything(a, "a")
    write_everything(b, "b")
    sync(a), sync(b), sync(a)
    for mem in (a, b):
        mem.engine.close()
        answers = serve_requests(mem.engine.workdir, [
            ("storage.userMemory.read", {"handlerId": "u"}),
            ("storage.agentMemory.read", {"handlerId": "m", "agentId": "shared"}),
            ("storage.session.read", {"handlerId": "s", "agentType": "claude-code",
                                      "sessionId": "session-b", "workingDir": "/x"}),
        ])
        assert "a says hello" in answers[0]["content"] and "b likes tea" in answers[0]["content"]
        assert "edited by hand on a" in answers[1]["content"]
        assert "edited by hand on b" in answers[1]["content"]
        assert answers[2] == {"messages": [{"id": "b-1", "content": "hi"}], "agentSessionId": "resume-b"}
        assert Git(mem.engine.workdir).status() == ""


def serve_requests(repo: Path, calls: list[tuple[str, dict]]) -> list:
    """Send ``calls`` to a fresh ``gitmem serve``, close its input, return the results."""
    lines = "".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n"
                    for i, (method, params) in enumerate(calls, 1))
    done = subprocess.run([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo)],
                          input=lines, capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=60)
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    assert all("result" in answers[i] for i in answers), done.stdout
    return [answers[i]["result"] for i in range(1, len(calls) + 1)]


def test_two_fresh_repositories_with_unrelated_histories_merge_when_asked(tmp_path, remote, opened):
    a = opened(Gitmem.open(tmp_path / "a"))
    b = opened(Gitmem.open(tmp_path / "b", identity=Identity("other", "other@example.org")))
    assert a.engine.head() != b.engine.head()
    for mem, who in ((a, "a"), (b, "b")):
        mem.engine.remotes.add("origin", str(remote))
        mem.memory.write(f"from {who}", mode="append")
    sync(a)
    head = b.engine.head()
    with pytest.raises(UnrelatedHistories, match="--allow-unrelated-histories"):
        sync(b)
    assert b.engine.head() == head
    assert sync(b, allow_unrelated_histories=True).how == "merge"
    sync(a)
    assert a.memory.read() == b.memory.read() == "from b\n\nfrom a\n"
    assert_clean(a)


def test_a_cleared_thread_comes_back_when_the_other_machine_appended(machines):
    a, b = machines
    a.threads.append_events("t", "planner", [{"type": "CUSTOM", "n": n} for n in range(3)])
    sync(a), sync(b)
    a.threads.clear("t")
    b.threads.append_events("t", "planner", [{"type": "CUSTOM", "n": 3}])
    sync(a), sync(b), sync(a)
    for mem in (a, b):
        assert mem.threads.read_events("t") == [{"type": "CUSTOM", "n": n} for n in range(4)]


def test_a_pending_hand_edit_is_committed_first_and_merged(machines):
    a, b = machines
    a.memory.write("first version", agent_id="x")
    sync(a), sync(b)
    b.memory.write("written on b", agent_id="x")
    sync(b)
    edited = a.engine.worktree.path("memory/agents/x.md")
    edited.write_text("typed by a person, not committed yet\n")
    assert sync(a).how == "merge"
    assert edited.read_text() == "typed by a person, not committed yet\n\nwritten on b\n"
    assert a.memory.read(agent_id="x") == edited.read_text()
    assert any(c.trailers.get("Gitmem-Op") == "hand-edit" for c in a.log("agent:x"))


def test_a_fast_forward_leaves_a_file_saved_meanwhile_alone(machines):
    """The engine's guard for an edit saved after sync committed the pending ones."""
    a, b = machines
    a.memory.write("first version", agent_id="x")
    sync(a), sync(b)
    b.memory.write("written on b", agent_id="x")
    sync(b)
    tip = a.engine.remotes.fetch("origin")
    edited = a.engine.worktree.path("memory/agents/x.md")
    edited.write_text("typed by a person, not committed yet\n")
    assert a.engine.fast_forward(a.engine.head(), tip) == ["memory/agents/x.md"]
    assert edited.read_text() == "typed by a person, not committed yet\n"
    assert a.engine.head() == b.engine.head()
    with pytest.raises(EngineError, match="does not descend"):
        a.engine.fast_forward(tip, a.engine.log.history()[-1].id)


def test_a_fast_forward_stages_what_it_wrote_as_a_write_does(machines):
    """Its small files with their stat data, a big one left to the refresher."""
    a, b = machines
    b.memory.write("small", agent_id="small")
    b.memory.write("x" * (STAT_ON_WRITE + 10), agent_id="big")
    sync(b)
    a.engine.fast_forward(a.engine.head(), a.engine.remotes.fetch("origin"))
    git = Git(a.engine.workdir)
    assert "0:0" not in stat_of(git, "memory/agents/small.md")
    assert stat_of(git, "memory/agents/big.md") == ("0:0", "0:0")  # hashed later, off the write


def test_sync_moves_the_branch_only_forward_and_backup_saves_the_tip(machines):
    a, b = machines
    a.memory.write("a", agent_id="a")
    b.memory.write("b", agent_id="b")
    sync(a), sync(b), sync(a)
    git = Git(a.engine.workdir)
    assert git("for-each-ref", "refs/gitmem/backup") == ""  # nothing ever needed one
    tip = a.engine.head()
    name = a.engine.refs.backup()
    assert name.startswith("refs/gitmem/backup/") and git("rev-parse", name).strip() == tip
    assert a.engine.refs.backup() != name


# -- random divergent histories ------------------------------------------------------------


def state(mem: Gitmem) -> dict[str, set]:
    """Every record as the set of items it holds (memory lines, message and event ids)."""
    found: dict[str, set] = {"user": set(mem.memory.read().split())}
    for agent in mem.memory.agents():
        found[f"agent:{agent}"] = set(mem.memory.read(agent_id=agent).split())
    for agent_type, session_id in mem.sessions.list():
        found[f"session:{session_id}"] = {m["id"] for m in mem.sessions.read(agent_type, session_id)[0]}
    for thread in mem.threads.list_threads():
        found[f"events:{thread['id']}"] = {e["id"] for e in mem.threads.read_events(thread["id"])}
        found[f"messages:{thread['id']}"] = {m["id"] for m in mem.threads.read_messages(thread["id"])}
    return found


def random_writes(mem: Gitmem, rng: random.Random, who: str, counter: list[int]) -> None:
    def item() -> str:
        counter[0] += 1
        return f"{who}{counter[0]}"

    for _ in range(rng.randint(1, 5)):
        agent = rng.choice([None, "x", "y"])
        kind = rng.choice(["append", "append", "replace", "delete", "session", "session-retry",
                           "events", "messages", "clear"])
        session, thread = rng.choice(["s1", "s2"]), rng.choice(["t1", "t2"])
        if kind in ("append", "replace"):
            mem.memory.write(item(), agent_id=agent, mode=kind)
        elif kind == "delete":
            mem.memory.delete(agent_id=agent)
        elif kind.startswith("session"):
            messages = mem.sessions.read("nui", session)[0]
            if kind == "session-retry":
                messages = messages[:-1]  # nui drops the last answer and writes the list again
            mem.sessions.write("nui", session, messages + [{"id": item()}])
        elif kind == "events":
            mem.threads.append_events(thread, "planner", [{"id": item()} for _ in range(rng.randint(1, 3))])
        elif kind == "messages":
            mem.threads.save_messages(thread, mem.threads.read_messages(thread) + [{"id": item()}])
        else:
            mem.threads.clear(thread)


@pytest.mark.parametrize("seed", range(3))
def test_random_divergent_histories_lose_nothing(tmp_path, remote, opened, seed):
    rng = random.Random(seed)
    machines = []
    for name in ("a", "b"):
        mem = opened(Gitmem.open(tmp_path / name))
        mem.engine.remotes.add("origin", str(remote))
        sync(mem, allow_unrelated_histories=True)  # two first commits (or one: made in the same second)
        machines.append(mem)
    a, b = machines
    counter = [0]
    base = state(a)
    for _ in range(12):
        random_writes(a, rng, "a", counter)
        random_writes(b, rng, "b", counter)
        before_a, before_b = state(a), state(b)
        heads = a.engine.head(), b.engine.head()
        first, second = (a, b) if rng.random() < 0.5 else (b, a)
        sync(first), sync(second), sync(first)
        assert a.engine.head() == b.engine.head()
        assert a.engine.log.is_ancestor(heads[0], a.engine.head())  # nothing reset away
        assert a.engine.log.is_ancestor(heads[1], a.engine.head())
        after = state(a)
        assert state(b) == after
        for record in set(before_a) | set(before_b):
            mine, theirs, old = (s.get(record, set()) for s in (before_a, before_b, base))
            must_have = (mine - old) | (theirs - old) | (mine & theirs)
            assert must_have <= after.get(record, set()), f"{record} lost {must_have - after.get(record, set())}"
        base = after
    assert_clean(a)


# -- plain git ----------------------------------------------------------------------------


def test_plain_git_pull_merges_jsonl_logs_by_union(machines):
    a, b = machines
    attributes = a.engine.gitdir / "info" / "attributes"
    assert "*.jsonl merge=union" in attributes.read_text()
    a.threads.append_events("t", "planner", [{"type": "RUN_STARTED", "runId": "0"}])
    sync(a), sync(b)
    a.threads.append_events("t", "planner", [{"type": "CUSTOM", "from": "a"}])
    b.threads.append_events("t", "planner", [{"type": "CUSTOM", "from": "b"}])
    b.sessions.write("nui", "s", [{"id": "b"}])
    a.engine.close(), b.engine.close()
    git_a, git_b = Git(a.engine.workdir), Git(b.engine.workdir)
    git_a("push", "--quiet", "origin", "main")
    git_b("pull", "--quiet", "--no-rebase", "origin", "main", check=False)
    unmerged = git_b("diff", "--name-only", "--diff-filter=U").split()
    # Only the thread's meta.json (both sides bumped updatedAt) needs gitmem's field merge.
    assert unmerged == ["threads/t/meta.json"]
    events = (b.engine.workdir / "threads/t/events/000000.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in events] == [
        {"type": "RUN_STARTED", "runId": "0"}, {"type": "CUSTOM", "from": "b"},
        {"type": "CUSTOM", "from": "a"}]


# -- pushes that race, remotes that fail, secrets ---------------------------------------------


def b_pushes_first(a, b, tmp_path) -> Path:
    """b writes, and the moment a pushes, b syncs first (once, from a's pre-push hook): a's
    push is then refused by the remote. The file the hook leaves when it has run."""
    b.memory.write("written on b while a was pushing", agent_id="b")
    flag = tmp_path / "b-pushed"
    hook = a.engine.gitdir / "hooks" / "pre-push"
    hook.write_text(f"#!/bin/sh\n[ -e {flag} ] && exit 0\ntouch {flag}\n"
                    f"exec {sys.executable} -m gitmem sync --repo {b.engine.workdir} >/dev/null\n")
    hook.chmod(0o755)
    return flag


def test_a_push_rejected_by_a_concurrent_push_is_retried(machines, tmp_path):
    a, b = machines
    flag = b_pushes_first(a, b, tmp_path)
    a.memory.write("written on a", agent_id="a")
    result = sync(a)
    assert flag.exists() and result.attempts == 2 and result.how == "merge"
    remote = Git(tmp_path / "remote.git")
    assert remote("show", "main:memory/agents/a.md") == "written on a\n"
    assert remote("show", "main:memory/agents/b.md") == "written on b while a was pushing\n"
    assert remote("rev-parse", "main").strip() == a.engine.head()


def test_a_retried_push_scans_nothing_it_scanned_before(machines, tmp_path):
    a, b = machines
    b_pushes_first(a, b, tmp_path)
    a.sessions.write("nui", "long", [{"id": f"m{i}", "content": f"message {i}"} for i in range(500)])
    a.memory.write("written on a", agent_id="a")
    result = sync(a)
    assert result.attempts == 2 and result.how == "merge"
    first, retry = result.scanned_bytes
    assert first > 500 * len('{"id":"m0","content":"message 0"}') and retry == 0
    assert Git(tmp_path / "remote.git")("show", "main:memory/agents/a.md") == "written on a\n"


def test_a_refused_push_scans_nothing_again_and_a_new_secret_is_still_refused(machines, tmp_path):
    a, _ = machines
    a.memory.write(f"deploy key:\n{OPENSSH_KEY}", agent_id="ops")
    a.sessions.write("nui", "long", [{"id": f"m{i}", "content": f"message {i}"} for i in range(300)])
    with pytest.raises(SecretsRefused) as first:
        sync(a)
    with pytest.raises(SecretsRefused) as again:
        sync(a)
    assert first.value.scanned_bytes > 0 and again.value.scanned_bytes == 0
    assert [str(f) for f in again.value.findings] == [str(f) for f in first.value.findings]
    assert [(f.path, f.line) for f in again.value.findings] == [("memory/agents/ops.md", 2)]
    # what was remembered names no secret
    remembered = (a.engine.private_dir / "secret-scan.json").read_bytes()
    assert b"PRIVATE KEY" not in remembered and b"b3BlbnNzaC1rZXk" not in remembered
    # a new unpushed commit appending another secret: only its own lines are scanned
    a.sessions.append("nui", "long", [{"id": "m300", "content": f"my token is {GITHUB_TOKEN}"}])
    with pytest.raises(SecretsRefused) as third:
        sync(a)
    assert 0 < third.value.scanned_bytes < 200
    assert {(f.path, f.line, f.kind) for f in third.value.findings} == {
        ("memory/agents/ops.md", 2, "private key block"),
        ("sessions/nui/long/messages/000000.jsonl", 301, "GitHub token")}
    before = Git(tmp_path / "remote.git")("rev-parse", "main")
    assert sync(a, allow_secrets=True).outgoing == 3
    assert Git(tmp_path / "remote.git")("rev-parse", "main") != before


def test_machines_syncing_all_at_once_all_land(tmp_path, remote):
    """Six clones append and sync at the same moment, three rounds: every sync lands (none
    gives up after a fixed number of refused pushes), nothing is lost, one head."""
    seed = tmp_path / "seed"
    with Gitmem.open(seed) as mem:
        mem.engine.remotes.add("origin", str(remote))
        sync(mem)
    names = [f"m{i}" for i in range(6)]
    for name in names:
        subprocess.run(["git", "clone", "--quiet", str(remote), str(tmp_path / name)], check=True,
                       env=SUBPROCESS_ENV)
    rounds = 3
    # each machine is one process; a line on its stdin starts a round, all at once
    script = ("import sys\n"
              "from gitmem.repository import Gitmem\nfrom gitmem.sync.exchange import sync\n"
              "name = sys.argv[1]\n"
              "with Gitmem.open(sys.argv[2], create=False) as mem:\n"
              "    for round_ in iter(lambda: sys.stdin.readline().strip(), ''):\n"
              "        mem.memory.write(f'{name} round {round_}', agent_id=name, mode='append')\n"
              "        mem.memory.write(f'{name} shared {round_}', agent_id='shared', mode='append')\n"
              "        mem.memory.write(f'{name} user {round_}', mode='append')\n"
              "        print(sync(mem).attempts, flush=True)\n")
    machines = [python_script(script, name, str(tmp_path / name), stderr=subprocess.PIPE)
                for name in names]
    try:
        for round_ in range(rounds):
            for machine in machines:
                machine.stdin.write(f"{round_}\n")
                machine.stdin.flush()
            for machine in machines:
                assert machine.stdout.readline().strip().isdigit(), machine.stderr.read()
    finally:
        for machine in machines:
            machine.stdin.close()
            machine.wait(timeout=60)
    assert [machine.returncode for machine in machines] == [0] * len(machines)
    for name in names:  # everyone takes in the others' last pushes
        with Gitmem.open(tmp_path / name, create=False) as mem:
            sync(mem)
    heads = {Git(tmp_path / name)("rev-parse", "main").strip() for name in names}
    assert heads == {Git(remote)("rev-parse", "main").strip()}
    with Gitmem.open(tmp_path / names[0], create=False) as mem:
        shared, user = mem.memory.read(agent_id="shared"), mem.memory.read()
        for name in names:
            own = mem.memory.read(agent_id=name)
            for round_ in range(rounds):
                assert f"{name} round {round_}" in own
                assert f"{name} shared {round_}" in shared and f"{name} user {round_}" in user
        assert_clean(mem)


def test_an_unreachable_remote_is_a_clear_error_and_local_writes_go_on(machines):
    a, _ = machines
    a.engine.close()
    repo = str(a.engine.workdir)
    Git(a.engine.workdir)("remote", "set-url", "origin", str(a.engine.workdir.parent / "gone.git"))
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="still written")
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "git fetch origin failed" in done.stderr
    assert "still written" in run_gitmem("memory", "read", "--user", repo=repo).stdout
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="and after")
    assert "and after" in run_gitmem("memory", "read", "--user", repo=repo).stdout
    with Gitmem.open(repo, create=False) as mem:
        recorded = read_state(mem.engine)
    assert recorded["remote"] == "origin" and "git fetch origin failed" in recorded["last_error"]
    assert "git fetch origin failed" in run_gitmem("status", repo=repo).stdout


def test_credentials_in_a_remote_url_never_show(machines):
    a, _ = machines
    a.engine.remotes.add("vault", "https://alice:s3cretPassw0rd@127.0.0.1:9/memory.git")
    with pytest.raises(SyncError) as raised:
        sync(a, "vault", interactive=False)
    state_text = (a.engine.private_dir / "sync-state.json").read_text()
    assert "s3cretPassw0rd" not in str(raised.value) and "s3cretPassw0rd" not in state_text
    assert "vault" in str(raised.value)


def test_a_private_key_is_refused_at_push_nothing_is_lost_and_allow_secrets_pushes(machines, tmp_path):
    a, _ = machines
    repo = str(a.engine.workdir)
    a.memory.write(f"deploy key:\n{OPENSSH_KEY}", agent_id="ops")
    a.engine.close()
    remote = Git(tmp_path / "remote.git")
    before = remote("rev-parse", "main")
    done = run_gitmem("sync", repo=repo, check=False)
    assert done.returncode == 1
    assert "memory/agents/ops.md:2: private key block" in done.stderr
    assert "b3BlbnNzaC1rZXk" not in done.stderr and "--allow-secrets" in done.stderr
    assert remote("rev-parse", "main") == before
    assert OPENSSH_KEY in run_gitmem("memory", "read", "--agent", "ops", repo=repo).stdout
    run_gitmem("sync", "--allow-secrets", repo=repo)
    assert OPENSSH_KEY in remote("show", "main:memory/agents/ops.md")
    run_gitmem("memory", "write", "--user", "--append", repo=repo, input="harmless")
    assert run_gitmem("sync", repo=repo).stdout == "out: 1 commit to origin\n"


def test_a_refused_secret_from_the_library_names_each_finding(machines):
    a, _ = machines
    a.sessions.write("nui", "s", [{"id": "m", "content": OPENSSH_KEY}])
    with pytest.raises(SecretsRefused) as raised:
        sync(a)
    assert raised.value.report()[0].startswith("sessions/nui/s/messages/000000.jsonl:1: private key block")
    assert read_state(a.engine)["last_error"].startswith("push to origin refused")


# -- the sync state and the CLI ------------------------------------------------------------


def test_merge_spots_are_recorded_until_someone_tidies_them(machines):
    a, b = machines
    a.memory.write("# Me\nprefers tea\nlives here", agent_id="p")
    sync(a), sync(b)
    a.memory.write("# Me\nprefers coffee\nlives here", agent_id="p")
    b.memory.write("# Me\nprefers water\nlives here", agent_id="p")
    sync(a)
    result = sync(b)
    assert [str(s) for s in result.spots] == [
        "memory/agents/p.md line 2: both versions kept (ours, a blank line, theirs)"]
    assert "memory/agents/p.md line 2" in b.engine.log.commit_info(b.engine.head()).message
    [spot] = read_state(b.engine)["merge_spots"]
    assert (spot["path"], spot["line"]) == ("memory/agents/p.md", 2)
    b.memory.write("a new first line\n\n" + b.memory.read(agent_id="p"), agent_id="p")
    assert read_state(b.engine)["merge_spots"][0]["line"] == 4  # follows the text
    b.memory.write("# Me\nprefers water\nlives here", agent_id="p")  # tidied
    assert read_state(b.engine)["merge_spots"] == []


def test_remote_add_and_sync_on_the_command_line(tmp_path, remote):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    run_gitmem("remote", "add", "backup", str(remote), repo=repo)
    assert run_gitmem("sync", repo=repo).stdout == "out: 1 commit to backup\n"
    assert run_gitmem("sync", "backup", repo=repo).stdout == "up to date with backup\n"
    done = run_gitmem("remote", "add", "backup", str(remote), repo=repo, check=False)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    done = run_gitmem("sync", "nowhere", repo=repo, check=False)
    assert done.returncode == 1 and "no remote named 'nowhere'" in done.stderr


# -- in the background ----------------------------------------------------------------------


class Server:
    """A ``gitmem serve`` subprocess spoken to one request at a time."""

    def __init__(self, repo: Path, *args: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gitmem", "serve", "--repo", str(repo), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=SUBPROCESS_ENV)
        self.next_id = 0

    def call(self, method: str, **params):
        self.next_id += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return answer["result"]

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def test_serve_syncs_in_the_background(machines):
    a, b = machines
    b.engine.close()
    server = Server(b.engine.workdir, "--sync-interval", "0.2")
    try:
        a.memory.write("written on a", agent_id="a")
        sync(a)
        deadline = time.monotonic() + 30
        while server.call("storage.agentMemory.read", handlerId="h", agentId="a")["content"] == "":
            assert time.monotonic() < deadline, "the background sync never brought a's write"
            time.sleep(0.1)
        server.call("storage.agentMemory.write", handlerId="h", agentId="b", content="from b",
                    writeMode="replace")
        while "memory/agents/b.md" not in Git(a.engine.workdir.parent / "remote.git")(
                "ls-tree", "-r", "--name-only", "main"):
            assert time.monotonic() < deadline, "the background sync never pushed b's write"
            time.sleep(0.1)
    finally:
        server.close()
    assert read_state(b.engine)["last_error"] is None


def test_requests_never_wait_for_a_background_sync_on_the_network(machines, tmp_path):
    a, _ = machines
    a.engine.close()
    # The remote answers only after 2 s; marker files show when the fetch began and ended.
    started, finished = tmp_path / "fetch-started", tmp_path / "fetch-finished"
    Git(a.engine.workdir)("config", "remote.origin.uploadpack",
                          f"touch {started}; sleep 2; touch {finished}; git-upload-pack")
    server = Server(a.engine.workdir, "--sync-interval", "60")
    try:
        deadline = time.monotonic() + 30
        while not started.exists():
            assert time.monotonic() < deadline, "the background sync never started"
            time.sleep(0.05)
        server.call("storage.userMemory.write", handlerId="h", content="answered at once",
                    writeMode="append")
        assert "answered at once" in server.call("storage.userMemory.read", handlerId="h")["content"]
        assert not finished.exists()
    finally:
        server.close()


def test_background_sync_failures_are_logged_recorded_and_retried_with_backoff(machines, tmp_path):
    a, _ = machines
    a.engine.close()
    (tmp_path / "remote.git").rename(tmp_path / "gone.git")  # the same remote, out of reach
    log_file = tmp_path / "serve.log"
    server = Server(a.engine.workdir, "--sync-interval", "0.1", "--log-file", str(log_file))
    try:
        deadline = time.monotonic() + 30
        while not log_file.exists() or log_file.read_text().count("background sync failed") < 4:
            assert time.monotonic() < deadline, "the background sync did not retry"
            time.sleep(0.1)
        server.call("storage.userMemory.write", handlerId="h", content="still fine",
                    writeMode="append")
    finally:
        server.close()
    delays = [float(line.split("next try in ")[1].split(" s")[0])
              for line in log_file.read_text().splitlines() if "background sync failed" in line]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8]
    recorded = read_state(a.engine)
    assert "git fetch origin failed" in recorded["last_error"] and recorded["last_sync"] is not None
