"""Fuzz suite: at least 10,000 generated request lines against one ``gitmem serve``.

The lines come from hypothesis strategies (seeded) and random bytes: invalid JSON and
UTF-8, NUL bytes, deep nesting, JSON that is no request, wrong types or no values in
every param of every method, huge strings and numbers, path-traversal and odd ids,
unknown methods, notifications. They go one at a time, as nui sends them. After each:
an answer within a bound, with the request's id exactly (null for a line whose id
cannot be read; none for a notification), well formed and never an internal error;
HEAD moved only for a write answered ok (or a notification). A fully valid write must
succeed and read back. At the end: one commit per move of HEAD, the server still
answers and shuts down cleanly, nothing changed outside the repository, the work tree
holds layout files only, private, and ``git fsck`` and ``git status`` are clean.

    GITMEM_TEST_SEED=5 GITMEM_FUZZ_LINES=50000 pytest -m fuzz
"""

from __future__ import annotations

import itertools
import json
import os
import random
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from conftest import SUBPROCESS_ENV, Git, run_gitmem
from gitmem.faces.rpc import INTERNAL_ERROR, MAX_LINE
from gitmem.stores.memory import normalise
from nui_client import NuiHost

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

SEED = int(os.environ.get("GITMEM_TEST_SEED", "1"))
LINES = int(os.environ.get("GITMEM_FUZZ_LINES", "10000"))
PER_EXAMPLE = 20  # lines per hypothesis example
TIMEOUT = 60  # seconds an answer may take (a huge write included)

ID, TEXT, MODE, OBJECTS, OWNER, FILTER = "id", "text", "mode", "objects", "owner", "filter"
METHODS: dict[str, dict[str, str]] = {
    "storage.info": {},
    "storage.session.read": {"handlerId": ID, "sessionId": ID, "agentType": ID, "workingDir": TEXT},
    "storage.session.write": {"handlerId": ID, "sessionId": ID, "agentType": ID,
                              "agentSessionId": ID, "workingDir": TEXT, "messages": OBJECTS},
    "storage.session.delete": {"handlerId": ID, "sessionId": ID, "agentType": ID,
                               "agentSessionId": ID, "workingDir": TEXT},
    "storage.agentMemory.read": {"handlerId": ID, "agentId": ID},
    "storage.agentMemory.write": {"handlerId": ID, "agentId": ID, "content": TEXT, "writeMode": MODE},
    "storage.agentMemory.delete": {"handlerId": ID, "agentId": ID},
    "storage.userMemory.read": {"handlerId": ID},
    "storage.userMemory.write": {"handlerId": ID, "content": TEXT, "writeMode": MODE},
    "storage.userMemory.delete": {"handlerId": ID},
    "extension.initialize": {"extensionName": ID, "extensionDir": TEXT, "apiUrl": TEXT},
    "threads.appendEvents": {"threadId": ID, "agentId": ID, "events": OBJECTS, "ownerId": OWNER},
    "threads.readEvents": {"threadId": ID},
    "threads.readState": {"threadId": ID},
    "threads.saveMessages": {"threadId": ID, "messages": OBJECTS},
    "threads.readMessages": {"threadId": ID},
    "threads.list": {"filter": FILTER},
    "threads.clear": {"threadId": ID},
}
WRITES = {m for m in METHODS if m.rsplit(".", 1)[1] in
          ("write", "delete", "appendEvents", "saveMessages", "clear")}
UNKNOWN_METHODS = ["storage.shutdown ", "Storage.info", "storage.session.Write", "threads.appendevents",
                   "storage", "", "__class__", "storage.info\u0000", "rpc.discover", "threads.*"]

ODD_IDS = ["", ".", "..", "...", "../../../../../../escaped", "/tmp/escaped", "/etc/passwd",
           "a/../../b", "..\\..\\x", "C:\\x", "\\\\host\\share", "~", "~/x", "$HOME", ".git",
           ".git/config", ".gitattributes", "README.md", "memory/../../x", "con", "AUX", "nul.md",
           "x\0y", "\0", "line\nbreak", "\r", " ", "\t", "%", "%2e%2e%2f", "~1", "a~b",
           "\u202egnp.exe", "\u0130", "\u0131", "\u00e9", "e\u0301", "A", "a", "\U0001f4a5",
           "\ud800", "\udfff", "\udc80", "x" * 255, "\u00e9" * 300, "/" * 50, "ext:corp/reviewer"]

