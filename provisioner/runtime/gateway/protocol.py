"""The gateway's wire format as pure functions: the request a call sends, and what the answer
means — a ``ToolResult`` or one outcome exception (GW-3, GW-5, GW-6).

No I/O: nothing here touches a socket, a file or an httpx object. The transport
(``provisioner.runtime.gateway.transport``) reads an answer's status, headers and bytes and
hands them here, and gets back the JSON-RPC result or the one exception that names what
happened (the tree is in ``provisioner.runtime.gateway.errors``). The only functions that
await move a long JSON decode to a worker thread, so that the event loop is not held by it.

The order of the checks is the contract's table:

1. HTTP status: 413 → ``BodyTooLarge``; 429, 502, 503 → ``MayPass``; 504 →
   ``GatewayCallTimeout``. Any other status than 200 is read for a JSON-RPC error and
   otherwise is a ``BrokenAnswer``.
2. A JSON-RPC error: the message "MCP server timed out" → ``GatewayCallTimeout`` whatever
   its code; -32001 → ``PolicyRefused``; -32002 → ``MayPass``; -32000 → ``CodedFault``
   (``code`` from ``error.data.code``) or ``InternalFault`` (no code); -32601, -32602 and
   any other code → ``BrokenAnswer``.
3. A result: ``isError: true`` → ``ToolRefused``; otherwise a ``ToolResult``.

The answer is held to the letter of JSON-RPC and MCP, since a gateway may answer anything: its
``id`` is the integer sent (not ``1.0``, not ``true``; an error may carry ``null`` when the
request could not be read), it has ``result`` or ``error`` but not both, and a result has a
``content`` list of objects. Anything else is a ``BrokenAnswer``.

A body comes either as one JSON document or as an event stream (``EventStreamDecoder``) whose
first JSON-RPC response is the answer. JSON too deep for Python's decoder is a broken answer
like any other (``NotJson``), and ``nested_deeper_than`` lets whoever parses JSON from someone
else refuse it before parsing.
"""

from __future__ import annotations

import asyncio
import codecs
import itertools
import json
import json.scanner
import operator
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, TypeGuard

from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CodedFault,
    GatewayCallTimeout,
    GatewayError,
    InternalFault,
    MayPass,
    PolicyRefused,
    ToolRefused,
)

MCP_PROTOCOL_VERSION = "2025-06-18"  # GW-3
POLICY_REFUSED_CODE = -32001  # GW-5 (contracts/gateway.md)
MAY_PASS_CODE = -32002  # GW-5
SERVER_FAULT_CODE = -32000  # GW-5
CONTRACT_ERROR_CODES = frozenset({-32601, -32602})  # GW-5: unknown method, bad arguments
GATEWAY_CALL_TIMEOUT_MESSAGE = "MCP server timed out"  # GW-5: the gateway's call limit
BODY_TOO_LARGE_STATUS = 413  # GW-5
MAY_PASS_STATUSES = frozenset({429, 502, 503})  # GW-5
GATEWAY_TIMEOUT_STATUS = 504  # GW-5
FAULT_CODE_MAX_CHARS = 128  # our choice: a fault code is a short word
RETRY_AFTER_CAP_S = 86_400.0  # our choice: a day; every longer hint means "not today"
# Our choice: JSON up to this size is decoded on the event loop (about 2 ms); larger JSON in a
# worker thread (``decode_json_off_loop``).
INLINE_DECODE_MAX_CHARS = 256 * 1024

JSONRPC_VERSION = "2.0"
DEFAULT_EVENT_TYPE = "message"

