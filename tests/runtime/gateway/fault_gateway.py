"""A loopback gateway that can give every answer of contracts/gateway.md's table, and worse.

It is a plain ASGI app, so it can hang, trickle bytes and cut a response off mid-event the way a
real broken gateway would (a framework would tidy that up). Behaviour is chosen by the URL, so
one running server serves every test at once::

    <base>/<scenario>/<tag>/catalog        GET: the scenario's catalog answer
    <base>/<scenario>/<tag>/s/<id>/mcp     POST: the scenario's tools/call answer

``<base>/<scenario>/<tag>`` is what a test passes as its gateway base URL. ``tag`` is any word;
requests are counted per ``<scenario>/<tag>``, so a test that picks a fresh tag sees only its
own requests, and scenarios like "fail once, then answer" count per tag too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from tests.support.loopback import read_request_body

CATALOG_MAX_BYTES = 8 * 1024 * 1024
DEEP_NESTING = 100_000  # brackets: far deeper than Python's JSON decoder can follow
HELD_POLL_S = 0.002  # how often a held answer looks whether the test has let it go
HELD_GUARD_S = 30.0  # a held answer nobody lets go ends unanswered after this: a guard
STREAM_TAIL_S = 0.05  # how long an event stream stays open after its answer
# A hanging or pinging answer gives up on its own after this, whatever the client does: far
# past every deadline a test gives such a call, so that "client left" tells the client's
# deadline ended it even on a machine too busy to keep a tenth of a second.
HANG_LIMIT_S = 10.0
TRICKLE_EVERY_S = 0.02
REQUEST_ID = "0b5a1f3e-9c1d-4f6e-8a2b-7d3c4e5f6a7b"


def key_of(base_url: str) -> str:
    """The ``<scenario>/<tag>`` that requests under ``base_url`` are counted by."""
    return base_url.split("/", 3)[3]


@dataclass
class Hit:
    """One request the gateway saw."""

    method: str
    key: str
    kind: str
    headers: dict[str, str]
    client_port: int | None
    body: bytes


@dataclass
class Exchange:
    """One request being answered, with helpers to answer it."""

    scope: dict[str, Any]
    receive: Callable[[], Awaitable[dict[str, Any]]]
    send: Callable[[dict[str, Any]], Awaitable[None]]
    body: bytes
    base_url: str
    seen_before: int
    released: threading.Event = field(default_factory=threading.Event)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def request_id(self) -> Any:
        try:
            return json.loads(self.body).get("id")
        except (ValueError, AttributeError):
            return None

    async def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        raw = [(name.lower().encode(), value.encode()) for name, value in headers]
        await self.send({"type": "http.response.start", "status": status, "headers": raw})

    async def chunk(self, data: bytes, *, more: bool = True) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})

    async def answer(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        headers = [("content-type", content_type), ("content-length", str(len(body)))]
        await self.start(status, headers + (extra or []))
        await self.chunk(body, more=False)

    async def rpc(
        self, message: dict[str, Any], extra: list[tuple[str, str]] | None = None
    ) -> None:
        await self.answer(200, json.dumps(message).encode(), extra=extra)

    async def wait_for_disconnect(self, limit_s: float = HANG_LIMIT_S) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.disconnected.wait(), limit_s)


Handler = Callable[[Exchange], Awaitable[None]]


# ---- catalogs -------------------------------------------------------------------------------


def catalog_payload(*, servers: list[dict[str, Any]] | None = None, generation: int = 7) -> dict:
    """A valid schema-1 catalog listing ``loom`` (and Nerve's own ``nerve``) by default."""
    if servers is None:
        servers = [
            {"id": "loom", "path": "/s/loom/mcp", "tools": ["loom_context_pack", "loom_search"]},
            {"id": "nerve", "path": "/s/nerve/mcp", "tools": ["memorize"]},
        ]
    return {
        "schemaVersion": 1,
        "generation": generation,
        "digest": "sha256:" + "ab" * 32,
        "servers": servers,
    }


def catalog_of_size(size: int) -> bytes:
    """A valid catalog body of exactly ``size`` bytes (padded in a description)."""
    payload = catalog_payload()
    payload["servers"][0]["description"] = ""
    bare = len(json.dumps(payload).encode())
    payload["servers"][0]["description"] = "x" * (size - bare)
    body = json.dumps(payload).encode()
    assert len(body) == size
    return body


async def catalog_ok(ex: Exchange) -> None:
    await ex.answer(200, json.dumps(catalog_payload()).encode())


async def catalog_once_then_503(ex: Exchange) -> None:
    if ex.seen_before == 0:
        await catalog_ok(ex)
    else:
        await catalog_503(ex)


async def catalog_503(ex: Exchange) -> None:
    envelope = {"reason": "upstream_unavailable", "requestId": REQUEST_ID, "detail": "SECRET"}
    await ex.answer(503, json.dumps(envelope).encode())


async def catalog_503_odd_envelope(ex: Exchange) -> None:
    envelope = {"reason": "Bad Reason\nINJECTED", "requestId": "not-a-uuid"}
    await ex.answer(503, json.dumps(envelope).encode())


async def catalog_huge(ex: Exchange) -> None:
    """8 MiB + 1 bytes, chunked, with no Content-Length to warn the reader."""
    body = catalog_of_size(CATALOG_MAX_BYTES + 1)
    await ex.start(200, [("content-type", "application/json")])
    step = 256 * 1024
    for offset in range(0, len(body), step):
        await ex.chunk(body[offset : offset + step])
    await ex.chunk(b"", more=False)


async def catalog_huge_declared(ex: Exchange) -> None:
    await ex.answer(200, catalog_of_size(CATALOG_MAX_BYTES + 1))


async def catalog_at_limit(ex: Exchange) -> None:
    await ex.answer(200, catalog_of_size(CATALOG_MAX_BYTES))


async def catalog_invalid(ex: Exchange) -> None:
    payload = catalog_payload()
    payload["servers"].reverse()
    await ex.answer(200, json.dumps(payload).encode())


async def catalog_without_loom(ex: Exchange) -> None:
    servers = [{"id": "github", "path": "/s/github/mcp", "tools": ["search_code"]}]
    await ex.answer(200, json.dumps(catalog_payload(servers=servers)).encode())


async def catalog_as_text(ex: Exchange) -> None:
    await ex.answer(200, json.dumps(catalog_payload()).encode(), content_type="text/plain")


async def catalog_duplicate_keys(ex: Exchange) -> None:
    body = json.dumps(catalog_payload()).encode()
    await ex.answer(200, body[:-1] + b', "generation": 8}')


def held(then: Handler) -> Handler:
    """``then``'s answer once the test lets the exchanges of its tag go (``FaultGateway.
    release``): a slow answer whose length is the test's to decide, not a timer's. A client
    that hangs up first ends it unanswered; so does HELD_GUARD_S passing, which only a test
    that never lets go meets."""

    async def handler(ex: Exchange) -> None:
        stop_at = asyncio.get_running_loop().time() + HELD_GUARD_S
        while not ex.released.is_set():
            if ex.disconnected.is_set() or asyncio.get_running_loop().time() > stop_at:
                return
            await asyncio.sleep(HELD_POLL_S)
        await then(ex)

    return handler


async def catalog_deep(ex: Exchange) -> None:
    await ex.answer(200, b"[" * DEEP_NESTING)


async def catalog_503_deep_envelope(ex: Exchange) -> None:
    await ex.answer(503, b'{"reason":' + b"[" * (DEEP_NESTING // 2))  # under the 64 KiB cap


async def redirect(ex: Exchange) -> None:
    await ex.start(307, [("location", ex.base_url + "/elsewhere"), ("content-length", "0")])
    await ex.chunk(b"", more=False)


async def hang(ex: Exchange) -> None:
    await ex.wait_for_disconnect()


# ---- tools/call answers ---------------------------------------------------------------------


def _result(ex: Exchange, structured: Any, *, is_error: bool = False) -> dict[str, Any]:
    text = json.dumps(structured)
    result = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        result["structuredContent"] = structured
    return {"jsonrpc": "2.0", "id": ex.request_id, "result": result}


def _error(ex: Exchange, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": ex.request_id, "error": error}


def _arguments(ex: Exchange) -> Any:
    return json.loads(ex.body)["params"]["arguments"]


async def result(ex: Exchange) -> None:
    await ex.rpc(_result(ex, {"ok": True, "arguments": _arguments(ex)}))


async def text_only_result(ex: Exchange) -> None:
    message = _result(ex, None)
    message["result"]["content"] = [{"type": "text", "text": json.dumps({"from": "text"})}]
    await ex.rpc(message)


async def tool_refused(ex: Exchange) -> None:
    message = _result(ex, None, is_error=True)
    message["result"]["content"] = [{"type": "text", "text": "namespace not found"}]
    await ex.rpc(message)


async def policy(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32001, "no credential set for loom"))


async def policy_as_403(ex: Exchange) -> None:
    await ex.answer(403, json.dumps(_error(ex, -32001, "tool not allowed")).encode())


async def may_pass(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32002, "upstream unavailable"))


async def fault_coded(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32000, "database unreachable", {"code": "BACKEND_UNAVAILABLE"}))


async def fault_uncoded(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32000, "internal error"))


