"""The per-call path keeps its guarantees with less work (GW-4, GW-5, GW-8).

Each call follows httpcore's trace only until its request is being sent, builds no httpx
timeouts of its own (its deadline bounds the whole request; the client adds the 2 s connect
limit), makes its request from headers merged once, returns with an event stream's answer
while the stream's end is read in the background, and drives a response's close to its end in
its own task. These tests hold the guarantees those shortcuts must keep: a hang after
connecting is still "no answer", a hang while connecting still "not reached", the request on
the wire is the one httpx would build (cookies included), a stream's connection still serves
the next call, and a cancellation still never cuts a close short.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator

import anyio
import httpx
import pytest

from provisioner.runtime.gateway import transport as transport_module
from provisioner.runtime.gateway.client import McpGatewayServer
from provisioner.runtime.gateway.errors import GatewayUnreachable, NoAnswer
from provisioner.runtime.gateway.protocol import REQUEST_HEADERS
from provisioner.runtime.gateway.transport import (
    PostRequests,
    StreamTails,
    finish_despite_cancellation,
    new_http_client,
)
from tests.support.loopback import LoopbackServer, read_request_body

from .fault_gateway import key_of
from .tracking import TrackedTransport

pytestmark = pytest.mark.anyio


class TestTracingOnlyUntilSent:
    async def test_a_kept_connection_that_then_gets_no_answer_is_no_answer(
        self, scenario_base, fault_gateway
    ) -> None:
        """GW-5: after the first call the trace is no longer followed, yet the second call's
        hang, on the same socket, is told apart from a gateway not reached."""
        base = scenario_base("result-once-then-hang")
        async with McpGatewayServer(base + "/s/loom/mcp") as server:
            first = await server.call_tool("loom_search", {}, deadline_s=5)
            with pytest.raises(NoAnswer):
                await server.call_tool("loom_search", {}, deadline_s=0.3)
        assert first.data["ok"] is True
        calls = [h for h in fault_gateway.hits if h.key == key_of(base) and h.kind == "call"]
        assert len({hit.client_port for hit in calls}) == 1, "both calls on one socket"

    async def test_a_connect_that_hangs_is_still_not_reached(self, unaccepting_url) -> None:
        """GW-5: the connect events come before any other, so they are always followed."""
        async with McpGatewayServer(unaccepting_url + "/s/loom/mcp") as server:
            with pytest.raises(GatewayUnreachable, match="no connection within"):
                await server.call_tool("loom_search", {}, deadline_s=0.3)


async def closing(log: list[str], *, waits: int = 3, error: Exception | None = None) -> None:
    """A clean-up that waits on timers and on bare turns of the loop, as httpcore's close does."""
    for _ in range(waits):
        await asyncio.sleep(0.01)
        await asyncio.sleep(0)
    if error is not None:
        raise error
    log.append("closed")


class TestCleanUpIsNeverCutShort:
    async def test_a_cancellation_during_the_clean_up_is_raised_once_it_is_over(self) -> None:
        log: list[str] = []
        task = asyncio.create_task(finish_despite_cancellation(closing(log)))
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]

    async def test_a_deadline_during_the_clean_up_is_a_timeout_once_it_is_over(self) -> None:
        log: list[str] = []
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.015):
                await finish_despite_cancellation(closing(log))
        assert log == ["closed"]

    async def test_many_cancellations_still_let_the_clean_up_finish(self) -> None:
        log: list[str] = []
        task = asyncio.create_task(finish_despite_cancellation(closing(log, waits=6)))
        for _ in range(5):
            await asyncio.sleep(0.01)
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]

    async def test_an_error_of_the_clean_up_is_raised_as_it_is(self) -> None:
        with pytest.raises(OSError, match="socket"):
            await finish_despite_cancellation(closing([], error=OSError("socket gone")))

    async def test_after_a_cancellation_the_cancellation_is_what_counts(self) -> None:
        task = asyncio.create_task(
            finish_despite_cancellation(closing([], error=OSError("socket gone")))
        )
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def test_the_clean_up_runs_in_the_callers_task(self) -> None:
        """anyio's cancel scopes, which httpcore's close enters, must be left in the task that
        entered them; a clean-up moved to another task part-way would fail there."""
        log: list[str] = []

        async def shielded() -> None:
            with anyio.CancelScope(shield=True):
                await closing(log)

        task = asyncio.create_task(finish_despite_cancellation(shielded()))
        await asyncio.sleep(0.015)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert log == ["closed"]


