"""The client's own breaker (GW-7): 15 s, doubling to 5 min, closed by an answer."""

from __future__ import annotations

import httpx
import pytest

from provisioner.runtime.gateway.breaker import BREAKER_FIRST_OPEN_S, BREAKER_MAX_OPEN_S, Breaker
from provisioner.runtime.gateway.client import EXTRACTION, McpGatewayServer
from provisioner.runtime.gateway.errors import (
    CircuitOpen,
    GatewayError,
    GatewayUnreachable,
    NoAnswer,
)

from .deadline_after_arrival import GUARD_DEADLINE_S, DeadlineAfterArrival
from .fault_gateway import CLIENT_LEFT, key_of

pytestmark = pytest.mark.anyio

OUTAGE_S = 600
ATTEMPTS_IN_OUTAGE = 6  # GW-7: at 0, 15, 45, 105, 225 and 465 s of a 10-minute outage


class CountingTransport(httpx.AsyncBaseTransport):
    """httpx's own network transport, counting the requests that reach it."""

    def __init__(self) -> None:
        self.requests = 0
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def fail_once(breaker: Breaker) -> None:
    """One call that was let through and then failed."""
    breaker.before_call().failed()


class TestBreakerStates:
    def test_a_failure_opens_it_for_15_seconds(self, clock) -> None:
        """GW-7."""
        breaker = Breaker(clock=clock)
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S - 0.1)
        with pytest.raises(CircuitOpen) as caught:
            breaker.before_call()
        assert caught.value.retry_in_s == pytest.approx(0.1)
        assert breaker.retry_in_s == pytest.approx(0.1)
        clock.advance(0.1)
        assert breaker.before_call().trial
        assert breaker.state == "half-open"

    def test_the_open_period_doubles_while_failures_go_on_up_to_5_minutes(self, clock) -> None:
        """GW-7."""
        breaker = Breaker(clock=clock)
        periods = []
        for _ in range(8):
            fail_once(breaker)
            periods.append(breaker.open_for_s)
            clock.advance(periods[-1])
        assert periods == [15, 30, 60, 120, 240, 300, 300, 300]
        assert BREAKER_MAX_OPEN_S == 300
        assert breaker.consecutive_failures == 8

    def test_an_answer_closes_it(self, clock) -> None:
        """GW-7: a success closes it, and the next failure starts again at 15 s."""
        breaker = Breaker(clock=clock)
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S)
        breaker.before_call().answered()
        assert breaker.state == "closed" and breaker.retry_in_s == 0
        fail_once(breaker)
        assert breaker.snapshot()["open_for_s"] == BREAKER_FIRST_OPEN_S

    def test_only_one_trial_goes_while_half_open(self, clock) -> None:
        breaker = Breaker(clock=clock)
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S)
        trial = breaker.before_call()
        with pytest.raises(CircuitOpen):
            breaker.before_call()
        trial.abandoned()
        assert breaker.before_call().trial

    def test_an_attempt_counts_only_its_first_verdict(self, clock) -> None:
        breaker = Breaker(clock=clock)
        attempt = breaker.before_call()
        attempt.failed()
        attempt.failed()
        attempt.answered()
        assert breaker.state == "open" and breaker.consecutive_failures == 1


class TestAttemptsFromBeforeTheOpening:
    """Defect: a late verdict of a call that began before the breaker opened was taken for
    the half-open trial's (GW-7)."""

    def test_a_late_failure_of_an_older_call_does_not_double_the_period(self, clock) -> None:
        breaker = Breaker(clock=clock)
        older = breaker.before_call()
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S)
        trial = breaker.before_call()
        older.failed()  # the outage it saw is already counted
        assert breaker.open_for_s == BREAKER_FIRST_OPEN_S
        assert breaker.trial_in_flight
        trial.answered()
        assert breaker.state == "closed"

    def test_a_cancelled_older_call_does_not_let_a_second_trial_through(self, clock) -> None:
        breaker = Breaker(clock=clock)
        older = breaker.before_call()
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S)
        breaker.before_call()  # the trial, still under way
        older.abandoned()
        with pytest.raises(CircuitOpen):
            breaker.before_call()

    def test_a_late_failure_after_the_gateway_answered_does_not_reopen_it(self, clock) -> None:
        breaker = Breaker(clock=clock)
        older = breaker.before_call()
        fail_once(breaker)
        clock.advance(BREAKER_FIRST_OPEN_S)
        breaker.before_call().answered()
        older.failed()
        assert breaker.state == "closed"

    def test_a_failure_of_a_call_that_began_while_closed_opens_it(self, clock) -> None:
        breaker = Breaker(clock=clock)
        first, second = breaker.before_call(), breaker.before_call()
        second.answered()
        first.failed()
        assert breaker.state == "open"


