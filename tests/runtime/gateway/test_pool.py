"""No pooled connection is left busy, however a call ends (GW-8).

httpcore frees a pooled connection only at the end of the response's close. On a busy event
loop the close of a stream that ended just as the client stopped reading its tail takes long
enough for the tail's timeout, or the call's deadline, to strike inside it. The transport here
is httpx's own on real loopback sockets; it only makes every close take a while, so that the
timeout strikes inside the close every time instead of once in a few hundred calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from provisioner.runtime.gateway.breaker import BREAKER_MAX_OPEN_S
from provisioner.runtime.gateway.client import McpGatewayServer
from provisioner.runtime.gateway.errors import NoAnswer
from provisioner.runtime.gateway.transport import STREAM_TAIL_WAIT_S

from .tracking import TrackedTransport

pytestmark = pytest.mark.anyio

SLOW_CLOSE_S = 4 * STREAM_TAIL_WAIT_S
CALLS = 5
CANCEL_AT_STEPS = 40  # every point a call can be cancelled at, up to its answer
CONCURRENT_CALLS = 4


class SlowClose(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        await asyncio.sleep(SLOW_CLOSE_S)  # the loop is busy elsewhere
        await self._inner.aclose()


class SlowClosingTransport(TrackedTransport):
    """httpx's network transport, each response's close first waiting ``SLOW_CLOSE_S``."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = SlowClose(response.stream)
        return response


class TestConnectionsAreFreed:
    """Defect: a cancellation inside a response's close left its connection busy for good."""

    async def test_a_tail_timeout_inside_the_close_still_frees_the_connection(
        self, scenario_base
    ) -> None:
        transport = SlowClosingTransport()
        url = scenario_base("sse-lf") + "/s/loom/mcp"
        async with McpGatewayServer(url, transport=transport) as server:
            for _ in range(CALLS):
                result = await server.call_tool("loom_search", {"query": "q"}, deadline_s=5)
                assert result.data["ok"] is True
                await server.settled()  # the stream's tail is read, and closed, after the answer
                assert transport.busy_connections == 0
            assert transport.connections <= 1, "the connection is reused or dropped, not kept"

    async def test_a_deadline_inside_the_close_still_frees_the_connection(
        self, scenario_base, clock
    ) -> None:
        transport = SlowClosingTransport()
        url = scenario_base("result") + "/s/loom/mcp"
        async with McpGatewayServer(url, transport=transport, clock=clock) as server:
            for _ in range(CALLS):
                with pytest.raises(NoAnswer):
                    await server.call_tool("loom_search", {}, deadline_s=SLOW_CLOSE_S / 2)
                assert transport.busy_connections == 0
                clock.advance(BREAKER_MAX_OPEN_S)  # let the breaker try again
                server.breaker.before_call().answered()


class TestCancelledBeforeSending:
    """Defect found by the soak test: a call cancelled after the pool gave it a new connection,
    but before its request went out, left that connection in the pool for good, neither idle
    nor closed (encode/httpcore#1093); enough of them and every call waits for the pool."""

    async def test_cancelling_calls_at_every_step_leaves_no_connection_behind(
        self, scenario_base
    ) -> None:
        transport = TrackedTransport()
        url = scenario_base("result") + "/s/loom/mcp"
        async with McpGatewayServer(url, transport=transport) as server:
            for steps in range(CANCEL_AT_STEPS):
                calls = [
                    asyncio.create_task(server.call_tool("loom_search", {}, deadline_s=5))
                    for _ in range(CONCURRENT_CALLS)
                ]
                for _ in range(steps):  # let the calls run this far, then cancel them all
                    await asyncio.sleep(0)
                for call in calls:
                    call.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
                assert transport.busy_connections == 0, f"cancelled after {steps} steps"
            result = await server.call_tool("loom_search", {}, deadline_s=5)
        assert result.data["ok"] is True
        assert server.breaker.state == "closed"
