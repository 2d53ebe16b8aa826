"""`gitmem log` on a terminal pages and colours like git (issue 19): $GIT_PAGER, then
$PAGER, else less with LESS=FRX; --no-pager; no pager when stdout is not a terminal;
--color=auto|always|never. The terminal is a real pseudo-terminal, the pager a script
recording what it was given; gitmem waits for it and never leaves it running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import SUBPROCESS_ENV

YELLOW, RESET = "\x1b[33m", "\x1b[m"
WAIT = 60.0  # seconds: the bound on every wait here (a loaded machine)
# Nothing from the machine running the tests: a terminal that can show colours.
ENV = {**{key: value for key, value in SUBPROCESS_ENV.items()
          if key not in ("GIT_PAGER", "PAGER", "LESS", "LV", "TERM")}, "TERM": "xterm"}


class Terminal:
    """``python -m gitmem ARGS`` with stdout on a new pseudo-terminal; what reaches the
    terminal is read as it comes."""

    def __init__(self, *args: str, env: dict[str, str]):
        master, slave = os.openpty()
        self.process = subprocess.Popen([sys.executable, "-m", "gitmem", *args],
                                        stdin=subprocess.DEVNULL, stdout=slave,
                                        stderr=subprocess.PIPE, text=True, env=env)
        os.close(slave)
        self._master = master
        self._read: list[bytes] = []
        self._reader = threading.Thread(target=self._read_all, daemon=True)
        self._reader.start()

    def _read_all(self) -> None:
        try:
            while chunk := os.read(self._master, 65536):
                self._read.append(chunk)
        except OSError:  # EIO: every writer (gitmem, its pager) has closed the terminal
            pass

    def finish(self) -> tuple[int, str, str]:
        """Exit status, what the terminal showed (newlines as written), stderr."""
        code = self.process.wait(WAIT)
        stderr = self.process.stderr.read()
        self.process.stderr.close()
        self._reader.join(WAIT)
        os.close(self._master)
        return code, b"".join(self._read).decode().replace("\r\n", "\n"), stderr


def pager(folder: Path, name: str = "pager", then: str = "") -> Path:
    """A pager script: records its pid, $LESS and its input under ``folder``, prints
    ``<name> done`` on the terminal, then runs ``then``."""
    folder.mkdir(exist_ok=True)
    script = folder / name
    script.write_text(f'#!/bin/sh\necho $$ > "{folder}/{name}.pid"\n'
                      f'printf %s "${{LESS-unset}}" > "{folder}/{name}.less"\n'
                      f'cat > "{folder}/{name}.tmp" && mv "{folder}/{name}.tmp" "{folder}/{name}.in"\n'
                      f'echo "{name} done"\n{then}\n')
    script.chmod(0o755)
    return script


def received(script: Path) -> str | None:
    path = script.with_name(script.name + ".in")
    return path.read_text() if path.exists() else None


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def repo(mem, repo_path, cli):
    mem.memory.write("prefers tea")
    mem.memory.write("checks types first", agent_id="reviewer")
    return repo_path


@pytest.fixture
def plain(repo, cli) -> str:
    return cli("log").stdout


@pytest.fixture
def coloured(repo, cli) -> str:
    return cli("log", "--color=always").stdout


def test_on_a_terminal_the_log_goes_to_the_pager_with_git_colours(repo, tmp_path, plain,
                                                                   coloured, git):
    script = pager(tmp_path / "pager")
    code, screen, stderr = Terminal("log", "--repo", str(repo), env={**ENV, "PAGER": str(script)}
                                    ).finish()
    assert (code, stderr) == (0, "")
    assert received(script) == coloured != plain
    assert screen == "pager done\n"  # the pager wrote to the terminal; gitmem only to it
    assert script.with_name("pager.less").read_text() == "FRX"
    newest = git.log(fmt="%H")[0][:10]
    assert coloured.startswith(f"{YELLOW}{newest}{RESET}  ")
    assert coloured.replace(YELLOW, "").replace(RESET, "") == plain


def test_git_pager_comes_first_and_a_less_setting_is_kept(repo, tmp_path, coloured):
    first, second = pager(tmp_path / "pagers", "first"), pager(tmp_path / "pagers", "second")
    env = {**ENV, "GIT_PAGER": str(first), "PAGER": str(second), "LESS": "-R"}
    code, screen, _ = Terminal("log", "--repo", str(repo), env=env).finish()
    assert (code, screen) == (0, "first done\n")
    assert (received(first), received(second)) == (coloured, None)
    assert first.with_name("first.less").read_text() == "-R"


def test_a_pager_command_line_goes_through_the_shell(repo, tmp_path, plain):
    out = tmp_path / "through a shell"
    command = f"tr a-z A-Z > '{out}'; echo shell done"
    code, screen, _ = Terminal("log", "--color=never", "--repo", str(repo),
                               env={**ENV, "PAGER": command}).finish()
    assert (code, screen) == (0, "shell done\n")
    assert out.read_text() == plain.upper()


@pytest.mark.parametrize("args", [("log", "--no-pager"), ("--no-pager", "log")])
def test_no_pager_prints_on_the_terminal(repo, tmp_path, coloured, args):
    script = pager(tmp_path / "pager")
    code, screen, _ = Terminal(*args, "--repo", str(repo), env={**ENV, "PAGER": str(script)}
                               ).finish()
    assert (code, screen, received(script)) == (0, coloured, None)


@pytest.mark.parametrize("variable, value", [("GIT_PAGER", ""), ("PAGER", "cat"),
                                             ("GIT_PAGER", "cat")])
def test_an_empty_pager_or_cat_is_no_pager(repo, variable, value, coloured):
    code, screen, _ = Terminal("log", "--repo", str(repo), env={**ENV, variable: value}).finish()
    assert (code, screen) == (0, coloured)


def test_no_pager_and_no_colour_when_stdout_is_not_a_terminal(repo, tmp_path, cli, plain):
    script = pager(tmp_path / "pager")
    done = cli("log", env={"PAGER": str(script), "TERM": "xterm"})
    assert (done.stdout, received(script)) == (plain, None)
    assert YELLOW not in plain and "\x1b" not in cli("log", "--color=auto").stdout


def test_colour_never_or_a_dumb_terminal_is_plain(repo, tmp_path, plain):
    script = pager(tmp_path / "pager")
    Terminal("log", "--color=never", "--repo", str(repo), env={**ENV, "PAGER": str(script)}
             ).finish()
    assert received(script) == plain
    code, screen, _ = Terminal("--no-pager", "log", "--repo", str(repo),
                               env={**ENV, "TERM": "dumb"}).finish()
    assert (code, screen) == (0, plain)


def test_a_bad_colour_is_a_usage_error(repo, cli):
    done = cli("log", "--color=sometimes", check=False)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert "sometimes" in done.stderr and done.stdout == ""


def test_json_is_paged_without_colours(repo, tmp_path, cli):
    script = pager(tmp_path / "pager")
    code, _, _ = Terminal("log", "--json", "--repo", str(repo), env={**ENV, "PAGER": str(script)}
                          ).finish()
    assert code == 0 and received(script) == cli("log", "--json").stdout


def test_gitmem_waits_for_the_pager(repo, tmp_path):
    script = pager(tmp_path / "pager", then="sleep 1; echo still reading")
    code, screen, _ = Terminal("log", "--repo", str(repo), env={**ENV, "PAGER": str(script)}
                               ).finish()
    pid = int(script.with_name("pager.pid").read_text())
    assert gone(pid)  # at gitmem's exit (finish waited for gitmem only)
    assert (code, screen) == (0, "pager done\nstill reading\n")


def test_leaving_the_pager_early_is_no_error(mem, repo_path, tmp_path):
    for n in range(250):  # more log than a pipe holds: gitmem is still writing when it goes
        mem.memory.write(f"note {n}\n", mode="append")
    script = tmp_path / "pager"
    script.write_text(f'#!/bin/sh\nhead -c 100 > "{tmp_path}/seen"\necho left\n')
    script.chmod(0o755)
    code, screen, stderr = Terminal("log", "--json", "--repo", str(repo_path),
                                    env={**ENV, "PAGER": str(script)}).finish()
    assert (code, screen, stderr) == (0, "left\n", "")
    assert len((tmp_path / "seen").read_text()) == 100


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("obeys", [True, False], ids=["pager ends", "pager ignores SIGTERM"])
def test_a_stopped_gitmem_takes_its_pager_along(repo, tmp_path, signum, obeys):
    ignore = "" if obeys else "trap '' TERM; "
    ready = tmp_path / "pager" / "reading"
    script = pager(tmp_path / "pager", then=f"{ignore}touch '{ready}'; exec sleep {WAIT}")
    terminal = Terminal("log", "--repo", str(repo), env={**ENV, "PAGER": str(script)})
    done_at = time.monotonic() + WAIT
    while not ready.exists() and terminal.process.poll() is None:
        assert time.monotonic() < done_at, "the pager never got the log"
        time.sleep(0.05)
    pid = int(script.with_name("pager.pid").read_text())
    terminal.process.send_signal(signum)
    code, screen, stderr = terminal.finish()
    assert gone(pid)
    assert code == 128 + signum and stderr == ""
    assert screen == "pager done\n"
