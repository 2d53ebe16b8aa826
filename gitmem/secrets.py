"""The secret scan ``gitmem sync`` runs before pushing: never on the write path.

It reads only the lines that the commits about to be pushed add, and looks for
private key blocks, AWS access key ids, GitHub tokens, ``sk-``-style API keys, and
high-entropy values assigned to names like token, secret or password. A finding
names the file, line and kind, and a fingerprint; never the secret itself.

Findings can be allowed in ``.gitmem-allow-secrets`` at the top of the repository
(commit it with git to share it between machines). One entry a line, ``#`` starts
a comment:

    # a fingerprint from the report allows that one line of that file
    3f9a0c1d2e4b5a6f
    # path:GLOB allows every finding in the files it matches
    path:memory/agents/security-*.md

    findings = scan(engine, engine.new_commits(tip, [remote_tip]))
    refused = [f for f in findings if not allowed(f, load_allow_list(engine))]
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable
from fnmatch import fnmatchcase

from gitmem.git.engine import GitEngine

ALLOW_FILE = ".gitmem-allow-secrets"
MIN_ENTROPY = 3.5  # bits a character (less for short values, which cannot reach it)

# A cheap first pass: a line matching none of these holds nothing we look for.
_CANDIDATE = re.compile(
    rb"PRIVATE KEY|A[KS]IA|gh[pousr]_|github_pat_|sk-|"
    rb"(?i:token|secret|passw|pwd|api.?key|access.?key|credential)")
_KINDS = (  # (kind, pattern, whether a match must also look random)
    ("private key block", re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
     False),
    ("AWS access key id", re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), False),
    ("GitHub token", re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})"),
     False),
    ("API key (sk-...)", re.compile(rb"\bsk-[A-Za-z0-9_-]{20,}"), True),
)
_ASSIGNED = re.compile(
    rb"(?i:token|secret|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|credential)[\w.-]*"
    rb"(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?([A-Za-z0-9+/=_.~!@#$%^&*-]{16,})")

_WORDS = re.compile(rb"[a-z]+(?:[_-][a-z0-9]+){2,}")


@dataclasses.dataclass(frozen=True)
class Finding:
    """A likely secret: where it is and what kind, never the value."""

    path: str
    line: int
    kind: str
    fingerprint: str  # allows this line of this file in the allow-list file
    commit: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} (commit {self.commit[:10]}, " \
               f"fingerprint {self.fingerprint})"


def scan_line(line: bytes) -> list[str]:
    """The kinds of secret ``line`` seems to hold ([] for none)."""
    if not _CANDIDATE.search(line):
        return []
    kinds = [kind for kind, pattern, must_look_random in _KINDS
             if any(not must_look_random or _random_enough(m.group(0))
                    for m in pattern.finditer(line))]
    if not kinds and any(_random_enough(m.group(1)) for m in _ASSIGNED.finditer(line)):
        kinds.append("high-entropy value assigned to a secret-like name")
    return kinds


def scan(engine: GitEngine, commits: Iterable[str]) -> list[Finding]:
    """Every finding in the lines that ``commits`` add, one per line and kind."""
    found: dict[tuple[str, str, str], Finding] = {}
    for commit in commits:
        for path, number, line in engine.added_lines(commit):
            for kind in scan_line(line):
                mark = fingerprint(path, line)
                found.setdefault((path, mark, kind), Finding(path, number, kind, mark, commit))
    return list(found.values())


def fingerprint(path: str, line: bytes) -> str:
    """A short hash naming one line of one file, safe to print and to write down."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape") + b"\0" + line.strip()).hexdigest()[:16]


def load_allow_list(engine: GitEngine) -> list[str]:
    """The entries of the allow-list file in the work tree ([] when there is none)."""
    try:
        text = engine.worktree_path(ALLOW_FILE).read_text("utf-8", "replace")
    except OSError:
        return []
    entries = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].split()
        if entry:
            entries.append(entry[0])
    return entries


def allowed(finding: Finding, allow_list: Iterable[str]) -> bool:
    """True when an entry names the finding's fingerprint or a glob matching its path."""
    return any(entry == finding.fingerprint or
               (entry.startswith("path:") and fnmatchcase(finding.path, entry[5:]))
               for entry in allow_list)


def refused(engine: GitEngine, commits: Iterable[str]) -> list[Finding]:
    """The findings in ``commits`` that the allow-list file does not allow."""
    allow_list = load_allow_list(engine)
    return [f for f in scan(engine, commits) if not allowed(f, allow_list)]


def _random_enough(value: bytes) -> bool:
    """A value long and random enough to be a credential: letters, digits, high entropy,
    and not words joined by ``_`` or ``-``."""
    if len(value) < 16 or not re.search(rb"[0-9]", value) or not re.search(rb"[A-Za-z]", value) \
            or _WORDS.fullmatch(value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= min(MIN_ENTROPY, 0.75 * math.log2(len(value)))
