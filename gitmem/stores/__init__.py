"""Record stores: memory documents, chat sessions and AG-UI threads on the git engine.

They know the on-disk layout and the formats; they know neither pygit2 nor JSON-RPC.
"""

from gitmem.stores.memory import MemoryStore
from gitmem.stores.sessions import SessionStore
from gitmem.stores.threads import AsyncThreadStore, ThreadStore

__all__ = ["AsyncThreadStore", "MemoryStore", "SessionStore", "ThreadStore"]
