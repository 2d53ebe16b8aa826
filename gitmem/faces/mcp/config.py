"""``gitmem mcp config``: the entry that declares ``gitmem mcp`` in an MCP client's
configuration, printed, or merged into the client's own file (keeping every other
server and setting in it).

    entry_text("cursor", Path("~/gitmem"))    # {"mcpServers": {"gitmem": {...}}}
    write("codex", Path("~/gitmem"))           # ~/.codex/config.toml, [mcp_servers.gitmem]

Where each client reads its servers (user-wide, for every project):

- claude-code: ``~/.claude.json``, ``mcpServers`` (``{"type": "stdio", "command", "args"}``)
- claude-desktop: ``claude_desktop_config.json`` in ``~/Library/Application Support/Claude``
  (macOS), ``%APPDATA%\\Claude`` (Windows), ``$XDG_CONFIG_HOME/Claude`` (Linux),
  ``mcpServers``
- cursor: ``~/.cursor/mcp.json``, ``mcpServers``
- codex: ``$CODEX_HOME/config.toml`` (default ``~/.codex``), a ``[mcp_servers.gitmem]`` table
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from gitmem.errors import InvalidInput

CLIENTS = ("claude-code", "claude-desktop", "cursor", "codex")
NAME = "gitmem"
_CODEX_TABLE = re.compile(r'^\s*\[\s*mcp_servers\s*\.\s*("?)gitmem\1\s*\]\s*(#.*)?$')
_TABLE = re.compile(r"^\s*\[")


def config_path(client: str, *, home: Path | None = None) -> Path:
    """The file ``client`` reads its MCP servers from."""
    home = home or Path.home()
    if client == "claude-code":
        return home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "codex":
        return Path(os.environ.get("CODEX_HOME") or home / ".codex") / "config.toml"
    if client == "claude-desktop":
        if sys.platform == "darwin":
            folder = home / "Library" / "Application Support"
        elif sys.platform == "win32":
            folder = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
        else:
            folder = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        return folder / "Claude" / "claude_desktop_config.json"
    raise InvalidInput(f"unknown MCP client {client!r}: use one of {', '.join(CLIENTS)}")


def server_entry(client: str, repo: Path, python: str = sys.executable) -> dict[str, Any]:
    """The server's entry for ``client``: absolute paths, the repository named."""
    from gitmem.faces.nui.extension import serve_command  # it loads the engine: `gitmem mcp` need not
    argv = serve_command(repo.expanduser().resolve(), python, command="mcp")
    entry: dict[str, Any] = {"command": argv[0], "args": argv[1:]}
    return {"type": "stdio", **entry} if client == "claude-code" else entry


def entry_text(client: str, repo: Path, python: str = sys.executable) -> str:
    """What to put in ``client``'s configuration file, as that file spells it."""
    entry = server_entry(client, repo, python)
    if client == "codex":
        return _toml_table(entry)
    config_path(client)  # an unknown client is refused
    return json.dumps({"mcpServers": {NAME: entry}}, indent=2) + "\n"


def write(client: str, repo: Path, *, path: Path | None = None,
          python: str = sys.executable) -> Path:
    """Merge the entry into ``path`` (default: the client's own file), which keeps every
    other server and setting; returns the file written. A symlinked file (a dotfile
    manager's) is written through: the link stays, its target gets the entry."""
    path = path or config_path(client)
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    entry = server_entry(client, repo, python)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if client == "codex":
        new = _merge_toml(old, entry, path)
    else:
        new = _merge_json(old, entry, path)
    _replace(path, new)
    return path


def _merge_json(old: str, entry: dict[str, Any], path: Path) -> str:
    try:
        config = json.loads(old) if old.strip() else {}
    except ValueError as error:
        raise InvalidInput(f"{path} is not valid JSON ({error}): fix it, then run again") from None
    if not isinstance(config, dict) or not isinstance(config.setdefault("mcpServers", {}), dict):
        raise InvalidInput(f'{path} does not hold a JSON object with an "mcpServers" object: '
                           "fix it, then run again")
    kept = config["mcpServers"].get(NAME)  # the person's own keys (env, cwd...) stay, as in codex
    config["mcpServers"][NAME] = {**kept, **entry} if isinstance(kept, dict) else entry
    return json.dumps(config, indent=2, ensure_ascii=False) + "\n"


def _toml_table(entry: dict[str, Any]) -> str:
    # JSON strings and arrays of strings are TOML basic strings and arrays
    return (f"[mcp_servers.{NAME}]\ncommand = {json.dumps(entry['command'])}\n"
            f"args = {json.dumps(entry['args'])}\n")


def _merge_toml(old: str, entry: dict[str, Any], path: Path) -> str:
    """``old`` with its ``[mcp_servers.gitmem]`` table replaced (or added at the end); its
    other tables and comments stay as they are."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: nothing to check the files with
        tomllib = None
    if tomllib is not None:
        try:
            servers = tomllib.loads(old).get("mcp_servers", {})
        except tomllib.TOMLDecodeError as error:
            raise InvalidInput(f"{path} is not valid TOML ({error}): fix it, then run again") from None
    lines = old.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if _CODEX_TABLE.match(line)), None)
    if start is None:
        gap = "" if not old else ("\n" if old.endswith("\n") else "\n\n")
        new = old + gap + _toml_table(entry)
    else:
        end = next((i for i in range(start + 1, len(lines)) if _TABLE.match(lines[i])), len(lines))
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + _toml_table(entry) + ("\n" + tail if tail else "")
    if tomllib is None:
        return new
    try:
        servers = tomllib.loads(new).get("mcp_servers", {})
    except tomllib.TOMLDecodeError:
        # TOML lets no [mcp_servers.gitmem] table extend an inline table or a value
        form = ("an inline table (mcp_servers = { ... })" if isinstance(servers, dict)
                else "a value that is not a table")
        raise InvalidInput(f"{path} writes mcp_servers as {form}, to which a "
                           f"[mcp_servers.{NAME}] table cannot be added: write each server as "
                           "its own [mcp_servers.<name>] table, then run again") from None
    if servers.get(NAME, {}).get("args") != entry["args"]:
        raise InvalidInput(f"{path} declares mcp_servers.{NAME} in a way this cannot merge "
                           f"into: remove it, then run again")
    return new


def _replace(path: Path, text: str) -> None:
    """Write ``path`` at once (a temporary file renamed over it), keeping its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
