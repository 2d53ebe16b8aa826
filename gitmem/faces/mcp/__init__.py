"""The MCP face: ``gitmem mcp``. The only package that imports the MCP SDK.

``tools`` (tools and resources on the SDK, handed the stores), ``server`` (the process:
the repository, its log, background packing), ``config`` (client configuration files).
"""
