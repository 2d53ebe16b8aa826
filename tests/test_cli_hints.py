"""The command line's smaller promises (issue 35, item 14): a usage error points to the
help of the command that refused, with the closest names; an environment variable is
blamed by its name; `show` without `--at` shows the newest version; a folder without
nui's data is an error; counts read as English. The real CLI, as subprocesses."""

from __future__ import annotations

import json

import pytest

from conftest import Git, run_gitmem


def usage_error(*args: str, **kwargs) -> str:
    """The one line of a usage error (exit 2)."""
    done = run_gitmem(*args, check=False, **kwargs)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    run_gitmem("init", str(path))
    return path


def test_a_mistyped_option_points_to_its_command_and_the_closest_option(repo):
    said = usage_error("memory", "read", "--agnt", "x", repo=repo)
    assert said.startswith("gitmem memory read: unrecognized arguments: --agnt x")
    assert "(did you mean --agent?)" in said and "(see gitmem memory read --help)" in said
    assert "(see gitmem status --help)" in usage_error("status", "--jsn", repo=repo)


def test_a_mistyped_command_gets_the_closest_names(repo):
    assert "(did you mean memory" in usage_error("memroy", "list", repo=repo)
    said = usage_error("memory", "lst", repo=repo)
    assert "(did you mean list?)" in said and "(see gitmem memory --help)" in said


def test_a_search_word_starting_with_a_dash_is_shown_after_double_dash(repo):
    assert "gitmem search -- -friday" in usage_error("search", "-friday", repo=repo)
    run_gitmem("memory", "write", "--user", repo=repo, input="plans for friday")
    assert run_gitmem("--repo", str(repo), "search", "plans", "--", "-friday").stdout == ""


def test_a_bad_late_window_in_the_environment_is_blamed_by_its_name(repo):
    said = usage_error("serve", repo=repo, env={"GITMEM_LATE_WINDOW": "abc"})
    assert "$GITMEM_LATE_WINDOW" in said and "abc" in said
    assert "--late-window:" not in said and "argument" not in said


def test_show_without_at_shows_the_newest_version(repo):
    for text in ("first", "second"):
        run_gitmem("memory", "write", "--user", repo=repo, input=text)
    assert run_gitmem("show", "user", repo=repo).stdout == "second\n"
    assert run_gitmem("show", "user", "--at", "@~1", repo=repo).stdout == "first\n"


def test_import_of_a_folder_without_nui_data_is_an_error_and_makes_nothing(tmp_path):
    empty = tmp_path / "not-nui"
    empty.mkdir()
    repo = tmp_path / "repo"
    done = run_gitmem("import", "nui", "--data-dir", str(empty), repo=repo, check=False)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr
    assert f"{empty} holds no nui data" in done.stderr
    assert not repo.exists()


def test_counts_read_as_english(repo, tmp_path):
    run_gitmem("session", "write", "claude-code", "s1", repo=repo,
               input='{"messages": [{"id": "m1", "role": "user", "content": "hi"}]}')
    assert Git(repo).log(fmt="%s")[0] == "session: write claude-code/s1 (1 message)"
    run_gitmem("memory", "write", "--agent", "reviewer", repo=repo, input="be kind")
    done = run_gitmem("export", "nui", str(tmp_path / "out"), repo=repo)
    assert done.stdout.splitlines()[-1] == f"exported 1 session, 1 agent memory to {tmp_path / 'out'}"
    assert json.loads((tmp_path / "out" / "data.json").read_text())["sessions"][0]["id"] == "s1"
