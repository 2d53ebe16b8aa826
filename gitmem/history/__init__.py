"""A record's history: its log, how it was at a time, diffs, restores and blame.

``versions`` (log, show, diff, restore, and the commit a time names: a revision, or a
date read by :mod:`gitmem.records.dates`), ``blame`` (who wrote each line),
``record_index`` (which commits touched which record, kept under ``.git/gitmem/``) and
``index_parts`` (its lines kept record by record, so that a record is read alone).

May import: ``gitmem.git``, ``gitmem.records``, ``gitmem.stores``.
"""
