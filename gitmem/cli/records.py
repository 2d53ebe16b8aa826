"""``gitmem memory``, ``gitmem session`` and ``gitmem thread``: the records themselves."""

from __future__ import annotations

import json
import sys

from gitmem.records.ids import check
from gitmem.cli.base import CliError, UsageError, open_repo, quick_first, write_pieces
from gitmem.cli.names import did_you_mean, printable, say_missing
from gitmem.cli.parser import command
from gitmem.records import strictjson


def add_memory(parser) -> None:
    memory_commands = parser.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("read", cmd_memory_read, "print the memory"),
                             ("write", cmd_memory_write, "replace (or --append to) the memory "
                              "with stdin"),
                             ("delete", cmd_memory_delete, "delete the memory")):
        sub = command(memory_commands, name, help_, run)
        who = sub.add_mutually_exclusive_group()  # one is required: checked by _agent
        who.add_argument("--user", action="store_true", help="user memory")
        who.add_argument("--agent", metavar="ID", help="an agent's memory")
        if name == "write":
            sub.add_argument("--append", action="store_true",
                             help="append a block after a blank line instead of replacing")
            sub.add_argument("--allow-empty", action="store_true",
                             help="write even an empty stdin (`memory delete` removes a memory)")
    command(memory_commands, "list", "list the memories: id, size in bytes, last change",
            cmd_memory_list)


def add_session(parser) -> None:
    session_commands = parser.add_subparsers(metavar="ACTION", required=True)
    for name, run, help_ in (("read", cmd_session_read, "print {messages, agentSessionId} as JSON"),
                             ("write", cmd_session_write, "replace the session with "
                              "{messages, agentSessionId, workingDir} JSON from stdin"),
                             ("append", cmd_session_append, "add the messages of "
                              "{messages, agentSessionId?, workingDir?} JSON from stdin"),
                             ("delete", cmd_session_delete, "delete the session")):
        sub = command(session_commands, name, help_, run)
        sub.add_argument("agent_type", metavar="AGENT_TYPE")
        sub.add_argument("session_id", metavar="SESSION_ID")
        if name == "write":
            sub.add_argument("--allow-empty", action="store_true",
                             help="write even no messages over a stored session "
                             "(`session delete` removes a session)")
    command(session_commands, "list", "list sessions as AGENT_TYPE<TAB>SESSION_ID",
            cmd_session_list)


def add_thread(parser) -> None:
    thread_commands = parser.add_subparsers(metavar="ACTION", required=True)
    command(thread_commands, "list", "list threads as JSON lines: id, agentId, ownerId, "
            "createdAt, updatedAt", cmd_thread_list)
    for name, help_ in (("events", "print a thread's events as a JSON array"),
                        ("state", "print a thread's last state snapshot as JSON"),
                        ("messages", "print a thread's messages as a JSON array")):
        sub = command(thread_commands, name, help_, cmd_thread_read)
        sub.add_argument("thread_id", metavar="THREAD_ID")
        sub.set_defaults(what=name)


def _agent(args) -> str | None:
    if not args.user and args.agent is None:
        raise UsageError("say whose memory: --user or --agent ID (see --help)")
    return None if args.user else check(args.agent, "--agent")


def cmd_memory_read(args) -> None:
    agent = _agent(args)
    with open_repo(args) as mem:
        content = mem.memory.read(agent)  # a read of HEAD: a hand edit of it is committed first
        if agent is not None and not content:
            snapshot = mem.engine.snapshot()
            if not snapshot.exists(mem.memory.path(agent)):
                _say_no_memory(mem, agent, snapshot=snapshot)
    sys.stdout.write(content)


def _say_no_memory(mem, agent: str | None, then: str = "", snapshot=None) -> None:
    """The memory of ``agent`` (None: the user's) is not there: said with the closest agents."""
    if agent is None:
        say_missing(f"user memory{then}", "user", [], "gitmem memory list")
        return
    from gitmem.records.layout import record_name
    say_missing(f"agent memory {agent!r}{then}", f"agent:{agent}",  # named as log does
                [record_name(path) for path in mem.memory.paths(snapshot=snapshot)],
                "gitmem memory list")


def cmd_memory_write(args) -> None:
    agent = _agent(args)
    content = sys.stdin.read()
    if not content.strip() and not args.allow_empty:
        raise CliError("stdin is empty: nothing written (use `gitmem memory delete` to remove "
                       "a memory, or --allow-empty to write it empty)")
    with open_repo(args) as mem:
        mem.memory.write(content, agent, "append" if args.append else "replace")


def cmd_memory_delete(args) -> None:
    agent = _agent(args)
    with open_repo(args) as mem:
        commit = mem.memory.delete(agent)
        if commit is None:
            _say_no_memory(mem, agent, " to delete")
            return
    print(f"deleted {printable('user' if agent is None else f'agent:{agent}')} in commit {commit[:10]}")


def cmd_memory_list(args) -> None:
    """One line a memory: ``user``, ``agent:<id>`` or ``note:<path>``, its size in bytes,
    its last change."""
    from datetime import datetime

    from gitmem.history.versions import memories
    with open_repo(args) as mem:
        for listed in memories(mem):
            when = datetime.fromtimestamp(listed.last.time).astimezone().strftime(
                "%Y-%m-%d %H:%M") if listed.last else "-"
            size = "?" if listed.size is None else listed.size  # unreadable: the warning says why
            print(f"{printable(listed.record)}\t{size}\t{when}")


