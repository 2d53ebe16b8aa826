"""LangGraph's long-term memory store on gitmem: ``store`` (imported by nothing else of
gitmem). Public as :mod:`gitmem.langgraph`.
"""
