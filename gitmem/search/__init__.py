"""Search over every record and its history.

``index`` (the FTS5 index under ``.git/gitmem/``, caught up from the commits it lacks),
``query`` (a query read and answered from the index, without opening the repository
while a stamp vouches for it).

May import: the layers below (``git``, ``records``, ``stores``, ``history``, ``edits``).
"""
