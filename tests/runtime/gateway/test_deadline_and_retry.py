"""The overall deadline (GW-4) and the one retry of a read after a short Retry-After (GW-6)."""

from __future__ import annotations

import pytest

from provisioner.runtime import (
    GatewayUnreachable,
    MayPass,
    McpGatewayServer,
    NoAnswer,
    ToolResult,
)
from provisioner.runtime.gateway.server import EXTRACTION, READ, RETRY_AFTER_MAX_WAIT_S, CallPolicy
from provisioner.runtime.gateway.wire import CONNECT_TIMEOUT_S

from .fault_gateway import ANSWER_ENDED, CLIENT_LEFT, HANG_LIMIT_S, TRICKLE_EVERY_S, key_of

pytestmark = pytest.mark.anyio


async def call(url: str, *, deadline_s: float = 5.0, policy: CallPolicy = READ, **seams):
    server = McpGatewayServer(url, **seams)
    try:
        return await server.call_tool(
            "loom_search",
            {"query": "tea"},
            deadline_s=deadline_s,
            policy=policy,
        )
    finally:
        await server.aclose()


class TestOverallDeadline:
    """GW-4, told apart without reading a clock: the fault gateway's pings and hangs end on
    their own after HANG_LIMIT_S, far past these deadlines. A call that kept waiting would see
    them end and come back with another outcome, and the gateway would record its answer as
    ended rather than the client as gone."""

    async def test_keep_alive_pings_do_not_stretch_the_deadline(
        self, scenario_base, fault_gateway
    ) -> None:
        """Pings arrive far more often than the deadline, yet the call ends in NoAnswer."""
        deadline_s = 0.3
        assert deadline_s > TRICKLE_EVERY_S * 5 and deadline_s * 5 < HANG_LIMIT_S
        base = scenario_base("trickle")
        with pytest.raises(NoAnswer) as caught:
            await call(base + "/s/loom/mcp", deadline_s=deadline_s)
        assert caught.value.deadline_s == deadline_s
        assert fault_gateway.ending(key_of(base)) == CLIENT_LEFT

    async def test_a_gateway_that_never_answers_costs_the_deadline(
        self, scenario_base, fault_gateway
    ) -> None:
        base = scenario_base("hang")
        with pytest.raises(NoAnswer) as caught:
            await call(base + "/s/loom/mcp", deadline_s=0.2)
        assert caught.value.deadline_s == 0.2
        assert fault_gateway.ending(key_of(base)) == CLIENT_LEFT

    async def test_a_stream_that_stays_open_after_its_answer_does_not_hold_the_call(
        self, scenario_base, fault_gateway
    ) -> None:
        """The stream pings on for HANG_LIMIT_S after the answer; the call hangs up first."""
        base = scenario_base("sse-then-pings")
        result = await call(base + "/s/loom/mcp", deadline_s=30)
        assert result.data == {"ok": True}
        assert fault_gateway.ending(key_of(base)) == CLIENT_LEFT

    async def test_the_gateway_tells_an_answer_that_ended_from_a_client_that_left(
        self, scenario_base, fault_gateway
    ) -> None:
        """The control for the three above: a whole answer read to its end is not a hang-up."""
        base = scenario_base("sse-lf")
        assert (await call(base + "/s/loom/mcp")).data["ok"] is True
        assert fault_gateway.ending(key_of(base)) == ANSWER_ENDED

    async def test_arguments_json_cannot_carry_are_refused_before_sending(
        self, scenario_base, fault_gateway
    ) -> None:
        base = scenario_base("result")
        server = McpGatewayServer(base + "/s/loom/mcp")
        with pytest.raises(ValueError):
            await server.call_tool("loom_search", {"top_k": float("nan")}, deadline_s=1)
        await server.aclose()
        assert fault_gateway.count(key_of(base)) == 0
        assert server.breaker.state == "closed"

    async def test_a_deadline_must_be_positive(self, scenario_base) -> None:
        with pytest.raises(ValueError):
            await call(scenario_base("result") + "/s/loom/mcp", deadline_s=0)


