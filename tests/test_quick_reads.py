"""`gitmem session read` answered from the work tree without opening the repository (issue 25).

After a read whose look found every file of the session holding HEAD's version, the next
read comes from the work tree while a stamp of that folder holds (`gitmem/edits/quick_reads.py`).
It must give the bytes the full read gives, and every way the world changes the session
must break the stamp: an editor's save, `>>`, a new chunk, a file's mtime set back, plain
`git commit`, a write through `gitmem serve`. What the full read would not give (a refused
hand edit, an image kept as a blob, a folder behind a symbolic link) is never read so.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
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


def quick_read(repo: Path) -> bytes:
    """The output of the first of some reads that comes from the work tree (a write a
    moment before the first read is too fresh for its stamp; the next read's look vouches
    for it)."""
    for _ in range(20):
        out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=repo)
        if not opened:
            return out
    raise AssertionError("no read came from the work tree alone")


def settled(repo: Path) -> None:
    """Reads until one comes from the work tree."""
    quick_read(repo)


def session_repo(tmp_path: Path, count: int) -> Path:
    """A repository holding session claude-code/s1 of ``count`` messages."""
    repo = tmp_path / "repo"
    run_gitmem("init", str(repo))
    messages = [{"role": "user", "content": f"message {i}"} for i in range(count)]
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input=json.dumps({"messages": messages, "agentSessionId": "resume-1"}))
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return session_repo(tmp_path, 30)


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


# -- chunks spliced without a look at their lines ---------------------------------------------
# A quick read remembers, by blob id in the stamp, the chunks it found written as gitmem
# writes them; the next reads splice those without looking at their lines. Whatever a person
# does to a chunk after, its bytes are a new blob, looked at again.

LONG_CHUNK = CHUNK.with_name("000001.jsonl")


@pytest.fixture
def long_repo(tmp_path: Path) -> Path:
    """A session of 2,500 messages: three chunks of up to 1,000 lines."""
    return session_repo(tmp_path, 2500)


def stampless_read(repo: Path) -> bytes:
    """The output of the full read: no stamp kept, the repository opened."""
    shutil.rmtree(repo / ".git" / "gitmem" / "stamps", ignore_errors=True)
    out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=repo)
    assert opened
    return out


def kept_stamp(repo: Path) -> dict:
    """The session's stamp, as kept in the repository."""
    stamps = [json.loads(file.read_bytes()) for file in (repo / ".git" / "gitmem" / "stamps").iterdir()]
    (kept,) = [found for found in stamps if found.get("scope") == "sessions/claude-code/s1"]
    return kept


def remembered(repo: Path) -> set[str]:
    """The blob ids the session's stamp names as chunks spliced without a look."""
    return set(kept_stamp(repo)["written_chunks"])


def blob_ids(repo: Path) -> dict[str, str]:
    """HEAD's blob id of each chunk of the session, as git tells it."""
    listed = Git(repo)("ls-tree", "HEAD", f"{CHUNK.parent}/")
    return {line.split("\t")[1]: line.split()[2] for line in listed.splitlines()}


def _odd_lines_in_an_editor(repo: Path) -> None:
    """Spaces before a line, a CR before its newline, blank lines, spaces around the JSON
    and escapes in a string, and no newline after the last line."""
    chunk = repo / LONG_CHUNK
    lines = chunk.read_bytes().split(b"\n")
    lines[0] = b"   " + lines[0]
    lines[1] += b"\r"
    lines[2] += b"\n\n \t"
    lines[3] = b'{"role": "user" , "content": "caf\\u00e9 \\"quoted\\"\\n\\t"}\t'
    chunk.write_bytes(b"\n".join(lines).rstrip(b"\n"))


def _spaced_line_with_shell_append(repo: Path) -> None:
    subprocess.run(f"""printf '%s\\n' '  {{"role": "user", "content": "spaced"}}' >> {repo / LONG_CHUNK}""",
                   shell=True, check=True)


def _last_line_without_newline(repo: Path) -> None:
    subprocess.run(f"""printf '%s' '{{"role": "user", "content": "no newline"}}' >> {repo / LONG_CHUNK}""",
                   shell=True, check=True)


@pytest.mark.parametrize("edit", [_odd_lines_in_an_editor, _spaced_line_with_shell_append,
                                  _last_line_without_newline])
def test_a_chunk_edited_by_hand_after_it_was_spliced_reads_as_the_full_read(long_repo, edit):
    quick_read(long_repo)
    before = blob_ids(long_repo)
    assert remembered(long_repo) == set(before.values())  # every chunk written as gitmem writes it
    assert quick_read(long_repo) == stampless_read(long_repo)
    edit(long_repo)
    out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=long_repo)
    assert opened  # the edit taken in, a new blob in HEAD
    assert out == quick_read(long_repo) == quick_read(long_repo) == stampless_read(long_repo)
    assert blob_ids(long_repo)[str(LONG_CHUNK)] != before[str(LONG_CHUNK)]
    messages = json.loads(out)["messages"]
    assert len(messages) >= 2500 and messages == full_read(long_repo)["messages"]


def test_an_odd_chunk_is_never_remembered_as_written(long_repo):
    _odd_lines_in_an_editor(long_repo)
    quick_read(long_repo)
    quick_read(long_repo)
    ids = blob_ids(long_repo)
    assert remembered(long_repo) == set(ids.values()) - {ids[str(LONG_CHUNK)]}
    assert json.loads(quick_read(long_repo))["messages"][1003] == {
        "role": "user", "content": 'caf\u00e9 "quoted"\n\t'}


def test_a_write_keeps_what_was_remembered_of_the_chunks_it_left_alone(long_repo):
    """An append changes the last chunk: the stamp after it still names the first two,
    and names no blob the session no longer holds."""
    quick_read(long_repo)
    first = blob_ids(long_repo)
    run_gitmem("session", "append", "claude-code", "s1", repo=long_repo,
               input=json.dumps({"messages": [{"role": "assistant", "content": "appended"}]}))
    head = Git(long_repo)("rev-parse", "HEAD").strip()
    for _ in range(20):  # full reads until one keeps a stamp (the append may be too fresh for it)
        out, opened = gitmem_opening("session", "read", "claude-code", "s1", repo=long_repo)
        assert opened and json.loads(out)["messages"][-1] == {"role": "assistant", "content": "appended"}
        if kept_stamp(long_repo)["head"] == head:
            break
    now = blob_ids(long_repo)
    last = str(CHUNK.with_name("000002.jsonl"))
    assert now[last] != first[last]
    assert remembered(long_repo) == {first[str(CHUNK)], first[str(LONG_CHUNK)]}
    out = quick_read(long_repo)
    assert remembered(long_repo) == set(now.values())
    assert out == stampless_read(long_repo)


@pytest.mark.parametrize("damage", [{"a": 1}, [1, None, ["x"]], "0" * 40])
def test_a_damaged_list_of_remembered_chunks_is_no_error(long_repo, damage):
    quick_read(long_repo)
    expected = quick_read(long_repo)
    for file in (long_repo / ".git" / "gitmem" / "stamps").iterdir():
        kept = json.loads(file.read_bytes())
        if "written_chunks" in kept:
            file.write_text(json.dumps({**kept, "written_chunks": damage}))
    assert quick_read(long_repo) == expected == stampless_read(long_repo)