REQUEST_HEADERS: Mapping[str, str] = {  # GW-3 (contracts/gateway.md)
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": MCP_PROTOCOL_VERSION,
}


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer.

    ``data`` is the result's ``structuredContent`` when present, else the first text block
    parsed as JSON, else None (a tool that answered plain text). ``text`` is the first text
    block, or ``""`` when there is none.
    """

    data: Any
    text: str


# --- JSON ----------------------------------------------------------------------------------


class NotJson(BrokenAnswer, ValueError):
    """A body that is not JSON, or JSON nested too deep for the decoder: a broken answer."""


def decode_json(text: bytes | str) -> Any:
    """``json.loads`` that fails only with ``NotJson``, whatever the bytes.

    Python's decoder recurses once per nesting level, so a hostile body of many thousand
    brackets raises ``RecursionError``; that is a broken answer like any other, not a crash.
    """
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise NotJson(str(error)) from error


async def decode_json_off_loop(text: bytes | str) -> Any:
    """``decode_json`` that never holds the event loop for long, whatever the size of ``text``.

    Small JSON is decoded at once. Larger JSON is decoded in a worker thread, and by the
    decoder's pure-Python scanner: the C scanner would hold the interpreter's lock for the
    whole parse (about 50 ms for 6 MB, however many threads there are), while Python code
    lets the interpreter hand the loop's thread its turn every few milliseconds. The value is
    the same as ``json.loads`` gives; failures are ``NotJson`` alike.
    """
    if len(text) <= INLINE_DECODE_MAX_CHARS:
        return decode_json(text)
    return await asyncio.to_thread(_decode_json_yielding, text)


def _decode_json_yielding(text: bytes | str) -> Any:
    """``json.loads(text)`` by the pure-Python scanner (see ``decode_json_off_loop``)."""
    if isinstance(text, str) and text.startswith("\ufeff"):
        raise NotJson("Unexpected UTF-8 BOM (decode using utf-8-sig)")  # as json.loads says
    try:
        if isinstance(text, bytes | bytearray):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        decoder = json.JSONDecoder()
        # Both names are json's own, left out of its type stubs.
        decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
        return decoder.decode(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise NotJson(str(error)) from error


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def nested_deeper_than(text: bytes, limit: int) -> bool:
    """Whether the JSON in ``text`` opens more than ``limit`` arrays or objects at once.

    Python's JSON decoder recurses once per array or object it opens, so a hostile text of
    many thousand brackets exhausts the interpreter's stack. Whoever parses JSON from someone
    else — an answer from a gateway, a request to the dev gateway, a line of ``nerve memory
    import`` — can ask this first and refuse the text in one line instead.

    One linear pass without recursion, all of it in C: strings are cut out (a bracket in a
    string is text), every other byte but a bracket is dropped, and the running depth is
    summed until it first passes ``limit``. Exact for UTF-8, where no byte of a multi-byte
    character looks like a quote, a backslash or a bracket; for anything else it may misjudge,
    which the decoder's own refusal then settles.
    """
    brackets = _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKET)
    steps = itertools.accumulate(brackets.translate(_BRACKET_STEP))  # twice the opens so far
    depths = map(operator.sub, steps, itertools.count(1))  # opens minus closes
    return next(filter(limit.__lt__, depths), None) is not None


# --- the request ---------------------------------------------------------------------------


def request_body(request_id: int, method: str, params: Mapping[str, Any]) -> bytes:
    """The JSON-RPC request (``tools/call``, ``tools/list``), compact UTF-8 JSON.

    Arguments that JSON cannot carry (NaN, infinities, objects) raise ``ValueError`` or
    ``TypeError``: a caller's bug, not a gateway outcome.
    """
    request = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": dict(params)}
    return _REQUEST_ENCODER.encode(request).encode("utf-8")


# Compact UTF-8 JSON, refusing NaN and infinities; built once, not on every call.
_REQUEST_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# --- the status and its headers ------------------------------------------------------------


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The answer's ``Retry-After`` in seconds (GW-6), or None without a usable one.

    ``Date`` and the wall clock matter only to a ``Retry-After`` that is there, so they are
    read only then: most answers carry none, and every call reads this.
    """
    if "retry-after" not in headers:
        return None
    return parse_retry_after(headers["retry-after"], date=headers.get("date"), now=time.time())


