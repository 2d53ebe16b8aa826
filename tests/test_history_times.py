"""``show`` and ``restore --at`` a time: before the record existed, git's own dates, a bare
date meaning the end of that day (issue 24)."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta

import pytest

from conftest import SUBPROCESS_ENV, run_gitmem
from test_cli import assert_one_line_error


@pytest.fixture
def repo(repo_path):
    run_gitmem("init", str(repo_path))
    return repo_path


def commit_with_plain_git(repo, text: str, when: datetime) -> None:
    """A person's commit of user memory, dated ``when`` (local time) by git's own clocks."""
    (repo / "memory").mkdir(exist_ok=True)
    (repo / "memory" / "user.md").write_text(text)
    stamp = when.astimezone().isoformat()
    for args in (["add", "memory/user.md"], ["commit", "-q", "-m", f"by hand: {text.strip()}"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env={
            **SUBPROCESS_ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp})


def dated_repo(path, versions: list[tuple[str, datetime]]):
    """A plain git repository whose commits of user memory are dated as given (oldest
    first), taken by ``gitmem init --adopt``."""
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True, env=SUBPROCESS_ENV)
    for text, when in versions:
        commit_with_plain_git(path, text, when)
    run_gitmem("init", "--adopt", str(path))
    return path


def test_restore_before_the_record_existed_is_refused_and_deletes_nothing(repo, cli, git):
    cli("memory", "write", "--user", input="likes tea")
    first = git("rev-parse", "HEAD").strip()
    cli("memory", "write", "--user", "--append", input="likes coffee")
    count = git.count()
    done = cli("restore", "user", "--at", "2020-01-01", check=False)
    assert_one_line_error(done, code=1, says=first[:10])
    assert "memory delete" in done.stderr
    assert git.count() == count
    assert cli("memory", "read", "--user").stdout == "likes tea\n\nlikes coffee\n"
    assert_one_line_error(cli("restore", "user", "--at", "2020-01-01", "--json", check=False), code=1)
    never = cli("restore", "agent:nobody", "--at", "HEAD", check=False)
    assert_one_line_error(never, code=1, says="agent:nobody")
    assert git.count() == count


def test_show_before_the_record_existed_exits_1(repo, cli, git):
    cli("memory", "write", "--user", input="likes tea")
    done = cli("show", "user", "--at", "2020-01-01", check=False)
    assert_one_line_error(done, code=1, says="did not exist")
    shown = cli("show", "user", "--at", "HEAD", check=False)
    assert shown.returncode == 0 and shown.stdout == "likes tea\n"


@pytest.mark.parametrize("when", ["today", "Today", "last week", "noon yesterday", "yesterday 23:59",
                                  "1.week.ago", "now"])
def test_git_dates_are_accepted(repo_path, when):
    dated_repo(repo_path, [("older\n", datetime.now() - timedelta(days=30)),
                           ("today's\n", datetime.now() - timedelta(seconds=5))])
    done = run_gitmem("show", "user", "--at", when, repo=repo_path, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == ("today's\n" if when in ("today", "Today", "now") else "older\n")


def test_a_bare_date_means_the_end_of_that_day(repo_path):
    day = datetime.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)
    dated_repo(repo_path, [("morning\n", day.replace(hour=8)),
                           ("evening\n", day.replace(hour=23, minute=59, second=59)),
                           ("next day\n", day + timedelta(days=1, seconds=1))])
    show = lambda when: run_gitmem("show", "user", "--at", when, repo=repo_path).stdout  # noqa: E731
    assert show(day.strftime("%Y-%m-%d")) == "evening\n"
    assert show(day.strftime("%Y-%m-%dT12:00")) == "morning\n"
    run_gitmem("restore", "user", "--at", day.strftime("%Y-%m-%d"), repo=repo_path)
    assert run_gitmem("memory", "read", "--user", repo=repo_path).stdout == "evening\n"


def test_what_no_date_reader_knows_is_still_refused(repo, cli):
    cli("memory", "write", "--user", input="x")
    for when in ("next tuesday", "tomorrow", "garbage words"):
        done = cli("show", "user", "--at", when, check=False)
        assert_one_line_error(done, code=1, says="neither a revision nor a date")


@pytest.mark.parametrize("when", ["HEAD~999", "HEAD~4", "main~999", "@~1x", "@~-1", "@~+1",
                                  "abc1234", "12", "1700000600"])
def test_a_revision_that_names_no_commit_is_refused_not_read_as_now(repo, cli, git, when):
    """git's date reading takes these as now (or a day of this month): the newest version,
    exit 0, was the answer (issue 24)."""
    for text in ("v1", "v2", "v3"):
        cli("memory", "write", "--agent", "x", input=text)
    count = git.count()  # init and three writes: HEAD~4 is one past the first commit
    for args in (["show", "agent:x", "--at", when], ["restore", "agent:x", "--at", when],
                 ["diff", "agent:x", "--since", when], ["diff", "agent:x", "--since", "@~1",
                                                          "--until", when]):
        assert_one_line_error(cli(*args, check=False), code=1, says=repr(when))
    assert git.count() == count
    assert cli("memory", "read", "--agent", "x").stdout == "v3\n"
    assert cli("show", "agent:x", "--at", "HEAD~3", check=False).returncode == 1  # the init commit: before x
    assert cli("show", "agent:x", "--at", "@1700000600", check=False).returncode == 1  # epoch: 2023
