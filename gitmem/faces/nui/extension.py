"""``gitmem nui``: package gitmem as a nui storage extension and edit its handler list.

    gitmem nui install --dir ./gitmem --repo ~/gitmem --agent-types claude-code,codex
    nui extension add ./gitmem
    gitmem nui handlers add notes agentMemory --agent-types pi --dir ./gitmem
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from gitmem.faces.nui.handlers import DEFAULT_FILE, load_handlers
from gitmem.opening.policy import template_files
from gitmem.repository import Gitmem

DEFAULT_AGENT_TYPES = ("claude-code", "codex", "pi", "opencode")
KINDS = ("sessionHistory", "agentMemory", "userMemory")


def serve_command(repo: Path, python: str = sys.executable, command: str = "serve") -> list[str]:
    """How nui starts ``gitmem serve`` (or ``command``: ``mcp``) on ``repo``: the ``gitmem``
    console script beside ``python``, else ``python -P -m gitmem`` (``-I`` before 3.11), so
    that a ``gitmem/`` folder in the current directory (the extension folder itself) cannot
    shadow the package. Absolute paths: nui runs it without a shell, from the extension
    folder (and MCP clients from wherever they are)."""
    interpreter = Path(python).absolute()
    script = interpreter.parent / "gitmem"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script), command, "--repo", str(repo)]
    isolate = "-P" if sys.version_info >= (3, 11) else "-I"
    return [str(interpreter), isolate, "-m", "gitmem", command, "--repo", str(repo)]


MCP_SERVERS_FILE = "mcp-servers.json"
# nui's catalog of standard MCP servers: agents take it with `ref: ext:gitmem/gitmem`
MCP_CATALOG = f"""  catalog:
    mcpServers:
      source:
        file: {MCP_SERVERS_FILE}
"""


def install(directory: Path, repo: Path, agent_types: list[str], *,
            python: str = sys.executable, force: bool = False, mcp: bool = False) -> Path:
    """Render ``templates/nui-extension/`` into ``directory`` for ``repo``; returns the folder.

    An existing ``storage-handlers.yaml`` is kept (handlers added since, agent types
    chosen) unless ``force``; ``extension.yaml`` is always written again. With ``mcp``
    the manifest also declares ``gitmem mcp`` in nui's catalog of MCP servers
    (``mcp-servers.json``), so that nui's agents get the memory tools.
    """
    if not agent_types:  # checked before writing anything: a refused install leaves no files
        raise ValueError("at least one agent type is needed (nui requires agentTypes for "
                         "sessionHistory and agentMemory handlers)")
    repo = repo.expanduser().resolve()
    Gitmem.open(repo, create=True).close()  # first: an extension that would point nowhere is not written
    command = serve_command(repo, python)
    values = {"{{command}}": json.dumps(command), "{{agent_types}}": json.dumps(agent_types),
              "{{mcp_catalog}}": MCP_CATALOG if mcp else ""}
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in template_files("nui-extension").items():
        if name == DEFAULT_FILE and (directory / name).exists() and not force:
            continue
        text = data.decode("utf-8")
        for key, value in values.items():
            text = text.replace(key, value)
        (directory / name).write_text(text, encoding="utf-8")
    if mcp:
        server = {"name": "gitmem", "description": "memory and history kept in git (gitmem)",
                  "command": serve_command(repo, python, command="mcp")}
        (directory / MCP_SERVERS_FILE).write_text(
            json.dumps({"mcpServers": [server]}, indent=2) + "\n", encoding="utf-8")
    load_handlers(directory / DEFAULT_FILE)  # the rendered list must be one nui accepts
    return directory