class TestBreakerOnTheWire:
    async def test_an_open_breaker_fails_calls_without_touching_the_network(
        self, refused_url, clock
    ) -> None:
        transport = CountingTransport()
        server = McpGatewayServer(refused_url + "/s/loom/mcp", transport=transport, clock=clock)
        with pytest.raises(GatewayUnreachable):
            await server.call_tool("loom_search", {}, deadline_s=1)
        for _ in range(20):
            with pytest.raises(CircuitOpen):
                await server.call_tool("loom_search", {}, deadline_s=1)
        await server.aclose()
        assert transport.requests == 1

    @pytest.mark.parametrize("outage", ["refused", "hang"])
    async def test_a_ten_minute_outage_costs_6_attempts(
        self, outage, refused_url, scenario_base, clock
    ) -> None:
        """GW-7: calls every 5 s for 10 minutes; the breaker lets few of them reach the wire."""
        base = refused_url if outage == "refused" else scenario_base("hang")
        transport = CountingTransport()
        server = McpGatewayServer(base + "/s/loom/mcp", transport=transport, clock=clock)
        outcomes = []
        for _ in range(0, OUTAGE_S + 1, 5):
            try:
                await server.call_tool("loom_search", {}, deadline_s=0.02)
            except (GatewayUnreachable, NoAnswer, CircuitOpen) as error:
                outcomes.append(type(error))
            clock.advance(5)
        await server.aclose()
        assert outcomes.count(CircuitOpen) == len(outcomes) - transport.requests
        assert transport.requests == ATTEMPTS_IN_OUTAGE

    async def test_a_call_the_client_gave_up_on_opens_the_breaker(
        self, scenario_base, fault_gateway, clock
    ) -> None:
        """GW-7: the gateway's own circuit never learns of it, so this breaker must count it.

        The deadline strikes once the gateway has the request (``DeadlineAfterArrival``), so
        the call is always one the gateway got and left unanswered, never a connect cut short.
        """
        base = scenario_base("hang")
        transport = DeadlineAfterArrival(fault_gateway, key_of(base))
        server = McpGatewayServer(base + "/s/loom/mcp", transport=transport, clock=clock)
        with pytest.raises(NoAnswer):
            await server.call_tool("loom_search", {}, deadline_s=GUARD_DEADLINE_S)
        assert transport.arrived == 1
        assert server.breaker.state == "open"
        await server.aclose()
        assert fault_gateway.ending(key_of(base)) == CLIENT_LEFT

    @pytest.mark.parametrize(
        "scenario", ["policy", "may-pass", "http-503", "http-504", "fault-uncoded", "bad-json"]
    )
    async def test_an_answer_of_any_kind_does_not_open_it(
        self, scenario, scenario_base, fault_gateway, clock
    ) -> None:
        base = scenario_base(scenario)
        server = McpGatewayServer(base + "/s/loom/mcp", clock=clock)
        for _ in range(3):
            with pytest.raises(GatewayError):
                await server.call_tool("loom_search", {}, deadline_s=1, policy=EXTRACTION)
        await server.aclose()
        assert server.breaker.state == "closed"
        assert fault_gateway.count(key_of(base), "call") == 3

    async def test_a_success_after_the_open_period_closes_it(self, scenario_base, clock) -> None:
        breaker = Breaker(clock=clock)
        fail_once(breaker)
        server = McpGatewayServer(
            scenario_base("result") + "/s/loom/mcp", clock=clock, breaker=breaker
        )
        with pytest.raises(CircuitOpen):
            await server.call_tool("loom_search", {}, deadline_s=1)
        clock.advance(BREAKER_FIRST_OPEN_S)
        await server.call_tool("loom_search", {}, deadline_s=1)
        await server.aclose()
        assert breaker.state == "closed"