class TestReadRetry:
    async def test_a_read_waits_out_a_short_retry_after_and_tries_again(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        """GW-6: the per-agent limit sends Retry-After: 1; a read waits it out once."""
        base = scenario_base("429-once-ra1")
        result = await call(base + "/s/loom/mcp", clock=clock, sleep=sleep)
        assert isinstance(result, ToolResult)
        assert sleep.waits == [1.0]
        assert fault_gateway.count(key_of(base), "call") == 2

    async def test_a_retry_after_of_exactly_two_seconds_is_waited_out(
        self, scenario_base, clock, sleep
    ) -> None:
        result = await call(scenario_base("429-once-ra2") + "/s/loom/mcp", clock=clock, sleep=sleep)
        assert isinstance(result, ToolResult) and sleep.waits == [RETRY_AFTER_MAX_WAIT_S]

    async def test_an_http_date_retry_after_is_waited_out_too(
        self, scenario_base, clock, sleep
    ) -> None:
        result = await call(
            scenario_base("503-once-date") + "/s/loom/mcp", clock=clock, sleep=sleep
        )
        assert isinstance(result, ToolResult) and sleep.waits == [1.0]

    async def test_a_read_without_retry_after_tries_again_at_once(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        base = scenario_base("may-pass-once")
        result = await call(base + "/s/loom/mcp", clock=clock, sleep=sleep)
        assert isinstance(result, ToolResult) and sleep.waits == []
        assert fault_gateway.count(key_of(base), "call") == 2

    async def test_a_retry_after_over_two_seconds_fails_the_read_at_once(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        base = scenario_base("503-once-ra10")
        with pytest.raises(MayPass) as caught:  # a deadline with room for the wait
            await call(base + "/s/loom/mcp", deadline_s=60, clock=clock, sleep=sleep)
        assert caught.value.retry_after_s == 10.0 > RETRY_AFTER_MAX_WAIT_S
        assert sleep.waits == [] and fault_gateway.count(key_of(base), "call") == 1

    async def test_a_read_is_retried_only_once(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        base = scenario_base("429-always-ra1")
        with pytest.raises(MayPass):
            await call(base + "/s/loom/mcp", clock=clock, sleep=sleep)
        assert sleep.waits == [1.0] and fault_gateway.count(key_of(base), "call") == 2

    async def test_a_retry_after_longer_than_the_time_left_is_not_waited(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        """GW-4: the wait and the retry fit in the one deadline, or do not happen."""
        base = scenario_base("429-once-ra1")
        with pytest.raises(MayPass):
            await call(base + "/s/loom/mcp", deadline_s=0.8, clock=clock, sleep=sleep)
        assert sleep.waits == [] and fault_gateway.count(key_of(base), "call") == 1

    async def test_an_extraction_never_waits_and_is_never_retried(
        self, scenario_base, fault_gateway, clock, sleep
    ) -> None:
        """GW-6: policy=EXTRACTION is one attempt; the caller gets the Retry-After."""
        base = scenario_base("429-once-ra1")
        with pytest.raises(MayPass) as caught:
            await call(base + "/s/loom/mcp", policy=EXTRACTION, clock=clock, sleep=sleep)
        assert caught.value.retry_after_s == 1.0
        assert sleep.waits == [] and fault_gateway.count(key_of(base), "call") == 1


class TestWhatTheMessagesSay:
    """Defect: a connect timeout was NoAnswer under short deadlines and an unreachable gateway
    with an empty reason otherwise; after a retry NoAnswer named the time left (GW-5)."""

    async def test_a_connect_timeout_within_a_short_deadline_is_unreachable(
        self, unaccepting_url
    ) -> None:
        # A clock that stands still: the message names the time the try had, which a loaded
        # machine would otherwise shave before the try starts (0.296 s).
        server = McpGatewayServer(unaccepting_url + "/s/loom/mcp", clock=lambda: 0.0)
        with pytest.raises(GatewayUnreachable) as caught:
            await server.call_tool("loom_search", {}, deadline_s=0.3)
        await server.aclose()
        assert "no connection within 0.3 s" in caught.value.message
        assert server.breaker.state == "open", "an unreached gateway counts for the breaker"

    async def test_a_connect_timeout_says_how_long_it_waited(self, unaccepting_url) -> None:
        """The deadline leaves room for more: the 2 s connect limit of the contract ends it."""
        server = McpGatewayServer(unaccepting_url + "/s/loom/mcp")
        with pytest.raises(GatewayUnreachable) as caught:
            await server.call_tool("loom_search", {}, deadline_s=CONNECT_TIMEOUT_S * 3)
        await server.aclose()
        assert caught.value.message.endswith(f"no connection within {CONNECT_TIMEOUT_S:g} s")

    async def test_after_a_retry_no_answer_names_the_callers_deadline(
        self, scenario_base, clock, sleep
    ) -> None:
        """The first try meets Retry-After: 1 and waits it out; the retry gets no answer."""
        base = scenario_base("429-once-then-hang")
        with pytest.raises(NoAnswer) as caught:
            await call(base + "/s/loom/mcp", deadline_s=1.3, clock=clock, sleep=sleep)
        assert sleep.waits == [1.0]
        assert caught.value.deadline_s == 1.3
        assert "deadline of 1.3 s" in caught.value.message
