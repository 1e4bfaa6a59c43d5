"""No client or socket leaks, whatever the failures (GW-8).

500 calls that end in policy refusals, calls the client gave up on, streams cut mid-event and
refused connections — through one kept connection and through one whose catalog names another
URL on every call, so a client is built and retired each time. Afterwards the process has as
many open file descriptors as before (±2).
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from itertools import cycle

import httpx
import pytest

from provisioner.runtime import (
    Breaker,
    BrokenAnswer,
    GatewayCatalog,
    GatewayUnreachable,
    LoomConnection,
    NoAnswer,
    PolicyRefused,
    parse_catalog,
)
from provisioner.runtime.breaker import BREAKER_MAX_OPEN_S

from .fault_gateway import catalog_payload

pytestmark = pytest.mark.anyio

CALLS = 500
FD_SLACK = 2
SETTLE_S = 3.0
DEADLINE_S = 2.0
HANG_DEADLINE_S = 0.02  # the calls the client gives up on


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def settled_fds() -> int:
    """The fd count once it has stopped changing for a moment.

    The servers run in this process (in other threads), so their side of each connection
    closes a little after the client's; the count is read once both sides are done.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + SETTLE_S
    last, steady = open_fds(), 0
    while steady < 5 and loop.time() < give_up:
        await asyncio.sleep(0.02)
        now = open_fds()
        steady = steady + 1 if now == last else 0
        last = now
    return last


TLS = httpx.create_ssl_context()  # built once: a context per transport costs tens of ms


class TrackedTransport(httpx.AsyncBaseTransport):
    """httpx's own network transport, remembering whether its client closed it."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport(verify=TLS)
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        self.closed = True
        await self._inner.aclose()


def close_the_breaker(breaker: Breaker, clock) -> None:
    """Let the open period pass and answer the trial, so the next call goes on the wire."""
    if breaker.state != "closed":
        clock.advance(BREAKER_MAX_OPEN_S)
        breaker.before_call().answered()


class RotatingCatalog:
    """Names the next of several gateways for ``loom`` on every read: a new URL each call."""

    def __init__(self, bases: list[str]) -> None:
        self._bases = cycle(bases)
        self.last_error = None

    async def current(self, *, deadline_s: float = 5.0):
        return parse_catalog(catalog_payload(), next(self._bases))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
class TestNoLeaks:
    async def test_500_failing_calls_leave_no_socket_open(
        self, scenario_base, refused_url, clock
    ) -> None:
        bases = [scenario_base(name) for name in ("policy", "hang", "cut-stream")]
        rotation = [bases[1], bases[2], refused_url, bases[0]]
        await self._round(bases[0], rotation, clock, 8, [])  # warm up: loop, executor, TLS
        baseline = await settled_fds()

        # Every transport stays referenced, so a client left open would keep its sockets
        # instead of having them freed with it by the garbage collector.
        transports: list[TrackedTransport] = []
        outcomes = await self._round(bases[0], rotation, clock, CALLS, transports)

        # half the calls are kept refusals; the rotation runs hang, cut, refused, policy
        assert outcomes == Counter(
            {PolicyRefused: 250 + 62, NoAnswer: 63, BrokenAnswer: 63, GatewayUnreachable: 62}
        )
        assert len(transports) == 1 + CALLS // 2, "one kept client, a new one per rotation"
        assert all(transport.closed for transport in transports)
        assert abs(await settled_fds() - baseline) <= FD_SLACK

    @staticmethod
    async def _round(
        policy_base: str, rotation: list[str], clock, calls: int, transports: list
    ) -> Counter:
        """``calls`` calls, alternating between a kept and a rotating connection; all closed."""

        def tracked() -> TrackedTransport:
            transports.append(TrackedTransport())
            return transports[-1]

        kept_catalog = GatewayCatalog(policy_base, clock=clock)
        kept = LoomConnection(kept_catalog, clock=clock, transport_factory=tracked)
        rotating = LoomConnection(RotatingCatalog(rotation), clock=clock, transport_factory=tracked)
        outcomes: Counter = Counter()
        for number in range(calls):
            connection = kept if number % 2 == 0 else rotating
            target = policy_base if number % 2 == 0 else rotation[(number // 2) % len(rotation)]
            deadline_s = HANG_DEADLINE_S if "/hang/" in target else DEADLINE_S
            try:
                await connection.call_tool("loom_search", {"query": "x"}, deadline_s=deadline_s)
            except (PolicyRefused, NoAnswer, BrokenAnswer, GatewayUnreachable) as error:
                outcomes[type(error)] += 1
            close_the_breaker(connection.breaker, clock)  # keep every call on the wire
        await kept.aclose()
        await rotating.aclose()
        await kept_catalog.aclose()
        return outcomes
