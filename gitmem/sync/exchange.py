"""``gitmem sync``: exchange commits with an ordinary git remote without losing a line.

One sync: commit pending hand edits; fetch the remote's ``main``, refused unless it holds
gitmem's records only and shares a commit with ours (or ``allow_unrelated_histories``);
fast-forward when only the remote moved; when both moved, merge by
:mod:`gitmem.records.merge`'s rules into one merge commit; scan what is about to go out
for secrets (:mod:`gitmem.sync.secrets`);
push, never forced. A push refused because someone pushed meanwhile starts over
from the fetch after a random pause that grows with each refusal (see
:func:`retry_pause`), until the sync's deadline. The branch only ever moves by a
commit on top, a fast-forward or a merge: local commits are never reset away.

The outcome goes to ``.git/gitmem/sync-state.json`` for ``gitmem status``: for each
remote (by name, with the URL it had) ``last_sync`` (ISO time of the last success),
``last_attempt`` and ``last_error`` (one line, or null); and ``merge_spots``: the places
where a merge kept two versions side by side (``{path, line, commit, note, text}``).
:func:`read_state` answers for one remote, forgets a remote removed or pointed
elsewhere since, and drops the spots a person has tidied since.

    with Gitmem.open("~/gitmem") as mem:
        result = sync(mem, "origin")
        print(result.describe())
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from datetime import datetime, timezone
from typing import Any

from gitmem.edits.handedits import HandEdits
from gitmem.errors import GitmemError
from gitmem.git.base import BranchMoved
from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.remote import scrub_credentials
from gitmem.opening.policy import refuse_a_foreign_remote
from gitmem.records import strictjson
from gitmem.records.counts import counted
from gitmem.records.merge import Spot, merge_changes, spots_paragraph
from gitmem.repository import Gitmem
from gitmem.sync import rescue, secrets

log = logging.getLogger("gitmem.sync.exchange")

STATE_FILE = "sync-state.json"  # inside .git/gitmem/
FIRST_PAUSE = 0.05  # seconds: the longest pause after the first refused push ...
LONGEST_PAUSE = 2.0  # ... doubling with each refusal up to this
UNLOCKED_MERGE_ATTEMPTS = 3  # merges made without the writers' lock before one is made with it
MAX_BACKOFF = 3600.0  # seconds between background attempts after repeated failures
SYNC_TIMEOUT = 30.0
"""Seconds one sync may take, all its fetches, pushes and retries together (git
config ``gitmem.syncTimeout``, or ``gitmem sync --timeout``, sets another bound)."""
TIMEOUT_KEY = "gitmem.syncTimeout"


class SyncError(GitmemError):
    """A sync could not finish; the message is one line saying why."""


class UnrelatedHistories(SyncError):
    """The remote's ``main`` and ours share no commit: two repositories started apart."""


class SecretsRefused(SyncError):
    """The commits about to be pushed add likely secrets; nothing was pushed."""

    def __init__(self, remote: str, findings: list[secrets.Finding], scanned_bytes: int = 0):
        self.findings = findings
        self.scanned_bytes = scanned_bytes  # read by this scan (0: all remembered from before)
        count = f"{len(findings)} likely secret{'s' if len(findings) != 1 else ''}"
        super().__init__(f"push to {remote} refused: new commits add {count} (take one back "
                         "with `gitmem forget PATH --secret FINGERPRINT`, or allow it with "
                         f"--allow-secrets or in {secrets.ALLOW_FILE})")

    def report(self) -> list[str]:
        """One line per finding: file, line, kind and fingerprint, never the secret."""
        return [str(finding) for finding in self.findings]


class SyncResult:
    """What one sync did."""

    __slots__ = ("remote", "incoming", "outgoing", "how", "merges", "kept", "attempts", "scanned_bytes")

    def __init__(self, remote: str) -> None:
        self.remote = remote
        self.incoming = 0  # commits that came in from the remote
        self.outgoing = 0  # commits pushed to the remote
        self.how = "up to date"  # or "fast-forward", "merge"
        self.merges: list[tuple[str, list[Spot]]] = []  # (commit, spots)
        self.kept: list[str] = []  # hand-edited files not updated
        self.attempts = 1
        self.scanned_bytes: list[int] = []  # by each attempt's scan

    @property
    def spots(self) -> list[Spot]:
        """The places the merges ask a person to tidy."""
        return [spot for _, spots in self.merges for spot in spots]

    def describe(self) -> list[str]:
        """Lines for a person: what came in, what went out, what to tidy."""
        lines = []
        if self.incoming:
            lines.append(f"in: {counted(self.incoming, 'commit')} from {self.remote} ({self.how})")
        if self.outgoing:
            lines.append(f"out: {counted(self.outgoing, 'commit')} to {self.remote}")
        if not lines:
            lines.append(f"up to date with {self.remote}")
        lines += [f"to tidy: {spot}" for spot in self.spots]
        lines += [f"not updated (uncommitted hand edit): {path}" for path in self.kept]
        return lines


