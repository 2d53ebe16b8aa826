"""The JSON-RPC line loop, driven over real pipes: a thread, or a subprocess for signals."""

from __future__ import annotations

import io
import json
import logging
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitmem.faces.rpc import (
    MAX_LINE,
    MAX_RESPONSE,
    InvalidParams,
    RawJSON,
    RpcError,
    Shutdown,
    arrival,
    json_texts,
    object_texts,
    param,
    parse_json,
    serve,
)

REPO = Path(__file__).resolve().parents[1]


def _fail(params):
    raise ValueError("bad\nthing")


def _teapot(params):
    raise RpcError(-32001, "teapot", {"why": "short and stout"})


def _shutdown(params):
    raise Shutdown({"ok": True})


@json_texts("items")
def _texts(params):
    items = params.get("items")
    if not isinstance(items, list):
        return {"not a list": items}
    return {"texts": [bytes(text).decode("utf-8", "surrogateescape") for text in items],
            "values": [parse_json(text) for text in items], "other": params.get("other")}


def _slow(params):
    time.sleep(params["seconds"])
    return time.monotonic()


METHODS = {
    "echo": lambda params: params,
    "slow": _slow,
    "arrival": lambda params: arrival(),
    "texts": _texts,
    "texts_after_need": json_texts("items")(lambda params: param(params, "name")),
    "need": lambda params: param(params, "name"),
    "size": lambda params: len(params["pad"]),
    "big": lambda params: "x" * params["n"],
    "raw": lambda params: {"before": 1, "messages": RawJSON(params["text"]), "after": [RawJSON(b"[]")]},
    "fail": _fail,
    "teapot": _teapot,
    "not_json": lambda params: {"value": object()},
    "nan": lambda params: float("nan"),
    "shutdown": _shutdown,
}


class Server:
    """`serve(METHODS)` in a thread, talking over two real pipes."""

    def __init__(self, **options) -> None:
        server_in_fd, self._to_server_fd = os.pipe()
        self._from_server_fd, server_out_fd = os.pipe()
        self._to_server = os.fdopen(self._to_server_fd, "wb")
        self._buffer = b""
        server_in, server_out = os.fdopen(server_in_fd, "rb"), os.fdopen(server_out_fd, "wb")

        def run() -> None:
            with server_in, server_out:
                serve(METHODS, server_in, server_out, **options)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def send(self, data: bytes) -> None:
        self._to_server.write(data)
        self._to_server.flush()

    def call(self, request: dict | str | bytes) -> dict:
        """Send one request line, return the one answer line, parsed."""
        if isinstance(request, dict):
            request = json.dumps(request)
        if isinstance(request, str):
            request = request.encode()
        self.send(request + b"\n")
        return json.loads(self.line())

    def line(self, timeout: float = 10) -> bytes:
        """The next answer line, newline included."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            chunk = self._read(deadline)
            assert chunk, f"server closed stdout; unread: {self._buffer!r}"
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"

    def close(self) -> bytes:
        """Close the server's stdin; return whatever it writes until it closes stdout."""
        self._to_server.close()
        rest, deadline = self._buffer, time.monotonic() + 10
        while chunk := self._read(deadline):
            rest += chunk
        self.thread.join(10)
        assert not self.thread.is_alive()
        os.close(self._from_server_fd)
        return rest

    def _read(self, deadline: float) -> bytes:
        ready, _, _ = select.select([self._from_server_fd], [], [], max(0, deadline - time.monotonic()))
        assert ready, "no answer in time"
        return os.read(self._from_server_fd, 1 << 20)


@pytest.fixture
def server():
    server = Server()
    yield server
    if not server._to_server.closed:
        assert server.close() == b""


def request(method: str, params=None, id=1) -> dict:
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def test_result_and_id_echo(server):
    for request_id in (1, 0, -7, 2**70, 1.5, "abc", "", None, "ünï\u2028"):
        answer = server.call(request("echo", {"a": 1}, id=request_id))
        assert answer == {"jsonrpc": "2.0", "id": request_id, "result": {"a": 1}}
        assert type(answer["id"]) is type(request_id)
    server.send(b'{"jsonrpc":"2.0","id":1180591620717411303424,"method":"echo"}\n')
    assert server.line() == b'{"jsonrpc":"2.0","id":1180591620717411303424,"result":{}}\n'


