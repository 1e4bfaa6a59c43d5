"""A kept-alive connection the gateway closes is met safely: a tool call is never sent twice.

A gateway may close a kept-alive connection while it is idle, just as the client takes it for
the next call. When the close lands after the pool has checked the connection but before the
request is written, nothing of the request has gone out: it is sent once more, on a fresh
connection. When the close comes after the request went out, the gateway may have read it, and
the call fails without being sent again (GW-3, GW-5).

The gateway here is a plain socket server on loopback, scripted by the test to the byte: each
connection answers with a complete event stream and stays open, and the test closes or resets
a connection itself at the moment it chooses, from its own task, between two steps of the
client's. The Loom backend's own connection is held to the same (it builds its clients itself).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable

import pytest

from provisioner.runtime.gateway.client import McpGatewayServer
from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom.backend import LoomMemory
from tests.fakes.gateway import catalog_payload, loom_server

from .tracking import TrackedTransport as _Tracked

pytestmark = pytest.mark.anyio

MCP_PATH = "/s/loom/mcp"
DEADLINE_S = 10.0
# The loopback kernel hands a close to the other socket at once; this pause only makes sure it
# has arrived before the client goes on, without letting the client's event loop run.
CLOSE_SETTLES_S = 0.02


class ScriptedGateway:
    """A loopback gateway on plain sockets, one thread per connection.

    Every tool call is recorded with the number of the connection it came on. A connection
    answers with a complete event stream and stays open, unless ``close_after_reading`` or
    ``reset_after_reading`` is set: then the next request is read in full and the connection is
    closed (FIN) or reset (RST) without an answer. ``GET /catalog`` is answered with a catalog
    listing Loom's tools; ``answer`` makes a call's structured content (default: its arguments).
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}{MCP_PATH}"
        self.connections: list[socket.socket] = []
        self.requests: list[tuple[int, dict]] = []
        self.close_after_reading = False
        self.reset_after_reading = False
        self.answer: Callable[[dict], dict] = lambda request: request["params"]["arguments"]
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def close_connection(self, number: int) -> None:
        """Close connection ``number`` from the gateway's side, as a gateway closing it idle."""
        self.connections[number].shutdown(socket.SHUT_RDWR)
        time.sleep(CLOSE_SETTLES_S)

    def stop(self) -> None:
        self._listener.close()
        for connection in self.connections:
            connection.close()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.connections.append(connection)
            number = len(self.connections) - 1
            thread = threading.Thread(target=self._serve, args=(connection, number), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket, number: int) -> None:
        buffer = b""
        while True:
            try:
                request, buffer = _read_request(connection, buffer)
            except OSError:
                return
            if request is None:
                return
            if request is CATALOG_REQUEST:
                connection.sendall(_catalog_answer())
                continue
            self.requests.append((number, request))
            if self.reset_after_reading:
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()
                return
            if self.close_after_reading:
                connection.shutdown(socket.SHUT_RDWR)
                return
            connection.sendall(_stream_answer(request, self.answer(request)))


CATALOG_REQUEST: dict = {}  # what _read_request gives for GET /catalog


def _read_request(connection: socket.socket, buffer: bytes) -> tuple[dict | None, bytes]:
    """The next request's JSON body (``CATALOG_REQUEST`` for the catalog) and what follows it,
    or None once the client closed."""
    while b"\r\n\r\n" not in buffer:
        data = connection.recv(65536)
        if not data:
            return None, buffer
        buffer += data
    head, _, buffer = buffer.partition(b"\r\n\r\n")
    if head.startswith(b"GET /catalog "):
        return CATALOG_REQUEST, buffer
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(buffer) < length:
        data = connection.recv(65536)
        if not data:
            return None, buffer
        buffer += data
    return json.loads(buffer[:length]), buffer[length:]


def _stream_answer(request: dict, structured: dict) -> bytes:
    """The result as one event of a chunked event stream, then the stream's end."""
    message = {
        "jsonrpc": "2.0",
        "id": request["id"],
        "result": {"content": [], "structuredContent": structured, "isError": False},
    }
    event = b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    return head + b"%x\r\n%s\r\n" % (len(event), event) + b"0\r\n\r\n"


def _catalog_answer() -> bytes:
    body = json.dumps(catalog_payload([loom_server()])).encode()
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
    return head % len(body) + body


class TrackedTransport(_Tracked):
    """httpx's network transport, showing which pooled connections requests were handed."""

    @property
    def pool_connections(self) -> list:
        return list(self._pool.connections)

    @property
    def handed_out(self) -> list:
        """The connections the pool has given to requests still under way."""
        return [request.connection for request in self._pool._requests if request.connection]


