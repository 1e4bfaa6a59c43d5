"""The dev gateway as one ASGI app: catalog, Loom's tools, the fault switch, a loopback guard.

Routes:

* ``GET /catalog`` — schema version 1 (contracts/gateway.md), listing ``loom`` with the tools
  the stand-in serves (``loom_op`` included, SWEEP-15) less those ``unlist`` took away, which
  a call then meets as the gateway's policy refusal; ``digest`` is the sha256 of the servers
  list as canonical JSON;
* ``POST /s/loom/mcp`` — one ``tools/call`` per POST. The fault plan decides first; if no fault
  plays, the SDK server answers, as JSON or as an event stream (``answers``: ``json``, ``sse``,
  or ``mixed`` — chosen per call from the seed). A ``tools/list`` is answered by the SDK
  server with each tool's schema, no fault playing on it (counted in ``listings``); with
  ``older_memory_set`` that schema, and the check of every call, is an older Loom's
  ``loom_memory_set`` without ``kind``, ``tags`` and the dates (REL-8);
* ``GET /_dev/faults`` and ``POST /_dev/faults`` with ``{"faults": SPEC, "seed": N}`` — the
  rules in force, and switching them while the gateway runs.

Every request must name a loopback host in ``Host`` (and in ``Origin`` when it sends one): a web
page elsewhere cannot reach the gateway through DNS rebinding. Anything else is answered 403.
``POST /_dev/faults`` takes only ``Content-Type: application/json`` (415 otherwise): a page that
sends no ``Origin`` can still post a form or ``text/plain`` to loopback without asking, but not
JSON, so no web page can switch the faults of a gateway a developer runs.

Hostile bodies get a 4xx, never a 500: a body that says (``Content-Length``) or turns out to be
longer than the route takes is 413, before or while it is read; JSON nested deeper than
``JSON_MAX_DEPTH`` is refused before any decoder sees it (Python's recurses once per level), as a
400 at ``/_dev/faults`` and as JSON-RPC's parse error (-32700, HTTP 400) at ``/s/loom/mcp``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from provisioner.base.loopback import is_loopback_request
from provisioner.devgateway.asgi import (
    JSON_CONTENT_TYPE,
    IncomingBodyTooLarge,
    Receive,
    Send,
    ending_first,
    json_answer,
    read_body,
    replay_body,
    sends_json,
    start_answer,
)
from provisioner.devgateway.contract import LOOM_OP, served_tools, with_an_older_memory_set
from provisioner.devgateway.faults import (
    DEFAULT_FAULT_CODE,
    DEFAULT_RETRY_AFTER_S,
    FaultPlan,
    FaultRule,
    FaultSpecError,
)
from provisioner.devgateway.loom_server import MCP_PATH, build_loom_server, loom_http_app
from provisioner.devgateway.store import LoomStandIn
from provisioner.runtime.face import nested_deeper_than

ANSWER_MODES = ("json", "sse", "mixed")
CATALOG_GENERATION = 1
HANG_LIMIT_S = 600.0  # a hanging or trickling answer ends on its own after this
TRICKLE_EVERY_S = 0.5
REQUEST_MAX_BYTES = 32 * 1024 * 1024  # bodies beyond this are refused 413 whatever the faults
FAULTS_REQUEST_MAX_BYTES = 64 * 1024  # a fault switch is a short spec and a seed
JSON_MAX_DEPTH = 128  # our choice: Loom's arguments nest a few levels; Python's decoder ~1000
PARSE_ERROR = -32700  # JSON-RPC: the body is not JSON the server can read
CALLS_KEPT = 10_000  # how many recent calls ``calls`` remembers
GATEWAY_CALL_TIMEOUT_MESSAGE = "MCP server timed out"
TOOLS_LIST = "tools/list"  # MCP: the tools the server declares, with their schemas
CUT_PREFIX = b'event: message\ndata: {"jsonrpc": "2.0", "id": '  # a stream cut off mid-answer


@dataclass(frozen=True)
class SeenCall:
    """One ``tools/call`` the gateway received: the tool, its arguments, and what answered."""

    tool: str
    arguments: Any
    fault: str | None
    answered_as: str


class DevGateway:
    """The ASGI app. ``store``, ``faults`` and ``calls`` are there for tests to use."""

    def __init__(
        self,
        *,
        store: LoomStandIn | None = None,
        faults: FaultPlan | None = None,
        answers: str = "mixed",
        log: Callable[[str], None] | None = None,
        older_memory_set: bool = False,
    ) -> None:
        if answers not in ANSWER_MODES:
            raise ValueError(f"answers {answers!r}: expected one of {', '.join(ANSWER_MODES)}")
        self.store = store or LoomStandIn()
        self.faults = faults or FaultPlan()
        self.calls: deque[SeenCall] = deque(maxlen=CALLS_KEPT)
        self.listings = 0  # tools/list requests answered (REL-8)
        tools = served_tools()
        self.tools = with_an_older_memory_set(tools) if older_memory_set else tools
        self.unlisted: set[str] = set()
        self.answering: list[object] = []  # Loom's answers under way: each call's session_id
        self.most_at_once = self.most_for_one_session = 0  # SWEEP-14: what a sweep overlapped
        self._answers = answers
        self._answer_draw = random.Random(f"answers:{self.faults.seed}")
        self._log = log or (lambda line: None)
        self._json_server = build_loom_server(self.store, self.tools, forced=self._queue_state)
        self._sse_server = build_loom_server(self.store, self.tools, forced=self._queue_state)
        self._json_app = loom_http_app(self._json_server, json_response=True)
        self._sse_app = loom_http_app(self._sse_server, json_response=False)

    def set_log(self, log: Callable[[str], None]) -> None:
        """Where one line per call (and per fault switch) goes."""
        self._log = log

    def unlist(self, *tools: str) -> None:
        """Leave ``tools`` out of the catalog (a platform that does not grant them); a call to
        one is refused by the gateway's policy. ``unlist()`` lists every tool again."""
        self.unlisted = set(tools)

    def _queue_state(self) -> str | None:
        """A forced state for one pending queued batch a status call names, or None: the
        ``queue`` fault rules, drawn per batch (SWEEP-15)."""
        return self.faults.queue_state(LOOM_OP)

    def catalog(self) -> dict[str, Any]:
        """The catalog this gateway serves."""
        servers = [
            {
                "id": "loom",
                "path": MCP_PATH,
                "tools": sorted(set(self.tools) - self.unlisted),
                "displayName": "Loom (dev stand-in)",
                "description": "Long-term memory, kept locally by nerve dev gateway",
            }
        ]
        canonical = json.dumps(servers, sort_keys=True, separators=(",", ":")).encode()
        return {
            "schemaVersion": 1,
            "generation": CATALOG_GENERATION,
            "digest": "sha256:" + hashlib.sha256(canonical).hexdigest(),
            "servers": servers,
        }

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if not is_loopback_request(scope["headers"]):
            await json_answer(send, 403, {"reason": "not_loopback"})
            return
        route = (scope["method"], scope["path"])
        if route == ("GET", "/catalog"):
            await json_answer(send, 200, self.catalog())
        elif scope["path"] == "/_dev/faults":
            await self._faults_route(scope, receive, send)
        elif route == ("POST", MCP_PATH):
            await self._tools_call(scope, receive, send)
        else:
            await json_answer(send, 404, {"reason": "not_found"})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(self._json_server.session_manager.run())
            await stack.enter_async_context(self._sse_server.session_manager.run())
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    break
        await send({"type": "lifespan.shutdown.complete"})

    async def _faults_route(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            if not sends_json(scope):
                detail = f"send the switch as Content-Type: {JSON_CONTENT_TYPE}"
                await json_answer(send, 415, {"reason": "unsupported_media_type", "detail": detail})
                return
            try:
                body = await read_body(receive, FAULTS_REQUEST_MAX_BYTES, scope)
                spec, seed = _fault_switch(body)
                self.faults.switch(spec, seed=seed)
            except IncomingBodyTooLarge:
                await json_answer(send, 413, {"reason": "body_too_large"})
                return
            except ValueError as error:
                await json_answer(send, 400, {"reason": "bad_fault_spec", "detail": str(error)})
                return
            self._log(f"faults now: {self.faults.spec or 'none'}")
        elif scope["method"] != "GET":
            await json_answer(send, 405, {"reason": "method_not_allowed"})
            return
        await json_answer(send, 200, {"faults": self.faults.spec, "seed": self.faults.seed})

    async def _tools_call(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            body = await read_body(receive, REQUEST_MAX_BYTES, scope)
        except IncomingBodyTooLarge:
            await json_answer(send, 413, {"reason": "body_too_large"})
            return
        if nested_deeper_than(body, JSON_MAX_DEPTH):
            self._log("tools/call ?: refused, JSON nested too deep")
            message = f"Parse error: JSON nested deeper than {JSON_MAX_DEPTH} levels"
            error = {"code": PARSE_ERROR, "message": message}
            await json_answer(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        method, tool, arguments, request_id = _call_of(body)
        if method == TOOLS_LIST:  # what Loom declares: no fault plays on it, it is not a call
            self.listings += 1
            self._log("tools/list")
            app = self._json_app if self._answer_mode() == "json" else self._sse_app
            await app(scope, replay_body(body, receive), send)
            return
        if tool in self.unlisted:
            self.calls.append(SeenCall(tool, arguments, "unlisted", "fault"))
            self._log(f"tools/call {tool}: not listed, refused")
            error = {"code": -32001, "message": f"policy: {tool} is not allowed for this agent"}
            await json_answer(send, 200, {"jsonrpc": "2.0", "id": request_id, "error": error})
            return
        decision = self.faults.decide(tool, body)
        rule, delayed = decision.rule, f" after {decision.delay_s:g} s" * bool(decision.delay_s)
        answered_as = "fault" if rule else self._answer_mode()
        self.calls.append(SeenCall(tool, arguments, str(rule) if rule else None, answered_as))
        self._log(f"tools/call {tool or '?'}: {rule or answered_as}{delayed}")
        if rule is not None:
            await _play_fault(rule, request_id, receive, send)
            return
        session = arguments.get("session_id") if isinstance(arguments, dict) else None
        answered = self._answering(session)
        try:
            if decision.delay_s:  # a slow Loom (latency): nobody to answer once the caller left
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_wait_for_disconnect(receive), decision.delay_s)
                    return
            app = self._json_app if answered_as == "json" else self._sse_app
            await app(scope, replay_body(body, receive), ending_first(send, answered))
        finally:
            answered()

    def _answering(self, session: object) -> Callable[[], None]:
        """Count a call of ``session`` as under way (SWEEP-14's overlap counters); the callable
        returned ends it, once however often it is called.

        The call must end before the last byte of its answer goes out, not when the app
        returns: a caller that has read its whole answer may send its next call at once, and
        that call must not find this one still counted (it would look like two at once).
        """
        self.answering.append(session)
        self.most_at_once = max(self.most_at_once, len(self.answering))
        overlap = self.answering.count(session) if session is not None else 0  # a probe: none
        self.most_for_one_session = max(self.most_for_one_session, overlap)
        ended = False

        def end() -> None:
            nonlocal ended
            if not ended:
                ended = True
                self.answering.remove(session)

        return end

    def _answer_mode(self) -> str:
        if self._answers != "mixed":
            return self._answers
        return self._answer_draw.choice(("json", "sse"))


def _call_of(body: bytes) -> tuple[str, str, Any, Any]:
    """The method, tool name, arguments and request id of a JSON-RPC body ("" when unreadable).

    The caller has bounded the nesting already; ``RecursionError`` is caught all the same, so
    that no body can make this a 500.
    """
    try:
        request = json.loads(body)
        params = request.get("params") or {}
        method = str(request.get("method", ""))
        return method, str(params.get("name", "")), params.get("arguments"), request.get("id")
    except (ValueError, AttributeError, RecursionError):
        return "", "", None, None


def _fault_switch(body: bytes) -> tuple[str, int | None]:
    """The spec and seed of a ``POST /_dev/faults`` body; ``ValueError`` saying what is wrong.

    The spec is parsed by the caller's ``switch``, which refuses a bad rule with
    ``FaultSpecError`` and leaves the rules in force as they were.
    """
    if nested_deeper_than(body, JSON_MAX_DEPTH):
        raise ValueError(f"JSON nested deeper than {JSON_MAX_DEPTH} levels")
    try:
        request = json.loads(body)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {JSON_MAX_DEPTH} levels") from None
    except ValueError as error:  # UnicodeDecodeError included
        raise ValueError(f"not JSON: {error}"[:300]) from None
    if not isinstance(request, dict):
        raise ValueError('expected a JSON object {"faults": SPEC, "seed": N}')
    spec = request.get("faults", "")
    if not isinstance(spec, str):
        raise FaultSpecError("faults must be a string of rules")
    seed = request.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise FaultSpecError("seed must be an integer")
    return spec, seed


# --- faults ---------------------------------------------------------------------------------


async def _play_fault(rule: FaultRule, request_id: Any, receive: Receive, send: Send) -> None:
    """Answer the way ``rule`` says (see ``provisioner.devgateway.faults``)."""
    errors = {
        "policy": (-32001, "policy: no credential is set for loom yet", None),
        "may-pass": (-32002, "upstream loom is unavailable", None),
        "coded": (-32000, "loom failed the op", {"code": rule.argument or DEFAULT_FAULT_CODE}),
        "uncoded": (-32000, "internal error", None),
        "fail-text": (-32000, "internal error", None),
        "call-limit": (-32000, GATEWAY_CALL_TIMEOUT_MESSAGE, None),
    }
    if rule.name in errors:
        code, message, data = errors[rule.name]
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await json_answer(send, 200, {"jsonrpc": "2.0", "id": request_id, "error": error})
    elif rule.name == "too-large":
        await json_answer(send, 413, {"reason": "request_too_large"})
    elif rule.name == "429":
        retry_after = rule.argument or str(DEFAULT_RETRY_AFTER_S)
        await json_answer(send, 429, {"reason": "rate_limited"}, [("retry-after", retry_after)])
    elif rule.name in ("502", "503", "504"):
        await json_answer(send, int(rule.name), {"reason": "upstream_error"})
    elif rule.name == "hang":
        await _wait_for_disconnect(receive)
    elif rule.name == "trickle":
        await _trickle(receive, send)
    elif rule.name == "cut":
        await start_answer(send, 200, "text/event-stream")
        await send({"type": "http.response.body", "body": CUT_PREFIX, "more_body": True})
        _cut_connection(send)
    else:  # reset
        _reset_connection(send)


async def _wait_for_disconnect(receive: Receive) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(HANG_LIMIT_S):
            while (await receive())["type"] != "http.disconnect":
                pass


async def _trickle(receive: Receive, send: Send) -> None:
    await start_answer(send, 200, "text/event-stream")
    watcher = asyncio.ensure_future(_wait_for_disconnect(receive))
    try:
        while not watcher.done():
            await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
            await asyncio.wait({watcher}, timeout=TRICKLE_EVERY_S)
    except OSError:
        pass
    finally:
        watcher.cancel()
    with contextlib.suppress(Exception):
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _transport_of(send: Send) -> Any:
    """uvicorn's ``send`` is bound to the request cycle, which holds the connection."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise ConnectionAbortedError("the dev gateway dropped the connection")
    return transport


def _cut_connection(send: Send) -> None:
    """Close the connection in the middle of the answer (a clean FIN, the body unfinished)."""
    _transport_of(send).close()


def _reset_connection(send: Send) -> None:
    """Reset the connection: linger 0 makes the close an RST instead of a FIN."""
    transport = _transport_of(send)
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()