def test_notifications_get_no_answer_even_on_error(server):
    for method, params in [("echo", {}), ("missing", {}), ("fail", {}), ("need", {}), ("echo", [1]), ("nan", {})]:
        server.send(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode() + b"\n")
    assert server.call(request("echo", id=7))["id"] == 7


@pytest.mark.parametrize(
    "line",
    [b"{not json", b'{"jsonrpc":"2.0","id":1,"method":"echo"', b"nul", b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":NaN}}'],
)
def test_parse_error_then_keeps_serving(server, line):
    answer = server.call(line)
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert "\n" not in answer["error"]["message"]
    assert server.call(request("echo", {"b": 2}))["result"] == {"b": 2}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63 - 2, max_value=2**200)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text()
    | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=1),  # a lone surrogate
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES, ascii=st.booleans())
def test_requests_are_read_as_the_json_module_reads_them(server, value, ascii):
    # Big integers stay integers, 1.0 stays a float, -0.0 keeps its sign, a "\ud800"
    # escape gives a lone surrogate: whichever decoder reads the line.
    line = json.dumps(request("echo", {"v": value}), ensure_ascii=ascii)
    answer = server.call(line.encode("utf-8", "backslashreplace"))
    assert repr(answer["result"]["v"]) == repr(value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=JSON_VALUES, ascii=st.booleans())
def test_json_texts_are_read_as_the_json_module_reads_them(server, value, ascii):
    # The same through a method that takes an array as texts: parse_json reads each.
    line = json.dumps(request("texts", {"items": [value, "<&>"], "other": value}), ensure_ascii=ascii)
    result = server.call(line.encode("utf-8", "backslashreplace"))["result"]
    assert repr(result["values"]) == repr([value, "<&>"]) and repr(result["other"]) == repr(value)


def test_json_texts_are_the_items_as_sent(server):
    items = '[{"b":1,"a":[true,null]}, "x\\u003cy\u00e9",-0.0,  1E+2 ,"\\ud83d\\ude00"]'
    line = '{"jsonrpc":"2.0","id":1,"method":"texts","params":{"other":{"k":[1]},"items":%s}}' % items
    result = server.call(line)["result"]
    assert result["texts"] == ['{"b":1,"a":[true,null]}', '"x\\u003cy\u00e9"', "-0.0", "1E+2",
                               '"\\ud83d\\ude00"']
    assert result["values"] == [{"b": 1, "a": [True, None]}, "x<y\u00e9", -0.0, 100.0, "\U0001f600"]
    assert result["other"] == {"k": [1]}


def test_json_texts_of_a_request_only_the_json_module_reads(server):
    # A lone surrogate, or a member msgspec does not know, sends the whole line to the
    # json module; the method still gets texts, those of the values it read.
    lone_surrogate = '{"jsonrpc":"2.0","id":1,"method":"texts","params":{"other":"\\ud800","items":%s}}'
    unknown_member = '{"jsonrpc":"2.0","id":1,"x":0,"method":"texts","params":{"items":%s}}'
    for line, other in ((lone_surrogate, "\ud800"), (unknown_member, None)):
        result = server.call(line % '[{"a":"\u00e9"},2]')["result"]
        assert result["values"] == [{"a": "\u00e9"}, 2] and result["other"] == other
        assert [json.loads(text) for text in result["texts"]] == [{"a": "\u00e9"}, 2]
    for items in ("null", "5", '{"a":1}'):  # not an array: as it is, for the method to refuse
        line = '{"jsonrpc":"2.0","id":1,"method":"texts","params":{"items":%s}}' % items
        assert server.call(line)["result"] == {"not a list": json.loads(items)}


