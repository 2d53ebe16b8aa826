"""Looking after a repository: packing, checks and the report of its state.

``maintenance`` (packing in the background, ``gc``, ``fsck``), ``status``.

May import: the facade, ``gitmem.sync`` and everything below them.
"""
