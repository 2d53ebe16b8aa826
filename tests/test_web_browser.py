"""``gitmem web`` in a real browser: Debian's Chromium driven by Playwright (the system
browser: Playwright's own download is not needed), against the real server on a real
repository. Clicks go from the records to a timeline, a diff and back; a search opens
its hit; an edit is saved while an agent writes; a version is restored. With
GITMEM_SCREENSHOTS=docs/images the run also saves the timeline and activity pages there
(the docs' pictures); otherwise they go to the test's own directory, and the tree stays clean.
"""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from conftest import Git, run_gitmem

pytest.importorskip("starlette")
sync_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("GITMEM_TEST_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium (.ci/run installs Debian's chromium)", allow_module_level=True)

from web_server import WebServer  # noqa: E402


def screenshot(page, tmp_path: Path, name: str) -> None:
    """The page, whole, as ``name`` in $GITMEM_SCREENSHOTS (else in ``tmp_path``)."""
    folder = Path(os.environ.get("GITMEM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)


def png(width: int, height: int) -> bytes:
    """A PNG of noise (so that its base64 passes the size images are stored as blobs from)."""
    rows = b"".join(b"\0" + random.Random(y).randbytes(3 * width) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


REVIEWER = ["Checks types first.", "Reviews tests first.", "Asks before renaming."]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("web-browser") / "memory"
    run_gitmem("init", str(path))
    git = Git(path)
    git("config", "user.name", "Pat Person")
    git("config", "user.email", "pat@example.org")
    run_gitmem("memory", "write", "--user", repo=path, input="# About me\n\nPrefers **short** answers.\n")
    for block in REVIEWER:
        run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=path, input=block)
    image = {"id": "i1", "mediaType": "image/png", "data": base64.b64encode(png(24, 16)).decode()}
    run_gitmem("session", "write", "claude-code", "s1", repo=path, input=json.dumps({"messages": [
        {"id": "m1", "role": "user", "content": "what does the reviewer check?", "images": [image]},
        {"id": "m2", "role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "memory_read", "input": {"record": "agent:reviewer"}}]},
        {"id": "m3", "role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "Checks types first."}]},
        {"id": "m4", "role": "assistant", "content": "It checks the **tangerine** types first."}]}))
    return path


@pytest.fixture(scope="module")
def web(repo: Path):
    with WebServer.start(repo) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, web: WebServer):
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    opened.goto(web.line)  # the printed address: its token becomes the cookie
    yield opened
    context.close()


def test_each_page_opens_and_a_record_leads_to_its_timeline_a_diff_and_back(page, web: WebServer, tmp_path):
    assert page.url == f"{web.url}/"  # the token left the address bar
    page.get_by_role("link", name="agent:reviewer", exact=True).click()
    assert page.locator("section.block").count() == 3
    assert page.locator("section.block").first.inner_text().strip().endswith(REVIEWER[0])
    page.click("#tab-timeline")
    assert page.locator("tr.version").count() == 3
    screenshot(page, tmp_path, "web-timeline.png")
    page.click("#compare-button")  # the two newest versions, side by side
    assert page.locator("#diff tr.added td.new").all_inner_texts() == ["", REVIEWER[2]]
    page.click("#back-to-timeline")
    assert page.locator("tr.version").count() == 3
    page.go_back()
    assert page.locator("#diff").count() == 1
    page.click("#tab-blame")
    assert page.locator("#blame tbody tr").count() == 3
    for path, text in (("/", "records"), ("/?kind=session", "session:claude-code/s1"),
                       ("/record?name=user", "About me"), ("/search", "search"),
                       ("/activity?range=week", "activity")):
        page.goto(web.url + path)
        assert text in page.content()


def test_a_session_shows_roles_folded_tool_calls_and_images(page, web: WebServer):
    page.goto(f"{web.url}/record?name=session:claude-code/s1")
    assert page.locator("li.message").count() == 4
    assert page.locator("li.role-user .role").first.inner_text().lower() == "user"
    call = page.locator("details.call")
    assert call.count() == 1 and not call.first.evaluate("d => d.open")  # folded
    assert "memory_read" in call.first.inner_text()
    image = page.locator("li.message img").first
    image.wait_for()
    assert image.evaluate("i => i.complete && i.naturalWidth") == 24


def test_search_opens_a_hit_in_context(page, web: WebServer):
    page.goto(f"{web.url}/search")
    page.fill("#search input[name=q]", "tangerine")
    page.click("#search button[type=submit]")
    hit = page.locator("a.hit-link").first
    assert hit.inner_text() == "session:claude-code/s1"
    hit.click()
    marked = page.locator("li.message.hit")
    assert marked.count() == 1 and "tangerine" in marked.inner_text()


def test_an_edit_is_saved_as_the_persons_commit_keeping_an_agents_write(page, web: WebServer, repo: Path):
    page.goto(f"{web.url}/record?name=agent:reviewer")
    page.click("#tab-edit")
    text = page.input_value("#content")
    # an agent appends while the page is open
    run_gitmem("memory", "write", "--agent", "reviewer", "--append", repo=repo, input="Agent wrote this meanwhile.")
    page.fill("#content", text.replace(REVIEWER[1], "Reviews the tests before the code."))
    page.click("#save")
    assert "Saved as commit" in page.inner_text("#saved")
    saved = run_gitmem("memory", "read", "--agent", "reviewer", repo=repo).stdout
    assert "Reviews the tests before the code." in saved and REVIEWER[1] not in saved
    assert "Agent wrote this meanwhile." in saved  # kept: the save was merged onto it
    git = Git(repo)
    assert git("log", "-1", "--format=%an <%ae>", "main").strip() == "Pat Person <pat@example.org>"
    assert "Gitmem-Client: gitmem web" in git("log", "-1", "--format=%B", "main")


def test_restoring_a_version(page, web: WebServer, repo: Path):
    page.goto(f"{web.url}/timeline?name=user")
    run_gitmem("memory", "write", "--user", repo=repo, input="Prefers long answers now.\n")
    page.reload()
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("tr.version").nth(1).locator("button.restore").click()
    assert "Restored as commit" in page.inner_text("#restored")
    assert "Prefers **short** answers." in run_gitmem("memory", "read", "--user", repo=repo).stdout
    git = Git(repo)
    message = git("log", "-1", "--format=%B", "main")
    assert "Gitmem-Restored-From" in message and "Gitmem-Client: gitmem web" in message
    assert git("log", "-1", "--format=%an <%ae>", "main").strip() == "Pat Person <pat@example.org>"


def test_the_activity_page_charts_the_writes(page, web: WebServer, tmp_path):
    page.goto(f"{web.url}/activity?range=week")
    assert page.locator("svg.chart").count() == 2
    assert page.locator("svg.chart rect title").count() > 0
    assert page.locator("#changes tbody tr").count() >= 5
    screenshot(page, tmp_path, "web-activity.png")