def parse_retry_after(value: str | None, *, date: str | None, now: float) -> float | None:
    """Seconds to wait according to a ``Retry-After`` ``value``: delay-seconds or an HTTP
    date; None when there is no usable hint (GW-6).

    An HTTP date is measured against the answer's own ``Date`` header (``date``) when it has
    one, so the wait is what the gateway meant even when the two machines' clocks disagree;
    without it, against ``now``, the wall-clock time in seconds since the epoch. A date in the
    past means "now" (0 s). A value that is neither form is ignored (None): a malformed hint
    must not fail an otherwise clear answer. A hint longer than ``RETRY_AFTER_CAP_S`` is read
    as that cap, so a value of hundreds of digits stays an ordinary number instead of
    overflowing a float or Python's integer-parsing limit.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return _capped_seconds(text)
    when = _http_date(text)
    if when is None:
        return None
    reference = _http_date(date) if date is not None else None
    base = reference if reference is not None else now
    return min(max(0.0, when - base), RETRY_AFTER_CAP_S)


_CAP_DIGITS = len(str(int(RETRY_AFTER_CAP_S)))


def _capped_seconds(digits: str) -> float:
    """ASCII digits as seconds, at most ``RETRY_AFTER_CAP_S``; only a few digits are parsed."""
    significant = digits.lstrip("0")
    if len(significant) > _CAP_DIGITS:
        return RETRY_AFTER_CAP_S
    return min(float(int(significant or "0")), RETRY_AFTER_CAP_S)


def _http_date(text: str) -> float | None:
    """Seconds since the epoch for an HTTP date, or None when ``text`` is not one."""
    try:
        parsed = parsedate_to_datetime(text)
        if parsed is None or parsed.tzinfo is None:
            return None
        return parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def error_for_status(status: int, *, retry_after_s: float | None) -> GatewayError | None:
    """The outcome an HTTP status alone decides, or None to read the body."""
    if status == BODY_TOO_LARGE_STATUS:
        return BodyTooLarge("the gateway refused the request body as too large (HTTP 413)")
    if status in MAY_PASS_STATUSES:
        return MayPass(f"the gateway answered HTTP {status}", retry_after_s=retry_after_s)
    if status == GATEWAY_TIMEOUT_STATUS:
        return GatewayCallTimeout("the gateway gave up on the upstream call (HTTP 504)")
    return None


def error_for_other_status(
    status: int, body: bytes | None, request_id: int, *, retry_after_s: float | None
) -> GatewayError:
    """The outcome of a status other than 200 that the table does not name: the JSON-RPC
    error its ``body`` carries, else ``BrokenAnswer``. ``body`` is None when it was too long
    to read."""
    try:
        message = decode_json(body) if body is not None else None
    except NotJson:
        message = None
    if _is_rpc_error(message):
        return error_of_response(message, request_id, retry_after_s=retry_after_s)
    return BrokenAnswer(f"unexpected HTTP status {status}")


# --- the JSON-RPC message ------------------------------------------------------------------


def outcome_of_message(
    message: Any, request_id: int, *, retry_after_s: float | None = None
) -> ToolResult:
    """The ``ToolResult`` in a JSON-RPC response to ``request_id``, or the exception it means.

    ``retry_after_s`` is the answer's ``Retry-After``, passed on to a -32002 ``MayPass``.
    """
    return tool_result(result_of_message(message, request_id, retry_after_s=retry_after_s))


def result_of_message(message: Any, request_id: int, *, retry_after_s: float | None = None) -> Any:
    """The ``result`` of a JSON-RPC response to ``request_id``, as sent, for any method; the
    exception an error means, as ``outcome_of_message`` raises it."""
    if not isinstance(message, dict) or message.get("jsonrpc") != JSONRPC_VERSION:
        raise BrokenAnswer("the answer is not a JSON-RPC 2.0 message")
    if "error" in message:
        raise error_of_response(message, request_id, retry_after_s=retry_after_s)
    if not _is_id(message.get("id"), request_id):
        raise BrokenAnswer("the answer is for another request id")
    if "result" not in message:
        raise BrokenAnswer("the answer has neither a result nor an error")
    return message["result"]


def error_of_response(
    message: dict[str, Any], request_id: int, *, retry_after_s: float | None = None
) -> GatewayError:
    """The outcome of a JSON-RPC error response to ``request_id`` (any HTTP status).

    An error for another request, or one that also carries a ``result``, is a ``BrokenAnswer``.
    """
    if "result" in message:
        return BrokenAnswer("the answer carries both a result and an error")
    request = message.get("id")
    if request is not None and not _is_id(request, request_id):
        return BrokenAnswer("the error answers another request id")
    return error_for_rpc_error(message["error"], retry_after_s=retry_after_s)


def _is_id(value: Any, request_id: int) -> bool:
    """Exactly the integer ``request_id``: JSON's ``1.0`` and ``true`` are other values."""
    return type(value) is int and value == request_id