async def bad_arguments(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32602, "invalid params: top_k"))


async def unknown_method(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32601, "method not found"))


async def call_limit(ex: Exchange) -> None:
    await ex.rpc(_error(ex, -32000, "MCP server timed out"))


def http_status(status: int, retry_after: str | None = None) -> Handler:
    async def handler(ex: Exchange) -> None:
        extra = [("retry-after", retry_after)] if retry_after else []
        await ex.answer(status, b"gateway says no", content_type="text/plain", extra=extra)

    return handler


async def plain_500(ex: Exchange) -> None:
    await ex.answer(500, b"<html>oops</html>", content_type="text/html")


async def bad_json(ex: Exchange) -> None:
    await ex.answer(200, b'{"jsonrpc": "2.0", "id": 1, "result": {')


async def wrong_shape(ex: Exchange) -> None:
    await ex.rpc({"jsonrpc": "2.0", "id": ex.request_id, "result": ["not", "an", "object"]})


async def wrong_id(ex: Exchange) -> None:
    message = _result(ex, {"ok": True})
    message["id"] = (ex.request_id or 0) + 1000
    await ex.rpc(message)


async def html_body(ex: Exchange) -> None:
    await ex.answer(200, b"<html></html>", content_type="text/html")


async def trickle(ex: Exchange) -> None:
    """An event stream of pings that never brings the answer."""
    await ex.start(200, [("content-type", "text/event-stream")])
    await trickle_on(ex)


