"""Claude's memory tool kept in git: ``MemoryTool(repo=PATH)`` (and ``AsyncMemoryTool``),
a ``BetaAbstractMemoryTool`` for the Anthropic SDK's tool runner. Needs the extra
``pip install 'gitmem[anthropic]'``; see :mod:`gitmem.faces.anthropic.memory_tool`.
"""

from gitmem.faces.anthropic.memory_tool import AsyncMemoryTool, MemoryTool

__all__ = ["AsyncMemoryTool", "MemoryTool"]