@quick_first
def cmd_session_read(args) -> None:
    from gitmem.opening.location import locate_repo
    from gitmem.edits.quick_reads import session_json
    found = session_json(locate_repo(args.repo)[0], args.agent_type, args.session_id)
    if found is None:
        with open_repo(args) as mem:
            found = mem.session_json(args.agent_type, args.session_id)  # hand edits taken in
            folder = mem.sessions.folder(args.agent_type, args.session_id)
            if mem.engine.snapshot().tree_id(folder) is None:
                _say_no_session(mem, args)
    pieces, agent_session_id = found
    # The stored lines as they are: no parse, no re-encoding, no copy.
    write_pieces([b'{"messages": ', *pieces,
                  b', "agentSessionId": %s}\n' % json.dumps(agent_session_id, ensure_ascii=False).encode()])


SESSION_KEYS = ("messages", "agentSessionId", "workingDir")


def _session_body() -> dict:
    """The JSON object on stdin, ``{"messages": [...], "agentSessionId": ..., "workingDir": ...}``,
    checked as the wire checks ``storage.session.write``: every message an object, the two
    ids strings, and no other key (a typo would otherwise store nothing without a word)."""
    try:
        body = strictjson.loads(sys.stdin.read())
    except ValueError as exc:  # not JSON, or NaN / Infinity (strictjson words it as the wire)
        raise CliError(f"stdin is not JSON: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("messages", []), (list, type(None))):
        raise CliError('stdin must be a JSON object like {"messages": [...], "agentSessionId": ""}')
    for key in body:
        if key not in SESSION_KEYS:
            raise CliError(f"stdin has an unknown key {key!r}{did_you_mean(key, SESSION_KEYS)} "
                           f"(it takes {', '.join(SESSION_KEYS)})")
    for index, message in enumerate(body.get("messages") or []):
        if not isinstance(message, dict):
            raise CliError(f'"messages" must hold JSON objects; item {index} is not one')
    for key in SESSION_KEYS[1:]:
        if not isinstance(body.get(key, ""), (str, type(None))):
            raise CliError(f'"{key}" must be a string')
    return body


def cmd_session_write(args) -> None:
    body = _session_body()
    with open_repo(args) as mem:
        if not body.get("messages") and not args.allow_empty:
            stored = len(mem.sessions.read(args.agent_type, args.session_id)[0])
            if stored:
                raise CliError(f"stdin holds no messages: the session's {stored} "
                               f"message{'s' if stored != 1 else ''} were kept (use `gitmem "
                               "session delete` to remove it, or --allow-empty to empty it)")
        mem.sessions.write(args.agent_type, args.session_id, body.get("messages"),
                           body.get("agentSessionId") or "", body.get("workingDir") or "")


def cmd_session_append(args) -> None:
    body = _session_body()
    given = [body.get(key) for key in ("agentSessionId", "workingDir")]
    with open_repo(args) as mem:
        mem.sessions.append(args.agent_type, args.session_id, body.get("messages"), *given)


def _say_no_session(mem, args, then: str = "") -> None:
    """Session ``args.agent_type/args.session_id`` is not there: said with the closest ones."""
    name = f"{args.agent_type}/{args.session_id}"
    say_missing(f"session {name}{then}", name, [f"{t}/{s}" for t, s in mem.sessions.list()],
                "gitmem session list")


def cmd_session_delete(args) -> None:
    with open_repo(args) as mem:
        commit = mem.sessions.delete(args.agent_type, args.session_id)
        if commit is None:
            _say_no_session(mem, args, " to delete")
            return
    print(f"deleted {printable(f'session:{args.agent_type}/{args.session_id}')} in commit {commit[:10]}")


def cmd_session_list(args) -> None:
    from gitmem.records.layout import SESSIONS
    with open_repo(args) as mem:
        snapshot = mem.engine.snapshot(scope=SESSIONS)  # the edits waiting are taken in, as a read's
        for agent_type, session_id in mem.sessions.list(snapshot=snapshot):
            print(f"{printable(agent_type)}\t{printable(session_id)}")


def cmd_thread_list(args) -> None:
    from gitmem.records.layout import THREADS
    with open_repo(args) as mem:
        snapshot = mem.engine.snapshot(scope=THREADS)  # the edits waiting are taken in, as a read's
        for thread in mem.threads.list_threads(snapshot=snapshot):
            print(json.dumps(thread, ensure_ascii=False))


def cmd_thread_read(args) -> None:
    with open_repo(args) as mem:
        threads = mem.threads
        if args.what == "state":
            text = threads.read_state_json(args.thread_id)
        else:
            text = b"".join((threads.read_events_json if args.what == "events"
                             else threads.read_messages_json)(args.thread_id)).decode("utf-8")
        snapshot = mem.engine.snapshot()  # after the read, which commits a hand edit first
        if snapshot.tree_id(threads.folder(args.thread_id)) is None:
            say_missing(f"thread {args.thread_id!r}", args.thread_id,
                        [t["id"] for t in threads.list_threads(snapshot=snapshot)], "gitmem thread list")
    sys.stdout.write(text + "\n")