async def trickle_on(ex: Exchange) -> None:
    loop = asyncio.get_running_loop()
    stop_at = loop.time() + HANG_LIMIT_S
    while loop.time() < stop_at and not ex.disconnected.is_set():
        await ex.chunk(b": ping\n\n")
        await asyncio.sleep(TRICKLE_EVERY_S)


class CutResponse(Exception):
    """Raised inside the app to make uvicorn drop the connection mid-response."""


async def cut_stream(ex: Exchange) -> None:
    await ex.start(200, [("content-type", "text/event-stream")])
    await ex.chunk(b'event: message\ndata: {"jsonrpc": "2.0", "id": ')
    raise CutResponse


async def cut_json(ex: Exchange) -> None:
    await ex.start(200, [("content-type", "application/json"), ("content-length", "200")])
    await ex.chunk(b'{"jsonrpc": "2.0", "id": 1, ')
    raise CutResponse


def sse_result(newline: str) -> Handler:
    """The answer as an event stream with ``newline`` line breaks, sent 5 bytes at a time.

    Comments, a notification, an event of another type, an ``id`` field and a response split
    over two ``data`` lines come first — everything a reader must get through.
    """

    async def handler(ex: Exchange) -> None:
        response = json.dumps(_result(ex, {"ok": True, "arguments": _arguments(ex)}))
        head, _, tail = response.partition(",")
        lines = [
            ": keep-alive",
            "",
            "event: message",
            'data: {"jsonrpc": "2.0", "method": "notifications/progress", '
            '"params": {"progressToken": 1, "progress": 1}}',
            "",
            "event: endpoint",
            "data: ignored",
            "",
            "id: 41",
            "data:" + head + ",",
            "data: " + tail,
            "",
        ]
        body = (newline.join(lines) + newline).encode()
        await ex.start(200, [("content-type", "text/event-stream; charset=utf-8")])
        for offset in range(0, len(body), 5):
            await ex.chunk(body[offset : offset + 5])
        await ex.chunk(b"", more=False)

    return handler


