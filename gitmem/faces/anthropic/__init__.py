"""Claude's memory tool on gitmem: ``memory_tool`` (a ``BetaAbstractMemoryTool`` of the
Anthropic SDK, imported only here). Public as :mod:`gitmem.anthropic`.
"""
