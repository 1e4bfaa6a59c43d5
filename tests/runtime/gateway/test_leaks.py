"""No client or socket leaks, whatever the failures (GW-8).

500 calls that end in policy refusals, calls the client gave up on, streams cut mid-event and
refused connections — through one kept connection and through one whose catalog names another
URL on every call, so a client is built and retired each time. Afterwards the process has as
many open file descriptors as before (±2).
"""

from __future__ import annotations

import os
from collections import Counter
from itertools import cycle

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
from provisioner.runtime.gateway.breaker import BREAKER_MAX_OPEN_S

from .fault_gateway import catalog_payload
from .tracking import TrackedTransport, settled_fds

pytestmark = pytest.mark.anyio

CALLS = 500
FD_SLACK = 2
DEADLINE_S = 2.0
HANG_DEADLINE_S = 0.02  # the calls the client gives up on


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
        # A hanging call's 20 ms may run out while its new connection is still being made on
        # a loaded machine, which is then an unreachable gateway rather than no answer.
        unanswered = outcomes.pop(NoAnswer, 0) + outcomes.pop(GatewayUnreachable, 0)
        assert outcomes == Counter({PolicyRefused: 250 + 62, BrokenAnswer: 63})
        assert unanswered == 63 + 62
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
