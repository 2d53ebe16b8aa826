"""Talk to a real ``gitmem serve`` subprocess the way the nui host does.

`install_as_nui` renders the extension with ``gitmem nui install`` and copies it the
way ``nui extension add`` does; `NuiHost.spawn` starts the command its
``extension.yaml`` names, with nui's cwd and environment. Requests are encoded like
Go's encoding/json (compact, keys sorted, ``<`` ``>`` ``&`` escaped) under numeric ids
that increase with gaps, one request in flight at a time as in nui (`send_request`
sends without waiting, for bursts). Every stdout line is
checked as it arrives: it must be a JSON-RPC response shorter than nui's 4 MiB line
limit, else the call fails and `NuiHost.problems` says why.

    ext = install_as_nui(tmp_path, repo)
    with NuiHost.spawn(ext) as host:
        assert host.call("storage.info")["name"] == "gitmem"
        assert host.error("storage.nope")["code"] == -32601
"""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from conftest import SUBPROCESS_ENV
from gitmem.faces.nui.extension import install

NUI_LINE_LIMIT = 4 * 1024 * 1024  # bufio.Scanner buffer of nui's reader, newline included
EXTENSION_NAME = "gitmem"
_GO_ESCAPES = (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
               ("\u2028", "\\u2028"), ("\u2029", "\\u2029"))


