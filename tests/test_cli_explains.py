"""A CLI that explains itself (issue 18): help with examples, global options anywhere,
listings for what could only be read through `gitmem serve`, value checks."""

from __future__ import annotations

import argparse
import json
import time

import pytest

from conftest import Git, run_gitmem
from test_cli import assert_one_line_error
from gitmem.cli.parser import build_parser


@pytest.fixture
def repo(repo_path):
    run_gitmem("init", str(repo_path))
    return repo_path


def every_command(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(words, parser, is a group) for every command and group under ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words = (*path, name)
                group = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                yield words, sub, group
                yield from every_command(sub, words)


def test_every_command_has_a_description_and_an_example():
    commands = list(every_command(build_parser()))
    assert len(commands) > 35
    for words, parser, group in commands:
        text = parser.format_help()
        description = parser.description or ""
        assert description and "\n" not in description, words
        assert description in " ".join(text.split()) or description[:30] in text, words
        example = text.split("example:\n", 1)[1].strip().splitlines()[0] if "example:" in text \
            else ""
        assert example.lstrip().startswith("echo") or example.split()[:2] == ["gitmem", words[0]], \
            (words, example)
        if group:  # its commands, each with its one-line description
            for sub_words, sub, _ in every_command(parser):
                if len(sub_words) == 1:
                    assert sub_words[0] in text and sub.description.split()[0] in text, sub_words


def test_help_through_the_real_command(repo):
    done = run_gitmem("memory", "--help")
    assert "list" in done.stdout and "list the memories" in done.stdout
    assert "example:\n  gitmem memory read --user" in done.stdout
    done = run_gitmem("memory", "write", "--help")
    assert "example:" in done.stdout and "--allow-empty" in done.stdout
    assert "--repo" not in run_gitmem("bench", "--help").stdout  # it works in folders of its own


def test_repo_before_or_after_the_command(repo, tmp_path):
    run_gitmem("--repo", str(repo), "memory", "write", "--user", input="before")
    assert run_gitmem("--repo", str(repo), "memory", "read", "--user").stdout == "before\n"
    assert run_gitmem("memory", "read", "--user", repo=repo).stdout == "before\n"
    other = tmp_path / "other"
    run_gitmem("--repo", str(other), "init")
    assert Git(other).count() == 1
    # given twice, the one after the command's name wins, as for any option
    done = run_gitmem("--repo", str(other), "memory", "read", "--user", "--repo", str(repo))
    assert done.stdout == "before\n"


def test_a_misspelt_option_is_named(repo):
    done = run_gitmem("memory", "read", "--agnet", "x", repo=repo, check=False)
    assert_one_line_error(done, says="--agnet", code=2)
    assert_one_line_error(run_gitmem("memory", "read", repo=repo, check=False), says="--user", code=2)


def test_memory_list(repo):
    assert run_gitmem("memory", "list", repo=repo).stdout == ""
    run_gitmem("memory", "write", "--user", repo=repo, input="likes tea")
    run_gitmem("memory", "write", "--agent", "ext:corp/reviewer", repo=repo, input="be brief")
    today = time.strftime("%Y-%m-%d")
    lines = [line.split("\t") for line in run_gitmem("memory", "list", repo=repo).stdout.splitlines()]
    assert [(name, size) for name, size, _ in lines] == [("user", "10"),
                                                         ("agent:ext:corp/reviewer", "9")]
    assert all(when.startswith(today) for _, _, when in lines)


def test_thread_commands_answer_as_the_wire(repo_path):
    from gitmem.repository import Gitmem
    with Gitmem.open(repo_path) as mem:
        mem.threads.append_events("t/1", "agent", [
            {"type": "STATE_SNAPSHOT", "snapshot": {"step": 2}}, {"type": "RUN_FINISHED"}])
        mem.threads.save_messages("t/1", [{"id": "m1", "role": "user", "content": "hi ✓"}])
    listed = [json.loads(line) for line in run_gitmem("thread", "list", repo=repo_path)
              .stdout.splitlines()]
    assert [(t["id"], t["agentId"]) for t in listed] == [("t/1", "agent")]
    events = json.loads(run_gitmem("thread", "events", "t/1", repo=repo_path).stdout)
    assert [e["type"] for e in events] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    assert json.loads(run_gitmem("thread", "state", "t/1", repo=repo_path).stdout) == {"step": 2}
    assert json.loads(run_gitmem("thread", "messages", "t/1", repo=repo_path).stdout) == [
        {"id": "m1", "role": "user", "content": "hi ✓"}]
    assert json.loads(run_gitmem("thread", "events", "none", repo=repo_path).stdout) == []


def test_remote_list_and_remove(repo, tmp_path):
    assert run_gitmem("remote", "list", repo=repo).stdout == ""
    run_gitmem("remote", "add", "origin", str(tmp_path / "a.git"), repo=repo)
    run_gitmem("remote", "add", "backup", "https://me:pw@example.org/b.git", repo=repo)
    listed = sorted(run_gitmem("remote", "list", repo=repo).stdout.splitlines())
    assert listed[1] == f"origin\t{tmp_path / 'a.git'}"
    assert listed[0].startswith("backup\thttps://") and "pw" not in listed[0]
    run_gitmem("remote", "remove", "backup", repo=repo)
    assert run_gitmem("remote", "list", repo=repo).stdout == f"origin\t{tmp_path / 'a.git'}\n"
    assert_one_line_error(run_gitmem("remote", "remove", "backup", repo=repo, check=False),
                          says="backup")


@pytest.mark.parametrize("args, says", [
    (("log", "-n", "0"), "at least 1"), (("log", "-n", "-1"), "at least 1"),
    (("log", "-n", "x"), "whole number"),
    (("watch", "--debounce", "-1"), "0 or more"), (("watch", "--debounce", "nan"), "seconds"),
    (("watch", "--max-delay", "inf"), "seconds"),
    (("sync", "--timeout", "inf"), "not a positive number of seconds: 'inf'"),
    (("sync", "--timeout", "0"), "not a positive number of seconds"),
    (("serve", "--sync-interval", "inf"), "not a positive number of seconds"),
    (("serve", "--sync-interval", "-1"), "not a positive number of seconds"),
    (("serve", "--sync-interval", "nan"), "not a positive number of seconds"),
    (("serve", "--late-window", "nan"), "seconds"), (("serve", "--late-window", "-1"), "0 or more")])
def test_value_checks(repo, args, says):
    assert_one_line_error(run_gitmem(*args, repo=repo, check=False), says=says, code=2)


def test_a_reversed_range_is_refused(repo):
    run_gitmem("memory", "write", "--user", repo=repo, input="one")
    run_gitmem("memory", "write", "--user", repo=repo, input="two")
    done = run_gitmem("diff", "user", "--since", "now", "--until", "3 days ago", repo=repo,
                      check=False)
    assert_one_line_error(done, says="swap them")
    assert_one_line_error(run_gitmem("diff", "user", "--since", "HEAD", "--until", "HEAD~1",
                                     repo=repo, check=False), says="later than")
    assert "+two" in run_gitmem("diff", "user", "--since", "HEAD~1", "--until", "HEAD",
                                repo=repo).stdout


@pytest.mark.parametrize("value", ["inf", "1e400", "nan", "0", "-2", "soon"])
def test_a_sync_bound_in_git_config_that_is_no_positive_number_is_named(repo, value):
    run_gitmem("remote", "add", "origin", str(repo.parent / "nowhere.git"), repo=repo)
    Git(repo)("config", "gitmem.syncTimeout", value)
    done = run_gitmem("sync", repo=repo, check=False)
    assert_one_line_error(done, code=1, says=f"git config gitmem.syncTimeout must be a positive "
                                              f"number of seconds, not {value!r}")
