"""Claude's memory tool on git (``gitmem.anthropic.MemoryTool``), driven by the real
Anthropic SDK: its tool runner takes the tool as it is, and each tool_use of a
conversation is answered as the SDK's own local-filesystem backend answers it.

The assistant's turns (tests/recorded/memory_tool_conversation.json) are Messages API
responses, tool_use inputs as the API sends them; a local HTTP server plays them to the
real client, so nothing goes over the network. The same inputs go to the SDK's
``BetaLocalFilesystemMemoryTool`` in a folder of its own: its answers are the expected ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV, Git, run_gitmem

anthropic = pytest.importorskip("anthropic")  # the test extra holds it; `pip install 'gitmem[anthropic]'`
from anthropic.lib.tools import ToolError  # noqa: E402
from anthropic.tools.memory import BetaLocalFilesystemMemoryTool  # noqa: E402

from gitmem.anthropic import MemoryTool  # noqa: E402

RECORDED = Path(__file__).resolve().parent / "recorded" / "memory_tool_conversation.json"
WRITES = ("create", "str_replace", "insert", "delete", "rename")


class MessagesApi:
    """A local Messages API that answers each request with the next recorded response and
    keeps the requests; ``on_request()`` runs before each answer."""

    def __init__(self, responses: list[dict], on_request=lambda: None):
        self.responses, self.requests = list(responses), []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                api.requests.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                on_request()
                body = json.dumps(api.responses.pop(0)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> MessagesApi:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def sdk_answer(tool, command: dict) -> tuple[str, bool]:
    """What ``tool`` answers to ``command``, and whether it is an error (a ``ToolError``).
    A folder's size in a listing is what a local disk gives a folder, 4K (ext4's; tmpfs
    gives other sizes): gitmem shows that, git keeping no size for a folder."""
    try:
        answer = tool.call(command)
    except ToolError as error:
        return error.content, True
    if answer.startswith("Here're the files and directories"):
        header, root, *entries = answer.split("\n")
        answer = "\n".join([header, "4K\t" + root.split("\t", 1)[1]] + [
            "4K\t" + entry.split("\t", 1)[1] if entry.endswith("/") else entry for entry in entries])
    return answer, False


def tool_uses(responses: list[dict]) -> list[dict]:
    return [block["input"] for response in responses for block in response["content"]
            if block["type"] == "tool_use"]


@pytest.fixture(scope="module")
def conversation(tmp_path_factory):
    """The recorded conversation run through the SDK's tool runner on a new repository:
    ``(repo, the tool_use inputs, the tool results sent back, HEAD before each request)``."""
    folder = tmp_path_factory.mktemp("conversation")
    repo = folder / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    responses = json.loads(RECORDED.read_text())
    heads: list[str] = []
    with MessagesApi(responses, lambda: heads.append(git("rev-parse", "HEAD").strip())) as api, \
            MemoryTool(repo=repo) as tool:
        client = anthropic.Anthropic(api_key="recorded", base_url=api.url, max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-4-5", max_tokens=2048, tools=[tool],
            messages=[{"role": "user", "content": "I'm Ada; I prefer short answers. Keep our plan."}])
        last = list(runner)[-1]
    assert last.stop_reason == "end_turn" and api.responses == []
    assert api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [request["messages"][-1]["content"][0] for request in api.requests[1:]]
    return repo, tool_uses(json.loads(RECORDED.read_text())), results, heads


def test_each_answer_is_the_sdk_backends_and_each_change_is_one_commit(conversation, tmp_path):
    repo, commands, results, heads = conversation
    git = Git(repo)
    reference = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "sdk"))
    assert len(results) == len(commands) == len(heads) - 1
    for n, (command, result) in enumerate(zip(commands, results, strict=True)):
        expected, refused = sdk_answer(reference, command)
        assert result["content"] == expected, command
        assert result.get("is_error", False) is refused, command
        before, after = heads[n], heads[n + 1]
        if refused or command["command"] == "view":
            assert after == before, command  # a read or a refusal writes nothing
            continue
        assert git("rev-list", "--count", f"{before}..{after}").strip() == "1", command
        path = command.get("path") or command["old_path"]
        subject, *trailers = git("log", "-1", "--format=%s%n%(trailers:only,unfold)", after).split("\n")
        assert subject == f"memories: {command['command']} {path}" + (
            f" to {command['new_path']}" if command["command"] == "rename" else "")
        assert f"Gitmem-Op: memories.{command['command']}" in trailers
        assert f"Gitmem-Path: {path}" in trailers and "Gitmem-Handler: gitmem-memory-tool" in trailers
    # the answers a model reads, spelled out once
    by_text = {json.dumps(c, sort_keys=True): r for c, r in zip(commands, results, strict=True)}
    ambiguous = next(c for c in commands if c.get("old_str") == "- [ ] write the")
    assert by_text[json.dumps(ambiguous, sort_keys=True)]["content"] == (
        "No replacement was performed. Multiple occurrences of old_str `- [ ] write the` in "
        "lines: 5, 6. Please ensure it is unique")
    sizes = {c["path"]: len(c["file_text"].encode()) for c in commands if c["command"] == "create"}
    assert results[-1]["content"] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
        f"4K\t/memories\n4K\t/memories/notes/\n{sizes['/memories/notes/meetings.md']}B\t"
        f"/memories/notes/meetings.md\n{sizes['/memories/user.md']}B\t/memories/user.md")
    # the files are where docs/layout.md says, as the model wrote them, and git agrees
    assert (repo / "memory/user.md").read_text().startswith("# About the user\n- Name: Ada")
    assert sorted(p.relative_to(repo / "memory").as_posix() for p in (repo / "memory").rglob("*")
                  if p.is_file()) == ["notes/meetings.md", "user.md"]
    assert git.status() == "" and git.fsck() is not None


def test_gitmem_log_and_restore_undo_each_command(conversation, tmp_path):
    """Newest first, each command's commit is undone by ``gitmem restore RECORD --at C~1``
    for every record it changed that existed before it (a file it created has no earlier
    version: its undo is a delete)."""
    repo = tmp_path / "repo"
    shutil.copytree(conversation[0], repo, symlinks=True)
    git = Git(repo)
    made = git.log(fmt="%H %s")
    commands = [line.split(" ", 1) for line in made if " memories: " in f" {line}"]
    assert [subject.split()[1] for _, subject in commands] == [
        "delete", "delete", "rename", "insert", "insert", "str_replace", "create", "create",
        "create", "create"]
    undone = 0
    for commit, subject in commands:
        for path in git("diff-tree", "--no-commit-id", "--name-only", "-r", commit).split():
            record = "user" if path == "memory/user.md" else "note:" + path.removeprefix("memory/")
            assert commit in run_gitmem("log", record, "--json", repo=repo).stdout, (subject, record)
            if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}~1:{path}"],
                              env=SUBPROCESS_ENV).returncode != 0:
                continue  # created by this command
            before = git("show", f"{commit}~1:{path}")
            run_gitmem("restore", record, "--at", f"{commit}~1", repo=repo)
            assert run_gitmem("show", record, "--at", "@", repo=repo).stdout == before, subject
            assert (repo / path).read_text() == before
            undone += 1
    assert undone >= 6  # the deletes, the rename's source, the inserts, the replace
    assert git.status() == ""


ESCAPES = ["/memories/../escaped.md", "/memories/notes/../../escaped.md", "/escaped.md",
           "escaped.md", "/tmp/escaped.md", "/memories/../repo/escaped.md"]


@pytest.mark.parametrize("path", ESCAPES)
def test_a_path_leaving_memories_is_refused_with_nothing_written(tmp_path, path):
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    before = git("rev-parse", "HEAD")
    reference = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "sdk"))
    with MemoryTool(repo=repo) as tool:
        for command in ({"command": "create", "path": path, "file_text": "escaped"},
                        {"command": "view", "path": path},
                        {"command": "str_replace", "path": path, "old_str": "a", "new_str": "b"},
                        {"command": "insert", "path": path, "insert_line": 0, "insert_text": "x"},
                        {"command": "delete", "path": path},
                        {"command": "rename", "old_path": "/memories/user.md", "new_path": path}):
            answer, refused = sdk_answer(tool, command)
            assert refused, (command, answer)
            assert (answer, refused) == sdk_answer(reference, command), command  # the SDK's words
    assert git("rev-parse", "HEAD") == before and git.status() == ""
    assert not [p for p in tmp_path.rglob("*escaped*")]


LINK_COMMANDS = ({"command": "create", "path": "/memories/link/escaped.md", "file_text": "x"},
                 {"command": "create", "path": "/memories/link/deeper/escaped.md", "file_text": "x"},
                 {"command": "view", "path": "/memories/link/secret.txt"},
                 {"command": "view", "path": "/memories/link"},
                 {"command": "str_replace", "path": "/memories/link/secret.txt", "old_str": "s", "new_str": "t"},
                 {"command": "delete", "path": "/memories/link"},
                 {"command": "rename", "old_path": "/memories/link", "new_path": "/memories/x"})


@pytest.mark.parametrize("committed", [False, True], ids=["placed in the work tree", "committed by hand"])
def test_a_symlink_leading_out_is_refused_as_the_sdk_refuses_it(tmp_path, committed):
    """A link under memory/ that points out of it, placed there by hand (and maybe committed
    with plain git): every command through it is refused with the SDK's ToolError and text,
    nothing is written or committed, and a listing leaves it out, as the SDK's does."""
    repo, outside, sdk = tmp_path / "repo", tmp_path / "outside", tmp_path / "sdk"
    outside.mkdir()
    (outside / "secret.txt").write_text("sensitive")
    run_gitmem("init", str(repo))
    git = Git(repo)
    (repo / "memory").mkdir(exist_ok=True)
    os.symlink(outside, repo / "memory" / "link", target_is_directory=True)
    if committed:
        git("add", "memory/link")
        git("commit", "-q", "-m", "a link, made by hand")
    before = git("rev-parse", "HEAD")
    reference = BetaLocalFilesystemMemoryTool(base_path=str(sdk))
    os.symlink(outside, sdk / "memories" / "link", target_is_directory=True)
    with MemoryTool(repo=repo) as tool:
        for command in LINK_COMMANDS:
            answer, refused = sdk_answer(tool, command)
            assert refused and "would escape /memories directory" in answer, (command, answer)
            assert (answer, refused) == sdk_answer(reference, command), command
        listing, _ = sdk_answer(tool, {"command": "view", "path": "/memories"})
        assert "link" not in listing and "link" not in sdk_answer(reference, {"command": "view",
                                                                                "path": "/memories"})[0]
    assert git("rev-parse", "HEAD") == before
    assert [p.name for p in outside.iterdir()] == ["secret.txt"]


