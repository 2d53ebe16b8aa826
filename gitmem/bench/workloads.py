"""What the bench's scenarios write and read, and the gitmem operations several of them time.

- contents: :func:`memory_content`, :func:`session_messages`, :func:`nui_message`, and
  :func:`make_nui_data` (a nui data folder as nui's built-in storage keeps it);
- repositories: :func:`build_repository`, :func:`copy_repository`, and :func:`git`, which
  runs the git CLI with the bench's identity and no user configuration (:data:`GIT_ENV`);
- operations: :class:`StoreWrite` (a memory write in-process), :class:`ColdRead` (a read
  right after opening), :class:`ServeProcess` (a ``gitmem serve`` child and its client).
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, cast

from gitmem.repository import Gitmem

AGENT = "bench"
AGENT_TYPE = "claude-code"
MEMORY_PATH = f"memory/agents/{AGENT}.md"
FLOOR_PATH = "memory/agents/floor.md"  # the floor's own file beside the store's
# The bench's git runs under its own identity and without the user's git configuration
# (a global commit.gpgsign or hook path would time something else).
# The servers measured without the background build of search by meaning's vectors
# (gitmem.upkeep.vectors: a core of its own while it runs, and the search index it builds).
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@localhost",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@localhost",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GITMEM_EMBEDDINGS": "off"}
GITMEM = [sys.executable, "-m", "gitmem"]  # this checkout's gitmem, whatever is on PATH


# -- contents -------------------------------------------------------------------------


def memory_content(i: int) -> bytes:
    """A memory document of about 2 KB, different for every ``i`` (as MemoryStore stores it)."""
    lines = [f"- note {n}: the reviewer prefers small, focused changes ({i})" for n in range(32)]
    return ("# bench\n\n" + "\n".join(lines) + f"\n\nrevision {i}\n").encode()


def session_messages(count: int) -> list[dict[str, Any]]:
    """The first ``count`` messages of a nui session (see :func:`nui_message`)."""
    return [nui_message(0, n) for n in range(count)]


def nui_message(session: int, i: int, image: bytes = b"") -> dict[str, Any]:
    """Message ``i`` of session number ``session`` as nui stores it: a user turn (with
    ``image`` attached when given) or an assistant turn with a text part and a tool part."""
    stamp = f"2026-10-{1 + session % 28:02d}T10:{i % 60:02d}:00.000Z"
    if i % 2 == 0:
        message: dict[str, Any] = {"id": f"u{session}-{i}", "role": "user",
                                   "content": f"please look at step {i} of task {session}",
                                   "createdAt": stamp}
        if image:
            message["images"] = [{"id": f"img{session}-{i}", "mediaType": "image/png",
                                  "data": base64.b64encode(image).decode()}]
        return message
    return {"id": f"a{session}-{i}", "role": "assistant", "content": f"Done with step {i}. " * 8,
            "createdAt": stamp,
            "parts": [{"type": "text", "id": f"p{session}-{i}a", "content": "Let me check."},
                      {"type": "tool", "id": f"p{session}-{i}b", "content": "",
                       "toolCallId": f"call_{session}_{i}", "toolName": "bash",
                       "toolArgs": {"command": f"grep -rn step{i} src/"},
                       "toolResult": f"src/a.py:{i}: step{i}()\n" * 5,
                       "subagentTrace": [{"role": "assistant", "content": "searching"}]}]}


def make_nui_data(folder: Path, *, sessions: int = 6, messages: int = 8, image_every: int = 3,
                  image_bytes: int = 30_000, seed: int = 0) -> dict[str, Any]:
    """Write a nui data folder as nui's built-in storage keeps it; returns its data.json.

    Sessions of ``claude-code``, ``codex`` and ``ext:corp/reviewer`` alternate; assistant
    turns carry text and tool parts; every ``image_every``-th session (0: none) has a
    user turn with an image; every third one has a sub-agent resume id. User memory
    and agent memory of ``claude-code`` and ``ext:corp/reviewer`` (as ``ext-corp-reviewer.md``).
    """
    rng = random.Random(seed)
    agent_types = ["claude-code", "codex", "ext:corp/reviewer"]
    data: dict[str, Any] = {"sessions": [], "agentSessions": {}, "sessionMessages": {}}
    for n in range(sessions):
        session_id = f"{rng.getrandbits(32):08x}-{n:04d}-4c1e-9a57-3f2d1e0c9b8a"
        agent_type = agent_types[n % len(agent_types)]
        data["sessions"].append({"id": session_id, "name": f"session {n}",
                                 "workingDir": f"/home/me/project{n % 4}", "agentType": agent_type,
                                 "createdAt": f"2026-10-{1 + n % 28:02d}T09:{n % 60:02d}:00Z",
                                 "pinned": n % 5 == 0})
        data["agentSessions"][session_id] = f"resume-{n}"
        if n % 3 == 0:
            data["agentSessions"][f"{session_id}#explorer"] = f"sub-resume-{n}"
        data["sessionMessages"][session_id] = [
            nui_message(n, i, rng.randbytes(image_bytes)
                        if image_every and n % image_every == 0 and i == 2 else b"")
            for i in range(messages)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    agents = folder / "memory" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (folder / "memory" / "user.md").write_text("Prefers short answers.\n\nWorks in Go and Python.\n")
    (agents / "claude-code.md").write_text("Run the tests with `make test`.\n")
    (agents / "ext-corp-reviewer.md").write_text("Review for naming first, then tests.\n")
    return data


# -- repositories -----------------------------------------------------------------------


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """``git ARGS`` in ``cwd`` with :data:`GIT_ENV`, its output captured as text."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=GIT_ENV)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done


