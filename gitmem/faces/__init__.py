"""The faces gitmem shows to other programs, one subpackage a face.

``rpc`` (newline-delimited JSON-RPC 2.0: framing, errors, the line loop nui and kaboo
share), ``serve`` (``gitmem serve``: one process answering ``storage.*`` and
``threads.*``), ``served`` (what the long-running faces, ``serve``, ``mcp`` and ``web``,
share: opening, the log, the background work and the shutdown), ``logfile`` (a server's
log file); ``nui/`` (the ``storage.*`` table,
handler lists, the extension install, the import of nui's data), ``kaboo/`` (the
``threads.*`` table, the npm adapter), ``mcp/`` (tools on the MCP SDK, the server, client
configuration), ``anthropic/`` (Claude's memory tool on the Anthropic SDK, public as
:mod:`gitmem.anthropic`), ``openai_agents/`` (the OpenAI Agents SDK's sessions, public as
:mod:`gitmem.openai_agents`).

May import anything below the command line. The method tables (``rpc``,
``nui.storage``, ``nui.handlers``, ``kaboo.threads``, ``mcp.tools``) are handed the stores
they serve and import neither ``gitmem.git``, ``gitmem.opening`` nor the facade.
"""
