"""``gitmem bench``: the benchmark, with baselines measured in the same run.

- ``core``: the table (:class:`~gitmem.bench.core.Row`, :class:`~gitmem.bench.core.Bench`),
  the runner, the printing, and the list of scenario modules (``SCENARIO_MODULES``);
- one module a scenario family: ``memory`` (writes), ``sessions``, ``reads``, ``threads``,
  ``serve``, ``watch`` (hand edits), ``sync``, ``history``, ``cold`` (cold starts);
- ``baselines``: everything gitmem is measured against (the raw pygit2 floor, the git
  CLI, SQLite, nui's data.json, the seed's JSON-file thread store);
- ``workloads``: what the scenarios share (contents, repositories, a ``gitmem serve`` client).
"""
