"""Newline-delimited JSON-RPC 2.0 over a pair of byte streams.

`serve` reads one request per line and writes one compact answer line per request
that has an `id`. It knows framing, error codes and size limits, and nothing about
storage: the caller hands it a table of methods.

A method is called with the request's params (a dict, `{}` when absent) and returns a
JSON-serialisable result, inside which a `RawJSON` stands for already-encoded JSON. It
may raise `RpcError` (answered as that error; `InvalidParams` for a bad param, as is
`gitmem.errors.InvalidInput`),
`Shutdown` (answered with its result, then the loop ends) or anything else (answered
as -32603 with a one-line message; the traceback goes to the log). A method marked
with `json_texts(name)` gets its array param `name` as the JSON texts of the items,
undecoded (`parse_json` reads one; `object_texts` checks they are objects).

Lines are read off the input as they come, by a thread of their own, while earlier
requests are answered in turn: `arrival()` tells a method when its request came, so
that how long it waited behind others decides nothing.

Nothing but answer lines is written to stdout, and no request ends the loop except
through `Shutdown`. `serve` returns at end of input, after `Shutdown`, when stdout is
gone, or after a stop signal; the caller then finishes its pending work. A caller
serving on the process's own stdout should first point `sys.stdout` elsewhere (e.g.
`sys.stderr`), so that a stray print() in some method can't corrupt the protocol.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import operator
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, Union, cast

import msgspec

from gitmem.errors import InvalidInput, one_line
from gitmem.faces.lines import RequestLines
from gitmem.records import strictjson

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESPONSE_TOO_LARGE = -32000

MAX_LINE = 64 * 1024 * 1024
"""Longest request line accepted, in bytes, not counting its newline."""
MAX_RESPONSE = 4 * 1024 * 1024
"""Longest answer line written, in bytes, counting its newline (nui's reader limit)."""
"""Bytes of request lines read ahead of the one being answered, at most (then the input
waits in its pipe; a longer line is still read, alone)."""

Method = Callable[[dict], Any]


class RpcError(Exception):
    """An error answered as the JSON-RPC error object `{code, message, data?}`."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The JSON-RPC error object."""
        error = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class InvalidParams(RpcError):
    """-32602: a param is missing or wrong; the message names it."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(INVALID_PARAMS, message, data)


class Shutdown(Exception):
    """Raised by a method to answer with `result` and then end the loop."""

    def __init__(self, result: Any = None) -> None:
        super().__init__("shutdown")
        self.result = result


class RawJSON:
    """One already-encoded JSON value, written into an answer as it is.

    `data` (str, UTF-8 bytes, or a list of UTF-8 pieces that join into it) is not parsed
    again, so it must be valid JSON; it may not contain a line break (compact JSON never
    does). Pieces are copied once, straight into the answer.
    """

    __slots__ = ("pieces",)

    def __init__(self, data: str | bytes | list[bytes]) -> None:
        if isinstance(data, str):
            data = _utf8(data)
        pieces = [data] if isinstance(data, bytes) else data
        if any(b"\n" in piece or b"\r" in piece for piece in pieces):
            raise ValueError("RawJSON must not contain a line break")
        self.pieces = pieces


_REQUIRED: Any = object()
_TYPE_NAMES = {
    type(None): "null",
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "an object",
}


def json_texts(name: str) -> Callable[[Method], Method]:
    """Mark a method that takes its array param `name` as a list of JSON texts (bytes-like),
    one per item, instead of decoded values: an array that the method mostly keeps as
    it is (a session's messages, sent whole on every write) then costs a scan instead of
    building every value. `parse_json` reads a text as the request would have been read.

        @json_texts("messages")
        def session_write(params): ...
    """
    def mark(method: Method) -> Method:
        vars(method)["json_texts"] = name  # a function's own attribute (its type has none)
        return method
    return mark


def uncapped(method: Method) -> Method:
    """Mark a method whose answers no line-limited reader reads (kaboo's ``threads.*``;
    nui never calls them): `serve`'s `max_response` does not apply to them."""
    vars(method)["uncapped"] = True  # a function's own attribute (its type has none)
    return method


def object_texts(params: Mapping[str, Any], name: str, default: Any = _REQUIRED) -> Sequence[Any]:
    """`params[name]` of a `json_texts` method: the texts of an array of JSON objects,
    checked by their first byte (a text has no space around it: an object's starts with
    a brace). Raises `InvalidParams` naming the param and the first item that is not one;
    `default` as for `param`."""
    texts = param(params, name, list, default)
    # typeshed's memoryview is generic in a way map() cannot infer from the class itself
    firsts = bytes(map(_first_byte, map(memoryview, texts)))  # type: ignore[arg-type]
    if firsts.count(b"{") != len(texts):
        raise not_an_object(name, next(i for i, byte in enumerate(firsts) if byte != _BRACE))
    return texts


def not_an_object(name: str, index: int) -> InvalidParams:
    """-32602 for item `index` of array param `name`, which must hold JSON objects."""
    return InvalidParams(f'param "{name}" must hold objects; item {index} is not one',
                         {"param": name, "index": index})


_first_byte = operator.itemgetter(0)
_BRACE = ord("{")


def id_param(params: Mapping[str, Any], name: str) -> str:
    """`params[name]`: an id, a string that is not empty or only whitespace (the stores
    refuse one with the words of their Python API; here the message names the param)."""
    from gitmem.records.ids import EmptyId, check
    value = param(params, name)
    try:
        return check(value, f'param "{name}"')
    except EmptyId as error:
        raise InvalidParams(str(error), {"param": name}) from None


def param(params: Mapping[str, Any], name: str, kind: type = str, default: Any = _REQUIRED) -> Any:
    """`params[name]`, checked to be a `kind` (str, list, dict or bool).

    A missing or null param gives `default`; without a default it is an error.
    Raises `InvalidParams` whose message and data name the param.
    """
    value = params.get(name)
    if value is None and default is not _REQUIRED:
        return default
    if name not in params:
        raise InvalidParams(f'missing param "{name}"', {"param": name})
    if not isinstance(value, kind):
        actual = _TYPE_NAMES.get(type(value), type(value).__name__)
        raise InvalidParams(f'param "{name}" must be {_TYPE_NAMES[kind]}, not {actual}', {"param": name})
    return value


_answering = threading.local()


def arrival() -> float:
    """When the request being answered was read off the input (``time.monotonic()``);
    now, outside a request (a method called directly)."""
    return getattr(_answering, "arrived", None) or time.monotonic()


def serve(
    methods: Mapping[str, Method],
    stdin: BinaryIO,
    stdout: BinaryIO,
    *,
    log: logging.Logger | None = None,
    log_context: Callable[[dict], str] | None = None,
    max_line: int = MAX_LINE,
    max_response: int = MAX_RESPONSE,
    stop_signals: Sequence[int] = (),
    after_first_answer: Callable[[], None] | None = None,
) -> None:
    """Answer the requests read from `stdin` on `stdout` (see the module doc).

    `log` (default: this module's logger) gets one INFO line per request: method, id,
    outcome, duration, sizes, and `log_context(params)` if given (keep it free of
    content); tracebacks go to it at ERROR. A request line longer than `max_line`
    bytes is skipped unread and answered -32600; an answer longer than `max_response`
    bytes is replaced by a -32000 error, unless its method is marked `uncapped`. For each signal in `stop_signals` (only
    possible from the main thread) a handler is installed for the duration of the
    call: the request in progress is finished and answered, then `serve` returns. The
    last answer (to `Shutdown`, or after a stop signal) is written only once its log
    line is and every handler of `log` is flushed: the caller may be killed right after.
    `after_first_answer` is called once the first request is answered (work that can wait
    for it, off the way of the caller's first request).
    """
    loop = _Loop(methods, stdout, log or logging.getLogger(__name__), log_context, max_line, max_response,
                 after_first_answer)
    with _stopped_by(stop_signals, loop):
        loop.run(stdin)
    if loop.signalled is not None:
        loop.log.info("stopped by %s", signal.Signals(loop.signalled).name)
        _flush(loop.log)


class _Call:
    """One request line as far as it was understood, and the reply to it
    (``{"result": ...}`` or ``{"error": ...}``)."""

    __slots__ = ("id", "method", "params", "notification", "reply")

    def __init__(self, id: Any = None, reply: dict[str, Any] | None = None) -> None:
        self.id, self.notification = id, False
        self.method: Any = None  # what the request holds: checked as it is understood
        self.params: Any = None
        self.reply = {} if reply is None else reply


class _Loop:
    def __init__(self, methods, stdout, log, log_context, max_line, max_response, after_first_answer) -> None:
        self.methods = methods
        self.after_first_answer = after_first_answer
        self.stdout = stdout
        self.log = log
        self.log_context = log_context
        self.max_line = max_line
        self.max_response = max_response
        self.stopping = False
        self.signalled: int | None = None  # the stop signal received
        self.idle = False  # blocked on input, where a stop signal may interrupt

    def run(self, stdin: BinaryIO) -> None:
        arrivals = RequestLines(stdin, self.max_line)
        arrivals.start()
        try:
            while not self.stopping:
                self.idle = True
                line, too_long, arrived = arrivals.next()
                self.idle = False
                if not line:
                    return
                started = time.perf_counter()
                _answering.arrived = arrived
                if too_long:
                    self.respond(_refusal(line, self.max_line), started, len(line))
                elif not line.isspace():
                    self.respond(self.dispatch(line), started, len(line))
                else:
                    continue
                if self.after_first_answer is not None:
                    first, self.after_first_answer = self.after_first_answer, None
                    first()
        finally:
            _answering.arrived = None
            arrivals.stop()

    def dispatch(self, line: bytes) -> _Call:
        call = _Call()
        try:
            request = _decode_request(line, self.methods)
            call.id = _id_of(request)
            _check_request(request)
            call.notification = "id" not in request
            call.method, call.params = request["method"], request.get("params", {})
            if not isinstance(call.params, dict):
                raise InvalidParams("params must be an object", {"param": "params"})
            method = self.methods.get(call.method)
            if method is None:
                raise RpcError(METHOD_NOT_FOUND, f"method not found: {_brief(call.method)}")
            call.reply = {"result": method(call.params)}
        except Shutdown as shutdown:
            self.stopping = True
            call.reply = {"result": shutdown.result}
        except InvalidInput as error:  # an empty id, a non-finite number: the caller's to fix
            call.reply = {"error": InvalidParams(str(error)).to_json()}
        except RpcError as error:
            call.reply = {"error": error.to_json()}
            if error.code == PARSE_ERROR:  # found late in a json_texts item: still the line's
                call.id, call.notification = None, False
        except RecursionError:  # JSON that parses can still nest too deeply to be handled
            call.reply = {"error": InvalidParams("params nest too deeply").to_json()}
        except Exception as error:
            self.log.error("%s id=%s raised", _brief(call.method), _brief(call.id), exc_info=True)
            call.reply = {"error": {"code": INTERNAL_ERROR, "message": _named(error)}}
        if "error" in call.reply and call.reply["error"]["code"] != PARSE_ERROR \
                and _texts_param(self.methods, call.method):
            # The json_texts items were only scanned: a line that is not JSON after all is
            # a parse error, whatever the method found wrong first (a bad threadId).
            try:
                parse_json(line)
            except RpcError as error:
                call.id, call.notification, call.reply = None, False, {"error": error.to_json()}
        return call

    def respond(self, call: _Call, started: float, size_in: int) -> None:
        data = b"" if call.notification else self.encode(call)
        last = self.stopping  # nui kills the process right after a shutdown answer
        if last:
            self.log_call(call, started, size_in, len(data))
            _flush(self.log)
        if data:
            self.write(data)
        if not last:
            self.log_call(call, started, size_in, len(data))

    def encode(self, call: _Call) -> bytes:
        """The answer line for `call`, its reply replaced by an error if it can't be sent."""
        try:
            data = _encode({"jsonrpc": "2.0", "id": call.id, **call.reply}) + b"\n"
        except (TypeError, ValueError, RecursionError) as error:
            self.log.error("%s id=%s: result is not JSON", _brief(call.method), _brief(call.id),
                           exc_info=True)
            message = "result is not JSON: " + _named(error)
            call.reply = {"error": {"code": INTERNAL_ERROR, "message": message}}
            data = _encode({"jsonrpc": "2.0", "id": call.id, **call.reply}) + b"\n"
        if len(data) > self.max_response and not _is_uncapped(self.methods, call.method):
            call.reply = {
                "error": {
                    "code": RESPONSE_TOO_LARGE,
                    "message": f"response too large: {len(data)} bytes, the limit is {self.max_response}",
                    "data": {"size": len(data), "limit": self.max_response},
                }
            }
            data = _encode({"jsonrpc": "2.0", "id": call.id, **call.reply}) + b"\n"
        return data

    def write(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:  # a raw (unbuffered) stream may take only part of it
                view = view[self.stdout.write(view):]
            self.stdout.flush()
        except (OSError, ValueError):  # the reader is gone (broken pipe, closed file)
            self.log.warning("stdout is closed: stopping", exc_info=True)
            self.stopping = True

    def log_call(self, call: _Call, started: float, size_in: int, size_out: int) -> None:
        if not self.log.isEnabledFor(logging.INFO):
            return
        error = call.reply.get("error")
        outcome = "ok" if error is None else f"error {error['code']} {_brief(error['message'], 200)}"
        context = ""
        if self.log_context is not None and isinstance(call.params, dict):
            try:
                context = " " + self.log_context(call.params)
            except Exception:
                self.log.error("log_context raised", exc_info=True)
        self.log.info(
            "%s id=%s %.1fms in=%dB out=%dB%s %s",
            _brief(call.method),
            _brief(call.id),
            (time.perf_counter() - started) * 1000,
            size_in,
            size_out,
            context,
            outcome,
        )


NUDGE_EVERY = 0.05  # seconds between repeats of a stop signal the blocking read missed


class _Stop(BaseException):
    """Raised by the stop-signal handler to break out of a blocking read."""


@contextlib.contextmanager
def _stopped_by(signals: Sequence[int], loop: _Loop) -> Iterator[None]:
    def handler(signum, frame):
        loop.stopping = True
        loop.signalled = signum
        if loop.idle:  # nothing in progress: interrupt the read
            loop.idle = False
            raise _Stop

    previous = {signum: signal.signal(signum, handler) for signum in signals}
    nudger = _Nudger(signals) if signals else None
    try:
        yield
    except _Stop:
        pass
    finally:
        if nudger is not None:
            nudger.stop()
        for signum, old in previous.items():
            signal.signal(signum, old)


class _Nudger:
    """Makes sure a stop signal ends a blocking read. One that lands after the loop last
    looked for signals and before its read began (the main thread waiting for the GIL,
    say) is only noted by Python, and the read would wait for the next line: a thread
    woken through ``signal.set_wakeup_fd`` sends the signal again to the main thread
    every NUDGE_EVERY seconds until the loop has stopped."""

    def __init__(self, signals: Sequence[int]):
        self._signals = set(signals)
        self._main = cast(int, threading.main_thread().ident)  # a started thread's: never None
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gitmem-signals", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                woken = os.read(self._read, 1)
            except OSError:
                return
            if not woken or self._done.is_set():
                return
            if woken[0] in self._signals:
                while not self._done.wait(NUDGE_EVERY):
                    signal.pthread_kill(self._main, woken[0])
                return

    def stop(self) -> None:
        self._done.set()
        signal.set_wakeup_fd(self._previous)
        os.close(self._write)  # the thread's read ends
        self._thread.join(NUDGE_EVERY * 10)
        os.close(self._read)


def _flush(log: logging.Logger) -> None:
    """Flush every handler a record of `log` goes to: its lines are written out now."""
    logger: logging.Logger | None = log
    while logger is not None:
        for handler in logger.handlers:
            handler.flush()
        logger = logger.parent if logger.propagate else None


# nui writes requests with sorted keys, so "id" comes first: an over-long request from
# nui still gets its error under its own id, instead of leaving the call hanging.
_LEADING_ID = re.compile(rb'\s*\{\s*"id"\s*:\s*(-?(?:0|[1-9][0-9]{0,30}))\s*,')


def _refusal(line: bytes, max_line: int) -> _Call:
    match = _LEADING_ID.match(line)
    error = {
        "code": INVALID_REQUEST,
        "message": f"request line longer than {max_line} bytes: refused",
        "data": {"limit": max_line},
    }
    return _Call(id=int(match[1]) if match else None, reply={"error": error})


_fast_decode = msgspec.json.Decoder().decode


def parse_json(data: bytes) -> Any:
    """The JSON value in `data` (bytes-like), as the json module reads it, but refusing
    NaN, Infinity and numbers beyond a float's range; raises `RpcError` (-32700).

    msgspec decodes twice as fast and gives the same values; what it refuses (lone
    surrogates, numbers out of a float's range, errors) goes to the json module, which
    decides and words the error.
    """
    try:
        return _fast_decode(data)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        return strictjson.loads(str(data, "utf-8"))
    except UnicodeDecodeError as error:
        raise RpcError(PARSE_ERROR, f"parse error: invalid UTF-8 at byte {error.start}") from None
    except strictjson.NonFiniteNumber as error:  # the words every entry uses
        raise RpcError(PARSE_ERROR, f"parse error: {error}") from None
    except (ValueError, RecursionError) as error:
        raise RpcError(PARSE_ERROR, f"parse error: {_named(error)}") from None


# A param as msgspec reads it in one pass over the line: an array as its items' texts.
_Param = Union[list[msgspec.Raw], dict[str, Any], str, int, float, bool, None]


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """A request's members. Members it does not know would be skipped unread: a request
    with any goes to the json module."""

    jsonrpc: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    params: dict[str, _Param] = {}


_decode_envelope = msgspec.json.Decoder(_Envelope).decode


def _decode_request(line: bytes, methods: Mapping[str, Method]) -> Any:
    """The request in `line` (see `parse_json`), with the param named by its method's
    `json_texts` mark, if an array, as a list of JSON texts. Those are scanned, not
    read: a text the method reads with `parse_json` may still prove not to be JSON
    (invalid UTF-8, a number beyond a float), a parse error of the line all the same."""
    try:
        envelope = _decode_envelope(line)
        texts = _texts_param(methods, envelope.method)
        params = envelope.params
        for name, value in params.items():
            if isinstance(value, list) and name != texts:
                params[name] = [_fast_decode(item) for item in value]
        request = {name: value for name in ("jsonrpc", "id", "method")
                   if (value := getattr(envelope, name)) is not msgspec.UNSET}
        request["params"] = params
        return request
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        pass
    # The json module decides and words the error; or the request holds what only it
    # reads (a lone surrogate), and the texts are made from the values it read.
    request = parse_json(line)
    if isinstance(request, dict) and isinstance(request.get("params"), dict):
        params = request["params"]
        texts = _texts_param(methods, request.get("method"))
        if isinstance(params.get(texts), list):
            params[texts] = [json.dumps(value).encode() for value in params[texts]]
    return request


def _texts_param(methods: Mapping[str, Method], name: Any) -> str | None:
    method = methods.get(name) if isinstance(name, str) else None
    return getattr(method, "json_texts", None)


def _is_uncapped(methods: Mapping[str, Method], name: Any) -> bool:
    method = methods.get(name) if isinstance(name, str) else None
    return getattr(method, "uncapped", False)


def _is_id(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _id_of(request: Any) -> Any:
    """The request's id if it has a valid one, else None (answered as null)."""
    if isinstance(request, dict) and _is_id(request.get("id")):
        return request.get("id")
    return None


def _check_request(request: Any) -> None:
    if isinstance(request, list):
        problem = "batches are not supported"
    elif not isinstance(request, dict):
        problem = "not a JSON object"
    elif request.get("jsonrpc") != "2.0":
        problem = '"jsonrpc" must be "2.0"'
    elif not isinstance(request.get("method"), str):
        problem = '"method" must be a string'
    elif not _is_id(request.get("id")):
        problem = '"id" must be a string, a number or null'
    else:
        return
    raise RpcError(INVALID_REQUEST, "invalid request: " + problem)


# An unguessable string stands for each RawJSON while the rest is encoded.
_PLACEHOLDER = f"\x00RawJSON {os.urandom(16).hex()}\x00"
_PLACEHOLDER_JSON = json.dumps(_PLACEHOLDER).encode()
# Legal inside JSON strings, but line breaks to JavaScript and to str.splitlines.
_LINE_SEPARATORS = (("\u2028".encode(), b"\\u2028"), ("\u2029".encode(), b"\\u2029"))


def _encode(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON without any line break, RawJSON spliced in."""
    raw: list[list[bytes]] = []

    def default(obj: Any) -> Any:
        if isinstance(obj, RawJSON):
            raw.append(obj.pieces)
            return _PLACEHOLDER
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable")

    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=default)
    data = _utf8(text)
    if raw:
        around = data.split(_PLACEHOLDER_JSON)
        pieces = [around[0]]
        for inside, after in zip(raw, around[1:], strict=True):
            pieces += inside
            pieces.append(after)
        data = b"".join(pieces)
    if b"\xe2" in data:  # the lead byte of both separators; one quick scan mostly spares two
        for separator, escaped in _LINE_SEPARATORS:
            data = data.replace(separator, escaped)
    return data


def _utf8(text: str) -> bytes:
    # A lone surrogate (from a "\ud800" escape in a request) has no UTF-8 form. It can
    # only sit inside a JSON string, where backslashreplace writes the same escape back.
    return text.encode("utf-8", "backslashreplace")


def _named(error: BaseException) -> str:
    """``error`` in one line led by its class's name (what its traceback in the log is
    found by), at most 500 characters."""
    return f"{type(error).__name__}: {one_line(error)}"[:500]


def _brief(value: Any, limit: int = 80) -> str:
    """`value` as a short printable line, for logs and messages."""
    text = value if isinstance(value, str) and value.isprintable() else json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."
