"""The secret scan ``gitmem sync`` runs before pushing: never on the write path.

It reads only the lines that the commits about to be pushed add, and looks for
private key blocks, AWS access key ids, GitHub tokens, ``sk-``-style API keys, and
high-entropy values assigned to names like token, secret or password. A finding
names the file, line and kind, and a fingerprint; never the secret itself.

A line is added when the file had no such line before (in none of a merge's
parents); which files each commit changed comes from one ``git diff-tree``, read
while the scan goes on (:mod:`gitmem.git.parentdiffs`). Each version of a file is
scanned once: what it added is remembered by blob ids in
``.git/gitmem/secret-scan.json`` (the kinds and line numbers found, never a line),
so a sync that retries, or runs again after a refused push, scans nothing it scanned
before. Each pattern runs once over all the lines a file version adds, led by a
literal, so a scan reads each byte a few times whatever the text says.

Findings can be allowed in ``.gitmem-allow-secrets`` at the top of the repository
(commit it with git to share it between machines). One entry a line, ``#`` starts
a comment:

    # a fingerprint from the report allows that one line of that file
    3f9a0c1d2e4b5a6f
    # path:GLOB allows every finding in the files it matches
    path:memory/agents/security-*.md

    scanned = Scanner(engine).scan(engine.log.new_commits(tip, [remote_tip]))
    refused = [f for f in scanned.findings if not allowed(f, load_allow_list(engine))]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import re
from collections import Counter, namedtuple
from collections.abc import Callable, Iterable, Iterator
from fnmatch import fnmatchcase

from gitmem.git.engine import GitEngine
from gitmem.git.files import write_private
from gitmem.git.parentdiffs import ParentDiffs
from gitmem.records import layout

log = logging.getLogger("gitmem.sync.secrets")

ALLOW_FILE = layout.ALLOW_SECRETS_FILE
SCAN_FILE = "secret-scan.json"  # inside .git/gitmem/: what each file version added
MIN_ENTROPY = 3.5  # bits a character (less for short values, which cannot reach it)

# Every pattern is led by a literal (a boundary checked by a look behind placed after
# it), so that re runs its matcher only where that literal is: one pass of each over the
# added text, at the speed of a byte search, however many lines say "key" or "token".
_KINDS = (  # (kind, pattern, whether a match must also look random)
    ("private key block", re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
     False),
    ("AWS access key id", re.compile(rb"A(?<!\wA)[KS]IA[0-9A-Z]{16}\b"), False),
    ("GitHub token", re.compile(rb"gh(?<!\wgh)[pousr]_[A-Za-z0-9]{36,}"), False),
    ("GitHub token", re.compile(rb"github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{40,}"), False),
    ("API key (sk-...)", re.compile(rb"sk-(?<!\wsk-)[A-Za-z0-9_-]{20,}"), True),
)
ASSIGNED = "high-entropy value assigned to a secret-like name"
# A value assigned to a secret-like name, one pattern a name (each led by its literal),
# matched in the lower-cased text; the value is taken from the text as written.
_ASSIGNED = tuple(re.compile(name + rb"[\w.-]*(?:\\?[\"'])?[ \t\r\f\v]*[:=][ \t\r\f\v]*"
                             rb"(?:\\?[\"'])?([a-z0-9+/=_.~!@#$%^&*-]{16,})")
                  for name in (rb"token", rb"secret", rb"passw(?:or)?d", rb"pwd", rb"api[_-]?key",
                               rb"access[_-]?key", rb"credential"))

_WORDS = re.compile(rb"[a-z]+(?:[_-][a-z0-9]+){2,}")
# What the remembered findings were found with: another scanner forgets them.
_SCANNER = hashlib.sha256(repr((
    MIN_ENTROPY, [p.pattern for p in _ASSIGNED], _WORDS.pattern,
    [(kind, p.pattern, random) for kind, p, random in _KINDS])).encode()).hexdigest()[:16]


class Finding(namedtuple("Finding", "path line kind fingerprint commit")):
    """A likely secret: where it is (``path``, ``line``, ``commit``) and what ``kind``, never
    the value; its ``fingerprint`` allows this line of this file in the allow-list file."""

    __slots__ = ()

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind} (commit {self.commit[:10]}, " \
               f"fingerprint {self.fingerprint})"


def scan_line(line: bytes) -> list[str]:
    """The kinds of secret ``line`` seems to hold ([] for none)."""
    return [kind for _, kind in found_in(line)]


def found_in(text: bytes) -> list[tuple[int, str]]:
    """``(line index, kind)`` of each kind of secret a line of ``text`` seems to hold, in
    the order of the lines, then of :data:`_KINDS` (an assigned value only on a line that
    holds no other kind). Each pattern runs once over the whole text."""
    at: dict[int, set[str]] = {}
    for kind, pattern, must_look_random in _KINDS:
        for match in pattern.finditer(text):
            if not must_look_random or _random_enough(match.group(0)):
                at.setdefault(match.start(), set()).add(kind)
    lowered = text.lower()
    for pattern in _ASSIGNED:
        for match in pattern.finditer(lowered):
            if _random_enough(text[match.start(1):match.end(1)]):
                at.setdefault(match.start(), set()).add(ASSIGNED)
    lines: dict[int, set[str]] = {}
    index = counted = 0
    for place in sorted(at):
        index += text.count(b"\n", counted, place)
        counted = place
        lines.setdefault(index, set()).update(at[place])
    order = list(dict.fromkeys(kind for kind, _, _ in _KINDS))
    return [(index, kind) for index, kinds in lines.items()
            for kind in ([k for k in order if k in kinds] or [ASSIGNED])]


class Scan:
    """What one scan found, and how much it read."""

    __slots__ = ("findings", "scanned_bytes", "scanned_files", "known_files")

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        self.scanned_bytes = 0  # of added lines looked at this time
        self.scanned_files = 0  # file versions looked at this time
        self.known_files = 0  # file versions whose findings were remembered from an earlier scan


class Scanner:
    """Scans the lines that commits add, each file version once (see the module docstring).

        Scanner(engine).scan(commits).findings
    """

    def __init__(self, engine: GitEngine):
        self.engine = engine
        self._file = engine.private_dir / SCAN_FILE

    def scan(self, commits: Iterable[str]) -> Scan:
        """Every finding in the lines that ``commits`` add, one per line and kind."""
        known = self._remembered()
        used: dict[str, list[list]] = {}
        result = Scan([])
        found: dict[tuple[str, str, str], Finding] = {}
        # closed as the scan ends, however it ends: git is not left running
        with contextlib.closing(self.engine.log.changes_from_parents(list(commits))) as changes:
            for commit in changes:
                for path, new, olds in _changed(commit):
                    key = ":".join([new, *sorted(o or "" for o in olds)])
                    hits = known.get(key)
                    if hits is None:
                        hits = self._scan_version(new, olds, result)
                    else:
                        result.known_files += 1
                    used[key] = hits
                    if hits:
                        lines = self.engine.read_blob(new).split(b"\n")
                        for number, kind in hits:
                            mark = fingerprint(path, lines[number - 1])
                            found.setdefault((path, mark, kind), Finding(path, number, kind, mark, commit.id))
        result.findings = list(found.values())
        if result.scanned_files:
            self._remember(used)
        log.info("secret scan: %d bytes of %d file versions read, %d file versions known",
                 result.scanned_bytes, result.scanned_files, result.known_files)
        return result

    def _scan_version(self, new: str, olds: list[str | None], result: Scan) -> list[list]:
        """``[[line number, kind], ...]`` in the lines blob ``new`` adds to blobs ``olds``."""
        data = self.engine.read_blob(new)
        result.scanned_files += 1
        if b"\0" in data[:8000]:  # binary, as git tells it
            return []
        block, line_number = _added_lines(data, [self.engine.read_blob(o) for o in olds if o])
        result.scanned_bytes += len(block)
        return [[line_number(index), kind] for index, kind in found_in(block)]

    def _remembered(self) -> dict[str, list[list]]:
        try:
            saved = json.loads(self._file.read_bytes())
        except (OSError, ValueError):
            return {}
        if not isinstance(saved, dict) or saved.get("scanner") != _SCANNER:
            return {}
        return saved.get("files") or {}

    def _remember(self, used: dict[str, list[list]]) -> None:
        """Keep what this scan used, and only that: the versions already pushed are never
        scanned again, so the file stays as small as what is waiting to go out."""
        try:
            write_private(self._file, json.dumps({"scanner": _SCANNER, "files": used},
                                                 separators=(",", ":")).encode())
        except OSError as exc:  # a read-only repository scans again next time
            log.info("secret scan: not remembered (%s)", exc)


def _changed(commit: ParentDiffs) -> Iterator[tuple[str, str, list[str | None]]]:
    """``(path, new blob id, [blob id in each parent])`` for each file ``commit`` changed
    from every one of its parents."""
    if not commit.changed_from_every_parent():
        return
    first, *others = commit.diffs
    for path, (_, new) in first.items():
        if new is not None and all(path in other for other in others):
            yield path, new, [diff[path][0] for diff in commit.diffs]


def _added_lines(data: bytes, olds: list[bytes]) -> tuple[bytes, Callable[[int], int]]:
    """The lines of ``data`` that none of ``olds`` has, as one text (lines joined by
    newlines), and the line number in ``data`` of its line at an index (lines are counted
    only for a finding)."""
    if not olds:
        return data, lambda index: index + 1
    if len(olds) == 1 and data.startswith(olds[0]):  # an append: the lines after the old text
        cut = olds[0].rfind(b"\n") + 1  # an unfinished last line counts as changed
        return data[cut:], lambda index: olds[0].count(b"\n", 0, cut) + 1 + index
    lines = data.split(b"\n")
    had = set().union(*(old.split(b"\n") for old in olds))
    numbers = [n for n, line in enumerate(lines, 1) if line not in had]
    return b"\n".join(lines[n - 1] for n in numbers), numbers.__getitem__


def scan(engine: GitEngine, commits: Iterable[str]) -> list[Finding]:
    """Every finding in the lines that ``commits`` add, one per line and kind (see :class:`Scanner`)."""
    return Scanner(engine).scan(commits).findings


def fingerprint(path: str, line: bytes) -> str:
    """A short hash naming one line of one file, safe to print and to write down."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape") + b"\0" + line.strip()).hexdigest()[:16]


def load_allow_list(engine: GitEngine) -> list[str]:
    """The entries of the allow-list file in the work tree ([] when there is none)."""
    try:
        text = engine.worktree.path(ALLOW_FILE).read_text("utf-8", "replace")
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
    return not_allowed(engine, scan(engine, commits))


def not_allowed(engine: GitEngine, findings: Iterable[Finding]) -> list[Finding]:
    """The ``findings`` that the allow-list file does not allow."""
    allow_list = load_allow_list(engine)
    return [f for f in findings if not allowed(f, allow_list)]


def _random_enough(value: bytes) -> bool:
    """A value long and random enough to be a credential: letters, digits, high entropy,
    and not words joined by ``_`` or ``-``."""
    if len(value) < 16 or not re.search(rb"[0-9]", value) or not re.search(rb"[A-Za-z]", value) \
            or _WORDS.fullmatch(value):
        return False
    counts = Counter(value)
    entropy = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return entropy >= min(MIN_ENTROPY, 0.75 * math.log2(len(value)))
