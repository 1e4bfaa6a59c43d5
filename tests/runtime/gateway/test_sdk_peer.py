"""Against the official mcp SDK server, in JSON and in event-stream mode (GW-3).

The SDK is the peer, not a mock: it decides the framing, the headers it requires and how it
answers a failing tool. It is mounted at /s/loom/mcp behind a small catalog app, so the calls
go through the catalog exactly as in production.
"""

from __future__ import annotations

import json

import httpx
import pytest

from provisioner.runtime.gateway import transport as transport_module
from provisioner.runtime.gateway.catalog import GatewayCatalog
from provisioner.runtime.gateway.client import LoomConnection, McpGatewayServer
from provisioner.runtime.gateway.errors import ToolRefused
from provisioner.runtime.gateway.protocol import MCP_PROTOCOL_VERSION, REQUEST_HEADERS
from testbed.sdk_peer import MCP_PATH, PROGRESS_STEPS

pytestmark = pytest.mark.anyio


@pytest.fixture
async def loom(sdk_peer):
    base, _ = sdk_peer
    catalog = GatewayCatalog(base)
    connection = LoomConnection(catalog)
    yield connection
    await connection.aclose()
    await catalog.aclose()


class TestCallsThroughTheCatalog:
    async def test_a_search_returns_its_structured_content(self, loom) -> None:
        result = await loom.call_tool("loom_search", {"query": "tea", "top_k": 2}, deadline_s=5)
        assert result.data == {
            "results": [
                {"memory_key": "k0", "content_excerpt": "tea #0"},
                {"memory_key": "k1", "content_excerpt": "tea #1"},
            ],
            "abstained": False,
        }
        assert json.loads(result.text) == result.data

    async def test_a_tool_with_progress_notifications_still_returns_its_result(self, loom) -> None:
        arguments = {"mode": "startup", "sections": ["memories"]}
        result = await loom.call_tool("loom_context_pack", arguments, deadline_s=5)
        items = result.data["sections"]["memories"]["items"]
        assert items == [{"memory_key": "m1", "text": "likes &lt;tea&gt;"}]

    async def test_a_text_only_answer_is_parsed_as_json(self, loom) -> None:
        result = await loom.call_tool("loom_namespace_summary", {}, deadline_s=5)
        assert result.data == {"org": "acme", "namespace": "agent-7", "memory_count": 3}

    async def test_a_failing_tool_is_a_tool_refusal(self, loom) -> None:
        with pytest.raises(ToolRefused):
            await loom.call_tool("loom_memory_get", {"memory_key": "gone"}, deadline_s=5)

    async def test_the_connection_keeps_one_client_across_calls(self, loom) -> None:
        await loom.call_tool("loom_namespace_summary", {}, deadline_s=5)
        first = loom.server
        for _ in range(3):
            await loom.call_tool("loom_namespace_summary", {}, deadline_s=5)
        assert loom.server is first and not first.closed


TAIL_GUARD_S = 30.0  # how long a stream's end is waited for here: a guard, never reached


class TestConnectionReuse:
    async def test_consecutive_calls_share_one_connection(
        self, sdk_peer, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """In stream mode too: the stream's end is read, so its connection is reused.

        The client reads a stream's end for 50 ms, then drops the connection; a busy machine
        can take longer to send the SDK's end, which would be a new connection for a reason
        of speed, not of the client. The tail is read here until it comes (``TAIL_GUARD_S``).
        """
        monkeypatch.setattr(transport_module, "STREAM_TAIL_WAIT_S", TAIL_GUARD_S)
        base, app = sdk_peer
        server = McpGatewayServer(base + MCP_PATH)
        app.seen_client_ports.clear()
        for _ in range(4):
            await server.call_tool("loom_namespace_summary", {}, deadline_s=5)
        await server.aclose()
        assert len(app.seen_client_ports) == 4
        assert len(set(app.seen_client_ports)) == 1


class TestStreamMode:
    async def test_the_sdk_sends_progress_before_the_result(self, sdk_sse_peer) -> None:
        """Guards the test above: in stream mode the peer really does send notifications."""
        base, _ = sdk_sse_peer
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "loom_context_pack",
                "arguments": {"mode": "startup", "sections": []},
            },
        }
        async with httpx.AsyncClient() as client:
            response = await client.post(base + MCP_PATH, json=request, headers=REQUEST_HEADERS)
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.text
        assert body.count("notifications/progress") == PROGRESS_STEPS
        assert body.index("notifications/progress") < body.index('"result"')


class TestWhatIsSent:
    async def test_a_call_sends_the_protocol_headers_and_no_credential(self, sdk_peer) -> None:
        """GW-3: stateless streamable HTTP, protocol 2025-06-18, no credential, no session."""
        base, app = sdk_peer
        server = McpGatewayServer(base + MCP_PATH)
        app.seen_headers.clear()
        await server.call_tool("loom_namespace_summary", {}, deadline_s=5)
        await server.aclose()
        [headers] = app.seen_headers
        assert headers["mcp-protocol-version"] == MCP_PROTOCOL_VERSION == "2025-06-18"
        assert headers["accept"] == "application/json, text/event-stream"
        assert headers["content-type"] == "application/json"
        assert not {"authorization", "cookie", "mcp-session-id", "proxy-authorization"} & set(
            headers
        )

    async def test_proxy_settings_in_the_environment_are_ignored(
        self, sdk_peer, refused_url, monkeypatch
    ) -> None:
        base, _ = sdk_peer
        for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, refused_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        server = McpGatewayServer(base + MCP_PATH)
        result = await server.call_tool("loom_namespace_summary", {}, deadline_s=5)
        await server.aclose()
        assert result.data["org"] == "acme"

    async def test_a_url_with_credentials_is_refused(self) -> None:
        with pytest.raises(ValueError, match="credentials"):
            McpGatewayServer("http://agent:secret@127.0.0.1:1/s/loom/mcp")