async def sse_result_then_pings(ex: Exchange) -> None:
    """The answer as an event, then a stream that stays open with pings."""
    event = "event: message\ndata: " + json.dumps(_result(ex, {"ok": True})) + "\n\n"
    await ex.start(200, [("content-type", "text/event-stream")])
    await ex.chunk(event.encode())
    await trickle_on(ex)


async def sse_result_then_slow_end(ex: Exchange) -> None:
    """The answer as an event; the body ends about ``STREAM_TAIL_S`` later (±20 %).

    That is when the client stops reading a stream's tail, so its timeout and the stream's end
    fall together again and again; the spread is seeded by the request's number.
    """
    event = "event: message\ndata: " + json.dumps(_result(ex, {"query": _arguments(ex)}))
    await ex.start(200, [("content-type", "text/event-stream")])
    await ex.chunk((event + "\n\n").encode())
    await asyncio.sleep(STREAM_TAIL_S * random.Random(ex.seen_before).uniform(0.8, 1.2))
    await ex.chunk(b"", more=False)


async def deep_json(ex: Exchange) -> None:
    await ex.answer(200, b"[" * DEEP_NESTING + b"]" * DEEP_NESTING)


async def deep_event(ex: Exchange) -> None:
    await ex.start(200, [("content-type", "text/event-stream")])
    await ex.chunk(b"data: " + b"[" * DEEP_NESTING + b"\n\n", more=False)


