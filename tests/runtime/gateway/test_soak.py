"""The gateway client under load, against the official mcp SDK server on loopback (GW-8).

Waves of concurrent calls, a long run of calls whose streams end late while the event loop is
kept busy, and waves of which half the calls are cancelled: every answer matches its call, no
pooled connection is left busy, and once closed the process has the sockets it started with.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from collections.abc import AsyncIterator

import pytest

from provisioner.runtime.gateway.catalog import GatewayCatalog
from provisioner.runtime.gateway.client import LoomConnection, McpGatewayServer
from provisioner.runtime.gateway.transport import STREAM_TAIL_WAIT_S

from .fault_gateway import STREAM_TAIL_S
from .tracking import TrackedTransport, TransportLog, settled_fds

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd"),
]

WAVES = 30
WAVE_SIZE = 100
SLOW_END_CALLS = 1000
MAX_CONNECTIONS_WITH_SLOW_ENDS = 20
CANCEL_WAVES = 5
CANCEL_WITHIN_S = 0.03
FD_SLACK = 2
DEADLINE_S = 30.0  # far above any answer here: a loaded machine must not turn load into errors
BUSY_BLOCK_S = 0.003


async def search(connection: LoomConnection, query: str) -> bool:
    """One call; True when its answer is the answer to this very query."""
    result = await connection.call_tool(
        "loom_search", {"query": query, "top_k": 1}, deadline_s=DEADLINE_S
    )
    return result.data["results"][0]["content_excerpt"] == f"{query} #0"


@contextlib.asynccontextmanager
async def busy_event_loop() -> AsyncIterator[None]:
    """A task that keeps blocking the loop for a few ms at a time, as a loaded engine does."""

    async def hog() -> None:
        while True:
            time.sleep(BUSY_BLOCK_S)
            await asyncio.sleep(0)

    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class TestWaves:
    async def test_30_waves_of_100_concurrent_calls_all_answer_their_own_call(
        self, sdk_peer
    ) -> None:
        base, _ = sdk_peer
        baseline = await settled_fds()
        built = TransportLog()
        errors: list[BaseException] = []
        mismatched = 0
        async with (
            GatewayCatalog(base) as catalog,
            LoomConnection(catalog, transport_factory=built) as connection,
        ):
            for wave in range(WAVES):
                queries = [f"w{wave}-c{number}" for number in range(WAVE_SIZE)]
                outcomes = await asyncio.gather(
                    *(search(connection, query) for query in queries), return_exceptions=True
                )
                errors += [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
                mismatched += outcomes.count(False)
                assert connection.server is not None
                await connection.server.settled()  # the wave's streams read to their end
                assert built.built[0].busy_connections == 0, f"after wave {wave}"
        assert [repr(error.__cause__ or error) for error in errors] == [] and mismatched == 0
        assert built.all_closed
        assert abs(await settled_fds() - baseline) <= FD_SLACK


class TestStreamsThatEndLate:
    async def test_1000_calls_whose_stream_ends_late_never_pile_up_connections(
        self, scenario_base
    ) -> None:
        """Each stream ends about STREAM_TAIL_S after its answer, when the client stops
        reading it, while another task keeps the loop busy.

        Before the fix, the tail's timeout struck inside the close of every few dozenth
        response and its connection stayed busy for good, until the pool was full."""
        transport = TrackedTransport()
        most_connections = 0
        url = scenario_base("sse-slow-end") + "/s/loom/mcp"
        async with McpGatewayServer(url, transport=transport) as server, busy_event_loop():
            for number in range(SLOW_END_CALLS):
                await server.call_tool("loom_search", {"n": number}, deadline_s=DEADLINE_S)
                most_connections = max(most_connections, transport.connections)
            result = await server.call_tool("loom_search", {"n": -1}, deadline_s=DEADLINE_S)
        assert most_connections <= MAX_CONNECTIONS_WITH_SLOW_ENDS
        assert result.data == {"query": {"n": -1}}
        assert STREAM_TAIL_S == STREAM_TAIL_WAIT_S, "the premise: both end together"


class TestCancelledCalls:
    async def test_cancelling_half_of_each_wave_leaks_nothing_and_leaves_the_breaker_closed(
        self, sdk_peer
    ) -> None:
        base, _ = sdk_peer
        baseline = await settled_fds()
        built = TransportLog()
        chance = random.Random(7)
        async with (
            GatewayCatalog(base) as catalog,
            LoomConnection(catalog, transport_factory=built) as connection,
        ):
            await search(connection, "warm-up")
            for wave in range(CANCEL_WAVES):
                calls = [
                    asyncio.create_task(search(connection, f"w{wave}-c{number}"))
                    for number in range(WAVE_SIZE)
                ]
                for call in chance.sample(calls, WAVE_SIZE // 2):
                    asyncio.get_running_loop().call_later(
                        chance.uniform(0, CANCEL_WITHIN_S), call.cancel
                    )
                outcomes = await asyncio.gather(*calls, return_exceptions=True)
                assert all(
                    outcome is True or isinstance(outcome, asyncio.CancelledError)
                    for outcome in outcomes
                )
                if connection.server is not None:
                    await connection.server.settled()  # answered streams read to their end
                assert built.built[0].busy_connections == 0, f"after wave {wave}"
            assert connection.breaker.state == "closed"
            assert await search(connection, "after the waves")
        assert built.all_closed
        assert abs(await settled_fds() - baseline) <= FD_SLACK
