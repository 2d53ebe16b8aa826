"""The pages of ``gitmem web``: Starlette handlers that call the library and fill the
Jinja2 templates in ``templates/``.

Every handler runs on the event loop, one at a time: the repository object is not
shared between threads, and ``/mcp`` (whose tools run on the loop too) uses the same one.
A request the library refuses (a record name, a time, a query) gets a page saying why
(400); anything else is logged and answered 500, and serving goes on.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gitmem.errors import one_line
from gitmem.faces.web import activity as activity_page
from gitmem.faces.web.guard import WriteRefused, check_form
from gitmem.faces.web.listing import KINDS, Listing
from gitmem.faces.web.markdown import render
from gitmem.faces.web.sidebyside import side_by_side
from gitmem.faces.web.transcript import parts, role_of
from gitmem.errors import HistoryError
from gitmem.history import versions as history
from gitmem.records import dates, layout
from gitmem.records.units import blocks
from gitmem.repository import Gitmem

log = logging.getLogger("gitmem.web")

PAGE = 50  # versions on a timeline page
MESSAGES = 100  # messages or events on a session's or thread's page
SEARCH_LIMIT = 50
FIND_BATCH = 2000  # messages read at a time, looking for a search hit's
SHOWN_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
CLIENT = "gitmem web"  # the Gitmem-Client trailer of the page's writes
_MARKED = re.compile(r"\*\*(.+?)\*\*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SURROGATE = re.compile("[\ud800-\udfff]")

templates = Environment(loader=FileSystemLoader(Path(__file__).with_name("templates")), autoescape=True)
templates.filters["markdown"] = render
templates.filters["short"] = lambda commit: (commit or "")[:10]
templates.filters["size"] = lambda n: f"{n:,} B" if n < 10_000 else (
    f"{n / 1000:,.1f} kB" if n < 10_000_000 else f"{n / 1_000_000:,.1f} MB")
templates.globals["client_of"] = activity_page.client_of
templates.globals["format_date"] = dates.format_date


class Pages:
    """The handlers, on one open repository."""

    def __init__(self, mem: Gitmem):
        self.mem = mem
        self.listing = Listing(mem)

    def routes(self) -> list:
        from starlette.routing import Route
        return [Route(path, self._answered(handler), methods=[method]) for path, handler, method in (
            ("/", self.records, "GET"), ("/record", self.record, "GET"),
            ("/timeline", self.timeline, "GET"), ("/diff", self.diff, "GET"),
            ("/blame", self.blame, "GET"), ("/edit", self.edit_form, "GET"),
            ("/edit", self.edit, "POST"), ("/restore", self.restore, "POST"),
            ("/search", self.search, "GET"), ("/activity", self.activity, "GET"),
            ("/blob", self.blob, "GET"))]

    def _answered(self, handler):
        """``handler`` with a refusal answered 400 (403 for a write without the token)
        and any other failure 500, each with one line; serving goes on."""
        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except REFUSALS as error:
                status = 403 if isinstance(error, WriteRefused) else 400
                log.info("%s %s refused: %s", request.method, request.url.path, one_line(error))
                return self.page(request, "error.html", status, code=status, message=one_line(error),
                                 title="refused")
            except Exception as error:  # noqa: BLE001 - every failure is an answer
                log.exception("%s %s failed", request.method, request.url.path)
                return self.page(request, "error.html", 500, code=500, message=one_line(error),
                                 title="failed")
        answer.__name__ = handler.__name__
        return answer

    def page(self, request: Request, template: str, status: int = 200, **values) -> Response:
        """``template`` filled with ``values``. A record that is not UTF-8 (a Latin-1 hand
        edit, read with each such byte a lone surrogate) is shown with U+FFFD for those."""
        values.setdefault("title", template.removesuffix(".html"))
        text = templates.get_template(template).render(request=request, token=request.state.write_token, **values)
        return HTMLResponse(_SURROGATE.sub("\ufffd", text), status)

    # -- the records ---------------------------------------------------------------

    async def records(self, request: Request) -> Response:
        kind = request.query_params.get("kind") or None
        if kind is not None and kind not in KINDS:
            raise HistoryError(f"no record kind {kind!r}: use one of {', '.join(KINDS)}")
        return self.page(request, "records.html", title="records", kinds=KINDS, kind=kind,
                         records=self.listing.records(kind))

    async def record(self, request: Request) -> Response:
        """A record now, or at ``at`` (a WHEN), with the units holding every ``find`` word marked."""
        record = _record(request)
        at = request.query_params.get("at") or None
        commit = history.resolve_version(self.mem, record, at) if at else None
        words = [w.casefold() for w in request.query_params.getlist("find") if w]
        values = {"record": record, "at": at, "commit": commit, "words": words,
                  "title": record.name, "saved": request.query_params.get("saved")}
        if record.kind in ("user", "agent"):
            return self._memory(request, record, values)
        snapshot = self.mem.engine.snapshot_of(commit, scope=record.path) if at else \
            self.mem.engine.snapshot(scope=record.path)  # a person's save waiting is taken in first
        if record.kind == "session":
            return self._session(request, record, snapshot, values)
        if record.kind == "store":
            return self._item(request, record, snapshot, values)
        return self._thread(request, record, snapshot, values)

    def _item(self, request: Request, record: layout.Record, snapshot, values: dict) -> Response:
        """A key-value store's item (LangGraph's): its value as one block of JSON."""
        item = self.mem.items.at(record.path, snapshot=snapshot)
        text = "" if item is None else json.dumps(item.value, indent=2, ensure_ascii=False)
        values["commit"] = values["commit"] or self.mem.engine.head()
        values["blocks"] = [(text, _holds(text, values["words"]))] if text else []
        return self.page(request, "memory.html", **values)

    def _memory(self, request: Request, record: layout.Record, values: dict) -> Response:
        agent = record.ids[0] if record.kind == "agent" else None
        if values["at"] is None:
            text = self.mem.memory.read(agent)  # a person's save waiting is taken in first
            values["commit"] = self.mem.engine.head()
        else:
            text = self.mem.memory.read(agent, snapshot=self.mem.engine.snapshot_of(
                values["commit"], scope=record.path))
        values["blocks"] = [(block, _holds(block, values["words"])) for block in blocks(text)]
        return self.page(request, "memory.html", **values)

    def _session(self, request: Request, record: layout.Record, snapshot, values: dict) -> Response:
        words, commit = values["words"], values["commit"]
        agent_type, session_id = record.ids
        total = self.mem.sessions.page(agent_type, session_id, 0, 0, snapshot=snapshot)[1]
        start = self._start(request, total, words, record, snapshot)
        lines = self.mem.sessions.page(agent_type, session_id, start, start + MESSAGES, snapshot=snapshot)[0]

        def image(file: str) -> str:
            return "/blob?" + urlencode({"name": record.name, "file": file, **({"at": commit} if commit else {})})

        messages = [json.loads(line) for line in lines]
        values["messages"] = [(start + i, role_of(m), parts(m, image), _holds(json.dumps(m, ensure_ascii=False), words))
                              for i, m in enumerate(messages)]
        values["meta"] = self.mem.sessions.meta(*record.ids, snapshot=snapshot) or {}
        values.update(_pages(record, values["at"], start, total, MESSAGES))
        return self.page(request, "session.html", **values)

    def _thread(self, request: Request, record: layout.Record, snapshot, values: dict) -> Response:
        thread = record.ids[0]
        events = self.mem.threads.read_events(thread, snapshot=snapshot)
        found = {i for i, e in enumerate(events) if _holds(json.dumps(e, ensure_ascii=False), values["words"])}
        start = min(found) // MESSAGES * MESSAGES if found and "from" not in request.query_params \
            else _page_start(request, len(events), MESSAGES)
        values["events"] = [(i, events[i], i in found) for i in range(start, min(start + MESSAGES, len(events)))]
        values["state"] = json.dumps(self.mem.threads.read_state(thread, snapshot=snapshot),
                                     ensure_ascii=False, indent=1)
        values["meta"] = self.mem.threads.meta(thread, snapshot=snapshot) or {}
        values.update(_pages(record, values["at"], start, len(events), MESSAGES))
        return self.page(request, "thread.html", **values)

    def _start(self, request, total, words, record, snapshot) -> int:
        """The first message shown: the page asked for; else, with words to find, the page
        of the first message holding them all; else the last page."""
        if "from" not in request.query_params and words:
            agent_type, session_id = record.ids
            for start in range(0, total, FIND_BATCH):
                lines = self.mem.sessions.page(agent_type, session_id, start, start + FIND_BATCH, snapshot=snapshot)[0]
                for i, line in enumerate(lines):
                    if _holds(json.dumps(json.loads(line), ensure_ascii=False), words):
                        return (start + i) // MESSAGES * MESSAGES
        return _page_start(request, total, MESSAGES)

    async def blob(self, request: Request) -> Response:
        record = _record(request)
        if record.kind != "session":
            raise HistoryError("only a session keeps images")
        at = request.query_params.get("at") or None
        if at is not None and not _COMMIT.fullmatch(at):
            raise HistoryError(f"at {at!r} is not a commit id")
        snapshot = self.mem.engine.snapshot_of(at, scope=record.path) if at else \
            self.mem.engine.snapshot(scope=record.path)
        agent_type, session_id = record.ids
        found = self.mem.sessions.image(agent_type, session_id, request.query_params.get("file", ""), snapshot=snapshot)
        if found is None:
            return Response("no such image\n", 404, media_type="text/plain")
        media_type, data = found
        headers = {"Cache-Control": "private, max-age=31536000, immutable"}  # named by its hash
        if media_type not in SHOWN_IMAGES:  # an SVG or anything else: downloaded, never opened here
            media_type = "application/octet-stream"
            headers["Content-Disposition"] = "attachment"
        return Response(data, media_type=media_type, headers=headers)

    # -- history -------------------------------------------------------------------

    async def timeline(self, request: Request) -> Response:
        record = _record(request)
        total = len(self.mem.record_index.versions(record.path))
        page = _whole(request.query_params.get("page", "0"), "page")
        entries = history.log(self.mem, record.name, limit=PAGE, skip=page * PAGE)
        return self.page(request, "timeline.html", title=f"{record.name}: timeline", record=record,
                         entries=entries, page=page, pages=max(1, math.ceil(total / PAGE)), total=total,
                         first=page * PAGE, restored=request.query_params.get("restored"))

    async def diff(self, request: Request) -> Response:
        record = _record(request)
        since = request.query_params.get("from") or None
        until = request.query_params.get("to") or None
        if since and until:  # two versions picked in either order: the older one first
            old, new = (history.resolve_version(self.mem, record, w) for w in (since, until))
            if old and new and old != new and self.mem.engine.log.descends_from(old, new):
                since, until = until, since
        found = self.mem.diff(record.name, since, until)
        return self.page(request, "diff.html", title=f"{record.name}: diff", record=record,
                         diff=found, rows=side_by_side(found.patch))

    async def blame(self, request: Request) -> Response:
        record = _record(request)
        return self.page(request, "blame.html", title=f"{record.name}: blame", record=record,
                         blamed=self.mem.blame(record.name))

    async def restore(self, request: Request) -> Response:
        form = await check_form(request)
        record = layout.parse_record(form.get("name", ""))
        done = self.mem.restore(record.name, form.get("at", ""), trailers={"Gitmem-Client": CLIENT},
                                author=self.mem.engine.user_identity())
        log.info("restored %s from %s: commit %s", record.name, done.source, done.commit)
        return RedirectResponse("/timeline?" + urlencode({"name": record.name,
                                                          "restored": done.commit or ""}), 303)

    async def edit_form(self, request: Request) -> Response:
        record = _memory(_record(request))
        agent = record.ids[0] if record.kind == "agent" else None
        self.mem.memory.read(agent)  # a person's save waiting is committed first
        base = self.mem.engine.head()
        text = self.mem.memory.read(agent, snapshot=self.mem.engine.snapshot_of(base, scope=record.path))
        return self.page(request, "edit.html", title=f"{record.name}: edit", record=record,
                         text=text, base=base)

    async def edit(self, request: Request) -> Response:
        form = await check_form(request)
        record = _memory(layout.parse_record(form.get("name", "")))
        base = form.get("base") or None
        if base is not None and not _COMMIT.fullmatch(base):
            raise HistoryError(f"base {base!r} is not a commit id")
        content = form.get("content", "").replace("\r\n", "\n")  # a form's text has CRLF line ends
        agent = record.ids[0] if record.kind == "agent" else None
        commit = self.mem.memory.save_from(content, agent, base, author=self.mem.engine.user_identity(),
                                           trailers={"Gitmem-Client": CLIENT})
        log.info("%s saved from %s: commit %s", record.name, (base or "nothing")[:10], commit)
        return RedirectResponse("/record?" + urlencode({"name": record.name, "saved": commit or "none"}), 303)

    # -- search and activity ---------------------------------------------------------

    async def search(self, request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        with_history = request.query_params.get("history") == "1"
        as_of = request.query_params.get("asof", "").strip()
        kind = request.query_params.get("kind") or None
        values: dict[str, Any] = {"q": query, "history": with_history, "asof": as_of, "kind": kind,
                  "kinds": ("memory", "session", "thread"), "hits": None, "title": "search"}
        if query:
            values["hits"] = [(hit, self._hit_link(hit, as_of)) for hit in
                              self._search(query, with_history, as_of, kind)]
        return self.page(request, "search.html", **values)

    def _search(self, query: str, with_history: bool, as_of: str, kind: str | None) -> list:
        if not as_of:
            return self.mem.search(query, history=with_history, kind=kind, limit=SEARCH_LIMIT)
        moment = dates.parse_time(as_of)
        if moment is None:
            raise HistoryError(f"as of {as_of!r} is not a date: use 2026-11-01, "
                                       "2026-11-01T14:00, yesterday or '3 days ago'")
        # what the records held then: added by then, and not removed by then
        hits = self.mem.search(query, history=True, kind=kind, until=as_of, limit=4 * SEARCH_LIMIT)
        return [hit for hit in hits if _seconds(hit.added_date) <= moment
                and (hit.removed_date is None or _seconds(hit.removed_date) > moment)][:SEARCH_LIMIT]

    @staticmethod
    def _hit_link(hit, as_of: str) -> str:
        """The hit's unit in its record: as it was when the text was there, marked."""
        query = [("name", hit.record)] + [("find", word) for word in _MARKED.findall(hit.snippet)]
        if hit.removed is not None or as_of:
            query.append(("at", hit.added))
        return "/record?" + urlencode(query)

    async def activity(self, request: Request) -> Response:
        choice = request.query_params.get("range", "today")
        since, until = (request.query_params.get(k, "").strip() for k in ("since", "until"))
        start, end = activity_page.window(choice if choice in ("today", "week") else "dates", since, until)
        found = activity_page.activity(self.mem, start, end)
        return self.page(request, "activity.html", title="activity", choice=choice, since=since,
                         until=until, found=found, shown=found.changes[:activity_page.SHOWN],
                         start=datetime.fromtimestamp(start).isoformat(timespec="minutes"),
                         end=datetime.fromtimestamp(end).isoformat(timespec="minutes"),
                         kind_chart=activity_page.kind_chart(found),
                         client_chart=activity_page.client_chart(found))