@pytest.fixture
def gateway():
    scripted = ScriptedGateway()
    yield scripted
    scripted.stop()


def calls_of(gateway: ScriptedGateway, number: int) -> list[int]:
    """The connections on which the gateway received the call with argument ``n`` = number."""
    return [
        connection
        for connection, request in gateway.requests
        if request["params"]["arguments"] == {"n": number}
    ]


class TestAKeptConnectionClosedBeforeTheRequestWentOut:
    """Defect: the close landed between the pool's check and the write, read as ReadError."""

    async def test_the_call_is_sent_once_on_a_fresh_connection_and_answers(
        self, gateway: ScriptedGateway
    ) -> None:
        transport = TrackedTransport()
        async with McpGatewayServer(gateway.url, transport=transport) as server:
            first = await server.call_tool("loom_search", {"n": 1}, deadline_s=DEADLINE_S)
            kept = transport.pool_connections[0]
            second_call = asyncio.create_task(
                server.call_tool("loom_search", {"n": 2}, deadline_s=DEADLINE_S)
            )
            await asyncio.sleep(0)  # the call takes the kept connection from the pool
            assert transport.handed_out == [kept], "the premise: the pool's check is behind"
            gateway.close_connection(0)  # ... and the gateway closes it before the write
            second = await second_call
        assert (first.data, second.data) == ({"n": 1}, {"n": 2})
        assert calls_of(gateway, 1) == [0]
        assert calls_of(gateway, 2) == [1], "sent once, on a new connection"

    async def test_a_connection_closed_while_idle_is_not_used_at_all(
        self, gateway: ScriptedGateway
    ) -> None:
        async with McpGatewayServer(gateway.url) as server:
            await server.call_tool("loom_search", {"n": 1}, deadline_s=DEADLINE_S)
            gateway.close_connection(0)
            second = await server.call_tool("loom_search", {"n": 2}, deadline_s=DEADLINE_S)
        assert second.data == {"n": 2}
        assert calls_of(gateway, 2) == [1]


class TestAConnectionClosedAfterTheRequestWentOut:
    """The gateway may have read the request: the call fails, and is never sent again."""

    @pytest.mark.parametrize("how", ["close", "reset"])
    async def test_the_call_is_a_broken_answer_and_was_sent_once(
        self, gateway: ScriptedGateway, how: str
    ) -> None:
        async with McpGatewayServer(gateway.url) as server:
            await server.call_tool("loom_search", {"n": 1}, deadline_s=DEADLINE_S)
            gateway.close_after_reading = how == "close"
            gateway.reset_after_reading = how == "reset"
            with pytest.raises(BrokenAnswer):
                await server.call_tool("loom_search", {"n": 2}, deadline_s=DEADLINE_S)
        assert calls_of(gateway, 2) == [0], "read once by the gateway, on the kept connection"
        assert len(gateway.connections) == 1, "no second connection was opened for it"


def pack_of(request: dict) -> dict:
    """A pack answer holding one memory, whatever was asked."""
    return {"sections": {"memories": {"items": [{"memory_key": "k", "text": "a fact"}]}}}


class TestTheLoomBackendsConnectionIsHeldToTheSame:
    """Defect: the backend wrapped its transport so that the check before the write was lost;
    a kept connection the gateway closed just then broke the recall (GW-3, GW-5)."""

    async def test_a_recall_on_a_kept_connection_closed_before_the_write_is_sent_once_more(
        self, gateway: ScriptedGateway
    ) -> None:
        gateway.answer = pack_of
        transports: list[TrackedTransport] = []

        def tracked() -> TrackedTransport:
            transports.append(TrackedTransport())
            return transports[-1]

        base = gateway.url.removesuffix(MCP_PATH)
        async with LoomMemory(gateway_url=base, transport_factory=tracked) as memory:
            first = await memory.startup_recall("session-1")
            [loom_connection] = [number for number, _ in gateway.requests]
            loom = transports[-1]  # the catalog's client was made first
            second_recall = asyncio.create_task(memory.startup_recall("session-2"))
            while not loom.handed_out:  # until the recall takes the kept connection from the pool
                assert not second_recall.done(), "the premise: the recall is caught before it"
                await asyncio.sleep(0)
            assert loom.handed_out == loom.pool_connections, "the premise: the check is behind"
            gateway.close_connection(loom_connection)  # ... and the gateway closes it now
            second = await second_recall
        assert first.items == second.items == ("a fact",)
        sent_on = [number for number, _ in gateway.requests]
        assert sent_on[0] == loom_connection
        assert len(sent_on) == 2, "the second recall was sent once"
        assert sent_on[1] != loom_connection, "on a new connection"
