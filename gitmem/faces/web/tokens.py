"""The bearer tokens of ``gitmem web``'s ``/mcp``: made and revoked by a person, kept
hashed in ``.git/gitmem/web-tokens.json`` (never in the repository's files).

A token is shown once, when it is made; the file keeps its name, whether it is
read-only, when it was made, and the SHA-256 of the secret. A running server reads the
file again when it changes, so a removed token stops working at once. A presented
secret is hashed and compared with every kept hash in constant time.

    tokens = Tokens(mem.engine.private_dir)
    secret = tokens.add("laptop", read_only=True)   # "gmw_..."
    tokens.check(secret)                             # Token(name="laptop", read_only=True, ...)
    tokens.remove("laptop")
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from pathlib import Path

from gitmem.errors import GitmemError
from gitmem.git.lock import FileLock

FILE = "web-tokens.json"  # in .git/gitmem/
LOCK_FILE = "web-tokens-lock"  # held while the file is read, changed and written again
PREFIX = "gmw_"  # what a secret starts with: a person can tell it from other tokens
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class TokenError(GitmemError, ValueError):
    """A token name that cannot be used, or a token that is not there."""


@dataclasses.dataclass(frozen=True)
class Token:
    """One token as the file keeps it (the secret itself is never kept)."""

    name: str
    read_only: bool
    created: int  # seconds since the epoch
    digest: str  # SHA-256 of the secret, hex

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


class Tokens:
    """The tokens kept for one repository (``private_dir`` is its ``.git/gitmem``)."""

    def __init__(self, private_dir: Path):
        self.path = Path(private_dir) / FILE
        self._lock = FileLock(self.path.with_name(LOCK_FILE), timeout=10.0)
        self._read: tuple[tuple[int, int], list[Token]] | None = None  # (stat, tokens)

    def list(self) -> list[Token]:
        """Every token, by name."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return []
        stamp = (info.st_mtime_ns, info.st_size)
        if self._read is None or self._read[0] != stamp:
            data = json.loads(self.path.read_text(encoding="utf-8") or "[]")
            self._read = (stamp, sorted((Token(**item) for item in data), key=lambda t: t.name))
        return list(self._read[1])

    def add(self, name: str, *, read_only: bool = False) -> str:
        """Make token ``name`` and return its secret (shown once, kept only hashed)."""
        if not NAME.fullmatch(name):
            raise TokenError(f"{name!r} cannot name a token: use letters, digits, '.', '_' "
                             "and '-' (at most 64, starting with a letter or digit)")
        with self._lock:
            found = self.list()
            if any(token.name == name for token in found):
                raise TokenError(f"there is a token named {name!r} already: remove it first "
                                 f"(gitmem web token remove {name})")
            secret = PREFIX + secrets.token_urlsafe(32)
            self._write(found + [Token(name, read_only, int(time.time()), digest(secret))])
        return secret

    def remove(self, name: str) -> None:
        """Revoke token ``name``."""
        with self._lock:
            found = self.list()
            kept = [token for token in found if token.name != name]
            if len(kept) == len(found):
                raise TokenError(f"there is no token named {name!r} (gitmem web token list)")
            self._write(kept)

    def check(self, secret: str) -> Token | None:
        """The token whose secret this is, or None. Every kept digest is compared, each
        in constant time: how long this takes says nothing about the secret."""
        presented = digest(secret).encode()
        match = None
        for token in self.list():
            if hmac.compare_digest(presented, token.digest.encode()):
                match = token
        return match

    def _write(self, tokens: builtins.list[Token]) -> None:  # list: in here, the method above
        temporary = self.path.with_name(f"{FILE}.{os.getpid()}.tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump([token.to_json() for token in tokens], file, indent=1)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        self._read = None