def go_json(value: Any, *, sort_keys: bool = True) -> bytes:
    """``value`` as Go's ``json.Marshal`` writes a map: compact, sorted keys, HTML-escaped
    (``sort_keys=False``: in the order given, as Go writes a struct)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys, separators=(",", ":"))
    # <, >, & and the two separators only ever occur inside strings: replacing is safe.
    for char, escaped in _GO_ESCAPES:
        text = text.replace(char, escaped)
    return text.encode("utf-8")


def install_as_nui(tmp_path: Path, repo: Path, agent_types: list[str] | None = None, *,
                   use_cli: bool = False) -> Path:
    """Render the extension for ``repo`` and install it as nui does; returns its folder.

    ``use_cli`` renders through the real ``gitmem nui install`` command (slower) instead
    of the function behind it. nui copies the folder to ``<data>/extensions/<name>/``,
    every file with mode 0644.
    """
    agent_types = agent_types or ["claude-code", "codex"]
    source = tmp_path / "rendered-extension"
    if use_cli:
        done = subprocess.run(
            [sys.executable, "-m", "gitmem", "nui", "install", "--dir", str(source),
             "--repo", str(repo), "--agent-types", ",".join(agent_types)],
            capture_output=True, text=True, env=SUBPROCESS_ENV, timeout=60)
        assert done.returncode == 0, done.stderr
    else:
        install(source, repo, agent_types)
    target = tmp_path / "nui-data" / "extensions" / EXTENSION_NAME
    target.mkdir(parents=True)
    for file in source.iterdir():
        shutil.copyfile(file, target / file.name)
        (target / file.name).chmod(0o644)
    return target


def manifest_command(extension_dir: Path) -> tuple[list[str], Path]:
    """The storage runtime command and cwd of ``extension.yaml``, as nui resolves them."""
    manifest = YAML(typ="safe").load((extension_dir / "extension.yaml").read_text())
    runtime = manifest["contributions"]["storage"]["runtime"]
    command = [part.replace("${NUI_EXTENSION_DIR}", str(extension_dir))
               for part in runtime["command"]]
    cwd = extension_dir / runtime["cwd"] if runtime.get("cwd") else extension_dir
    return command, cwd


class RpcFailure(AssertionError):
    """A call that was expected to succeed was answered with an error."""


class NuiHost:
    """One ``gitmem serve`` process and the host side of its pipes."""

    def __init__(self, command: list[str], *, cwd: Path, env: dict[str, str]):
        self.stderr_file = tempfile.TemporaryFile()  # nui drops stderr; tests show it on failure
        self.process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.stderr_file)
        self.lines: list[bytes] = []  # every stdout line, as received
        self.problems: list[str] = []  # stdout lines nui could not have read
        self._answers: queue.Queue[dict | str | None] = queue.Queue()  # str: a problem
        self._next_id = 0
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    @classmethod
    def spawn(cls, extension_dir: Path, *, extra_args: tuple[str, ...] = (),
              env: dict[str, str] | None = None) -> NuiHost:
        """Start the extension's storage command as nui does (cwd, NUI_EXTENSION_* env)."""
        command, cwd = manifest_command(extension_dir)
        env = {**SUBPROCESS_ENV, **(env or {}), "NUI_EXTENSION_DIR": str(extension_dir),
               "NUI_EXTENSION_NAME": extension_dir.name}
        return cls(command + list(extra_args), cwd=cwd, env=env)

    # -- requests ---------------------------------------------------------------------

    def new_id(self) -> int:
        """The next request id: increasing, with gaps (nui's ids are shared with other calls)."""
        self._next_id += 1 + self._next_id % 3
        return self._next_id

    def request(self, method: str, params: dict | None = None, *, timeout: float = 30) -> dict:
        """Send one request as nui does and return the whole response (same id checked)."""
        return self.answer_to(self.send_request(method, params), timeout)

    def send_request(self, method: str, params: dict | None = None) -> int:
        """Write one request as nui writes it, without waiting; returns its id."""
        request_id = self.new_id()
        self.send(go_json({"id": request_id, "jsonrpc": "2.0", "method": method,
                           "params": params if params is not None else {}}))
        return request_id

    def answer_to(self, request_id: int, timeout: float = 30) -> dict:
        """The next response, which must carry ``request_id`` as the same JSON number."""
        response = self.answer(timeout)
        assert type(response["id"]) is int and response["id"] == request_id, \
            f"answered under id {response['id']!r}, not {request_id}"
        return response

    def call(self, method: str, params: dict | None = None, **kwargs) -> Any:
        """The result of a request; raises `RpcFailure` on an error answer."""
        response = self.request(method, params, **kwargs)
        if "error" in response:
            raise RpcFailure(f"{method} failed: {response['error']}")
        return response["result"]

    def error(self, method: str, params: dict | None = None, **kwargs) -> dict:
        """The error object of a request that must fail."""
        response = self.request(method, params, **kwargs)
        assert "error" in response, f"{method} should have failed: {response}"
        return response["error"]

    def send(self, line: bytes) -> None:
        """Write one raw line (its newline added)."""
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 30) -> dict:
        """The next response line, parsed; fails if none comes within ``timeout``."""
        try:
            response = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer within {timeout}s; stderr: {self.stderr()}") from None
        if response is None:
            raise AssertionError(f"stdout closed (exit {self.process.poll()}); stderr: {self.stderr()}")
        if isinstance(response, str):  # nui fails the call (and, past 4 MiB, the connection)
            raise AssertionError(f"unreadable answer: {response}")
        return response

    # -- ending -----------------------------------------------------------------------

    def close_stdin(self) -> None:
        self.process.stdin.close()

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float = 30) -> int:
        """The exit code, once the process has exited and stdout is fully read."""
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code

    def stderr(self) -> str:
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode("utf-8", "replace")

    def close(self) -> None:
        """Kill the process if still running and release its pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        self.stderr_file.close()

    def __enter__(self) -> NuiHost:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the reader -------------------------------------------------------------------

    def _read_stdout(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)
            response = self._check(line)
            self._answers.put(response if response is not None else self.problems[-1])
        self._answers.put(None)

    def _check(self, line: bytes) -> dict | None:
        """The response in ``line``, or None after recording why nui could not read it."""
        if len(line) > NUI_LINE_LIMIT:
            self.problems.append(f"line of {len(line)} bytes passes nui's 4 MiB limit")
            return None
        if not line.endswith(b"\n"):
            self.problems.append(f"unterminated last line {line[:80]!r}")
            return None
        try:
            response = json.loads(line)
        except ValueError:
            self.problems.append(f"not JSON: {line[:80]!r}")
            return None
        if not (isinstance(response, dict) and response.get("jsonrpc") == "2.0" and "id" in response
                and ("result" in response) != ("error" in response)):
            self.problems.append(f"not a JSON-RPC response: {line[:80]!r}")
            return None
        error = response.get("error")
        if error is not None and not (isinstance(error, dict) and isinstance(error.get("code"), int)
                                      and isinstance(error.get("message"), str)):
            self.problems.append(f"malformed error object: {line[:80]!r}")
            return None
        return response
