"""The MCP face: ``gitmem mcp``. The only package that imports the MCP SDK.

``tools`` (tools and resources on the SDK, handed the stores), ``stdio`` (the wire on
stdin/stdout: every line answered), ``server`` (the process: the repository, its log,
background packing, the worker thread the calls run in), ``config`` (client configuration
files).
"""
