"""The git engine: the only package that imports pygit2.

One module per concept, the lower ones first:

- ``files``: gitmem's own files in ``.git/gitmem/``, written atomically (no pygit2);
- ``base``: names (``BRANCH``, ``REF``), errors, :class:`Identity`, :class:`CommitInfo`,
  path checks, commit messages with trailers;
- ``cancel``: a write called off by its caller before its commit;
- ``lock`` (the writers' lock), ``statcache`` (what stat data vouches for), ``journal``
  (what each work-tree file held), ``gitproc`` (the one runner of the ``git`` command):
  no pygit2;
- ``objects``: each object checked before libgit2 reads it (damaged loose objects);
- ``snapshot``: :class:`Snapshot` and the :class:`~gitmem.git.snapshot.Reader` of
  revisions, trees and cached blobs;
- ``worktree``: atomic work-tree writes that never overwrite a person's save;
- ``index``: the index kept in step with HEAD, and crash recovery;
- ``trees``: a commit's trees built in memory for the touched paths; ``branch``: moving
  ``main`` by compare-and-swap; ``attempts``: a write made again after plain git moved
  ``main``;
- ``rawlog``: the one reader of ``git log --raw`` output; ``changes``: the files each
  commit of main's first-parent line changed (for search);
- ``log``: history and diffs; ``parentdiffs``: the files each of many commits changed
  from each parent (one ``git diff-tree``, for the secret scan); ``remote``: fetch and
  push; ``refs``: the reflog, rescue and backup refs; ``pack``: packing and fsck;
  ``facts``: a repository looked at before it is opened;
- ``engine``: :class:`GitEngine`, which commits (compare-and-swap on ``main``), merges
  and moves ``main``, made of the pieces above; the layers above use it alone.

Import from the module that holds a name (``from gitmem.git.engine import GitEngine``).
"""