class HeaderEcho:
    """An ASGI gateway that answers every tool call with an empty result, records each
    request's headers, and sets a cookie on its answers once ``cookie`` is given (as a load
    balancer pinning a client to one backend would)."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.cookie: str | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = await read_request_body(receive)
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        request_id = json.loads(body)["id"]
        answer = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [], "isError": False}}
        head = [(b"content-type", b"application/json")]
        if self.cookie:
            head.append((b"set-cookie", f"{self.cookie}; Path=/".encode()))
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


@pytest.fixture
def header_echo():
    app = HeaderEcho()
    server = LoopbackServer(app)
    server.start()
    yield app, server.base_url
    server.stop()


class TestEachRequestIsTheOneHttpxWouldBuild:
    """A call's request is made from headers merged once (``PostRequests``), not by
    ``build_request`` on every call; what goes on the wire must not change (GW-3)."""

    def test_the_request_equals_what_build_request_makes(self) -> None:
        client = new_http_client(None)
        url = "http://127.0.0.1:9/s/loom/mcp"
        made = PostRequests(client, url, REQUEST_HEADERS).build(b'{"id": 1}')
        built = client.build_request("POST", url, content=b'{"id": 1}', headers=REQUEST_HEADERS)
        assert (made.method, made.url, made.headers.raw, made.content, made.extensions) == (
            built.method,
            built.url,
            built.headers.raw,
            built.content,
            built.extensions,
        )

    async def test_each_call_carries_the_contract_headers_and_its_own_length(
        self, header_echo
    ) -> None:
        app, base = header_echo
        async with McpGatewayServer(base + "/s/loom/mcp") as server:
            await server.call_tool("loom_search", {"q": "a"}, deadline_s=5)
            await server.call_tool("loom_search", {"q": "a longer query"}, deadline_s=5)
        first, second = app.headers
        for sent in (first, second):
            assert sent["accept"] == REQUEST_HEADERS["Accept"]
            assert sent["content-type"] == "application/json"
            assert sent["mcp-protocol-version"] == REQUEST_HEADERS["MCP-Protocol-Version"]
        assert int(second["content-length"]) - int(first["content-length"]) == len(" longer query")

    async def test_a_cookie_the_gateway_sets_is_sent_back_on_the_next_call(
        self, header_echo
    ) -> None:
        app, base = header_echo
        app.cookie = "pinned=backend-2"
        async with McpGatewayServer(base + "/s/loom/mcp") as server:
            await server.call_tool("loom_search", {}, deadline_s=5)
            await server.call_tool("loom_search", {}, deadline_s=5)
        assert "cookie" not in app.headers[0]
        assert app.headers[1]["cookie"] == "pinned=backend-2"


HELD_END_MAX_S = 30.0  # how long a stream's end may be held; the test lets it go far sooner


class HeldStreamEnd:
    """An ASGI gateway answering each tool call as an event stream whose end it holds until
    the test lets it go (``release``); it records each call's client port."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended = 0
        self.client_ports: list[int] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = await read_request_body(receive)
        self.client_ports.append(scope["client"][1])
        result = {"content": [], "structuredContent": {"ok": True}, "isError": False}
        answer = {"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": result}
        head = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        event = b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await asyncio.to_thread(self.release.wait, HELD_END_MAX_S)
        self.ended += 1  # before the end goes out: the client cannot see it sooner
        await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def held_stream_end(monkeypatch: pytest.MonkeyPatch):
    """The gateway, and a client that reads a tail for as long as the test holds it: the
    wait it gives a tail (50 ms) would otherwise depend on how fast this machine is."""
    monkeypatch.setattr(transport_module, "STREAM_TAIL_WAIT_S", HELD_END_MAX_S)
    app = HeldStreamEnd()
    server = LoopbackServer(app)
    server.start()
    yield app, server.base_url
    app.release.set()
    server.stop()