def test_a_symlink_staying_inside_is_not_followed_either(tmp_path):
    """Where the SDK follows a link that stays in its folder, gitmem follows none (where it
    points on another clone is anyone's guess): refused, nothing committed."""
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    git = Git(repo)
    (repo / "memory" / "real").mkdir(parents=True)
    os.symlink("real", repo / "memory" / "link", target_is_directory=True)
    before = git("rev-parse", "HEAD")
    with MemoryTool(repo=repo) as tool:
        for command in LINK_COMMANDS:
            answer, refused = sdk_answer(tool, command)
            assert refused and answer == "Path would escape /memories directory via symlink", command
    assert git("rev-parse", "HEAD") == before and list((repo / "memory" / "real").iterdir()) == []


def test_folders_are_made_0700_whatever_the_umask(tmp_path):
    """As the SDK's backend makes its folders: under umask 0 the repository's folder, the
    folders above it that were missing and every folder a command makes are 0700 (a general
    gitmem defect: mkdir(parents=True) left the parents to the umask, 0777)."""
    base = tmp_path / "nested" / "deeper" / "repo"
    old = os.umask(0)
    try:
        with MemoryTool(repo=base) as tool:
            tool.call({"command": "create", "path": "/memories/a/b/c.md", "file_text": "x"})
    finally:
        os.umask(old)
    for folder in (tmp_path / "nested", base.parent, base, base / "memory", base / "memory" / "a",
                   base / "memory" / "a" / "b"):
        assert oct(folder.stat().st_mode & 0o777) == oct(0o700), folder