# Kept small: hypothesis' own cost per draw is most of the suite's time.
scalars = (st.none() | st.booleans() | st.integers(-(10 ** 400), 10 ** 400)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(max_size=6), children, max_size=3), max_leaves=6)
ids = (st.sampled_from(ODD_IDS) | st.text(max_size=20) | st.text(min_size=1, max_size=6).map(lambda s: s * 60)
       | st.text("abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=20))
texts = st.text(max_size=60) | st.sampled_from(ODD_IDS)
markdown = texts.filter(lambda text: _is_text(text))  # what memory can hold
objects = st.lists(st.dictionaries(st.text(max_size=6), scalars, max_size=3), max_size=3)
messages_ = st.lists(st.dictionaries(st.text(max_size=6), json_values, max_size=3), max_size=4)
VALID = {ID: ids, TEXT: texts, MODE: st.sampled_from(["replace", "append"]),
         OBJECTS: objects, OWNER: st.none() | ids,
         FILTER: st.just({}) | ids.map(lambda owner: {"ownerId": owner}) | st.just({"ownerId": None})}
FUZZED = {**VALID, MODE: st.sampled_from(["replace", "append", "Append", "", "merge"])}
HUGE = 0.002  # the share of text params that are megabytes long
KINDS = {"request": 10, "valid": 1, "notification": 1, "bad id": 1, "envelope": 1, "garbage": 1,
         "corrupted": 1, "deep": 1, "blank": 0.3}
NO_ANSWER = object()  # the expected id of a line that gets no answer
BAD_BYTES = [b"\xff", b"\x00", b"\xc3\x28", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80"]


def encode(request: Any, ascii_only: bool) -> bytes:
    """One request line; JSON escapes where the text cannot be UTF-8 (lone surrogates)."""
    try:
        return json.dumps(request, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(request, separators=(",", ":")).encode("utf-8")


def same(a: Any, b: Any) -> bool:
    """JSON equality that tells 1, 1.0 and true apart."""
    return type(a) is type(b) and a == b


class Fuzzer:
    """Sends lines to one server and checks every answer and every move of HEAD."""

    def __init__(self, host: NuiHost, repo: Path):
        self.host, self.repo = host, repo
        self.counter = itertools.count(1)
        self.head = self.read_head()
        self.moves = 0
        self.lines = 0
        self.outcomes: dict[str, int] = {}
        self.memory: dict[str, str] = {}  # agent id -> content, for valid writes
        self.sessions: dict[tuple[str, str], list] = {}

    def read_head(self) -> str:
        ref = self.repo / ".git" / "refs" / "heads" / "main"
        try:
            return ref.read_text().strip()
        except FileNotFoundError:  # packed by maintenance
            return Git(self.repo)("rev-parse", "refs/heads/main").strip()

    def fresh_id(self, kind: int = 0) -> Any:
        """A new request id: an int (negative, huge), a float or a string (odd characters too)."""
        n = next(self.counter)
        return (n, -n, 10 ** 20 + n, n + 0.5, f"s{n}", f"\u00e9\U0001f4a5\u2028 {n}")[kind % 6]

    def send(self, line: bytes, expected: Any, *, method: Any = None, writes: bool = False) -> dict | None:
        """Send ``line``; check its answer (id ``expected``) and what it did to HEAD."""
        self.lines += 1
        self.host.send(line)
        answer = None
        if expected is NO_ANSWER:
            ping = self.host.send_request("storage.info", {})
            assert self.host.answer_to(ping, TIMEOUT)["result"]["name"] == "gitmem", \
                f"a line that needs no answer got one: {line[:300]!r}"
        else:
            answer = self.host.answer(TIMEOUT)
            assert same(answer["id"], expected), \
                f"answered under id {answer['id']!r}, not {expected!r}: {line[:300]!r}"
            error = answer.get("error")
            assert error is None or error["code"] != INTERNAL_ERROR, \
                f"internal error {error['message']!r} for {line[:300]!r}"
            outcome = "ok" if error is None else str(error["code"])
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        head = self.read_head()
        if head != self.head:
            self.moves += 1
            self.head = head
            assert writes and method in WRITES and (answer is None or "result" in answer), \
                f"HEAD moved for a request answered {answer}: {line[:300]!r}"
        return answer

    def call(self, method: str, params: dict) -> dict:
        """A valid request that must succeed; its result."""
        request_id = self.fresh_id(0)
        answer = self.send(encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
                                  True), request_id, method=method, writes=True)
        assert "result" in answer, f"{method} {params!r:.300} failed: {answer['error']}"
        return answer["result"]


class Draws:
    """Draws from hypothesis, each value then reused now and then within the example:
    hypothesis' own cost per drawn value is most of this suite's time."""

    def __init__(self, data, rng, fresh: float = 0.3):
        self.data, self.rng, self.fresh = data, rng, fresh
        self.pools: dict[int, tuple[Any, list]] = {}  # the strategy kept alive: its id stays its own

    def draw(self, strategy) -> Any:
        pool = self.pools.setdefault(id(strategy), (strategy, []))[1]
        if not pool or self.rng.random() < self.fresh:
            pool.append(self.data.draw(strategy))
            return pool[-1]
        return self.rng.choice(pool)


def fuzzed_params(data, rng, method: str) -> Any:
    """Params for ``method``: each one valid, of a wrong type, null or missing; extras too."""
    params = {}
    for name, kind in METHODS.get(method, {}).items():
        choice = rng.choices(["valid", "wrong", "null", "missing"], [3, 1, 1, 1])[0]
        if choice == "valid" and kind == TEXT and rng.random() < HUGE:
            params[name] = "\u00fc\n" * rng.randint(1 << 19, 3 << 19)
        elif choice == "valid":
            params[name] = data.draw(FUZZED[kind])
        elif choice == "wrong":
            params[name] = data.draw(json_values)
        elif choice == "null":
            params[name] = None
    if rng.random() < 0.1:
        params.update(data.draw(st.dictionaries(st.text(max_size=10), json_values, max_size=3)))
    if rng.random() < 0.05:  # params that are no object
        return data.draw(json_values.filter(lambda value: not isinstance(value, dict)))
    return params


def fuzzed_line(data, rng, fuzzer: Fuzzer) -> None:
    """Draw one line of some kind and send it."""
    kind = rng.choices(list(KINDS), list(KINDS.values()))[0]
    if kind == "valid":
        valid_write(data, fuzzer)
        return
    method = rng.choice(list(METHODS)) if rng.random() < 0.95 else data.draw(
        st.sampled_from(UNKNOWN_METHODS) | st.text(max_size=30))
    ascii_only = rng.random() < 0.5
    request = {"jsonrpc": "2.0", "method": method}
    if rng.random() < 0.9:
        request["params"] = fuzzed_params(data, rng, method)
    if kind in ("request", "notification", "envelope", "bad id"):
        request_id = fuzzer.fresh_id(rng.randrange(6))
        expected: Any = request_id
        if kind == "envelope":  # what makes it no valid request, its id still readable
            broken = rng.choice(["jsonrpc", "method", "no jsonrpc", "no method"])
            if broken.startswith("no "):
                del request[broken[3:]]
            else:
                request[broken] = data.draw(json_values.filter(
                    lambda v: not isinstance(v, str) if broken == "method" else v != "2.0"))
        if kind == "notification":
            expected = NO_ANSWER
        elif kind == "bad id":
            request_id = rng.choice([True, False, [], {}, [1], {"id": 1}, None])
            expected = None
        if kind != "notification":
            request["id"] = request_id
        line = encode(request, ascii_only)
        if kind == "bad id" and rng.random() < 0.5:
            request["id"] = 0
            line = encode(request, ascii_only).replace(b'"id":0', b'"id":1e400')  # inf: no id
        runs = kind in ("request", "notification") or (kind == "bad id" and request_id is None)
        fuzzer.send(line, expected, method=method, writes=runs)
    elif kind == "garbage":
        line = data.draw(st.binary(min_size=1, max_size=300)).replace(b"\n", b" ")
        if line.isspace() or _parses_to_object(line):
            line = b"{" + line
        fuzzer.send(line, None)
    elif kind == "corrupted":
        request["id"] = fuzzer.fresh_id(0)
        line = encode(request, ascii_only)
        at = int(rng.random() * len(line))  # (the length depends on the id, not on hypothesis)
        fuzzer.send(line[:at] + rng.choice(BAD_BYTES) + line[at:], None)
    elif kind == "deep":
        depth = rng.choice([1, 50, 300, 600, 5000, 200000])
        nested = b"[" * depth + b"]" * depth
        if rng.random() < 0.5:
            fuzzer.send(nested, None)  # JSON, but no object
        else:
            request_id = fuzzer.fresh_id(0)
            line = (b'{"jsonrpc":"2.0","id":%d,"method":"storage.session.write","params":'
                    b'{"handlerId":"h","sessionId":"deep","agentType":"a","messages":[%s]}}'
                    % (request_id, nested))
            fuzzer.send(line, request_id if depth < 1000 else None,
                        method="storage.session.write", writes=True)
    else:
        fuzzer.send(rng.choice([b"", b" ", b"\t \r"]), NO_ANSWER)


def valid_write(data, fuzzer: Fuzzer) -> None:
    """A write with odd but valid values, which must succeed, move HEAD and read back."""
    token = f"valid {next(fuzzer.counter)}"
    what = data.draw(st.sampled_from(["memory", "session"]))
    if what == "memory":
        agent = "\u2603/" + data.draw(ids)
        content = data.draw(markdown) + token
        before = fuzzer.moves
        fuzzer.call("storage.agentMemory.write", {"handlerId": data.draw(ids), "agentId": agent,
                                                   "content": content, "writeMode": "replace"})
        assert fuzzer.moves == before + 1
        fuzzer.memory[agent] = normalise(content)
        assert fuzzer.call("storage.agentMemory.read", {"handlerId": "h", "agentId": agent}) == \
            {"content": normalise(content)}
    else:
        key = ("\u2603/" + data.draw(ids), data.draw(ids.filter(str.strip)))  # "" is refused
        messages = data.draw(messages_) + [{"id": token, "role": "user"}]
        params = {"handlerId": data.draw(ids), "agentType": key[0], "sessionId": key[1]}
        before = fuzzer.moves
        fuzzer.call("storage.session.write", {**params, "messages": messages,
                                               "agentSessionId": data.draw(ids),
                                               "workingDir": data.draw(VALID[TEXT])})
        assert fuzzer.moves == before + 1
        fuzzer.sessions[key] = messages
        assert fuzzer.call("storage.session.read", params)["messages"] == messages


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")  # as memory stores it
    except UnicodeEncodeError:
        return False
    return True


def _parses_to_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False


def outside(root: Path, repo: Path) -> dict[str, tuple]:
    """Every path under ``root`` except inside ``repo``, with its type, size, mode and mtime."""
    found = {}
    for path in sorted(root.rglob("*")):
        if path == repo or repo in path.parents:
            continue
        st_ = path.lstat()
        found[str(path)] = (stat.S_IFMT(st_.st_mode), st_.st_size, st_.st_mode, st_.st_mtime_ns)
    return found


def test_ten_thousand_generated_lines(tmp_path):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    repo = tmp_path / "a" / "b" / "c" / "d" / "repo"  # ids that climb out land in tmp_path
    run_gitmem("init", str(repo))
    git = Git(repo)
    commits = int(git("rev-list", "--count", "HEAD"))
    before = outside(tmp_path, repo)
    before_parent = sorted(p.name for p in tmp_path.parent.iterdir())
    # --late-window 0: the model here is one write after the other (nui's late writes: test_nui_host)
    host = NuiHost([sys.executable, "-m", "gitmem", "serve", "--repo", str(repo), "--late-window", "0"],
                   cwd=cwd, env={**SUBPROCESS_ENV, "HOME": str(home)})
    try:
        fuzzer = Fuzzer(host, repo)
        fuzzer.call("storage.info", {})
        request_id = fuzzer.fresh_id(0)  # nui puts "id" first: a refused line keeps its id
        fuzzer.send(b'{"id":%d,"x":"%s"}' % (request_id, b"x" * MAX_LINE), request_id)

        @seed(SEED)
        @settings(max_examples=-(-LINES // PER_EXAMPLE), database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(st.data())
        def lines(data):
            # Plain random for the choices with weights (hypothesis' own Random ignores weights).
            rng = random.Random(data.draw(st.integers(0, 2 ** 64)))
            draws = Draws(data, rng)
            for _ in range(PER_EXAMPLE):
                fuzzed_line(draws, rng, fuzzer)

        print(f"fuzz suite: seed {SEED} (replay with GITMEM_TEST_SEED={SEED})")
        lines()
        assert fuzzer.lines >= LINES
        assert host.problems == []
        for agent, content in fuzzer.memory.items():  # no two odd ids share a file
            assert fuzzer.call("storage.agentMemory.read", {"handlerId": "h", "agentId": agent}) == \
                {"content": content}
        for (agent_type, session_id), messages in fuzzer.sessions.items():
            params = {"handlerId": "h", "agentType": agent_type, "sessionId": session_id}
            assert fuzzer.call("storage.session.read", params)["messages"] == messages
        assert host.call("storage.shutdown") == {"ok": True}
        assert host.wait() == 0, host.stderr()
    finally:
        host.close()
    print(f"{fuzzer.lines} lines, answers {fuzzer.outcomes}, {fuzzer.moves} commits")

    assert int(git("rev-list", "--count", "HEAD")) == commits + fuzzer.moves  # one commit per write
    assert outside(tmp_path, repo) == before
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before_parent
    for path in repo.rglob("*"):
        relative = path.relative_to(repo)
        if relative.parts[0] == ".git":
            continue
        assert relative.parts[0] in ("memory", "sessions", "threads", "README.md", ".gitattributes"), path
        assert not path.is_symlink()
        assert stat.S_IMODE(path.lstat().st_mode) == (0o700 if path.is_dir() else 0o600), path
        if path.suffix in (".json", ".jsonl"):
            path.read_bytes().decode("utf-8")  # JSON files stay UTF-8 whatever the input
    git.fsck()
    run_gitmem("fsck", repo=repo)  # every JSONL line and metadata file parses
    assert git.status() == ""
