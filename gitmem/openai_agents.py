"""OpenAI Agents SDK sessions kept in git: ``Session(session_id, repo=PATH)`` implements
the ``agents`` package's ``Session`` protocol; see :mod:`gitmem.faces.openai_agents.session`.
Install the SDK with ``pip install 'gitmem[openai-agents]'``.
"""

from gitmem.faces.openai_agents.session import Session

__all__ = ["Session"]