# -- the query ---------------------------------------------------------------------


def _record(request: Request) -> layout.Record:
    return layout.parse_record(request.query_params.get("name", ""))


def _memory(record: layout.Record) -> layout.Record:
    if record.kind not in ("user", "agent"):
        raise HistoryError(f"{record.name} cannot be edited here: only a memory (user, agent:<id>) can")
    return record


def _whole(text: str, what: str) -> int:
    if not text.isdigit():
        raise HistoryError(f"{what} must be a whole number, not {text!r}")
    return int(text)


def _page_start(request: Request, total: int, size: int) -> int:
    """Where the page asked for starts (``from``), by default at the last page."""
    given = request.query_params.get("from")
    if given is None:
        return max(0, (total - 1) // size * size) if total else 0
    return min(_whole(given, "from"), max(0, total - 1))


def _pages(record: layout.Record, at: str | None, start: int, total: int, size: int) -> dict:
    """The pager's values: where this page starts, and the addresses of the pages around it."""
    def link(first: int) -> str:
        return "/record?" + urlencode({"name": record.name, "from": first, **({"at": at} if at else {})})
    return {"start": start, "total": total, "size": size,
            "previous": link(max(0, start - size)) if start > 0 else None,
            "next": link(start + size) if start + size < total else None}


def _holds(text: str, words: list[str]) -> bool:
    folded = text.casefold()
    return bool(words) and all(word in folded for word in words)


def _seconds(date: str) -> float:
    return datetime.fromisoformat(date).timestamp()


REFUSALS = (HistoryError, layout.BadRecordName, ValueError, WriteRefused)
