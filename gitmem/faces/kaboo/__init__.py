"""kaboo's face: the ``ThreadStore``.

``threads`` (the ``threads.*`` method table), ``adapter`` (the npm package shipped in
``templates/kaboo``: ``gitmem kaboo path|init``).
"""