def test_numbers_beyond_a_float_are_refused(server):
    # The json module would read 1e400 as inf, which no JSON file or answer can hold.
    answer = server.call('{"jsonrpc":"2.0","id":1,"method":"echo","params":{"v":-1e400}}')
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert "number out of range: -1e400" in answer["error"]["message"]
    for request_id in ('"id":2,', ""):  # found only when the item is read: the line's all the same
        answer = server.call('{"jsonrpc":"2.0",%s"method":"texts","params":{"items":[1,1e400]}}' % request_id)
        assert answer["id"] is None and answer["error"]["code"] == -32700
        assert "number out of range: 1e400" in answer["error"]["message"]
    assert server.call(request("echo", {"v": 1e300}))["result"] == {"v": 1e300}


def test_invalid_utf8_is_a_parse_error(server):
    for method in ("echo", "texts"):  # texts are checked too, though not decoded
        answer = server.call(b'{"jsonrpc":"2.0","id":1,"method":"%s","params":{"items":["\xff\xfe"]}}'
                             % method.encode())
        assert answer["id"] is None and answer["error"]["code"] == -32700
        assert "UTF-8" in answer["error"]["message"]
    assert server.call(request("echo"))["result"] == {}


def test_invalid_utf8_in_texts_is_a_parse_error_when_the_method_refuses_another_param_first(server):
    # threads.saveMessages with a null threadId: the method refuses the id before it reads
    # the texts, but the line is not JSON (found by the fuzz suite)
    line = b'{"jsonrpc":"2.0","id":1,"method":"texts_after_need","params":{"items":["\xff"]}}'
    answer = server.call(line)
    assert answer["id"] is None and answer["error"]["code"] == -32700
    good = server.call(b'{"jsonrpc":"2.0","id":2,"method":"texts_after_need","params":{"items":["x"]}}')
    assert good["id"] == 2 and good["error"]["code"] == -32602


@pytest.mark.parametrize(
    "message, answer_id",
    [
        ([], None),
        ([{"jsonrpc": "2.0", "id": 1, "method": "echo"}], None),
        (5, None),
        ("echo", None),
        (None, None),
        ({"jsonrpc": "2.0", "id": 3}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": 5}, 4),
        ({"jsonrpc": "1.0", "id": 5, "method": "echo"}, 5),
        ({"id": 6, "method": "echo"}, 6),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "echo"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "echo"}, None),
        ({"jsonrpc": "2.0", "method": ["echo"]}, None),  # no id, but not a valid notification
    ],
)
def test_invalid_request(server, message, answer_id):
    answer = server.call(json.dumps(message))
    assert answer["error"]["code"] == -32600
    assert answer["id"] == answer_id and type(answer["id"]) is type(answer_id)
    assert server.call(request("echo", id=99))["id"] == 99


def test_unknown_method(server):
    answer = server.call(request("storage.nope", id=12))
    assert answer["id"] == 12
    assert answer["error"]["code"] == -32601 and "storage.nope" in answer["error"]["message"]
    assert server.call(request("echo"))["result"] == {}


