"""nui's face: the storage extension.

``storage`` (the ``storage.*`` method table), ``handlers`` (``storage-handlers.yaml``),
``extension`` (``gitmem nui install``), ``importer`` (``gitmem import nui``).
"""
