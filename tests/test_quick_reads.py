"""`gitmem session read` answered from the work tree without opening the repository (issue 25).

After a read whose look found every file of the session holding HEAD's version, the next
read comes from the work tree while a stamp of that folder holds (`gitmem/quick_reads.py`).
It must give the bytes the full read gives, and every way the world changes the session
must break the stamp: an editor's save, `>>`, a new chunk, a file's mtime set back, plain
`git commit`, a write through `gitmem serve`. What the full read would not give (a refused
hand edit, an image kept as a blob, a folder behind a symbolic link) is never read so.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import Git, gitmem_opening, run_gitmem
from gitmem.repository import Gitmem
from nui_client import NuiHost, install_as_nui

CHUNK = Path("sessions/claude-code/s1/messages/000000.jsonl")


def read(repo: Path, warning: str = "") -> tuple[dict, bool]:
    out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=repo, warning=warning)
    return json.loads(out), opened


def full_read(repo: Path) -> dict:
    with Gitmem.open(repo) as mem:
        pieces, agent_session_id = mem.sessions.read_json_pieces("claude-code", "s1")
    return {"messages": json.loads(b"".join(pieces)), "agentSessionId": agent_session_id}


def settled(repo: Path) -> None:
    """Reads until one comes from the work tree (a write a moment before the first read is
    too fresh for its stamp; the next read's look vouches for it)."""
    for _ in range(20):
        if not read(repo)[1]:
            return
    raise AssertionError("no read came from the work tree alone")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    messages = [{"role": "user", "content": f"message {i}"} for i in range(30)]
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": messages, "agentSessionId": "resume-1"}))
    return repo


def test_the_next_read_comes_from_the_work_tree_with_the_same_bytes(repo):
    first, opened = read(repo)
    assert opened
    settled(repo)
    out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=repo)
    assert not opened
    assert json.loads(out) == first == full_read(repo)
    assert first["agentSessionId"] == "resume-1" and len(first["messages"]) == 30


def _editor_save(repo: Path) -> None:
    chunk = repo / CHUNK
    chunk.write_bytes(chunk.read_bytes() + b'{"role": "user", "content": "saved by hand"}\n')


def _shell_append(repo: Path) -> None:
    subprocess.run(f"""printf '%s\\n' '{{"role": "user", "content": "saved by hand"}}' >> {repo / CHUNK}""",
                   shell=True, check=True)


def _new_chunk(repo: Path) -> None:
    (repo / CHUNK).with_name("000001.jsonl").write_text('{"role": "user", "content": "saved by hand"}\n')


def _old_mtime(repo: Path) -> None:
    _editor_save(repo)
    os.utime(repo / CHUNK, (946684800, 946684800))


def _git_commit(repo: Path) -> None:
    _editor_save(repo)
    Git(repo)("commit", "-q", "-am", "by hand")


@pytest.mark.parametrize("change", [_editor_save, _shell_append, _new_chunk, _old_mtime, _git_commit])
def test_a_change_made_after_the_last_read_is_read(repo, change):
    settled(repo)
    change(repo)
    found, opened = read(repo)
    assert opened, change.__name__
    assert found["messages"][-1] == {"role": "user", "content": "saved by hand"}
    assert found == full_read(repo)


def test_a_write_through_serve_is_read_next(repo, tmp_path):
    settled(repo)
    extension = install_as_nui(tmp_path, repo)
    messages = read(repo)[0]["messages"] + [{"role": "assistant", "content": "answered through serve"}]
    with NuiHost.spawn(extension) as host:
        assert host.call("storage.session.write", {
            "handlerId": "gitmem-sessions", "agentType": "claude-code", "sessionId": "s1",
            "messages": messages, "agentSessionId": "resume-2"}) == {"ok": True}
        found, opened = read(repo)  # while serve runs
    assert opened and found["messages"] == messages and found["agentSessionId"] == "resume-2"


def test_a_refused_hand_edit_is_never_read_from_the_work_tree(repo):
    settled(repo)
    before = full_read(repo)
    with open(repo / CHUNK, "ab") as chunk:
        chunk.write(b'{"role": "user", "content": "half a line\n')  # not JSON: refused
    for _ in range(3):
        found, opened = read(repo, warning="not committing hand edit")
        assert opened and found == before


def test_a_session_with_an_image_is_read_with_its_image(repo):
    image = base64.b64encode(bytes(range(256)) * 64).decode()
    messages = [{"role": "user", "content": [{"type": "image", "data": image, "mimeType": "image/png"}]}]
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": messages, "agentSessionId": "resume-1"}))
    for _ in range(3):
        found, opened = read(repo)
        assert opened and found["messages"] == messages


def test_a_session_behind_a_symbolic_link_is_not_read_from_it(repo, tmp_path):
    settled(repo)
    elsewhere = tmp_path / "elsewhere"
    messages = repo / CHUNK.parent
    messages.rename(elsewhere)
    messages.symlink_to(elsewhere)
    for _ in range(3):
        found, opened = read(repo)
        assert opened and len(found["messages"]) == 30


def test_a_refused_hand_edit_a_long_lived_process_knows_is_not_vouched_for(repo):
    """A process that refused an edit once lets it be after (it is not logged again): its
    looks must still not stamp the session as holding HEAD."""
    settled(repo)
    with open(repo / CHUNK, "ab") as chunk:
        chunk.write(b'{"role": "user", "content": "half a line\n')
    with Gitmem.open(repo) as mem:
        for _ in range(3):
            pieces, _ = mem.session_json("claude-code", "s1")
            assert len(json.loads(b"".join(pieces))) == 30
    found, opened = read(repo, warning="not committing hand edit")
    assert opened and len(found["messages"]) == 30


def test_a_folder_named_like_a_chunk_is_no_chunk(repo):
    """A person's plain git commit of a folder `messages/000001.jsonl/`: every read failed
    ("'NoneType' is not iterable"); the folder is not a chunk."""
    folder = repo / CHUNK.with_name("000001.jsonl")
    folder.mkdir()
    (folder / "note.txt").write_text("not a chunk\n")
    Git(repo)("add", "-A")
    Git(repo)("commit", "-q", "-m", "a folder by hand")
    for _ in range(3):
        found, _ = read(repo)
        assert len(found["messages"]) == 30
