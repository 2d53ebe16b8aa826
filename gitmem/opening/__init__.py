"""Finding and opening a repository: the layer right below the facade.

``location`` (which repository a command uses: ``--repo``, ``$GITMEM_REPO``, the gitmem
repository holding the current folder, or the default; it reads the environment and the
folders and loads no pygit2, so the reads that answer without opening the repository
use it too) and ``policy`` (whether a folder may be opened as a repository or made one,
and what the first opening does: :func:`~gitmem.opening.policy.open_engine`, which
:meth:`gitmem.repository.Gitmem.open` wraps).

May import: the layers below (``git``, ``records``, ``edits``).
"""
