"""storage-handlers.yaml: nui's validation rules, call checks, discovery, comment-keeping edits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gitmem.faces.nui.handlers import (
    Handler,
    HandlerConfigError,
    HandlerTable,
    add_handler,
    find_handlers_file,
    load_handlers,
    remove_handler,
)
from gitmem.faces.rpc import InvalidParams

SEED = """\
# gitmem storage handlers
storageHandlers:
  # sessions of the reviewer
  - id: postgres-sessions   # the main one
    kind: sessionHistory
    agentTypes: ["ext:corp/reviewer", "claude-code"]
    retention: 30d          # not nui's: ignored
    options:
      depth: 2
  - id: agent-notes
    kind: agentMemory
    agentTypes: ['ext:corp/reviewer']
  # the user's own notes
  - id: user-cloud
    kind: userMemory
"""


def write(tmp_path: Path, text: str, name: str = "storage-handlers.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_load_seed(tmp_path):
    table = load_handlers(write(tmp_path, SEED))
    assert table.handlers == (
        Handler("postgres-sessions", "sessionHistory", ("ext:corp/reviewer", "claude-code")),
        Handler("agent-notes", "agentMemory", ("ext:corp/reviewer",)),
        Handler("user-cloud", "userMemory"),
    )
    assert all(type(t) is str for h in table.handlers for t in (h.id, h.kind, *h.agent_types))
    assert table.handlers[2].to_json() == {"id": "user-cloud", "kind": "userMemory"}
    assert table.handlers[1].to_json()["agentTypes"] == ["ext:corp/reviewer"]


def test_json_files(tmp_path):
    doc = {"storageHandlers": [{"id": "u", "kind": "userMemory"}, {"id": "a", "kind": "agentMemory", "agentTypes": ["pi"]}]}
    for name in ("handlers.json", "storage-handlers.yaml"):  # JSON is read by both parsers
        table = load_handlers(write(tmp_path, json.dumps(doc, indent="\t" if name.endswith("json") else None), name))
        assert [h.id for h in table.handlers] == ["u", "a"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("storageHandlers:\n  - id: s1\n    kind: sessionHistory\n", 'storageHandlers[0] (id "s1"): sessionHistory requires a non-empty agentTypes'),
        ("storageHandlers:\n  - id: a1\n    kind: agentMemory\n    agentTypes: []\n", 'storageHandlers[0] (id "a1"): agentMemory requires'),
        ('storageHandlers:\n  - id: u1\n    kind: userMemory\n    agentTypes: ["pi"]\n', 'storageHandlers[0] (id "u1"): userMemory must not have agentTypes'),
        ("storageHandlers:\n  - id: x1\n    kind: blobs\n", 'storageHandlers[0] (id "x1"): kind must be one of sessionHistory, agentMemory, userMemory, not "blobs"'),
        ("storageHandlers:\n  - id: x1\n", 'storageHandlers[0] (id "x1"): kind must be one of'),
        ("storageHandlers:\n  - id: d\n    kind: 2020-01-01\n", 'storageHandlers[0] (id "d"): kind must be one of'),
        ("storageHandlers:\n  - kind: userMemory\n", "storageHandlers[0]: id is required"),
        ("storageHandlers:\n  - id: '  '\n    kind: userMemory\n", "storageHandlers[0]: id is required"),
        ("storageHandlers:\n  - id: 12\n    kind: userMemory\n", "storageHandlers[0]: id is required and must be a string"),
        ("storageHandlers:\n  - id: s\n    kind: sessionHistory\n    agentTypes: pi\n", 'storageHandlers[0] (id "s"): agentTypes must be a list of strings'),
        ("storageHandlers:\n  - id: s\n    kind: sessionHistory\n    agentTypes: [pi, [x]]\n", "agentTypes must be a list of strings"),
        ("storageHandlers:\n  - just a string\n", "storageHandlers[0]: expected a mapping"),
        (SEED + "  - id: late\n    kind: agentMemory\n", 'storageHandlers[3] (id "late"): agentMemory requires'),
        ("handlers: []\n", "expected a top-level storageHandlers list"),
        ("", "expected a top-level storageHandlers list"),
        ("storageHandlers: {id: u, kind: userMemory}\n", "storageHandlers must be a list"),
        ("storageHandlers:\n  - id: [unclosed\n", "cannot parse"),
        ("storageHandlers:\n  - id: u\n    id: v\n    kind: userMemory\n", "cannot parse"),
    ],
)
def test_invalid_files_name_the_entry(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(HandlerConfigError) as caught:
        load_handlers(path)
    assert str(caught.value).startswith(str(path))
    assert expected in str(caught.value)


def test_lenient_where_nui_is(tmp_path):
    # userMemory with an empty agentTypes list is what nui's len() check lets through.
    table = load_handlers(write(tmp_path, "storageHandlers:\n  - id: u\n    kind: userMemory\n    agentTypes: []\n"))
    assert table.handlers == (Handler("u", "userMemory"),)
    # All entries commented out: an empty list, which takes no calls at all.
    empty = load_handlers(write(tmp_path, "storageHandlers:\n#  - id: u\n#    kind: userMemory\n"))
    assert empty.handlers == ()
    with pytest.raises(InvalidParams):
        empty.check("u", "userMemory")


def test_unreadable_file(tmp_path):
    with pytest.raises(HandlerConfigError, match="cannot read"):
        load_handlers(tmp_path / "missing.yaml")


def check_error(table: HandlerTable, *args) -> InvalidParams:
    with pytest.raises(InvalidParams) as caught:
        table.check(*args)
    assert caught.value.code == -32602
    return caught.value


def test_check(tmp_path):
    table = load_handlers(write(tmp_path, SEED))
    table.check("postgres-sessions", "sessionHistory", "claude-code")
    table.check("agent-notes", "agentMemory", "ext:corp/reviewer")
    table.check("user-cloud", "userMemory")
    table.check("user-cloud", "userMemory", "anything")  # no agent routing for userMemory

    error = check_error(table, "nope", "userMemory")
    assert error.message == 'unknown handlerId "nope"' and error.data == {"param": "handlerId"}
    error = check_error(table, "user-cloud", "agentMemory", "pi")
    assert error.message == 'handler "user-cloud" is for userMemory, not agentMemory'
    error = check_error(table, "postgres-sessions", "sessionHistory", "codex")
    assert error.data == {"param": "agentType"} and '"codex"' in error.message and '"postgres-sessions"' in error.message
    error = check_error(table, "agent-notes", "agentMemory", "ext:corp/other")
    assert error.data == {"param": "agentId"}
    check_error(table, "agent-notes", "agentMemory", "ext:corp/*")  # no wildcards
    check_error(table, "agent-notes", "agentMemory", "EXT:corp/reviewer")  # case matters
    check_error(table, "agent-notes", "agentMemory", None)
    check_error(table, "Postgres-sessions", "sessionHistory", "claude-code")


def test_check_matches_like_nui(tmp_path):
    text = 'storageHandlers:\n  - id: s\n    kind: sessionHistory\n    agentTypes: [" pi ", ""]\n'
    table = load_handlers(write(tmp_path, text))
    table.check("s", "sessionHistory", "pi")  # nui trims both sides
    table.check("s", "sessionHistory", "\tpi\u3000")
    check_error(table, "s", "sessionHistory", "")  # an empty agent never matches
    check_error(table, "s", "sessionHistory", "  ")


def test_duplicate_ids_any_entry_may_fit(tmp_path):
    text = (
        "storageHandlers:\n"
        "  - {id: git, kind: sessionHistory, agentTypes: [codex]}\n"
        "  - {id: git, kind: agentMemory, agentTypes: [pi]}\n"
        "  - {id: git, kind: agentMemory, agentTypes: [nui]}\n"
    )
    table = load_handlers(write(tmp_path, text))
    table.check("git", "sessionHistory", "codex")
    table.check("git", "agentMemory", "pi")
    table.check("git", "agentMemory", "nui")
    check_error(table, "git", "sessionHistory", "pi")
    assert "agentMemory and sessionHistory" in check_error(table, "git", "userMemory").message


def test_no_file_accepts_every_handler():
    table = HandlerTable(None)
    table.check("anything", "sessionHistory", "whoever")
    table.check("", "userMemory")


def test_find_handlers_file(tmp_path):
    assert find_handlers_file("/some/where.yaml", {"NUI_EXTENSION_DIR": str(tmp_path)}) == Path("/some/where.yaml")
    assert find_handlers_file(None, {}) is None
    assert find_handlers_file(None, {"NUI_EXTENSION_DIR": str(tmp_path)}) is None
    default = write(tmp_path, SEED)
    assert find_handlers_file(None, {"NUI_EXTENSION_DIR": str(tmp_path)}) == default
    manifest = "name: gitmem\ncontributions:\n  storage:\n    source: {file: conf/handlers.json}\n"
    write(tmp_path, manifest, "extension.yaml")
    assert find_handlers_file(None, {"NUI_EXTENSION_DIR": str(tmp_path)}) == default  # named file missing
    (tmp_path / "conf").mkdir()
    named = write(tmp_path, '{"storageHandlers": []}', "conf/handlers.json")
    assert find_handlers_file(None, {"NUI_EXTENSION_DIR": str(tmp_path)}) == named
    write(tmp_path, "contributions: [broken\n", "extension.yaml")
    with pytest.raises(HandlerConfigError, match="extension.yaml"):
        find_handlers_file(None, {"NUI_EXTENSION_DIR": str(tmp_path)})


def test_add_keeps_comments_order_and_quotes(tmp_path):
    path = write(tmp_path, SEED)
    added = add_handler(path, "git-agents", "agentMemory", ["ext:corp/reviewer", "pi"])
    assert added == Handler("git-agents", "agentMemory", ("ext:corp/reviewer", "pi"))
    assert path.read_text() == SEED + (
        "  - id: git-agents\n"
        "    kind: agentMemory\n"
        '    agentTypes: ["ext:corp/reviewer", "pi"]\n'
    )
    add_handler(path, "user-two", "userMemory")
    assert path.read_text().endswith("  - id: user-two\n    kind: userMemory\n")
    assert [h.id for h in load_handlers(path).handlers] == ["postgres-sessions", "agent-notes", "user-cloud", "git-agents", "user-two"]


def test_add_keeps_the_file_indentation(tmp_path):
    text = "storageHandlers:\n- id: a\n  kind: agentMemory\n  agentTypes:\n  - pi\n"
    path = write(tmp_path, text)
    add_handler(path, "u", "userMemory")
    assert path.read_text() == text + "- id: u\n  kind: userMemory\n"


def test_add_creates_a_missing_file(tmp_path):
    path = tmp_path / "storage-handlers.yaml"
    add_handler(path, "u", "userMemory")
    assert path.read_text() == "storageHandlers:\n  - id: u\n    kind: userMemory\n"


@pytest.mark.parametrize(
    "args, expected",
    [
        (("agent-notes", "userMemory", []), 'handler "agent-notes" is already listed'),
        (("new", "agentMemory", []), 'storageHandlers[3] (id "new"): agentMemory requires'),
        (("new", "userMemory", ["pi"]), "userMemory must not have agentTypes"),
        (("new", "blobs", []), "kind must be one of"),
        (("", "userMemory", []), "storageHandlers[3]: id is required"),
    ],
)
def test_add_refuses_an_invalid_result(tmp_path, args, expected):
    path = write(tmp_path, SEED)
    with pytest.raises(HandlerConfigError, match=re.escape(expected)):
        add_handler(path, *args)
    assert path.read_text() == SEED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["storage-handlers.yaml"]


def test_add_odd_ids_read_back(tmp_path):
    path = write(tmp_path, "storageHandlers: []\n")
    odd = ["123", "null", "yes", "a #b", " lead", "ext:x/y", "-dash", "multi\nline", "quote\"s'"]
    for i, handler_id in enumerate(odd):
        add_handler(path, handler_id, "agentMemory", [f"agent: {i}", "#x"])
    assert [(h.id, h.agent_types) for h in load_handlers(path).handlers] == [
        (handler_id, (f"agent: {i}", "#x")) for i, handler_id in enumerate(odd)
    ]


def test_remove_keeps_the_rest(tmp_path):
    path = write(tmp_path, SEED)
    assert remove_handler(path, "agent-notes") == 1
    assert path.read_text() == SEED.replace("  - id: agent-notes\n    kind: agentMemory\n    agentTypes: ['ext:corp/reviewer']\n", "")
    with pytest.raises(HandlerConfigError, match='no handler "agent-notes"'):
        remove_handler(path, "agent-notes")


def test_remove_all_then_add_again(tmp_path):
    path = write(tmp_path, "# mine\nstorageHandlers:\n  - {id: u, kind: userMemory}\n  - id: u\n    kind: userMemory\n")
    assert remove_handler(path, "u") == 2
    assert load_handlers(path).handlers == ()
    add_handler(path, "u", "userMemory")
    assert path.read_text() == "# mine\nstorageHandlers:\n  - id: u\n    kind: userMemory\n"


def test_edit_json_file(tmp_path):
    extra = {"n": 1, "f": 0.5, "b": True, "z": None, "s": "\u00e9\\/"}
    path = write(tmp_path, json.dumps({"storageHandlers": [{"id": "u", "kind": "userMemory", "x": extra}]}), "handlers.json")
    add_handler(path, "a", "agentMemory", ["pi"])
    assert json.loads(path.read_text()) == {
        "storageHandlers": [{"id": "u", "kind": "userMemory", "x": extra}, {"id": "a", "kind": "agentMemory", "agentTypes": ["pi"]}]
    }
    remove_handler(path, "u")
    assert json.loads(path.read_text()) == {"storageHandlers": [{"id": "a", "kind": "agentMemory", "agentTypes": ["pi"]}]}
