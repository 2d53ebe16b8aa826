"""A session's messages as a chat transcript: who spoke, what they said, the tool calls
and their results (shown folded), and the images.

Messages come as their writers stored them (nui's, AG-UI's, OpenAI's and Anthropic's
shapes are read; anything else is shown as its JSON, folded). Images are blob
references (``gitmem:blob:<sha256>.<ext>``, as :mod:`gitmem.stores.blobs` keeps them),
which :func:`parts` turns into the address of the image: a page never carries base64.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from gitmem.stores.blobs import REF


class Part(NamedTuple):
    """One piece of a message: ``kind`` is "text", "call" (a tool call), "result" (a tool's
    result), "image" (``src`` its address) or "other" (JSON of something unknown)."""

    kind: str
    title: str
    text: str
    src: str | None = None


def role_of(message: Any) -> str:
    if isinstance(message, dict):
        for key in ("role", "type", "kind"):
            if isinstance(message.get(key), str):
                return message[key]
    return "?"


def parts(message: Any, image_src: Callable[[str], str]) -> list[Part]:
    """The parts of one message; ``image_src(file)`` is the address of a blob file."""
    if not isinstance(message, dict):
        return [Part("other", "value", _json(message))]
    found: list[Part] = []
    role = role_of(message)
    content = message.get("content")
    tool = role in ("tool", "toolResult", "tool_result", "function")
    if isinstance(content, str):
        found.append(Part("result" if tool else "text",
                          f"result of {message.get('toolCallId') or message.get('tool_call_id') or message.get('name') or 'a tool'}"
                          if tool else "", content))
    elif isinstance(content, list):
        for block in content:
            found.extend(_block(block, image_src))
    elif content is not None:
        found.append(Part("other", "content", _json(content)))
    for key in ("toolCalls", "tool_calls"):
        for call in message.get(key) or []:
            found.append(_call(call))
    for image in message.get("images") or []:
        found.extend(_image(image, image_src))
    known = {"id", "role", "content", "toolCalls", "tool_calls", "images", "toolCallId",
             "tool_call_id", "name", "timestamp", "createdAt", "type"}
    rest = {k: v for k, v in message.items() if k not in known}
    if rest:
        found.append(Part("other", "more fields", _json(rest)))
    return found


def _block(block: Any, image_src: Callable[[str], str]) -> list[Part]:
    if isinstance(block, str):
        return [Part("text", "", block)]
    if not isinstance(block, dict):
        return [Part("other", "value", _json(block))]
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text") and isinstance(block.get("text"), str):
        return [Part("text", "", block["text"])]
    if kind in ("tool_use", "toolCall", "function_call"):
        return [_call(block)]
    if kind in ("tool_result", "toolResult", "function_call_output"):
        inner = block.get("content", block.get("output"))
        return [Part("result", f"result of {block.get('tool_use_id') or block.get('call_id') or 'a tool'}",
                     inner if isinstance(inner, str) else _json(inner))]
    if kind in ("image", "image_url", "input_image", "binary"):
        return _image(block, image_src)
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return [Part("result", "thinking", block["thinking"])]
    return [Part("other", str(kind or "block"), _json(block))]


def _call(call: Any) -> Part:
    if not isinstance(call, dict):
        return Part("call", "tool call", _json(call))
    function = call["function"] if isinstance(call.get("function"), dict) else call
    name = function.get("name") or call.get("name") or "a tool"
    arguments = function.get("arguments", function.get("input", call.get("input")))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    return Part("call", f"call {name}", arguments if isinstance(arguments, str) else _json(arguments))


def _image(image: Any, image_src: Callable[[str], str]) -> list[Part]:
    """An image's part, found in any string of it that is a blob reference (else a data
    URL; an address elsewhere is not loaded: a page fetches nothing from other sites)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(image)
    for text in found:
        if text.startswith(REF):
            return [Part("image", "image", "", image_src(text[len(REF):].split("|", 1)[0]))]
    for text in found:
        if text.startswith("data:image/") and len(text) < 4096:
            return [Part("image", "image", "", text)]
    return [Part("other", "image", _json(image)[:2000])]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1)
