"""A memory's markdown as HTML: CommonMark and tables by markdown-it-py, with raw HTML
in the text shown as text (a memory cannot put a script into the page) and links only
to http(s) and mail addresses (markdown-it's own check)."""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def render(text: str) -> Markup:
    return Markup(_RENDERER.render(text))
