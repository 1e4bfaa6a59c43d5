"""The MCP gateway client: one ``tools/call`` per HTTP POST to a catalog server, and one kept
client for the URL the catalog names for Loom (GW-3…GW-8).

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

A gateway that refuses calls — "no credential set yet" until the agent's Loom credential
exists — must not cost a new client and socket on every health probe, session start and
sweep. ``LoomConnection`` therefore keeps one ``McpGatewayServer`` for as long as the
catalog names the same URL for its server: refusals and failures keep it. Only when the
catalog names another URL is a new one built; the old one is closed as soon as no call is
using it, and ``aclose()`` closes every client at shutdown.

The client in use is looked up and replaced without any wait in between, so calls arriving
together after the URL changed share one new client; a call that was waiting for the catalog
when the connection closed ends in ``ClientClosed`` and builds nothing.

The connection asks the catalog before each call (the catalog throttles its own reads to one
per 30 s, so this is usually answered from memory). One breaker (GW-7) spans the clients it
replaces, and it is consulted before the catalog, so an open breaker fails a call without any
network traffic at all.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx

from provisioner.runtime.clock import Clock, Sleep
from provisioner.runtime.gateway.breaker import Breaker
from provisioner.runtime.gateway.catalog import Catalog
from provisioner.runtime.gateway.errors import (
    BrokenAnswer,
    CatalogError,
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
    ConnectProgress,
    KeptConnectionClosed,
    Lifecycle,
    LifecycleOwner,
    PostRequests,
    StreamTails,
    check_gateway_url,
    describe,
    new_http_client,
    read_result,
)
from provisioner.runtime.memory_contract import LOOM_SERVER

RETRY_AFTER_MAX_WAIT_S = 2.0  # GW-6: a read waits out a Retry-After of up to 2 s, once
TOOLS_CALL = "tools/call"  # GW-3: the one method a tool call sends
TOOLS_LIST = "tools/list"  # MCP: what a server declares of its tools (REL-8)


# --- the call's deadline (GW-4), on an injectable monotonic clock --------------------------


@dataclass(frozen=True)
class Deadline:
    """How long a call was given (``given_s``) and when, on ``clock``, that time is up.

    Everything a call does — a catalog read, connecting, a ``Retry-After`` wait, the retry —
    draws on this one deadline, so nothing can stretch it. Messages name ``given_s``, the
    caller's number, not whatever happened to be left when the time ran out.
    """

    given_s: float
    at: float
    clock: Clock

    @classmethod
    def starting_now(cls, given_s: float, clock: Clock) -> Deadline:
        """A deadline of ``given_s`` seconds from now; ``ValueError`` unless it is positive."""
        if not given_s > 0:
            raise ValueError(f"deadline_s must be positive, got {given_s!r}")
        return cls(given_s=given_s, at=clock() + given_s, clock=clock)

    def left_s(self) -> float:
        """Seconds left, never below 0."""
        return max(self.at - self.clock(), 0.0)

    def passed(self) -> bool:
        """Whether no time is left."""
        return self.at - self.clock() <= 0


# --- one call per POST ---------------------------------------------------------------------


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


class McpGatewayServer(LifecycleOwner):
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
        self._posts = PostRequests(self._client, self._url, REQUEST_HEADERS)
        self._tails = StreamTails()
        self._ids = itertools.count(1)
        self._lifecycle = Lifecycle(f"the client for {self._url}")

    @property
    def url(self) -> str:
        """The server URL this client posts to."""
        return self._url

    @property
    def breaker(self) -> Breaker:
        """The breaker this client consults before every attempt."""
        return self._breaker

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

        The tails of event streams still being read are waited for first (each for at most
        ``STREAM_TAIL_WAIT_S``). Safe to call more than once.
        """
        if self._lifecycle.close():
            try:
                await self._tails.settled()
            finally:
                await self._client.aclose()

    async def settled(self) -> None:
        """Wait until every event stream answered so far has been read to its end and closed,
        so its connection is back in the pool or gone (each takes at most
        ``STREAM_TAIL_WAIT_S``)."""
        await self._tails.settled()

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
        request = self._posts.build(body)
        progress = ConnectProgress(request.extensions)
        request.extensions["trace"] = progress.trace
        try:
            # The deadline bounds the whole request; the client's own timeout adds only the
            # connect limit (GW-2), so no per-request httpx timeout is built (new_http_client).
            # ``send`` and ``aclose`` are what ``client.stream()`` does, without its
            # context-manager generator on every call.
            async with asyncio.timeout(remaining):
                if self._tails.reading:  # a connection is free in a moment: no new one
                    await self._tails.ended()
                response = await self._client.send(request, stream=True)
                return await read_result(response, request_id, self._tails)
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


