"""The client objects as async context managers with an explicit state (GW-8).

``McpGatewayServer``, ``GatewayCatalog`` and ``LoomConnection`` move from unopened to opened
to closed, and only forward: "used after close" is one check, not a race with a shutdown.
"""

from __future__ import annotations

import pytest

from provisioner.runtime.gateway.catalog import GatewayCatalog
from provisioner.runtime.gateway.client import LoomConnection, McpGatewayServer
from provisioner.runtime.gateway.transport import ClientState
from testbed.sdk_peer import MCP_PATH

from .tracking import TransportLog

pytestmark = pytest.mark.anyio


def each_kind(base: str) -> list:
    catalog = GatewayCatalog(base)
    return [McpGatewayServer(base + MCP_PATH), catalog, LoomConnection(catalog)]


class TestStates:
    async def test_async_with_opens_and_closes_each_kind(self, sdk_json_peer) -> None:
        base, _ = sdk_json_peer
        for client in each_kind(base):
            assert client.state is ClientState.UNOPENED
            async with client as opened:
                assert opened is client and client.state is ClientState.OPENED
            assert client.state is ClientState.CLOSED

    async def test_a_client_cannot_be_opened_twice_or_reopened(self, sdk_json_peer) -> None:
        base, _ = sdk_json_peer
        for client in each_kind(base):
            async with client:
                with pytest.raises(RuntimeError, match="already open"):
                    await client.__aenter__()
            with pytest.raises(RuntimeError, match="cannot be opened again"):
                await client.__aenter__()

    async def test_a_closed_client_refuses_work_before_touching_the_network(
        self, sdk_json_peer
    ) -> None:
        base, app = sdk_json_peer
        server, catalog, connection = each_kind(base)
        for client in (server, catalog, connection):
            await client.aclose()
            await client.aclose()  # closing twice is harmless
        app.seen_headers.clear()
        with pytest.raises(RuntimeError, match="closed"):
            await server.call_tool("loom_search", {"query": "q"}, deadline_s=5)
        with pytest.raises(RuntimeError, match="closed"):
            await catalog.current()
        with pytest.raises(RuntimeError, match="closed"):
            await connection.call_tool("loom_search", {"query": "q"}, deadline_s=5)
        assert app.seen_headers == []

    async def test_an_unopened_client_opens_on_first_use(self, sdk_json_peer) -> None:
        base, _ = sdk_json_peer
        server = McpGatewayServer(base + MCP_PATH)
        await server.call_tool("loom_search", {"query": "q"}, deadline_s=5)
        assert server.state is ClientState.OPENED
        await server.aclose()


class TestTogether:
    async def test_catalog_and_connection_in_one_async_with(self, sdk_peer) -> None:
        """The way the Loom backend holds them; diagnostics stay readable after the block."""
        base, _ = sdk_peer
        built = TransportLog()
        async with (
            GatewayCatalog(base) as catalog,
            LoomConnection(catalog, transport_factory=built) as connection,
        ):
            result = await connection.call_tool("loom_search", {"query": "q"}, deadline_s=5)
        assert result.data["results"][0]["content_excerpt"] == "q #0"
        assert connection.state is ClientState.CLOSED and built.all_closed
        assert catalog.generation == 1 and catalog.servers == ("loom",)
        assert connection.breaker.state == "closed" and connection.breaker.retry_in_s == 0