def sync(mem: Gitmem, remote: str | None = None, *, allow_secrets: bool = False,
         interactive: bool = True, timeout: float | None = None,
         allow_unrelated_histories: bool = False) -> SyncResult:
    """Fetch, merge and push ``main`` with ``remote`` (default: see :func:`choose_remote`).

    A remote whose ``main`` holds anything but gitmem's records is refused
    (:class:`~gitmem.opening.policy.NotAGitmemRepository`) before anything comes into ``main``,
    and one whose ``main`` shares no commit with ours (:class:`UnrelatedHistories`) unless
    ``allow_unrelated_histories``.

    ``interactive=False`` (background syncs) forbids credential prompts. It gives up
    after ``timeout`` seconds (default: :func:`sync_timeout`), retries included. Raises
    :class:`SyncError` (:class:`SecretsRefused` for a refused push) with a one-line
    reason; success or failure is recorded in the sync state either way.
    """
    engine = mem.engine
    name = remote
    try:
        name = choose_remote(engine, remote)
        network = _Deadline(timeout if timeout is not None else sync_timeout(engine))
        result = _sync(engine, name, allow_secrets, allow_unrelated_histories, interactive, network)
    except Exception as exc:
        reason = scrub_credentials(str(exc).strip().split("\n")[0] or type(exc).__name__)
        _save_state(engine, name, last_error=reason, last_attempt=_now())
        if isinstance(exc, SyncError):
            raise
        raise SyncError(reason) from exc
    now = _now()
    new_spots = [{"path": s.path, "line": s.line, "note": s.note, "text": s.text, "commit": commit}
                 for commit, spots in result.merges for s in spots]
    _save_state(engine, name, last_sync=now, last_attempt=now, last_error=None,
                incoming=result.incoming, outgoing=result.outgoing,
                merge_spots=read_state(engine, name)["merge_spots"] + new_spots)
    return result


def choose_remote(engine: GitEngine, remote: str | None = None) -> str:
    """``remote`` if given; else ``branch.main.remote`` from git config, ``origin``, or the
    only remote there is."""
    if remote:
        return remote
    names = engine.remotes.names()
    configured = engine.config_get("branch.main.remote")
    if configured in names:
        return configured
    if "origin" in names:
        return "origin"
    if len(names) == 1:
        return names[0]
    if not names:
        raise SyncError("no remote to sync with (add one with `gitmem remote add NAME URL`)")
    raise SyncError(f"several remotes ({', '.join(names)}): name the one to sync with")


def sync_timeout(engine: GitEngine) -> float:
    """``gitmem.syncTimeout`` from git config, else :data:`SYNC_TIMEOUT`."""
    text = engine.config_get(TIMEOUT_KEY)
    if text is None:
        return SYNC_TIMEOUT
    try:
        return positive_seconds(text)
    except ValueError:
        raise SyncError(f"git config {TIMEOUT_KEY} must be a positive number of seconds, "
                        f"not {text!r}") from None


def positive_seconds(text: str) -> float:
    """``text`` as a number of seconds above 0 and finite (a bound, for ``--timeout`` and
    ``--sync-interval`` too); ``ValueError`` saying so for anything else."""
    try:
        value = strictjson.finite_float(text)
    except ValueError:
        value = 0.0
    if not value > 0:  # nan too
        raise ValueError(f"not a positive number of seconds: {text!r}")
    return value


