"""A real ``gitmem web`` subprocess, and plain HTTP requests to it.

``WebServer.start(repo)`` runs ``python -m gitmem web --port 0`` and reads the one line
it prints when it is ready (the address with the start's token, within a deadline);
``request`` sends one request with exactly the headers given (``Host`` included), so a
test can send what a browser on another site, or a rebinding attack, would.

    with WebServer.start(repo) as web:
        cookie = web.login()                      # the token's visit: the cookie it sets
        status, headers, body = web.request("GET", "/", cookie=cookie)
"""

from __future__ import annotations

import http.client
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from conftest import SUBPROCESS_ENV

START_DEADLINE = 60.0  # seconds for the first line
URL = re.compile(r"^http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{20,})$")


class WebServer:
    def __init__(self, process: subprocess.Popen, line: str):
        self.process = process
        self.line = line
        found = URL.match(line)
        assert found is not None, f"not an address with a token: {line!r}"
        self.port, self.token = int(found[1]), found[2]
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.cookie_name = f"gitmem_web_{self.port}"
        self.stopped: tuple[int, str] | None = None

    @classmethod
    def start(cls, repo: Path, *options: str, env: dict[str, str] | None = None) -> WebServer:
        process = subprocess.Popen([sys.executable, "-m", "gitmem", "web", "--repo", str(repo),
                                    "--port", "0", *options], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, env={**SUBPROCESS_ENV, **(env or {})})
        ready, _, _ = select.select([process.stdout], [], [], START_DEADLINE)
        if not ready:
            process.kill()
            raise AssertionError(f"gitmem web printed nothing in {START_DEADLINE} s")
        line = process.stdout.readline().strip()
        if not line:
            process.wait(10)
            raise AssertionError(f"gitmem web ended: {process.stderr.read()}")
        return cls(process, line)

    def request(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                cookie: str | None = None, form: dict[str, str] | None = None,
                body: bytes | None = None) -> tuple[int, dict[str, str], str]:
        """One request; ``Host`` is the server's own unless ``headers`` names another."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        sent = {"Host": self.host, **(headers or {})}
        if cookie is not None:
            sent["Cookie"] = f"{self.cookie_name}={cookie}"
        if form is not None:
            body = urlencode(form).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for key, value in sent.items():
                connection.putheader(key, value)
            if body is not None:
                connection.putheader("Content-Length", str(len(body)))
            connection.endheaders(body)
            answer = connection.getresponse()
            return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
        finally:
            connection.close()

    def login(self) -> str:
        """Visit the printed address: the cookie value the server sets."""
        status, headers, _ = self.request("GET", urlsplit(self.line).path + "?" + urlsplit(self.line).query)
        assert status == 303, status
        found = re.match(rf"{self.cookie_name}=([^;]+);", headers["set-cookie"])
        assert found is not None, headers["set-cookie"]
        return found[1]

    def get(self, path: str, cookie: str) -> str:
        status, _, body = self.request("GET", path, cookie=cookie)
        assert status == 200, (status, body[:500])
        return body

    def stop(self) -> tuple[int, str]:
        """SIGTERM, then the exit status and stderr (the server must end within 20 s)."""
        if self.stopped is not None:
            return self.stopped
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError("gitmem web did not end within 20 s of SIGTERM") from None
        self.stopped = (self.process.returncode, self.process.stderr.read())
        return self.stopped

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(predicate, seconds: float = 10.0) -> None:
    """Until ``predicate()`` holds (at most ``seconds``)."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "not within the deadline"
        time.sleep(0.05)
