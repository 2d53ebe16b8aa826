"""``gitmem bench``: the benchmark, with baselines measured in the same run.

``core`` holds the table (rows, measuring, printing) and the issue-2 scenarios; the
other modules add the scenarios of each feature; ``baselines`` the stores we compare
against (SQLite, nui's data.json, the seed's JSON-file thread store).
"""
