"""The gitmem command, run as a real subprocess on real repositories."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem


@pytest.fixture
def repo(repo_path):
    run_gitmem("init", str(repo_path))
    return repo_path


def assert_one_line_error(done, *, code: int | None = None, says: str = "") -> None:
    assert done.returncode != 0 if code is None else done.returncode == code
    assert done.stdout == ""
    assert done.stderr.startswith("gitmem") and done.stderr.count("\n") == 1, done.stderr
    assert "Traceback" not in done.stderr and "Errno" not in done.stderr
    assert says in done.stderr, done.stderr


def test_init_creates_the_repository_with_readme_and_attributes(repo_path):
    done = run_gitmem("init", str(repo_path))
    assert str(repo_path) in done.stdout
    git = Git(repo_path)
    assert sorted(git("ls-tree", "--name-only", "HEAD").split()) == [".gitattributes", "README.md"]
    assert "memory/user.md" in (repo_path / "README.md").read_text()
    assert git.log(fmt="%s") == ["init: gitmem repository"]
    assert git.status() == ""
    run_gitmem("init", str(repo_path))  # again: nothing to do, no new commit
    assert git.count() == 1


def test_init_takes_repo_or_environment(tmp_path):
    run_gitmem("init", repo=tmp_path / "by-option")
    run_gitmem("init", env={"GITMEM_REPO": str(tmp_path / "by-env")})
    run_gitmem("init", env={"GITMEM_REPO": "", "XDG_DATA_HOME": str(tmp_path / "data")})
    for path in ("by-option", "by-env", "data/gitmem"):
        assert Git(tmp_path / path).count() == 1, path


def test_memory_commands(repo, cli, git):
    cli("memory", "write", "--user", input="likes tea\n")
    assert cli("memory", "read", "--user").stdout == "likes tea\n"
    cli("memory", "write", "--agent", "ext:corp/reviewer", "--append", input="first")
    cli("memory", "write", "--agent", "ext:corp/reviewer", "--append", input="second\n")
    assert cli("memory", "read", "--agent", "ext:corp/reviewer").stdout == "first\n\nsecond\n"
    assert (repo / "memory/agents/ext%3acorp%2freviewer.md").is_file()
    count = git.count()
    cli("memory", "write", "--user", input="likes tea")  # identical: succeeds, no commit
    assert git.count() == count
    cli("memory", "delete", "--agent", "ext:corp/reviewer")
    assert cli("memory", "read", "--agent", "ext:corp/reviewer").stdout == ""
    cli("memory", "delete", "--agent", "ext:corp/reviewer")  # nothing there: succeeds, no commit
    assert git.count() == count + 1
    assert git.status() == ""


def test_memory_uses_gitmem_repo_from_the_environment(repo):
    run_gitmem("memory", "write", "--user", input="via env", env={"GITMEM_REPO": str(repo)})
    assert run_gitmem("memory", "read", "--user", repo=repo).stdout == "via env\n"


def test_session_commands(repo, cli, git):
    body = {"messages": [{"id": "m1", "role": "user", "content": "hi ✓", "extra": {"z": 1, "a": 2}}],
            "agentSessionId": "resume-1", "workingDir": "/home/me"}
    cli("session", "write", "claude-code", "s1", input=json.dumps(body))
    cli("session", "write", "ext:corp/x", "s/2", input='{"messages": null}')
    read = json.loads(cli("session", "read", "claude-code", "s1").stdout)
    assert read == {"messages": body["messages"], "agentSessionId": "resume-1"}
    assert list(read["messages"][0]["extra"]) == ["z", "a"]
    assert json.loads(cli("session", "read", "ext:corp/x", "s/2").stdout) == {
        "messages": [], "agentSessionId": ""}
    assert sorted(cli("session", "list").stdout.splitlines()) == ["claude-code\ts1", "ext:corp/x\ts/2"]
    cli("session", "delete", "claude-code", "s1")
    assert json.loads(cli("session", "read", "claude-code", "s1").stdout) == {
        "messages": [], "agentSessionId": ""}
    assert cli("session", "list").stdout == "ext:corp/x\ts/2\n"
    assert git.status() == ""


def test_session_append(repo, cli, git):
    cli("session", "write", "claude-code", "s1", input=json.dumps(
        {"messages": [{"id": "m1", "content": "hi"}], "agentSessionId": "r1", "workingDir": "/w"}))
    cli("session", "append", "claude-code", "s1",
        input=json.dumps({"messages": [{"id": "m2", "content": "ho ✓", "extra": {"z": 1, "a": 2}}]}))
    read = json.loads(cli("session", "read", "claude-code", "s1").stdout)
    assert read == {"messages": [{"id": "m1", "content": "hi"},
                                 {"id": "m2", "content": "ho ✓", "extra": {"z": 1, "a": 2}}],
                    "agentSessionId": "r1"}
    assert git.log(fmt="%s")[0] == "session: append 1 message to claude-code/s1"
    cli("session", "append", "claude-code", "s1",
        input='{"messages": [{"id": "m3"}], "agentSessionId": "r2"}')
    meta = json.loads((repo / "sessions/claude-code/s1/meta.json").read_text())
    assert (meta["agentSessionId"], meta["workingDir"]) == ("r2", "/w")
    count = git.count()
    cli("session", "append", "claude-code", "s1", input='{"messages": []}')  # succeeds, no commit
    cli("session", "append", "ext:corp/x", "new", input='{"messages": [{"id": "n1"}]}')
    assert git.count() == count + 1
    assert json.loads(cli("session", "read", "ext:corp/x", "new").stdout) == {
        "messages": [{"id": "n1"}], "agentSessionId": ""}
    assert git.status() == ""


def test_log_of_a_record_newest_first(repo, cli, git):
    cli("memory", "write", "--agent", "a/b", input="one")
    cli("memory", "write", "--user", input="user")
    cli("memory", "write", "--agent", "a/b", "--append", input="two")
    cli("session", "write", "claude-code", "s1", input='{"messages": []}')
    lines = cli("log", "agent:a/b").stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("memory: append to agent a/b")
    assert lines[1].endswith("memory: replace agent a/b")
    assert lines[0].split()[0] == git.log("memory/agents/a%2fb.md")[0][:10]
    assert len(cli("log").stdout.splitlines()) == git.count() == 5
    assert len(cli("log", "-n", "2").stdout.splitlines()) == 2
    assert "session: write claude-code/s1" in cli("log", "session:claude-code/s1").stdout
    assert cli("log", "thread:none-yet").stdout == ""
    entries = json.loads(cli("log", "user", "--json").stdout)
    assert [e["id"] for e in entries] == git.log("memory/user.md")
    host = socket.gethostname()
    assert entries[0]["email"] == f"gitmem@{host}"
    assert entries[0]["trailers"] == {"Gitmem-Op": "memory.replace", "Gitmem-Id": "user"}


@pytest.mark.parametrize("args, stdin, says", [
    (("log", "nonsense"), None, "not a record name"),
    (("log", "session:no-slash"), None, "not a record name"),
    (("session", "write", "t", "s"), "not json", "not JSON"),
    (("session", "write", "t", "s"), '{"messages": 5}', "JSON object"),
    (("session", "write", "t", "s"), "[]", "JSON object"),
    (("session", "append", "t", "s"), "not json", "not JSON"),
    (("session", "append", "t", "s"), '{"messages": {}}', "JSON object"),
])
def test_bad_input_is_one_line_on_stderr(repo, cli, git, args, stdin, says):
    count = git.count()
    assert_one_line_error(cli(*args, input=stdin, check=False), code=1, says=says)
    assert git.count() == count


@pytest.mark.parametrize("args", [("memory", "read"), ("memory", "read", "--user", "--agent", "x"),
                                  ("memory", "frobnicate"), ("nonsense",), ("log", "-n", "x")])
def test_usage_errors_are_one_line_too(repo, cli, args):
    assert_one_line_error(cli(*args, check=False), code=2)


def test_a_missing_repository_is_an_error_not_a_new_repository(tmp_path):
    missing = tmp_path / "missing"
    done = run_gitmem("memory", "read", "--user", repo=missing, check=False)
    assert_one_line_error(done, code=1, says="gitmem init")
    assert not missing.exists()


def run_bench(*args: str) -> subprocess.CompletedProcess:
    """``gitmem bench ARGS``: no deadline a loaded machine could miss (only a bound
    against a hang), so the smoke tests run a small set of scenarios."""
    done = subprocess.run([sys.executable, "-m", "gitmem", "bench", *args], capture_output=True,
                          text=True, env=SUBPROCESS_ENV, timeout=BENCH_HANG)
    assert done.returncode == 0, done.stderr
    return done


BENCH_HANG = 1800  # seconds: the quick scenarios below take ~10 s on a quiet 2-core machine


def test_bench_quick_prints_one_table_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    done = run_bench("--quick", "--only", "^(memory_write|session_write|serve_writes)$",
                     "--json", str(out))
    table = done.stdout.splitlines()
    assert table[0].startswith("gitmem bench --quick")
    rows = json.loads(out.read_text())["rows"]
    assert len(table) == 3 + len(rows)  # the machine, the header, a line a row, and the count
    assert table[-1].startswith(f"{len(rows)} rows, 0 failed")
    measured = {(r["scenario"], r["repo"], r["what"]) for r in rows if r["ratio"] is None}
    for repo in ("10 files", "300 files"):
        for what in ("store: MemoryStore.write", "floor: pygit2 commit", "git CLI: commit -a"):
            assert ("memory write", repo, what) in measured
    targets = [(r["what"], r["target"]) for r in rows if r["ratio"] is not None]
    # issue 39: at most 1.5x a raw pygit2 commit plus the index entry; git commit -a for reference
    assert targets.count(("store: MemoryStore.write / floor + index entry (keeping the index in step)",
                          1.5)) == 2
    assert targets.count(("store: MemoryStore.write / git CLI: commit -a", None)) == 2
    assert ("store: append 1 message to 5,000 / store: append 1 message to 10", 1.5) in targets
    assert ("store: +1 message to 5,000 / store: +1 message to 10", None) in targets
    for scenario, store in (("serve memory", "MemoryStore.write"),
                            ("serve session", "SessionStore.write, 200 messages")):
        assert ("serve --no-watch: round trip / store: " + store, 1.2) in targets
        assert (scenario, "10 files", f"child process: {store}, asked over a pipe") in measured
    assert ("serve --no-watch: round trip / store: SessionStore.write, 400 messages", None) in targets
    assert targets.count(("  the protocol's own share: round trip / child process", None)) == 3
    assert all(r["median_ms"] > 0 and r["p95_ms"] >= r["median_ms"] and r["n"] >= 2
               for r in rows if r["n"])
    assert all(r["value"] is not None for r in rows if not r["n"] and r["ratio"] is None)
    assert all(r["met"] in (True, False) for r in rows if r["target"] is not None)


def test_bench_keeps_every_scenario_of_the_earlier_issues():
    """Which scenarios exist, without running them all (that is `gitmem bench`'s job)."""
    from gitmem.bench.core import scenarios
    assert {s.__name__ for s in scenarios()} >= {
        "memory_write", "memory_append", "serve_durability", "session_write", "session_nui",
        "thread_append", "reads", "thread_list", "serve_writes", "serve_cold_start",
        "hand_edit_latency", "sync_diverged", "history_size", "history_import"}


def test_bench_only_runs_the_scenarios_that_match(tmp_path):
    out = tmp_path / "bench.json"
    run_bench("--quick", "--only", "memory_append", "--json", str(out))
    assert {r["scenario"] for r in json.loads(out.read_text())["rows"]} == {"memory append"}
    assert_one_line_error(run_gitmem("bench", "--only", "no-such-scenario", check=False), code=1,
                          says="no scenario matches")