def test_notes_are_listed_searched_hand_edited_and_synced(synced, tmp_path):
    """A file the model makes beside the memories is a record like them: ``gitmem memory
    list`` lists it, search finds it, a person edits it, sync carries it to a clone."""
    repo, remote = synced
    with MemoryTool(repo=repo) as tool:
        assert tool.call({"command": "create", "path": "/memories/projects/parser.md",
                          "file_text": "# Parser\nUses a Pratt loop.\n"}).startswith("File created")
        listed = run_gitmem("memory", "list", repo=repo).stdout.splitlines()
        assert [line.split("\t")[0] for line in listed] == ["user", "note:projects/parser.md"]
        hits = json.loads(run_gitmem("search", "Pratt", "--json", repo=repo).stdout)
        assert [hit["record"] for hit in hits] == ["note:projects/parser.md"]
        # a person edits the note; the next command sees the edit, committed as theirs
        with open(repo / "memory/projects/parser.md", "a") as file:
            file.write("Precedence climbing for the operators.\n")
        assert "Precedence climbing" in tool.call({"command": "view", "path": "/memories/projects/parser.md"})
    git = Git(repo)
    author, subject = git.log(fmt="%an|%s")[0].split("|")
    assert subject == "hand edit: memory/projects/parser.md" and not author.startswith("gitmem")
    run_gitmem("sync", repo=repo)
    clone = tmp_path / "clone"
    run_gitmem("clone", str(remote), str(clone))
    with MemoryTool(repo=clone) as tool:
        assert tool.call({"command": "view", "path": "/memories/projects/parser.md"}) == (
            "Here's the content of /memories/projects/parser.md with line numbers:\n"
            "     1\t# Parser\n     2\tUses a Pratt loop.\n     3\tPrecedence climbing for the operators.\n"
            "     4\t")
    log = json.loads(run_gitmem("log", "/memories/projects/parser.md", "--json", repo=clone).stdout)
    assert [entry["summary"] for entry in log] == ["+1 -0 lines", "created: +2 -0 lines"]


