"""The git engine: the only package that imports pygit2.

What the layers above use:

- :class:`~gitmem.git.engine.GitEngine` (``engine``), opened once per repository: it
  commits (compare-and-swap on ``main``), merges, fast-forwards and rewrites, reads
  ``main``'s tip, snapshots and blobs, and shows its parts as attributes:
  ``engine.log`` (:mod:`~gitmem.git.log`: history and diffs), ``engine.worktree``
  (:mod:`~gitmem.git.worktree`: atomic work-tree writes that never overwrite a person's
  save), ``engine.index`` (:mod:`~gitmem.git.index`: the index kept in step with HEAD),
  ``engine.remotes`` (:mod:`~gitmem.git.remote`: fetch and push), ``engine.pack``
  (:mod:`~gitmem.git.pack`: packing and fsck), ``engine.refs`` (:mod:`~gitmem.git.refs`:
  the reflog, rescue and backup refs) and ``engine.journal`` (:mod:`~gitmem.git.journal`);
- the values they hand back: :class:`~gitmem.git.snapshot.Snapshot` (a commit's files),
  :class:`~gitmem.git.base.CommitInfo`, :class:`~gitmem.git.base.Identity`, the diffs of
  :mod:`~gitmem.git.log`, :class:`~gitmem.git.refs.ReflogEntry`,
  :class:`~gitmem.git.parentdiffs.ParentDiffs`; and the errors, in :mod:`~gitmem.git.base`
  (``EngineError`` and its kinds), with the names (``BRANCH``, ``REF``) and path checks;
- what needs no open engine: ``gitproc`` (the one runner of the ``git`` command;
  ``remote.scrub_credentials`` for what it prints), ``files`` (gitmem's own files in
  ``.git/gitmem/``, written atomically), ``lock`` (the writers' lock), ``cancel`` (a write
  called off before its commit), ``facts`` (a repository looked at before it is opened),
  ``stamp`` (main and the work tree vouched for by stat data alone), ``statcache`` (blob
  ids from stat data), ``pipes`` (pipes that carry big texts), and two readers of long
  stretches of history by one git process: ``changes`` (the files each commit of main's
  first-parent line changed, for search) and ``hunks`` (the lines each version of a file
  changed, for blame).

The engine is made, besides, of modules nothing above it imports: ``objects`` (each
object checked before libgit2 reads it), ``trees`` (a commit's trees built in memory),
``branch`` (moving ``main`` by compare-and-swap), ``attempts`` (a write made again after
plain git moved ``main``), ``displaced`` (a file written to after gitmem replaced it),
``rawlog`` (the one reader of ``git log --raw`` output) and ``wiring`` (what the engine
calls of the parts above it).

Import from the module that holds a name (``from gitmem.git.engine import GitEngine``).
"""
