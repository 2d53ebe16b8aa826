"""``gitmem web``: a local site over memory, history and search, and MCP over HTTP at
``/mcp`` (the ``web`` extra: Starlette, uvicorn, Jinja2, markdown-it-py).

- :mod:`~gitmem.faces.web.app`: the server, its start line and its lifetime;
- :mod:`~gitmem.faces.web.guard`: Host, Origin and the start's token, in front of every page;
- :mod:`~gitmem.faces.web.pages`: the pages (templates in ``templates/``, ``static/``);
- :mod:`~gitmem.faces.web.tokens`: the bearer tokens of ``/mcp``, kept hashed;
- :mod:`~gitmem.faces.web.mcp_http`: the MCP face over streamable HTTP.

:mod:`~gitmem.faces.web.tokens` needs nothing of the extra: ``gitmem web token`` runs without it.
"""
