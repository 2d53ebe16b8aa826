"""A person's ``echo line >> memory/agents/codex.md`` racing API appends to the same file.

Two ``gitmem serve`` processes append through the wire as fast as they can while a
shell appends a line with ``>>`` every 50 ms. Each API write replaces the file by a
rename, and a ``>>`` may have opened the file just before: its line then lands in the
file the rename displaced. The oracle: every hand line is at ``main`` or still in the
work tree, and every answered API append is at ``main``.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV
from nui_client import NuiHost, install_as_nui

pytestmark = pytest.mark.slow

AGENT = {"handlerId": "gitmem-agent-memory", "agentId": "codex"}
HAND_LINES = 100  # per round; three rounds, as the issue measured (~300)
PERSON = r"""
for i in $(seq 1 "$2"); do
    if [ $((i % 2)) = 0 ]; then
        echo "hand $3.$i" >> "$1"
    else  # an external command's output: the file is open while the command starts
        /bin/echo "hand $3.$i" >> "$1"
    fi
    sleep 0.05
done
"""


def appender(host: NuiHost, name: str, stop: threading.Event, answered: list[str],
             failures: list[dict]) -> None:
    number = 0
    while not stop.is_set() and not failures:
        block = f"api {name}.{number}"
        answer = host.request("storage.agentMemory.write", {**AGENT, "content": block, "writeMode": "append"})
        if answer.get("result") == {"ok": True}:
            answered.append(block)
        else:
            failures.append(answer)
        number += 1


def test_hand_appends_racing_api_appends_are_all_kept(tmp_path: Path, repo_path: Path, cli, git):
    cli("init")
    cli("memory", "write", "--agent", "codex", input="start")
    extension = install_as_nui(tmp_path, repo_path)
    path = repo_path / "memory/agents/codex.md"
    hand: list[str] = []
    answered: list[str] = []
    failures: list[dict] = []
    for round_number in range(3):
        hosts = [NuiHost.spawn(extension) for _ in range(2)]
        try:
            for host in hosts:
                host.call("storage.info")
            stop = threading.Event()
            threads = [threading.Thread(target=appender, args=(host, f"{round_number}.{n}", stop, answered, failures))
                       for n, host in enumerate(hosts)]
            for thread in threads:
                thread.start()
            try:
                subprocess.run(["bash", "-c", PERSON, "person", str(path), str(HAND_LINES), str(round_number)],
                               check=True, env=SUBPROCESS_ENV, timeout=300)
            finally:
                stop.set()
                for thread in threads:
                    thread.join(60)
            hand += [f"hand {round_number}.{i}" for i in range(1, HAND_LINES + 1)]
            for host in hosts:
                host.call("storage.shutdown")
        finally:
            for host in hosts:
                host.close()
        assert failures == []
        head = set(git.show("main:memory/agents/codex.md").splitlines())
        on_disk = set(path.read_text().splitlines())
        assert [line for line in hand if line not in head and line not in on_disk] == []
        assert [block for block in answered if block not in head] == []
    assert len(answered) > 100  # the servers did write while the person typed
    cli("memory", "read", "--agent", "codex")  # commits what the work tree still holds
    head = set(git.show("main:memory/agents/codex.md").splitlines())
    assert [line for line in hand + answered if line not in head] == []
    git.fsck()