class _Deadline:
    """What is left of one sync's time."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def left(self) -> float:
        left = self._end - time.monotonic()
        if left <= 0:
            raise SyncError(f"gave up after {self.seconds:g} s (for a longer "
                            f"bound: gitmem sync --timeout, or git config {TIMEOUT_KEY})")
        return left


def retry_pause(refusals: int) -> float:
    """Seconds to wait after the ``refusals``-th refused push before fetching again: random
    up to a bound that doubles with each refusal, so machines pushing at once spread out."""
    return random.uniform(0, min(LONGEST_PAUSE, FIRST_PAUSE * 2 ** (refusals - 1)))


def _sync(engine: GitEngine, remote: str, allow_secrets: bool, allow_unrelated: bool,
          interactive: bool, deadline: _Deadline) -> SyncResult:
    result = SyncResult(remote)
    rescue.find_lost(engine)  # commits a history rewrite took off main stay kept, whatever comes in
    while True:
        remote_tip = engine.remotes.fetch(remote, interactive=interactive, timeout=deadline.left())
        if remote_tip != engine.head():  # what is not ours yet: never merged into main, nor pushed over
            refuse_a_foreign_remote(engine, remote, remote_tip, named=remote, undone="nothing merged or pushed",
                                    interactive=interactive, timeout=deadline.left())
            if remote_tip is not None and not allow_unrelated:
                _refuse_unrelated(engine, remote, remote_tip)
        # Pending hand edits first: they travel (a file saved after this is left alone).
        HandEdits.of(engine).commit_pending()
        local = _integrate(engine, remote, remote_tip, result)
        if local is None or local == remote_tip:
            return result
        outgoing = engine.log.new_commits(local, [remote_tip] if remote_tip else [])
        if not allow_secrets:
            scanned = secrets.Scanner(engine).scan(outgoing)
            result.scanned_bytes.append(scanned.scanned_bytes)
            found = secrets.not_allowed(engine, scanned.findings)
            if found:
                raise SecretsRefused(remote, found, scanned.scanned_bytes)
        if engine.remotes.push(remote, local, interactive=interactive, timeout=deadline.left()):
            result.outgoing = len(outgoing)
            return result
        pause = retry_pause(result.attempts)
        log.info("push to %s refused: it moved meanwhile (attempt %d); again in %.2f s",
                 remote, result.attempts, pause)
        if pause >= deadline.left():
            raise SyncError(f"{remote} kept moving while we pushed; gave up after "
                            f"{result.attempts} attempts in {deadline.seconds:g} s (run `gitmem "
                            f"sync` again, or give it longer with --timeout)")
        time.sleep(pause)
        result.attempts += 1


def _refuse_unrelated(engine: GitEngine, remote: str, remote_tip: str) -> None:
    local = engine.head()
    if local is not None and engine.log.merge_base(local, remote_tip) is None:
        raise UnrelatedHistories(
            f"{remote}/main and this repository share no commit (each was started on its own): "
            f"nothing merged or pushed; to merge the two, `gitmem sync --allow-unrelated-histories "
            f"{remote}`; for a new machine, `gitmem clone URL` starts from the remote instead")


def _integrate(engine: GitEngine, remote: str, remote_tip: str | None,
               result: SyncResult) -> str | None:
    """Bring the remote's commits into ``main``; return the new tip.

    The merge is made from a snapshot, without the writers' lock, so no writer waits for
    it; the engine moves the branch only from the commit the merge started from, and a
    writer's commit in between makes the merge start again on top of it. Writers that
    keep committing faster than a merge is made cannot starve it: the last attempt holds
    the lock (for as long as one merge takes, a fraction of a second even for large files).
    """
    local = engine.head()
    if remote_tip is None or remote_tip == local or (local and engine.log.is_ancestor(remote_tip, local)):
        return local
    result.incoming += len(engine.log.new_commits(remote_tip, [local] if local else []))
    for _ in range(UNLOCKED_MERGE_ATTEMPTS):
        try:
            return _merge_into(engine, remote, local, remote_tip, result)
        except BranchMoved:
            log.info("a writer committed while we merged %s/main: merging again", remote)
            local = engine.head()
    with engine.lock:
        return _merge_into(engine, remote, engine.head(), remote_tip, result)


def _merge_into(engine: GitEngine, remote: str, local: str | None, remote_tip: str,
                result: SyncResult) -> str:
    """Fast-forward ``main`` from ``local`` to ``remote_tip``, or merge the two; BranchMoved
    when ``main`` is no longer at ``local``."""
    if local is None or engine.log.is_ancestor(local, remote_tip):
        result.kept += engine.fast_forward(local, remote_tip)
        result.how = "fast-forward"
        return remote_tip
    base = engine.log.merge_base(local, remote_tip)
    merged = merge_changes(engine.log.changed_files(base, local),
                           engine.log.changed_files(base, remote_tip), engine.read_blob)
    commit, kept = engine.commit_merge(local, remote_tip, merged.changes,
                                       _merge_message(remote, result.incoming, merged.spots),
                                       {"Gitmem-Op": "sync.merge", "Gitmem-Remote": remote})
    log.info("merged %s/main into %s as %s (%d spots to tidy)", remote, local[:10],
             commit[:10], len(merged.spots))
    result.how = "merge"
    result.merges.append((commit, merged.spots))
    result.kept += kept
    return commit


def _merge_message(remote: str, incoming: int, spots: list[Spot]) -> str:
    return f"sync: merge {remote}/main ({counted(incoming, 'commit')} in)\n" + spots_paragraph(spots)


# -- state for `gitmem status` --------------------------------------------------------


def read_state(engine: GitEngine, remote: str | None = None) -> dict[str, Any]:
    """``{remote, last_sync, last_attempt, last_error, merge_spots}``: the syncs with
    ``remote`` (default: the one `gitmem sync` would use, else the last one tried), as long
    as it is still configured with the URL it had; ``merge_spots`` narrowed to the ones
    still in the files (their line numbers brought up to date)."""
    state = _load_state(engine)
    remotes = {name: entry for name, entry in state["remotes"].items()
               if name == "" or (name in engine.remotes.names() and entry.get("url") in (None, _url(engine, name)))}
    if remote is None:
        try:
            remote = choose_remote(engine)
        except SyncError:  # none, or several: the last one tried (its error says which)
            remote = max(remotes, key=lambda name: remotes[name].get("last_attempt") or "", default=None)
    entry = {key: value for key, value in remotes.get(remote or "", {}).items() if key != "url"}
    return {"remote": remote or None, "last_sync": None, "last_attempt": None, "last_error": None,
            **entry, "merge_spots": _open_spots(engine, state["merge_spots"])}


def _open_spots(engine: GitEngine, spots: list[dict]) -> list[dict]:
    snapshot = engine.snapshot()
    still = []
    for spot in spots:
        data = snapshot.read(spot.get("path", "")) if spot.get("path") else None
        text = spot.get("text") or ""
        content = data.decode("utf-8", "surrogateescape") if data is not None else ""
        at = content.find(text) if text else -1
        if at >= 0:
            still.append({**spot, "line": content.count("\n", 0, at) + 1})
    return still


def _load_state(engine: GitEngine) -> dict[str, Any]:
    """``{"remotes": {name: {url, last_sync, ...}}, "merge_spots": [...]}`` from the state
    file; one written for a single remote (``{"remote": ..., "last_sync": ...}``) is read as
    that remote's, its URL not known."""
    try:
        state = json.loads((engine.private_dir / STATE_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        state = {}
    if not isinstance(state, dict):
        state = {}
    remotes = state["remotes"] if isinstance(state.get("remotes"), dict) else {}
    if "remote" in state:
        remotes = {state.get("remote") or "": {key: value for key, value in state.items()
                                                if key not in ("remote", "merge_spots")}}
    return {"remotes": {name: entry for name, entry in remotes.items() if isinstance(entry, dict)},
            "merge_spots": state.get("merge_spots") or []}


def _save_state(engine: GitEngine, remote: str | None, *, merge_spots: list | None = None,
                **updates: Any) -> None:
    """Record ``updates`` for ``remote`` (None: a sync that found no remote to use); a
    remote under that name with another URL than before starts afresh."""
    state = _load_state(engine)
    url = _url(engine, remote) if remote else None
    entry = state["remotes"].get(remote or "", {})
    if entry.get("url") not in (None, url):
        entry = {}
    configured = engine.remotes.names()
    state["remotes"] = {name: kept for name, kept in state["remotes"].items() if name in configured}
    state["remotes"][remote or ""] = {**entry, **updates, "url": url}
    if merge_spots is not None:
        state["merge_spots"] = merge_spots
    write_private(engine.private_dir / STATE_FILE, (json.dumps(state, indent=2) + "\n").encode("utf-8"))


def _url(engine: GitEngine, remote: str) -> str | None:
    """The URL of ``remote`` as the state keeps it: credentials hidden."""
    url = engine.config_get(f"remote.{remote}.url")
    return scrub_credentials(url) if url is not None else None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- in the background (`gitmem serve --sync-interval SECONDS`) ------------------------


class BackgroundSync:
    """Syncs every ``interval`` seconds in a thread, starting at once.

    Requests never wait on the network (only on the short local merge step). A failure
    is logged and recorded in the sync state, and the next attempt waits twice as long
    as the last, up to :data:`MAX_BACKOFF`; a success restores the interval.

        syncer = BackgroundSync(mem, 300).start()
        ...
        syncer.stop()
    """

    def __init__(self, mem: Gitmem, interval: float, remote: str | None = None):
        if interval <= 0:
            raise ValueError("the sync interval must be a positive number of seconds")
        self.mem = mem
        self.interval = interval
        self.remote = remote
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gitmem-sync", daemon=True)

    def start(self) -> BackgroundSync:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the sync in progress, if any (waiting at most ``timeout`` seconds)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        delay = 0.0
        while not self._stopping.wait(delay):
            try:
                result = sync(self.mem, self.remote, interactive=False)
            except Exception as exc:  # recorded by sync(); keep going, more slowly
                delay = min(max(delay * 2, self.interval), max(MAX_BACKOFF, self.interval))
                log.warning("background sync failed (next try in %g s): %s", delay, exc)
                continue
            for line in result.describe():
                log.info("background sync: %s", line)
            delay = self.interval