def tracked_server(base: str) -> tuple[TrackedTransport, McpGatewayServer]:
    """A tool client for the gateway at ``base``, on a transport whose pool a test can see."""
    transport = TrackedTransport()
    return transport, McpGatewayServer(base + "/s/loom/mcp", transport=transport)


class TestAStreamsTailIsReadAfterTheAnswer:
    """REL-3: a call answered in an event stream returns with the answer; the stream's end,
    which a server sends a moment later, is read in the background, and its connection then
    serves the next call."""

    async def test_the_call_returns_before_the_stream_ends_and_the_connection_is_kept(
        self, held_stream_end
    ) -> None:
        app, base = held_stream_end
        transport, server = tracked_server(base)
        async with server:
            first = await server.call_tool("loom_search", {}, deadline_s=5)
            assert app.ended == 0, "answered while the stream was still open"
            assert transport.busy_connections == 1, "its tail is being read"
            app.release.set()
            await server.settled()
            assert (app.ended, transport.busy_connections, transport.connections) == (1, 0, 1)
            second = await server.call_tool("loom_search", {}, deadline_s=5)
        assert first.data == second.data == {"ok": True}
        assert app.client_ports[0] == app.client_ports[1], "the kept connection served it"

    async def test_a_call_made_while_a_tail_is_read_waits_for_it_and_reuses_its_connection(
        self, held_stream_end
    ) -> None:
        app, base = held_stream_end
        _, server = tracked_server(base)
        async with server:
            await server.call_tool("loom_search", {}, deadline_s=5)
            second = asyncio.create_task(server.call_tool("loom_search", {}, deadline_s=5))
            await asyncio.sleep(0)
            assert not second.done() and len(app.client_ports) == 1, "it waits for the tail"
            app.release.set()
            await second
        assert len(set(app.client_ports)) == 1, "no second connection was opened"

    async def test_closing_the_client_waits_for_the_tails_before_it_closes_the_pool(
        self, held_stream_end
    ) -> None:
        app, base = held_stream_end
        transport, server = tracked_server(base)
        await server.call_tool("loom_search", {}, deadline_s=5)
        closing = asyncio.create_task(server.aclose())
        await asyncio.sleep(0)
        assert not closing.done(), "the tail is waited for"
        app.release.set()
        await closing
        assert transport.closed and app.ended == 1


class HeldEnd(httpx.AsyncByteStream):
    """A response body whose end comes when the test sets ``end``."""

    def __init__(self) -> None:
        self.end = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        await self.end.wait()
        return
        yield b""  # an async generator that ends without a chunk

    async def aclose(self) -> None:
        self.end.set()


TURNS_TO_WAKE = 10  # loop turns for a task whose awaited task has ended to run again (3)


class TestTheTailsACallWaitsFor:
    async def test_each_call_waits_for_one_tail_of_its_own_the_oldest_first(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A call needs one connection: it waits for one tail, the oldest no other call waits
        for, and no more; so as many calls as tails each find a connection, and a call costs
        the same however many tails are being read."""
        monkeypatch.setattr(transport_module, "STREAM_TAIL_WAIT_S", HELD_END_MAX_S)
        tails = StreamTails()
        oldest, newest = HeldEnd(), HeldEnd()
        responses = [httpx.Response(200, stream=body) for body in (oldest, newest)]
        for response in responses:
            tails.read_on(response, response.aiter_bytes())
        first = asyncio.create_task(tails.ended())
        second = asyncio.create_task(tails.ended())
        third = asyncio.create_task(tails.ended())
        await asyncio.sleep(0)
        assert third.done(), "no tail was left for it: it goes at once"
        assert not first.done() and not second.done()
        oldest.end.set()
        while not responses[0].is_closed:  # the oldest tail is read and its response closed
            await asyncio.sleep(0)
        await woken(first)
        assert not second.done(), "it waits for the newest tail, still being read"
        newest.end.set()
        await second
        await tails.settled()
        assert not tails.reading


async def woken(task: asyncio.Task) -> None:
    """Let the loop turn until ``task``, whose awaited task has ended, has run again."""
    for _ in range(TURNS_TO_WAKE):
        if task.done():
            return
        await asyncio.sleep(0)
    assert task.done(), "it was not woken by the end of the tail it waits for"