async def deep_error_body(ex: Exchange) -> None:
    # under the client's 64 KiB cap for a non-200 body, still far too deep to decode
    await ex.answer(403, b'{"jsonrpc": "2.0", "error": ' + b"[" * (DEEP_NESTING // 2))


async def deep_text_block(ex: Exchange) -> None:
    message = _result(ex, None)
    message["result"]["content"] = [{"type": "text", "text": "[" * DEEP_NESTING}]
    await ex.rpc(message)


def retry_after_digits(status: int, digits: int) -> Handler:
    async def handler(ex: Exchange) -> None:
        message = _result(ex, {"ok": True})
        if status == 200:
            await ex.rpc(message, extra=[("retry-after", "9" * digits)])
        else:
            await ex.answer(status, b"busy", "text/plain", [("retry-after", "9" * digits)])

    return handler


def loose(change: Callable[[dict[str, Any]], None], status: int = 200) -> Handler:
    """A result answer that ``change`` loosens (its id, its shape) before it is sent."""

    async def handler(ex: Exchange) -> None:
        message = _result(ex, {"ok": True})
        change(message)
        await ex.answer(status, json.dumps(message).encode())

    return handler


def _error_with_id_true(message: dict[str, Any]) -> None:
    message.pop("result")
    message["id"] = True
    message["error"] = {"code": -32001, "message": "refused, for request true"}


def _error_for_another_id(message: dict[str, Any]) -> None:
    message.pop("result")
    message["id"] += 1000
    message["error"] = {"code": -32001, "message": "refused, but for another call"}


def once_then_result(first: Handler, then: Handler | None = None) -> Handler:
    async def handler(ex: Exchange) -> None:
        await (first if ex.seen_before == 0 else (then or result))(ex)

    return handler


async def unavailable_with_date(ex: Exchange) -> None:
    """503 with ``Retry-After`` as an HTTP date one second after the answer's ``Date``."""
    now = 1_800_000_000.0
    extra = [
        ("date", formatdate(now, usegmt=True)),
        ("retry-after", formatdate(now + 1, usegmt=True)),
    ]
    await ex.answer(503, b"busy", content_type="text/plain", extra=extra)


async def outage(ex: Exchange) -> None:
    await ex.answer(503, b"{}")


@dataclass(frozen=True)
class Scenario:
    catalog: Handler = catalog_ok
    call: Handler = result


SCENARIOS: dict[str, Scenario] = {
    # catalogs
    "catalog-ok": Scenario(),
    "catalog-once": Scenario(catalog=catalog_once_then_503),
    "catalog-503": Scenario(catalog=catalog_503),
    "catalog-odd-envelope": Scenario(catalog=catalog_503_odd_envelope),
    "catalog-huge": Scenario(catalog=catalog_huge),
    "catalog-huge-declared": Scenario(catalog=catalog_huge_declared),
    "catalog-at-limit": Scenario(catalog=catalog_at_limit),
    "catalog-invalid": Scenario(catalog=catalog_invalid),
    "catalog-no-loom": Scenario(catalog=catalog_without_loom),
    "catalog-text": Scenario(catalog=catalog_as_text),
    "catalog-duplicate-keys": Scenario(catalog=catalog_duplicate_keys),
    "catalog-redirect": Scenario(catalog=redirect),
    "catalog-hang": Scenario(catalog=hang),
    "catalog-held": Scenario(catalog=held(catalog_ok)),
    "catalog-deep": Scenario(catalog=catalog_deep),
    "catalog-deep-envelope": Scenario(catalog=catalog_503_deep_envelope),
    "outage": Scenario(catalog=outage, call=outage),
    "outage-after-catalog": Scenario(catalog=catalog_once_then_503, call=hang),
    # tools/call answers
    "result": Scenario(),
    "text-only": Scenario(call=text_only_result),
    "tool-refused": Scenario(call=tool_refused),
    "policy": Scenario(call=policy),
    "policy-403": Scenario(call=policy_as_403),
    "may-pass": Scenario(call=may_pass),
    "fault-coded": Scenario(call=fault_coded),
    "fault-uncoded": Scenario(call=fault_uncoded),
    "bad-arguments": Scenario(call=bad_arguments),
    "unknown-method": Scenario(call=unknown_method),
    "call-limit": Scenario(call=call_limit),
    "http-413": Scenario(call=http_status(413)),
    "http-429": Scenario(call=http_status(429, "1")),
    "http-502": Scenario(call=http_status(502)),
    "http-503": Scenario(call=http_status(503, "3")),
    "http-504": Scenario(call=http_status(504)),
    "http-500": Scenario(call=plain_500),
    "redirect": Scenario(call=redirect),
    "hang": Scenario(call=hang),
    "trickle": Scenario(call=trickle),
    "cut-stream": Scenario(call=cut_stream),
    "cut-json": Scenario(call=cut_json),
    "bad-json": Scenario(call=bad_json),
    "wrong-shape": Scenario(call=wrong_shape),
    "wrong-id": Scenario(call=wrong_id),
    "html": Scenario(call=html_body),
    "sse-lf": Scenario(call=sse_result("\n")),
    "sse-cr": Scenario(call=sse_result("\r")),
    "sse-crlf": Scenario(call=sse_result("\r\n")),
    "sse-then-pings": Scenario(call=sse_result_then_pings),
    "held": Scenario(call=held(result)),
    "sse-slow-end": Scenario(call=sse_result_then_slow_end),
    # hostile answers
    "deep-json": Scenario(call=deep_json),
    "deep-event": Scenario(call=deep_event),
    "deep-error-body": Scenario(call=deep_error_body),
    "deep-text-block": Scenario(call=deep_text_block),
    "ra-400-digits": Scenario(call=retry_after_digits(200, 400)),
    "ra-5000-digits": Scenario(call=retry_after_digits(200, 5000)),
    "ra-5000-digits-429": Scenario(call=retry_after_digits(429, 5000)),
    "id-float": Scenario(call=loose(lambda m: m.update(id=float(m["id"])))),
    "id-true": Scenario(call=loose(lambda m: m.update(id=True))),
    "error-id-true": Scenario(call=loose(_error_with_id_true)),
    "error-for-another-id": Scenario(call=loose(_error_for_another_id, status=403)),
    "result-and-error": Scenario(
        call=loose(lambda m: m.update(error={"code": -32001, "message": "no"}))
    ),
    "no-content": Scenario(call=loose(lambda m: m["result"].pop("content"))),
    "content-not-objects": Scenario(
        call=loose(lambda m: m["result"].update(content=["text", 1, None]))
    ),
    # a read that meets a condition that may pass, then the answer
    "429-once-ra1": Scenario(call=once_then_result(http_status(429, "1"))),
    "429-once-ra2": Scenario(call=once_then_result(http_status(429, "2"))),
    "503-once-ra10": Scenario(call=once_then_result(http_status(503, "10"))),
    "503-once-date": Scenario(call=once_then_result(unavailable_with_date)),
    "may-pass-once": Scenario(call=once_then_result(may_pass)),
    "429-always-ra1": Scenario(call=http_status(429, "1")),
    "429-once-then-hang": Scenario(call=once_then_result(http_status(429, "1"), hang)),
    "result-once-then-hang": Scenario(call=once_then_result(result, hang)),
}


CLIENT_LEFT = "client left"  # the client hung up while the answer was still going
ANSWER_ENDED = "answer ended"  # the handler finished (or ran out) with the client still there
ENDING_GUARD_S = 30.0  # how long ending() waits before failing the test: a guard, not a bound


class FaultGateway:
    """The ASGI app; ``hits`` lists every request in arrival order.

    ``ending(key)`` tells how a request's exchange ended. A hanging or pinging answer ends on
    its own after HANG_LIMIT_S, so "client left" shows the client gave up first: its deadline
    held, with no clock read by the test.
    """

    def __init__(self) -> None:
        self.hits: list[Hit] = []
        self.base_url = ""
        self._endings: dict[str, list[str]] = {}
        self._ended = threading.Condition()
        self._releases: dict[str, threading.Event] = {}

    def ending(self, key: str, index: int = 0) -> str:
        """How the ``index``-th exchange under ``key`` ended, once it has."""
        with self._ended:
            if not self._ended.wait_for(
                lambda: len(self._endings.get(key, ())) > index, ENDING_GUARD_S
            ):
                raise AssertionError(f"exchange {index} under {key} never ended")
            return self._endings[key][index]

    def _record_ending(self, key: str, ex: Exchange) -> None:
        with self._ended:
            ending = CLIENT_LEFT if ex.disconnected.is_set() else ANSWER_ENDED
            self._endings.setdefault(key, []).append(ending)
            self._ended.notify_all()

    def release(self, key: str) -> None:
        """Let the held answers under ``<scenario>/<tag>`` go, those waiting and those to come."""
        self._release(key).set()

    def _release(self, key: str) -> threading.Event:
        with self._ended:
            return self._releases.setdefault(key, threading.Event())

    def count(self, key: str, kind: str | None = None) -> int:
        """Requests seen under ``<scenario>/<tag>`` (of one ``kind``: catalog or call)."""
        return sum(1 for hit in self.hits if hit.key == key and kind in (None, hit.kind))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        parts = scope["path"].strip("/").split("/")
        body = await read_request_body(receive)
        kind = _kind(parts)
        scenario = SCENARIOS.get(parts[0]) if kind else None
        key = "/".join(parts[:2])
        ex = Exchange(
            scope, receive, send, body, self.base_url, self.count(key, kind), self._release(key)
        )
        self.hits.append(_hit(scope, key, kind or "other", body))
        if scenario is None:
            await ex.answer(404, b"{}")
            return
        watcher = asyncio.create_task(_watch_disconnect(receive, ex.disconnected))
        try:
            await (scenario.catalog if kind == "catalog" else scenario.call)(ex)
        finally:
            watcher.cancel()
            self._record_ending(key, ex)


def _kind(parts: list[str]) -> str | None:
    rest = parts[2:]
    if rest == ["catalog"]:
        return "catalog"
    if len(rest) == 3 and rest[0] == "s" and rest[2] == "mcp":
        return "call"
    return None


def _hit(scope: dict[str, Any], key: str, kind: str, body: bytes) -> Hit:
    headers = {name.decode().lower(): value.decode() for name, value in scope["headers"]}
    client = scope.get("client")
    return Hit(scope["method"], key, kind, headers, client[1] if client else None, body)


async def _watch_disconnect(receive: Any, flag: asyncio.Event) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            flag.set()
            return


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