def test_the_async_tool_answers_as_the_sync_one_through_the_async_runner(conversation, tmp_path):
    """``AsyncMemoryTool`` in the SDK's async tool runner: the same tool results as the
    sync tool gave, and the same files."""
    from gitmem.anthropic import AsyncMemoryTool

    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    responses = json.loads(RECORDED.read_text())

    async def converse(url: str) -> None:
        tool = AsyncMemoryTool(repo=repo)
        try:
            client = anthropic.AsyncAnthropic(api_key="recorded", base_url=url, max_retries=0)
            runner = client.beta.messages.tool_runner(
                model="claude-sonnet-4-5", max_tokens=2048, tools=[tool],
                messages=[{"role": "user", "content": "I'm Ada; I prefer short answers. Keep our plan."}])
            async for _ in runner:
                pass
        finally:
            tool.close()

    with MessagesApi(responses) as api:
        import anyio
        anyio.run(converse, api.url)
    results = [request["messages"][-1]["content"][0] for request in api.requests[1:]]
    assert [(r["content"], r.get("is_error", False)) for r in results] == [
        (r["content"], r.get("is_error", False)) for r in conversation[2]]
    assert (repo / "memory/user.md").read_text() == (conversation[0] / "memory/user.md").read_text()
    assert Git(repo).count("memory") == Git(conversation[0]).count("memory")


def test_gitmem_recent_shows_each_command_newest_first_with_its_diff(conversation):
    repo = conversation[0]
    git = Git(repo)
    commits = git.log(fmt="%H")
    found = json.loads(run_gitmem("recent", "--since", commits[-1], "--json", repo=repo).stdout)
    assert [change["id"] for change in found] == commits[:-1]  # all but the init commit
    assert {change["op"] for change in found} == {f"memories.{command}" for command in WRITES}
    text = run_gitmem("recent", "--since", commits[-1], "-n", "1", repo=repo).stdout
    assert text.startswith(commits[0][:10]) and "[memories.delete]  memories: delete /memories/projects" in text
    assert "--- a/memory/projects/parser/plan.md\n+++ /dev/null\n" in text and "\n-# Project plan\n" in text