def _is_rpc_error(message: Any) -> TypeGuard[dict[str, Any]]:
    """Whether ``message`` looks like a JSON-RPC error response (for non-200 bodies)."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == JSONRPC_VERSION
        and isinstance(message.get("error"), dict)
    )


def error_for_rpc_error(error: Any, *, retry_after_s: float | None = None) -> GatewayError:
    """The outcome exception for a JSON-RPC ``error`` object."""
    if not isinstance(error, dict):
        return BrokenAnswer("the JSON-RPC error is not an object")
    code, text = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(text, str):
        return BrokenAnswer("the JSON-RPC error has no integer code or no message")
    if text.strip() == GATEWAY_CALL_TIMEOUT_MESSAGE:
        return GatewayCallTimeout(f"the gateway's call limit passed: {text}")
    if code == POLICY_REFUSED_CODE:
        return PolicyRefused(text)
    if code == MAY_PASS_CODE:
        return MayPass(text, retry_after_s=retry_after_s)
    if code == SERVER_FAULT_CODE:
        fault_code = _fault_code(error.get("data"))
        if fault_code is None:
            return InternalFault(text)
        return CodedFault(text, code=fault_code)
    if code in CONTRACT_ERROR_CODES:
        return BrokenAnswer(f"the call broke the contract (JSON-RPC {code}): {text}")
    return BrokenAnswer(f"unexpected JSON-RPC error {code}: {text}")


def _fault_code(data: Any) -> str | None:
    """Loom's ``error.data.code``: a non-empty short string, else None (an uncoded fault)."""
    if not isinstance(data, dict):
        return None
    code = data.get("code")
    if isinstance(code, str) and 0 < len(code) <= FAULT_CODE_MAX_CHARS and code.isprintable():
        return code
    return None


# --- the result ----------------------------------------------------------------------------


def tool_result(result: Any) -> ToolResult:
    """A ``ToolResult`` from a ``tools/call`` result; ``ToolRefused`` when ``isError`` is true."""
    if not isinstance(result, dict):
        raise BrokenAnswer("the result is not an object")
    content = result.get("content")
    is_error = result.get("isError", False)
    structured = result.get("structuredContent")
    if not isinstance(content, list) or not isinstance(is_error, bool):
        raise BrokenAnswer("the result has no content list, or isError is not a boolean")
    if not all(isinstance(block, dict) for block in content):
        raise BrokenAnswer("the result's content holds a block that is not an object")
    if structured is not None and not isinstance(structured, dict):
        raise BrokenAnswer("the result's structuredContent is not an object")
    texts = [block["text"] for block in content if _is_text_block(block)]
    if is_error:
        raise ToolRefused(" ".join(texts))
    first = texts[0] if texts else ""
    data = structured if structured is not None else _json_or_none(first)
    return ToolResult(data=data, text=first)


async def with_long_text_decoded(message: Any) -> Any:
    """``message``, with a long JSON text of its result decoded off the loop beforehand.

    A result without ``structuredContent`` is read from its first text block, decoded as JSON
    by ``tool_result`` there and then, on the loop. For a long text that would hold the loop
    as a long body would, so that text is decoded here the way a body is
    (``decode_json_off_loop``) and, when it is an object, handed on as the result's
    ``structuredContent``: what ``tool_result`` makes of the result is the same
    ``ToolResult``. Anything else — a short text, a text that is not a JSON object, a result of
    another shape — is left for ``tool_result`` to judge as it is.
    """
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or result.get("structuredContent") is not None:
        return message
    content = result.get("content")
    if not isinstance(content, list):
        return message
    first = next((block["text"] for block in content if _is_text_block(block)), None)
    if first is None or len(first) <= INLINE_DECODE_MAX_CHARS:
        return message
    try:
        data = await decode_json_off_loop(first)
    except NotJson:
        return message
    if not isinstance(data, dict):
        return message
    return {**message, "result": {**result, "structuredContent": data}}


def listed_tools(result: Any) -> list[dict[str, Any]]:
    """The tools of a ``tools/list`` result, each ``{"name", "inputSchema", …}`` as sent;
    ``BrokenAnswer`` for a result without a list of named tools with schema objects."""
    tools = result.get("tools") if isinstance(result, dict) else None
    if not isinstance(tools, list) or not all(_is_listed_tool(tool) for tool in tools):
        raise BrokenAnswer("the tools/list result has no list of named tools with schemas")
    return tools


