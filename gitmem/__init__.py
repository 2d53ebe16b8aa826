"""gitmem: memory and history for AI agents, kept as plain files in a git repository.

    import gitmem
    with gitmem.open("~/gitmem") as mem:
        mem.memory.write("likes tea", agent_id="reviewer", mode="append")
"""

from gitmem.repository import Gitmem, default_repo_path

__version__ = "0.1.0"

open = Gitmem.open  # noqa: A001 - gitmem.open(path) reads naturally

__all__ = ["Gitmem", "default_repo_path", "open", "__version__"]
