"""gitmem: memory and history for AI agents, kept as plain files in a git repository.

    import gitmem
    with gitmem.open("~/gitmem") as mem:
        mem.memory.write("likes tea", agent_id="reviewer", mode="append")

``gitmem.open``, ``gitmem.Gitmem`` and ``gitmem.default_repo_path`` come from
:mod:`gitmem.repository`, imported on first use (PEP 562), so that ``gitmem --version``
or a submodule imported alone does not load the git engine.
"""

__version__ = "0.1.0"

__all__ = ["Gitmem", "default_repo_path", "open", "__version__"]

_FROM_REPOSITORY = ("Gitmem", "default_repo_path", "open")


def __getattr__(name: str):
    if name not in _FROM_REPOSITORY:
        raise AttributeError(f"module 'gitmem' has no attribute {name!r}")
    from gitmem import repository
    value = repository.Gitmem.open if name == "open" else getattr(repository, name)
    globals()[name] = value  # gitmem.open(path) reads naturally; looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_REPOSITORY})
