"""One kept HTTP client for the URL the catalog names for Loom (GW-8).

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
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

import httpx

from provisioner.runtime.gateway.breaker import Breaker
from provisioner.runtime.gateway.catalog import Catalog
from provisioner.runtime.gateway.client import (
    READ,
    CallPolicy,
    Clock,
    McpGatewayServer,
    Sleep,
    ToolResult,
)
from provisioner.runtime.gateway.deadline import Deadline
from provisioner.runtime.gateway.errors import CatalogError, ClientClosed, NoAnswer
from provisioner.runtime.gateway.transport import ClientState, Lifecycle
from provisioner.runtime.memory_contract import LOOM_SERVER

Answer = TypeVar("Answer")


class CatalogSource(Protocol):
    """What a connection needs of a catalog reader; ``GatewayCatalog`` is the real one."""

    @property
    def last_error(self) -> CatalogError | None: ...

    async def current(self, *, deadline_s: float = ...) -> Catalog | None: ...


class LoomConnection:
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

    async def __aenter__(self) -> LoomConnection:
        self._lifecycle.enter()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def server_id(self) -> str:
        """The catalog server this connection calls."""
        return self._server_id

    @property
    def catalog(self) -> CatalogSource:
        """The catalog this connection asks before each call (diagnostics read it)."""
        return self._catalog

    @property
    def state(self) -> ClientState:
        """Unopened, opened or closed."""
        return self._lifecycle.state

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
