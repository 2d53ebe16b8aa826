"""What a record is, as values: no git, no I/O beyond reading one file.

``ids`` (agent, session and thread ids to file names and back), ``strictjson`` (JSON as
the wire takes it), ``layout`` (where each record lies in the repository), ``meta``
(``meta.json`` and commit trailers), ``jsontexts`` (JSON texts passed through without
decoding), ``merge`` (the three-way merge rules), ``units`` (a record cut into blocks,
messages and events, for search). Also ``dates`` (dates as people write them, commit
times as people read them) and ``counts`` (``1 message``, ``2 messages``).

May import: ``gitmem.errors`` and ``gitmem.git``.
"""