def fast_import(path: Path, stream: Iterable[bytes]) -> None:
    """Feed ``git fast-import`` the commands in ``stream`` (on ``main``; a generator's
    written as they come, never all held at once) and check ``main`` out."""
    args = ["git", "-C", str(path), "fast-import", "--quiet", "--force"]
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, env=GIT_ENV)
    stdin = cast(IO[bytes], proc.stdin)  # a PIPE: never None
    try:
        for data in stream:
            stdin.write(data)
    finally:
        stdin.close()
        if proc.wait() != 0:
            raise subprocess.CalledProcessError(proc.returncode, args)
    git(path, "checkout", "-q", "-f", "main")


def command(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Callable[[int], None]:
    """A bench operation that runs ``args`` as a process to its end, output thrown away
    (``env``: else :data:`GIT_ENV`)."""
    def run(i: int) -> None:
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=env or GIT_ENV, cwd=cwd)
    return run


def build_repository(path: Path, files: int) -> Path:
    """A gitmem repository holding ``files`` files (the bench's memory among them), checked out."""
    contents = {f"notes/{i // 100:03d}/{i:05d}.md": f"note {i}\n".encode() * 8
                for i in range(files - 1)}
    contents[MEMORY_PATH] = memory_content(-1)
    with Gitmem.open(path) as mem:  # init adds README.md and .gitattributes
        mem.engine.commit(contents, f"bench: {files} files")
    return path


def copy_repository(source: Path, target: Path) -> Path:
    """A copy of ``source`` whose index matches its files again (copying changes inodes).

    Object files are hard links (quicker than copies): git never changes one in place.
    """
    objects = source / ".git" / "objects"
    shutil.copytree(source, target, symlinks=True,
                    ignore=lambda folder, names: ["objects"] if Path(folder) == objects.parent else [])
    shutil.copytree(objects, target / ".git" / "objects", symlinks=True, copy_function=os.link)
    git(target, "update-index", "-q", "--refresh", check=False)
    return target


# -- operations ---------------------------------------------------------------------------


class StoreWrite:
    """``MemoryStore.write`` (replace) of agent ``record``, the path every gitmem write takes."""

    def __init__(self, path: Path, record: str = AGENT):
        self.mem = Gitmem.open(path, create=False)
        self.record = record

    def __call__(self, i: int) -> None:
        self.mem.memory.write(memory_content(i).decode(), self.record)

    def settle(self) -> None:
        """Refresh the index now, so no background work spills into others' turns."""
        self.mem.engine.index.refresher.flush()

    def close(self) -> None:
        self.mem.close()


class ColdRead:
    """``read(mem)`` on a repository opened just before, untimed: nothing cached in this process."""

    def __init__(self, path: Path, read: Callable[[Gitmem], Any]):
        self.path = path
        self.read = read
        self.mem: Gitmem | None = None

    def prepare(self, i: int) -> None:
        self.close()
        self.mem = Gitmem.open(self.path, create=False)

    def __call__(self, i: int) -> Any:
        assert self.mem is not None  # opened by prepare(), which Bench.measure calls first
        return self.read(self.mem)

    def close(self) -> None:
        if self.mem is not None:
            self.mem.close()
            self.mem = None


class ServeProcess:
    """A ``gitmem serve [options]`` subprocess on ``repo`` and a client that waits for each answer."""

    COMMAND = "serve"

    def __init__(self, repo: Path, env: dict[str, str] = GIT_ENV, options: Sequence[str] = ()):
        self.process = subprocess.Popen([*GITMEM, self.COMMAND, "--repo", str(repo), *options],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL, env=env)
        self.stdin = cast(IO[bytes], self.process.stdin)  # PIPEs: never None
        self.stdout = cast(IO[bytes], self.process.stdout)
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request as nui encodes it (compact, keys sorted) and return its result."""
        return self.send(self.encode(method, params))

    def encode(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        """The next request line, as nui encodes it (compact, keys sorted)."""
        self.next_id += 1
        request = {"id": self.next_id, "jsonrpc": "2.0", "method": method, "params": params or {}}
        return json.dumps(request, sort_keys=True, separators=(",", ":")).encode() + b"\n"

    def send(self, request: bytes) -> Any:
        """Send one encoded request and return its result."""
        self.stdin.write(request)
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            raise RuntimeError(f"{json.loads(request)['method']}: the server exited without answering")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"{json.loads(request)['method']}: {answer['error']['message']}")
        return answer["result"]

    def close(self) -> None:
        """End of input: the server finishes its work and exits (killed if it has not in 60 s)."""
        self.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
