"""Remotes: configuring them, and fetching and pushing ``main``.

For gitmem.sync.exchange. The network part runs `git fetch`/`git push` as subprocesses
(:mod:`gitmem.git.gitproc`), so the user's ssh agent, ~/.ssh/config and credential
helpers apply; objects, merges and the branch stay in pygit2. Git's words are
scrubbed of URL credentials before they reach an error message.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pygit2

from gitmem.git import gitproc
from gitmem.git.base import BRANCH, REF, EngineError, config_get

NETWORK_TIMEOUT = 30.0  # seconds a fetch or push may take unless the caller says otherwise
_SSH_OPTIONS = ("-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3")
_SSH_BATCH = ("-o", "BatchMode=yes")  # no passphrase or host-key prompts in the background
_HTTP_LIMITS = {"http.lowSpeedLimit": "1000", "http.lowSpeedTime": "10"}  # bytes/s, seconds
# ssh's own reasons, which git follows with only "Could not read from remote repository."
_SSH_REASONS = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED",
                "Permission denied", "Could not resolve hostname", "Connection refused",
                "Connection timed out", "No route to host", "Connection closed by",
                "Too many authentication failures", "No such file or directory")
# Words in `git push --porcelain` refusals meaning "the remote moved since we fetched".
_REMOTE_MOVED = ("fetch first", "non-fast-forward", "stale info", "cannot lock ref",
                 "failed to update ref", "incorrect old value")
log = logging.getLogger("gitmem.engine")
_URL_CREDENTIALS = re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s]*@")


class Remotes:
    """The remotes of ``repo``, whose work tree is ``workdir`` (where git runs)."""

    def __init__(self, repo: pygit2.Repository, workdir: Path):
        self._repo = repo
        self._workdir = workdir

    def names(self) -> list[str]:
        """The names of the configured remotes."""
        return [name for name in self._repo.remotes.names() if name is not None]

    def add(self, name: str, url: str) -> None:
        """Configure remote ``name`` fetching from and pushing to ``url``, as ``git remote add``."""
        try:
            self._repo.remotes.create(name, url)
        except (ValueError, pygit2.GitError) as exc:
            raise EngineError(scrub_credentials(str(exc))) from None

    def remove(self, name: str) -> None:
        """Remove remote ``name`` and its remote-tracking refs, as ``git remote remove``."""
        self.require(name)
        self._repo.remotes.delete(name)

    def tip(self, remote: str) -> str | None:
        """The remote's ``main`` as last fetched or pushed (``refs/remotes/<remote>/main``)."""
        ref = self._repo.references.get(_tracking_ref(remote))
        return str(ref.target) if ref is not None else None

    def fetch(self, remote: str, *, interactive: bool = True,
              timeout: float | None = None) -> str | None:
        """Fetch the remote's ``main``; return its tip, or None when the remote has no ``main``.

        ``interactive=False`` (background syncs) forbids password prompts. Gives up after
        ``timeout`` seconds (default NETWORK_TIMEOUT). Raises EngineError with git's reason, credentials removed.
        """
        self.require(remote)
        done = self._run_git(["fetch", "--quiet", "--no-tags", remote,
                              f"+{REF}:{_tracking_ref(remote)}"], interactive, timeout, remote)
        if done.returncode != 0:
            if "couldn't find remote ref" in done.stderr:
                stale = self._repo.references.get(_tracking_ref(remote))
                if stale is not None:
                    stale.delete()
                return None
            raise EngineError(f"git fetch {remote} failed: {_git_reason(done.stderr)}")
        return self.tip(remote)

    def branches(self, remote: str, *, interactive: bool = True, timeout: float | None = None) -> list[str]:
        """The names of the remote's branches (``git ls-remote --heads``)."""
        self.require(remote)
        done = self._run_git(["ls-remote", "--heads", remote], interactive, timeout, remote)
        if done.returncode != 0:
            raise EngineError(f"git ls-remote {remote} failed: {_git_reason(done.stderr)}")
        return [line.split("\trefs/heads/", 1)[1] for line in done.stdout.splitlines()
                if "\trefs/heads/" in line]

    def push(self, remote: str, commit: str, *, interactive: bool = True,
             timeout: float | None = None) -> bool:
        """Push ``commit`` to the remote's ``main``, never forced.

        True when it landed; False when the remote's ``main`` moved since our fetch
        (fetch, merge and push again); EngineError for any other failure.
        """
        self.require(remote)
        first = self.tip(remote) is None  # the remote had no main when we last fetched
        done = self._run_git(["push", "--porcelain", remote, f"{commit}:{REF}"], interactive,
                             timeout, remote)
        if done.returncode == 0:
            self._repo.references.create(_tracking_ref(remote), pygit2.Oid(hex=commit), force=True)
            if first:
                self._point_head_at_main(remote)
            return True
        refused = [line for line in done.stdout.splitlines() if line.startswith("!\t")]
        if refused:
            reason = refused[0].split("\t")[-1]
            if any(word in reason for word in _REMOTE_MOVED):
                return False
            said = _remote_said(done.stderr)
            raise EngineError(f"git push {remote} refused: {scrub_credentials(reason)}"
                              + (f"; the remote said: {said}" if said else ""))
        raise EngineError(f"git push {remote} failed: {_git_reason(done.stderr)}")

    def _point_head_at_main(self, remote: str) -> None:
        """Point the HEAD of a bare remote on this machine at ``main`` when it names a branch
        that does not exist and ``main`` is its only one: `git init --bare` names ``master``,
        and a plain `git clone` of the remote would check nothing out. A remote over the
        network is left as it is (git's protocol cannot set HEAD)."""
        url = self._repo.remotes[remote].push_url or self._repo.remotes[remote].url
        folder = _local_folder(url, self._workdir) if url else None
        if folder is None:
            return
        try:
            other = pygit2.Repository(str(folder))
            head = other.references.get("HEAD")
            target = head.target if head is not None else None
            if (other.is_bare and isinstance(target, str) and other.references.get(target) is None
                    and list(other.branches.local) == [BRANCH]):
                other.references.create("HEAD", REF, force=True)
                log.info("pointed the HEAD of %s at %s (it named %s, which does not exist)",
                         remote, BRANCH, target)
        except (pygit2.GitError, OSError, ValueError) as exc:  # not ours to insist on
            log.info("left the HEAD of %s as it is: %s", remote, exc)

    def require(self, remote: str) -> None:
        """Raise EngineError unless remote ``remote`` is configured."""
        if remote not in self.names():
            raise EngineError(f"no remote named {remote!r} (add one with `gitmem remote add "
                              "NAME URL` or `git remote add`)")

    def _run_git(self, args: list[str], interactive: bool, timeout: float | None,
                 remote: str) -> subprocess.CompletedProcess:
        """git with deadlines on the network: ssh's and http's own where the user set none,
        and ``timeout`` for the whole command."""
        timeout = timeout or NETWORK_TIMEOUT
        env = {}
        if not interactive:
            env["GIT_TERMINAL_PROMPT"] = "0"  # never wait on a prompt nobody sees
        config = self._repo.config
        if not ({"GIT_SSH", "GIT_SSH_COMMAND"} & os.environ.keys() or config_get(config, "core.sshCommand")):
            env["GIT_SSH_COMMAND"] = " ".join(["ssh", *_SSH_OPTIONS, *([] if interactive else _SSH_BATCH)])
        limits = [arg for key, value in _HTTP_LIMITS.items() if config_get(config, key) is None
                  for arg in ("-c", f"{key}={value}")]
        try:
            return gitproc.run([*limits, *args], cwd=self._workdir, timeout=timeout, env=env)
        except gitproc.GitMissing:
            raise EngineError("syncing needs the `git` command, and it is not installed") from None
        except gitproc.GitTimeout:
            raise EngineError(f"git {args[0]} {remote} failed: no answer within {timeout:.2g} s "
                              "(for a longer bound: gitmem sync --timeout, or git config "
                              "gitmem.syncTimeout)") from None