def test_params(server):
    assert server.call(request("echo"))["result"] == {}
    for params in ([1, 2], "x", 3, None):
        answer = server.call({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": params})
        assert answer["error"]["code"] == -32602 and "params" in answer["error"]["message"]
    missing = server.call(request("need", {}))["error"]
    assert missing["code"] == -32602 and '"name"' in missing["message"] and missing["data"] == {"param": "name"}
    wrong = server.call(request("need", {"name": 5}))["error"]
    assert wrong["code"] == -32602 and wrong["message"] == 'param "name" must be a string, not a number'
    assert server.call(request("need", {"name": "ok"}))["result"] == "ok"


def test_param_helper():
    assert param({"a": None}, "a", list, default=[]) == []
    assert param({}, "a", str, default="") == ""
    assert param({"a": {"b": 1}}, "a", dict) == {"b": 1}
    with pytest.raises(InvalidParams, match='param "a" must be a string, not null'):
        param({"a": None}, "a")
    with pytest.raises(InvalidParams, match='param "a" must be an array, not an object'):
        param({"a": {}}, "a", list)
    with pytest.raises(InvalidParams, match='missing param "a"') as caught:
        param({}, "a")
    assert caught.value.code == -32602


def test_method_errors(server, caplog):
    caplog.set_level(logging.INFO)
    answer = server.call(request("fail", id="f"))
    assert answer["id"] == "f"
    assert answer["error"] == {"code": -32603, "message": "ValueError: bad thing"}
    assert server.call(request("teapot"))["error"] == {"code": -32001, "message": "teapot", "data": {"why": "short and stout"}}
    for method in ("not_json", "nan"):
        error = server.call(request(method))["error"]
        assert error["code"] == -32603 and error["message"].startswith("result is not JSON")
    assert server.call(request("echo"))["result"] == {}
    tracebacks = [r for r in caplog.records if r.exc_info and r.exc_info[0] is ValueError and "raised" in r.getMessage()]
    assert len(tracebacks) == 1


def test_log_line_per_request_without_params(caplog):
    caplog.set_level(logging.INFO, logger="test.rpc")
    server = Server(log=logging.getLogger("test.rpc"), log_context=lambda params: f"handler={params.get('handlerId')}")
    server.call(request("echo", {"handlerId": "h1", "content": "SECRET CONTENT"}, id=41))
    server.call(request("need", {"content": "SECRET CONTENT"}, id=42))
    assert server.close() == b""
    lines = [r.getMessage() for r in caplog.records if r.name == "test.rpc"]
    assert len(lines) == 2
    assert lines[0].startswith("echo id=41 ") and "handler=h1" in lines[0] and lines[0].endswith(" ok")
    assert lines[1].startswith("need id=42 ") and "error -32602" in lines[1]
    assert all("ms " in line for line in lines)
    assert not any("SECRET" in line for line in lines)


def test_blank_lines_are_skipped(server):
    server.send(b"\n   \n\t\r\n")
    assert server.call(request("echo", id=3))["id"] == 3


def test_answers_never_break_lines(server):
    text = "a\u2028b\u2029c\nd\re\x00f\U0001f600"
    server.send(json.dumps(request("echo", {"s": text})).encode() + b"\n")
    line = server.line()
    assert line.count(b"\n") == 1 and b"\r" not in line
    assert "\u2028".encode() not in line and "\u2029".encode() not in line
    assert b"\\u2028" in line and "\U0001f600".encode() in line  # other non-ASCII stays UTF-8
    assert json.loads(line)["result"] == {"s": text}
    # A lone surrogate arrives as an escape and can't be UTF-8: it goes back as the escape.
    server.send(b'{"jsonrpc":"2.0","id":2,"method":"echo","params":{"s":"x\\ud800y\\udc00"}}\n')
    line = server.line()
    assert line.decode("utf-8").count("\n") == 1
    assert json.loads(line)["result"] == {"s": "x\ud800y\udc00"}


def test_raw_json_is_spliced_verbatim(server):
    text = json.dumps([{"id": "m1", "content": "héllo \u2028"}, {"n": 2}], ensure_ascii=False, separators=(",", ":"))
    server.send(json.dumps(request("raw", {"text": text})).encode() + b"\n")
    line = server.line()
    assert b'"messages":[{"id":"m1","content":"h\xc3\xa9llo \\u2028"},{"n":2}]' in line
    assert json.loads(line)["result"] == {"before": 1, "messages": json.loads(text), "after": [[]]}
    # A string that looks like the internal placeholder is left alone.
    looks_like = "\x00RawJSON 0123\x00"
    assert server.call(request("echo", {"s": looks_like}))["result"] == {"s": looks_like}


def test_raw_json_refuses_line_breaks():
    with pytest.raises(ValueError):
        RawJSON('{\n"a": 1}')
    with pytest.raises(ValueError):
        RawJSON(b"[1,\r2]")


def test_response_cap_then_keeps_serving(server):
    overhead = len(b'{"jsonrpc":"2.0","id":1,"result":""}\n')
    answer = server.call(request("big", {"n": MAX_RESPONSE - overhead}))
    assert len(answer["result"]) == MAX_RESPONSE - overhead  # exactly 4 MiB with the newline: sent
    answer = server.call(request("big", {"n": MAX_RESPONSE - overhead + 1}, id=2))
    assert answer["id"] == 2 and answer["error"]["code"] == -32000
    assert answer["error"]["data"] == {"size": MAX_RESPONSE + 1, "limit": MAX_RESPONSE}
    assert str(MAX_RESPONSE) in answer["error"]["message"]
    assert server.call(request("echo", id=3))["id"] == 3


HEAD = b'{"id":5,"jsonrpc":"2.0","method":"size","params":{"pad":"'
TAIL = b'"}}'


def _line_of(size: int) -> bytes:
    """A request (id 5) exactly `size` bytes long, newline not counted, as nui writes it."""
    return HEAD + b"x" * (size - len(HEAD) - len(TAIL)) + TAIL


def test_request_line_of_64_mib_is_accepted(server):
    answer = server.call(_line_of(MAX_LINE))
    assert answer == {"jsonrpc": "2.0", "id": 5, "result": MAX_LINE - len(HEAD) - len(TAIL)}


def test_longer_request_line_is_refused_then_next_line_answered(server):
    server.send(_line_of(MAX_LINE + 1) + b"\n" + json.dumps(request("echo", id=6)).encode() + b"\n")
    refused = json.loads(server.line())
    assert refused["error"]["code"] == -32600 and str(MAX_LINE) in refused["error"]["message"]
    assert refused["id"] == 5  # nui puts "id" first: recovered from the head of the line
    assert json.loads(server.line())["id"] == 6


def test_small_line_limit():
    server = Server(max_line=100)
    assert server.call(request("echo", {"p": "x" * 30}))["result"] == {"p": "x" * 30}
    server.send(b"[" + b"1," * 200 + b"1]\n")  # no id to recover
    assert server.line() == b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request line longer than 100 bytes: refused","data":{"limit":100}}}\n'
    server.send(b"y" * 101)  # over-long and unterminated at end of input
    rest = server.close()
    assert rest.count(b"\n") == 1 and json.loads(rest)["error"]["code"] == -32600


def test_partial_writes_of_a_raw_stdout():
    class Trickle:
        """An unbuffered stdout that, like a raw pipe, may take only part of a write."""

        def __init__(self, fd: int) -> None:
            self.fd = fd

        def write(self, data) -> int:
            return os.write(self.fd, data[:1000])

        def flush(self) -> None:
            pass

    server_in_fd, to_server_fd = os.pipe()
    from_server_fd, server_out_fd = os.pipe()
    with os.fdopen(to_server_fd, "wb") as to_server:
        to_server.write(json.dumps(request("big", {"n": 50_000})).encode() + b"\n")
    with os.fdopen(server_in_fd, "rb") as server_in:
        serve(METHODS, server_in, Trickle(server_out_fd))
    os.close(server_out_fd)
    with os.fdopen(from_server_fd, "rb") as from_server:
        assert json.loads(from_server.read())["result"] == "x" * 50_000


def test_shutdown_answers_then_stops(server):
    server.send(json.dumps(request("shutdown", id=9)).encode() + b"\n" + json.dumps(request("echo", id=10)).encode() + b"\n")
    assert json.loads(server.line()) == {"jsonrpc": "2.0", "id": 9, "result": {"ok": True}}
    server.thread.join(5)
    assert not server.thread.is_alive()  # returned although stdin is still open
    assert server.close() == b""  # and the request after shutdown got no answer


def test_a_request_arrives_when_it_is_read_not_when_it_is_answered(server):
    sent = time.monotonic()
    server.send(json.dumps(request("slow", {"seconds": 0.5}, id=1)).encode() + b"\n"
                + json.dumps(request("arrival", id=2)).encode() + b"\n")
    slow_done = json.loads(server.line())["result"]
    arrived = json.loads(server.line())["result"]
    assert sent <= arrived < slow_done  # read while the slow one was answered, not after


def test_end_of_input_returns(server):
    server.send(json.dumps(request("echo", id=1)).encode())  # last line without a newline
    assert server.close() == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'


SCRIPT = """
import signal, sys, time
from gitmem.faces.rpc import serve

def slow(params):
    print("started", file=sys.stderr, flush=True)
    time.sleep(0.5)
    return "done"

serve({"slow": slow, "echo": lambda p: p}, sys.stdin.buffer, sys.stdout.buffer,
      stop_signals=(signal.SIGTERM,))
print("finished pending work", file=sys.stderr, flush=True)
"""


@pytest.fixture
def process(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_subprocess_stdout_carries_answers_only_and_exits_0_at_eof(process):
    out, err = process.communicate(b"\n".join(json.dumps(request("echo", {"i": i}, id=i)).encode() for i in range(3)) + b"\n", timeout=10)
    assert process.returncode == 0
    assert out.splitlines() == [b'{"jsonrpc":"2.0","id":%d,"result":{"i":%d}}' % (i, i) for i in range(3)]
    assert b"finished pending work" in err


def test_sigterm_while_idle_stops(process):
    process.stdin.write(json.dumps(request("echo", id=1)).encode() + b"\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=5) == 0
    assert process.stdout.read() == b""
    assert b"finished pending work" in process.stderr.read()


NOTED_ELSEWHERE_SCRIPT = """
import signal, sys, threading, time
from gitmem.faces.rpc import serve

def signal_from_another_thread(params):
    def later():
        time.sleep(0.3)  # the loop is back in its read of the next line
        signal.raise_signal(signal.SIGTERM)  # handled by this thread: the read is not interrupted
    threading.Thread(target=later).start()
    return "armed"

serve({"arm": signal_from_another_thread}, sys.stdin.buffer, sys.stdout.buffer,
      stop_signals=(signal.SIGTERM,))
print("finished pending work", file=sys.stderr, flush=True)
"""


def test_a_stop_signal_that_does_not_interrupt_the_read_still_stops(tmp_path):
    # As when SIGTERM lands while the main thread waits for the interpreter, just before
    # its read of the next line (a hang of gitmem serve found under load).
    script = tmp_path / "server.py"
    script.write_text(NOTED_ELSEWHERE_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        proc.stdin.write(json.dumps(request("arm", id=1)).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["result"] == "armed"
        assert proc.wait(timeout=10) == 0  # stdin still open: only the signal can stop it
        assert b"finished pending work" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_during_a_request_lets_it_finish(process):
    process.stdin.write(json.dumps(request("slow", id=2)).encode() + b"\n")
    process.stdin.flush()
    assert process.stderr.readline() == b"started\n"
    process.send_signal(signal.SIGTERM)
    assert json.loads(process.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": "done"}
    assert process.wait(timeout=5) == 0
    assert b"finished pending work" in process.stderr.read()


def test_the_last_answer_is_written_after_its_log_line_is_flushed():
    events: list[str] = []

    class Recorder(logging.Handler):
        def emit(self, record):
            events.append("log " + record.getMessage().split(" ", 1)[0])

        def flush(self):
            events.append("flush")

    class Out:
        def write(self, data):
            events.append("answer " + json.loads(bytes(data))["result"]["method"])
            return len(data)

        def flush(self):
            pass

    def stop(params):
        raise Shutdown({"method": "stop"})

    log = logging.getLogger("test.rpc.flush")
    log.addHandler(Recorder())
    log.propagate, log.level = False, logging.INFO
    lines = [json.dumps(request(name, id=n)).encode() + b"\n" for n, name in enumerate(("echo", "stop"), 1)]
    serve({"echo": lambda params: {"method": "echo"}, "stop": stop}, io.BytesIO(b"".join(lines)), Out(), log=log)
    assert events == ["answer echo", "log echo", "log stop", "flush", "answer stop"]


def test_object_texts():
    assert object_texts({"m": [b'{"a":1}', memoryview(b"{}")]}, "m") == [b'{"a":1}', memoryview(b"{}")]
    assert object_texts({}, "m", default=[]) == []
    for texts, index in (([b"1"], 0), ([b"{}", b'"x"', b"[]"], 1), ([b"{}", b"null"], 1)):
        with pytest.raises(InvalidParams) as raised:
            object_texts({"m": texts}, "m")
        assert raised.value.data == {"param": "m", "index": index}