# --- one kept client for Loom --------------------------------------------------------------


Answer = TypeVar("Answer")


class CatalogSource(Protocol):
    """What a connection needs of a catalog reader; ``GatewayCatalog`` is the real one."""

    @property
    def last_error(self) -> CatalogError | None: ...

    async def current(self, *, deadline_s: float = ...) -> Catalog | None: ...


class LoomConnection(LifecycleOwner):
    """Calls the tools of one catalog server (``loom`` by default) through one kept client.

    An async context manager; it may also be used without ``async with`` and closed with
    ``aclose()``. The catalog belongs to the caller, who closes it; the connection closes only
    the ``McpGatewayServer`` objects it built. ``clock`` and ``sleep`` are passed to each of
    them; ``transport_factory`` (a test seam) builds each one's transport, since a client
    closes its transport when it is closed and a replaced client must not take the next one
    down.
    """

    def __init__(
        self,
        catalog: CatalogSource,
        *,
        server_id: str = LOOM_SERVER,
        transport_factory: Callable[[], httpx.AsyncBaseTransport] | None = None,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self._catalog = catalog
        self._server_id = server_id
        self._transport_factory = transport_factory
        self._clock = clock or time.monotonic
        self._sleep = sleep
        self._breaker = Breaker(clock=self._clock)
        self._server: McpGatewayServer | None = None
        self._calls_in_flight: dict[McpGatewayServer, int] = {}
        self._retired: list[McpGatewayServer] = []
        self._listed: dict[str, list[dict[str, Any]]] = {}  # tools/list, by server URL
        self._lifecycle = Lifecycle("the Loom connection")

    @property
    def server_id(self) -> str:
        """The catalog server this connection calls."""
        return self._server_id

    @property
    def catalog(self) -> CatalogSource:
        """The catalog this connection asks before each call (diagnostics read it)."""
        return self._catalog

    @property
    def server(self) -> McpGatewayServer | None:
        """The client in use now, or None before the first call found the server."""
        return self._server

    @property
    def breaker(self) -> Breaker:
        """The breaker shared by every client of this connection (diagnostics read it)."""
        return self._breaker

    @property
    def retired(self) -> tuple[McpGatewayServer, ...]:
        """Replaced clients still finishing a call; each closes when its last call ends."""
        return tuple(self._retired)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        deadline_s: float,
        policy: CallPolicy = READ,
    ) -> ToolResult:
        """Call ``name`` on the catalog's server, as ``McpGatewayServer.call_tool`` does.

        Before the call: an open breaker raises ``CircuitOpen``; no catalog raises the read's
        ``CatalogError``; a catalog without the server raises ``ServerNotListed``. The catalog
        read counts against ``deadline_s``, which must be positive (``ValueError``); a deadline
        that passes while the catalog is read raises ``NoAnswer``. Raises ``RuntimeError`` once
        closed, and ``ClientClosed`` when the connection closes while the call is under way.
        """

        async def call(server: McpGatewayServer, deadline: Deadline) -> ToolResult:
            return await server.call_tool_within(name, arguments, deadline=deadline, policy=policy)

        return await self._through_server(deadline_s, call)

    async def list_tools(self, *, deadline_s: float) -> list[dict[str, Any]]:
        """The catalog server's MCP ``tools/list`` (REL-8): each tool it declares, with its
        ``inputSchema``. Read once for each URL the catalog names, then kept: a server does
        not change what it declares under one connection. Before and around the request,
        what ``call_tool`` does and raises."""

        async def listing(server: McpGatewayServer, deadline: Deadline) -> list[dict[str, Any]]:
            if server.url not in self._listed:
                self._listed[server.url] = await server.list_tools_within(deadline)
            return self._listed[server.url]

        return await self._through_server(deadline_s, listing)

    async def _through_server(
        self,
        deadline_s: float,
        request: Callable[[McpGatewayServer, Deadline], Awaitable[Answer]],
    ) -> Answer:
        """``request`` on the client for the catalog's URL, counted as a call in flight."""
        self._lifecycle.use()
        deadline = Deadline.starting_now(deadline_s, self._clock)
        self._breaker.raise_if_open()
        server = await self._server_for_call(deadline)
        self._calls_in_flight[server] = self._calls_in_flight.get(server, 0) + 1
        try:
            if self._retired:
                await self._close_idle_retired()
            if self._lifecycle.closed:
                raise ClientClosed("the connection was closed before the call was sent")
            return await request(server, deadline)
        finally:
            if self._call_ended(server):
                await server.aclose()

    async def aclose(self) -> None:
        """Close every client, current and retired; later calls raise ``RuntimeError``."""
        if not self._lifecycle.close():
            return
        servers = [*self._retired, *([self._server] if self._server else [])]
        self._retired.clear()
        self._server = None
        await asyncio.gather(*(server.aclose() for server in servers))

    async def _server_for_call(self, deadline: Deadline) -> McpGatewayServer:
        """The client for the URL the catalog names now, once the catalog has been asked."""
        catalog = await self._catalog.current(deadline_s=deadline.left_s())
        if self._lifecycle.closed:
            raise ClientClosed("the connection was closed while the call waited for the catalog")
        if catalog is None:
            last = self._catalog.last_error
            if last is None:
                raise _catalog_too_slow(deadline)  # the first read is still under way
            raise _no_catalog_error(last)
        url = catalog.require(self._server_id).url
        if deadline.passed():
            raise _catalog_too_slow(deadline)
        return self._server_for(url)

    def _server_for(self, url: str) -> McpGatewayServer:
        """The kept client when ``url`` is its URL; else a new one, and the old one retired.

        Synchronous on purpose: no other call can run between the check and the replacement.
        """
        current = self._server
        if current is not None and current.url == url:
            return current
        self._server = McpGatewayServer(
            url,
            transport=self._transport_factory() if self._transport_factory else None,
            clock=self._clock,
            sleep=self._sleep,
            breaker=self._breaker,
        )
        if current is not None:
            self._retired.append(current)
        return self._server

    async def _close_idle_retired(self) -> None:
        """Close the retired clients no call is using any more."""
        idle = [server for server in self._retired if not self._calls_in_flight.get(server)]
        for server in idle:
            self._retired.remove(server)
        await asyncio.gather(*(server.aclose() for server in idle))

    def _call_ended(self, server: McpGatewayServer) -> bool:
        """Count a call on ``server`` as ended; True when it was a retired client's last one.

        Synchronous, so that the common case — the client in use, or calls still running on
        a retired one — costs no await; the caller then closes the retired client itself.
        """
        left = self._calls_in_flight[server] - 1
        if left:
            self._calls_in_flight[server] = left
            return False
        del self._calls_in_flight[server]
        if server in self._retired:
            self._retired.remove(server)
            return True
        return False


def _no_catalog_error(last: CatalogError) -> CatalogError:
    """Why no catalog can be used: the last read's failure, with the gateway's own values."""
    return CatalogError(
        f"no catalog could be read: {last.message}",
        reason=last.reason,
        gateway_reason=last.gateway_reason,
        request_id=last.request_id,
    )


def _catalog_too_slow(deadline: Deadline) -> NoAnswer:
    """The call's time ran out while the catalog was read; the read goes on without it."""
    return NoAnswer(
        f"no catalog arrived within the call's deadline of {deadline.given_s:.3g} s",
        deadline_s=deadline.given_s,
    )