def _is_listed_tool(tool: Any) -> bool:
    return (
        isinstance(tool, dict)
        and isinstance(tool.get("name"), str)
        and isinstance(tool.get("inputSchema"), dict)
    )


def _is_text_block(block: Any) -> bool:
    """A ``{"type": "text", "text": …}`` content block: what a result's text is read from."""
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _json_or_none(text: str) -> Any:
    if not text:
        return None
    try:
        return decode_json(text)
    except NotJson:
        return None


# --- event streams -------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSentEvent:
    """One dispatched event: its type (``message`` unless named), its data, its last id."""

    event: str
    data: str
    id: str | None = None


class EventStreamDecoder:
    """Turns chunks of a ``text/event-stream`` body into ``ServerSentEvent`` objects, in order.

    The gateway may answer a ``tools/call`` with an event stream instead of one JSON body: zero
    or more notifications, keep-alive comments (``: ping``), then the JSON-RPC response as a
    ``message`` event. Bytes arrive in arbitrary chunks, so the decoder keeps whatever is
    unfinished between ``feed`` calls — a UTF-8 sequence, a line, whether the last chunk ended
    in a CR whose LF may come next — and hands out each event once its blank line has arrived.

    It follows the HTML living standard's parsing rules: lines end in CR, LF or CRLF; a line
    starting with ``:`` is a comment; ``data`` lines of one event join with LF; an event with
    no data is not dispatched; an unfinished event at the end of the stream is dropped. A body
    that is not UTF-8 raises ``ValueError``.

    The work is linear in the bytes fed: only each new chunk is searched for line breaks, and
    an unfinished line is kept as a list of pieces, joined once when its line break arrives.
    A CR ends its line at once; an LF right after it (perhaps in the next chunk) is skipped.
    """

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._pieces: list[str] = []
        self._at_start = True
        self._after_cr = False
        self._event_type = ""
        self._data: list[str] = []
        self._last_id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The events completed by ``chunk``; raises ``ValueError`` on bytes that are not UTF-8."""
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as error:
            raise ValueError(f"event stream is not UTF-8: {error.reason}") from None
        if self._at_start and text:
            text = text.removeprefix("\ufeff")
            self._at_start = False
        return self._take_text(text)

    def close(self) -> list[ServerSentEvent]:
        """The stream ended: an unfinished line and event are dropped."""
        try:
            self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as error:
            raise ValueError(f"event stream ends inside a UTF-8 sequence: {error.reason}") from None
        self._pieces, self._data, self._event_type = [], [], ""
        return []

    def _take_text(self, text: str) -> list[ServerSentEvent]:
        """The events ``text`` completes; its lines are cut by ``str`` methods, not a regex
        (a recall's answer is one long data line, REL-3)."""
        after_cr = self._after_cr
        if text:
            self._after_cr = text.endswith("\r")
        if after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF the last chunk ended inside
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        *ended, unfinished = text.split("\n")
        events: list[ServerSentEvent] = []
        if ended:
            self._pieces.append(ended[0])
            ended[0] = "".join(self._pieces)
            self._pieces = []
            for line in ended:
                event = self._take_line(line)
                if event is not None:
                    events.append(event)
        if unfinished:
            self._pieces.append(unfinished)
        return events

    def _take_line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event_type = value
        elif field == "id" and "\x00" not in value:
            self._last_id = value
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        data, event_type = self._data, self._event_type
        self._data, self._event_type = [], ""
        if not data:
            return None
        return ServerSentEvent(
            event=event_type or DEFAULT_EVENT_TYPE, data="\n".join(data), id=self._last_id
        )


async def first_response_in(events: list[ServerSentEvent]) -> Any:
    """The first ``message`` event that is a JSON-RPC response (no ``method``), or None:
    notifications and requests before it are skipped.

    Raises ``ValueError`` for an event whose data is not JSON, or is JSON ``null``.
    """
    for event in events:
        if event.event != "message":
            continue
        try:
            message = await decode_json_off_loop(event.data)
        except NotJson as error:
            raise ValueError("an event's data is not JSON") from error
        if isinstance(message, dict) and "method" in message:
            continue
        if message is None:
            raise ValueError("an event's data is null, not a JSON-RPC message")
        return message
    return None
