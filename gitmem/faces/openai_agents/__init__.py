"""The OpenAI Agents SDK's session memory on gitmem: ``session`` (imported by nothing
else of gitmem). Public as :mod:`gitmem.openai_agents`.
"""
