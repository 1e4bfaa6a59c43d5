"""The MCP gateway client: one ``tools/call`` per HTTP POST to a catalog server (GW-3…GW-7).

The gateway serves each catalog server as stateless streamable HTTP (MCP protocol
2025-06-18): no ``initialize``, no session id, no credential — the gateway knows the agent
from its connection. ``McpGatewayServer`` sends one JSON-RPC request per POST and accepts
either a JSON body or an event stream (notifications and pings first, then the response).

Every call has one overall deadline that covers connecting, waiting, any ``Retry-After`` and
the retry; keep-alive pings on a stream cannot stretch it (GW-4). What comes back is a
``ToolResult`` or exactly one exception of ``provisioner.runtime.gateway.errors`` (GW-5). A read —
a call under the ``READ`` policy — that meets a condition that may pass is tried once more,
after waiting out a ``Retry-After`` of up to 2 s; a longer one fails it at once. Extraction
calls use the ``EXTRACTION`` policy: one attempt, never a wait (GW-6). A breaker opens
when the gateway is not reached or does not answer in time (GW-7).

This module also re-exports the catalog reader, so ``provisioner.runtime.gateway.client`` is the one
place to import the gateway's public names from.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from provisioner.runtime.clock import Clock, Sleep
from provisioner.runtime.gateway.breaker import Breaker
from provisioner.runtime.gateway.catalog import (
    Catalog,
    CatalogServer,
    GatewayCatalog,
    parse_catalog,
)
from provisioner.runtime.gateway.deadline import Deadline
from provisioner.runtime.gateway.errors import (
    BrokenAnswer,
    ClientClosed,
    CountsForBreaker,
    GatewayError,
    GatewayUnreachable,
    MayPass,
    NoAnswer,
)
from provisioner.runtime.gateway.protocol import (
    REQUEST_HEADERS,
    ToolResult,
    listed_tools,
    request_body,
    tool_result,
)
from provisioner.runtime.gateway.transport import (
    CONNECT_TIMEOUT_S,
    ClientState,
    ConnectProgress,
    KeptConnectionClosed,
    Lifecycle,
    check_gateway_url,
    describe,
    new_http_client,
    read_result,
)

__all__ = [
    "EXTRACTION",
    "READ",
    "CallPolicy",
    "Catalog",
    "CatalogServer",
    "Deadline",
    "GatewayCatalog",
    "McpGatewayServer",
    "ToolResult",
    "parse_catalog",
]

RETRY_AFTER_MAX_WAIT_S = 2.0  # GW-6: a read waits out a Retry-After of up to 2 s, once
TOOLS_CALL = "tools/call"  # GW-3: the one method a tool call sends
TOOLS_LIST = "tools/list"  # MCP: what a server declares of its tools (REL-8)


@dataclass(frozen=True)
class CallPolicy:
    """What a call does when the gateway answers that a condition may pass (GW-6).

    ``retry_may_pass``: try once more after a ``Retry-After`` of up to
    ``RETRY_AFTER_MAX_WAIT_S`` that fits in the deadline; otherwise the ``MayPass`` is raised
    at once, carrying the gateway's ``retry_after_s`` for the caller to schedule by.
    """

    name: str
    retry_may_pass: bool


READ = CallPolicy("read", retry_may_pass=True)  # GW-6: reads are retried once
EXTRACTION = CallPolicy("extraction", retry_may_pass=False)  # GW-6: never waits on Retry-After


class McpGatewayServer:
    """A client for one catalog server's URL, such as ``<base>/s/loom/mcp``.

    An async context manager (``async with McpGatewayServer(url) as server``) that owns one
    HTTP client and its connection pool until it closes; it may also be used without ``async
    with`` and closed with ``aclose()``. Keep it for as long as the URL stays the same —
    refusals and failures do not spoil it (GW-8). ``transport`` replaces httpx's network
    transport (a test seam); ``clock`` (monotonic seconds) and ``sleep`` (an async sleep) are
    injected so that deadlines, ``Retry-After`` and the breaker can be tested without waiting.
    ``breaker`` lets an owner keep one breaker across the clients it replaces; by default each
    server has its own.

    Raises ``ValueError`` for a URL that is not a plain absolute http(s) URL.
    """

    def __init__(
        self,
        url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        breaker: Breaker | None = None,
    ) -> None:
        self._url = check_gateway_url(url, "the MCP server URL")
        self._clock = clock or time.monotonic
        self._sleep = sleep or asyncio.sleep
        self._breaker = breaker or Breaker(clock=self._clock)
        self._client = new_http_client(transport)
        self._ids = itertools.count(1)
        self._lifecycle = Lifecycle(f"the client for {self._url}")

    async def __aenter__(self) -> McpGatewayServer:
        self._lifecycle.enter()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def url(self) -> str:
        """The server URL this client posts to."""
        return self._url

    @property
    def breaker(self) -> Breaker:
        """The breaker this client consults before every attempt."""
        return self._breaker

    @property
    def state(self) -> ClientState:
        """Unopened, opened or closed; a closed server refuses calls."""
        return self._lifecycle.state

    @property
    def closed(self) -> bool:
        """True once ``aclose()`` has run."""
        return self._lifecycle.closed

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        deadline_s: float,
        policy: CallPolicy = READ,
    ) -> ToolResult:
        """Call tool ``name`` with ``arguments``; return its result within ``deadline_s`` seconds.

        Under ``READ`` a ``MayPass`` is tried once more, after a ``Retry-After`` of up to 2 s
        that fits in the deadline (GW-6). Under ``EXTRACTION`` there is one attempt, and a
        ``MayPass`` is raised with the gateway's ``retry_after_s``.
        Raises one ``GatewayError`` subclass on any failure (GW-5), ``ValueError`` for a
        non-positive deadline and ``RuntimeError`` once closed.
        """
        deadline = Deadline.starting_now(deadline_s, self._clock)
        return await self.call_tool_within(name, arguments, deadline=deadline, policy=policy)

    async def call_tool_within(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        deadline: Deadline,
        policy: CallPolicy = READ,
    ) -> ToolResult:
        """``call_tool`` on a deadline that began earlier (an owner read the catalog first)."""
        self._lifecycle.use()
        params = {"name": name, "arguments": dict(arguments)}
        try:
            return tool_result(await self._attempt(TOOLS_CALL, params, deadline))
        except MayPass as first:
            if not policy.retry_may_pass:
                raise
            await self._wait_before_retry(first, deadline)
        return tool_result(await self._attempt(TOOLS_CALL, params, deadline))

    async def list_tools_within(self, deadline: Deadline) -> list[dict[str, Any]]:
        """MCP ``tools/list``: every tool the server declares, each ``{"name",
        "inputSchema", …}`` as sent (REL-8). A read: a ``MayPass`` is tried once more as under
        ``READ``. Raises what ``call_tool`` raises; a result of another shape is a
        ``BrokenAnswer``.
        """
        self._lifecycle.use()
        try:
            return listed_tools(await self._attempt(TOOLS_LIST, {}, deadline))
        except MayPass as first:
            await self._wait_before_retry(first, deadline)
        return listed_tools(await self._attempt(TOOLS_LIST, {}, deadline))

    async def aclose(self) -> None:
        """Close the HTTP client and its sockets; calls still under way end in ``ClientClosed``.

        Safe to call more than once.
        """
        if self._lifecycle.close():
            await self._client.aclose()

    async def _wait_before_retry(self, first: MayPass, deadline: Deadline) -> None:
        """Sleep out ``first``'s ``Retry-After``, or re-raise it when it is too long to wait."""
        wait_s = first.retry_after_s or 0.0
        if wait_s > RETRY_AFTER_MAX_WAIT_S or wait_s >= deadline.left_s():
            raise first
        if wait_s > 0:
            await self._sleep(wait_s)

    async def _attempt(self, method: str, params: Mapping[str, Any], deadline: Deadline) -> Any:
        """One POST, guarded by the breaker (GW-7), which this attempt alone settles.

        A deadline already passed raises ``NoAnswer`` before the breaker is asked: nothing is
        sent, so there is nothing for the breaker to count. So does a server closed meanwhile.
        """
        if self._lifecycle.closed:
            raise ClientClosed(f"the client for {self._url} was closed before the call was sent")
        if deadline.passed():
            raise NoAnswer("the deadline passed before the call was sent", deadline_s=0.0)
        attempt = self._breaker.before_call()
        try:
            result = await self._post(method, params, deadline)
        except CountsForBreaker:
            attempt.failed()
            raise
        except ClientClosed:
            attempt.abandoned()
            raise
        except GatewayError:
            attempt.answered()
            raise
        except BaseException:
            attempt.abandoned()
            raise
        attempt.answered()
        return result

    async def _post(self, method: str, params: Mapping[str, Any], deadline: Deadline) -> Any:
        """Send the request and read its answer's result, mapping transport failures to
        outcomes."""
        request_id = next(self._ids)
        body = request_body(request_id, method, params)
        remaining = max(deadline.left_s(), 0.001)
        request = self._client.build_request(
            "POST", self._url, content=body, headers=REQUEST_HEADERS
        )
        progress = ConnectProgress(request.extensions)
        request.extensions["trace"] = progress.trace
        try:
            # The deadline bounds the whole request; the client's own timeout adds only the
            # connect limit (GW-2), so no per-request httpx timeout is built (new_http_client).
            # ``send`` and ``aclose`` are what ``client.stream()`` does, without its
            # context-manager generator on every call.
            async with asyncio.timeout(remaining) as budget:
                response = await self._client.send(request, stream=True)
                try:
                    return await read_result(response, request_id, budget)
                finally:
                    await response.aclose()
        except GatewayError:
            raise
        except TimeoutError as error:
            if progress.connecting:
                raise _not_connected(remaining) from error
            raise _no_answer(deadline, remaining) from error
        except Exception as error:
            raise self._outcome_of_failure(error, deadline, remaining) from error

    def _outcome_of_failure(
        self, error: Exception, deadline: Deadline, remaining: float
    ) -> GatewayError:
        """The one mapping point from httpx's (and a closed client's) exceptions to outcomes.

        Anything else is a bug in this client and is raised as it is.
        """
        if self._lifecycle.closed and isinstance(error, httpx.HTTPError | RuntimeError):
            return ClientClosed(f"the client for {self._url} was closed during the call")
        if isinstance(error, httpx.ConnectTimeout):
            return _not_connected(min(CONNECT_TIMEOUT_S, remaining))
        if isinstance(error, httpx.ConnectError):
            return GatewayUnreachable(f"the gateway was not reached: {describe(error)}")
        if isinstance(error, KeptConnectionClosed):
            # Found again on the fresh connection the request was sent on once more: the
            # gateway closes connections before any request reaches it.
            return GatewayUnreachable(f"the gateway was not reached: {error}")
        if isinstance(error, httpx.TimeoutException):
            return _no_answer(deadline, remaining)
        if isinstance(error, httpx.HTTPError):
            return BrokenAnswer(f"the answer broke off or could not be read: {describe(error)}")
        raise error


def _no_answer(deadline: Deadline, attempt_s: float) -> NoAnswer:
    """``NoAnswer`` naming the caller's deadline, and the time the last try had if it was less."""
    text = f"no complete answer within the call's deadline of {deadline.given_s:.3g} s"
    if attempt_s < deadline.given_s * 0.99:
        text += f" (its last try had {attempt_s:.3g} s left)"
    return NoAnswer(text, deadline_s=deadline.given_s)


def _not_connected(within_s: float) -> GatewayUnreachable:
    return GatewayUnreachable(f"the gateway accepted no connection within {within_s:.3g} s")