def _local_folder(url: str, workdir: Path) -> Path | None:
    """The folder of a remote given as a path or a ``file://`` URL (a relative path is taken
    from ``workdir``, as git takes it); None for a network URL (``ssh://``, ``host:path``)."""
    if url.startswith("file://"):
        return Path(unquote(url[len("file://"):]))
    if "://" in url or ":" in url.split("/", 1)[0]:
        return None
    return workdir / url


def scrub_credentials(text: str) -> str:
    """``text`` with the user and password of every ``scheme://user:secret@host`` URL hidden."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)


def _git_reason(stderr: str) -> str:
    """git's own explanation in one line: ssh's reason (a changed host key, a refused key,
    an unknown host), then git's fatal/error lines, else its last line."""
    lines = [line.strip().strip("@ ").strip() for line in stderr.splitlines() if line.strip()]
    ssh = [line for line in lines if any(reason in line for reason in _SSH_REASONS)
           and not line.startswith(("fatal:", "error:"))]
    reasons = ssh[:2] + [line for line in lines if line.startswith(("fatal:", "error:"))]
    return scrub_credentials("; ".join(reasons or lines[-1:]))[:500] or "no reason given"


def _remote_said(stderr: str) -> str:
    """The remote's own words in git's output (its ``remote:`` lines: a hook's message),
    joined in one line, control characters left out, at most 500 characters."""
    lines = [line[len("remote:"):].strip() for line in stderr.splitlines() if line.startswith("remote:")]
    text = " / ".join(line for line in lines if line)
    text = "".join(ch for ch in text if ch.isprintable())
    return scrub_credentials(text)[:500]


def _tracking_ref(remote: str) -> str:
    return f"refs/remotes/{remote}/{BRANCH}"

