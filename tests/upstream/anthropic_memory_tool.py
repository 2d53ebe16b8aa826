"""A pytest plugin: the Anthropic SDK's own tests of its local-filesystem memory tool
(``tests/lib/tools/memory_tools/test_filesystem.py`` of the ``anthropic`` source package) run
against ``gitmem.anthropic.MemoryTool`` and ``AsyncMemoryTool``. Each backend those tests make
on ``base_path`` is gitmem's tool on a repository at ``base_path``; the tests that do not apply
are deselected, each with its reason (docs/python.md lists them).
"""

from __future__ import annotations

import pytest

from gitmem.anthropic import AsyncMemoryTool, MemoryTool
from upstream_common import deselect, made, said_made

_WALKS = ("walks base_path with os.walk and expects it to hold memories/ alone; gitmem keeps "
          "the same files under memory/ of a repository, beside .git/")
_PRIVATE = "calls a private method of the SDK's backend: "
_OS_OPEN = ("makes os.open meet a symlink between the SDK's check of a path and its opening; gitmem "
            "reads the committed file from git (a person's save is committed first), never "
            "through os.open of the work tree")
NOT_APPLYING: dict[str, str] = {
    **{name: _WALKS for name in (
        "test_create", "test_create_nested_directories", "test_str_replace", "test_insert",
        "test_insert_at_beginning_of_file", "test_insert_at_end_of_file", "test_delete",
        "test_delete_directory", "test_rename", "test_rename_to_nested_path")},
    "test_read_rejects_symlink_created_after_validation": _PRIVATE + "_validate_path",
    "test_view_rejects_directory_symlink_created_after_validation": _PRIVATE + "_validate_path",
    "test_validate_path_returns_resolved_path_not_symlink_target": _PRIVATE + "_validate_path",
    "TestBetaAsyncLocalFilesystemMemoryTool::test_mkdir_parents_not_world_writable_under_permissive_umask":
        _PRIVATE + "_ensure_memory_root (the sync test of the same modes passes)",
    "test_read_rejects_file_replaced_with_symlink_before_open": _OS_OPEN,
    "test_view_lists_symlinks_only_when_they_stay_inside_memories": (
        "lists a symlink that stays inside /memories; gitmem follows no link, inside or out "
        "(where a link points on another clone is anyone's guess), and lists none"),
}


def _on_a_repository(tool):
    class OnARepository(tool):
        """The tool made as the SDK's backend is: on ``base_path``."""

        opened: list = []

        def __init__(self, base_path: str = "./memory", *, cache_control=None, **_options):
            super().__init__(repo=base_path, cache_control=cache_control)
            OnARepository.opened.append(self)
            made["count"] += 1

    return OnARepository


GitmemMemoryTool = _on_a_repository(MemoryTool)
GitmemAsyncMemoryTool = _on_a_repository(AsyncMemoryTool)
SWAPS = {"BetaLocalFilesystemMemoryTool": GitmemMemoryTool,
         "BetaAsyncLocalFilesystemMemoryTool": GitmemAsyncMemoryTool}


@pytest.fixture(autouse=True)
def _gitmem_memory_tool(request, monkeypatch):
    for name, swap in SWAPS.items():
        if hasattr(request.module, name):
            monkeypatch.setattr(request.module, name, swap)
    yield
    for swap in SWAPS.values():
        while swap.opened:
            swap.opened.pop().mem.close()


def pytest_collection_modifyitems(config, items):
    deselect(config, items, NOT_APPLYING)


def pytest_terminal_summary(terminalreporter):
    said_made(terminalreporter)
