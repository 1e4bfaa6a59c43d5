"""Every row of contracts/gateway.md's answer table maps to exactly one outcome (GW-5).

Each row is a real answer from the loopback fault gateway (or a real refused connection), and
the test asserts the exact class, not just a base class: two rows that meant different things
to the caller must never come back as the same exception.

No row races the clock: an answer comes whatever the deadline, which is only a guard; a hang
ends once the gateway has the request (``DeadlineAfterArrival``), never in a connect cut
short; pings end only by a real deadline, and the gateway pings on far longer (HANG_LIMIT_S).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from provisioner.runtime.gateway.client import EXTRACTION, McpGatewayServer
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CodedFault,
    GatewayCallTimeout,
    GatewayUnreachable,
    InternalFault,
    MayPass,
    NoAnswer,
    PolicyRefused,
    ToolRefused,
)
from provisioner.runtime.gateway.protocol import RETRY_AFTER_CAP_S, ToolResult

from .deadline_after_arrival import GUARD_DEADLINE_S, DeadlineAfterArrival
from .fault_gateway import FaultGateway, key_of

pytestmark = pytest.mark.anyio

PINGS_DEADLINE_S = 0.25  # the pings row's deadline: real, and far shorter than the pings

# (row of the table, fault gateway scenario, the one outcome class)
ROWS = [
    ("result, isError false", "result", ToolResult),
    ("result, isError false, JSON only as text", "text-only", ToolResult),
    ("result as an LF event stream", "sse-lf", ToolResult),
    ("result as a CR event stream", "sse-cr", ToolResult),
    ("result as a CRLF event stream", "sse-crlf", ToolResult),
    ("result, isError true", "tool-refused", ToolRefused),
    ("error -32001", "policy", PolicyRefused),
    ("error -32001 carried by HTTP 403", "policy-403", PolicyRefused),
    ("error -32002", "may-pass", MayPass),
    ("error -32000 coded", "fault-coded", CodedFault),
    ("error -32000 uncoded", "fault-uncoded", InternalFault),
    ("error -32602", "bad-arguments", BrokenAnswer),
    ("error -32601", "unknown-method", BrokenAnswer),
    ("HTTP 413", "http-413", BodyTooLarge),
    ("HTTP 429", "http-429", MayPass),
    ("HTTP 502", "http-502", MayPass),
    ("HTTP 503", "http-503", MayPass),
    ("HTTP 504", "http-504", GatewayCallTimeout),
    ("error 'MCP server timed out'", "call-limit", GatewayCallTimeout),
    ("no answer: the gateway hangs", "hang", NoAnswer),
    ("no answer: only keep-alive pings", "trickle", NoAnswer),
    ("broken: bad JSON", "bad-json", BrokenAnswer),
    ("broken: result of the wrong shape", "wrong-shape", BrokenAnswer),
    ("broken: answer to another id", "wrong-id", BrokenAnswer),
    ("broken: stream cut mid-event", "cut-stream", BrokenAnswer),
    ("broken: JSON body cut short", "cut-json", BrokenAnswer),
    ("broken: HTML instead of JSON", "html", BrokenAnswer),
    ("broken: HTTP 500 without JSON-RPC", "http-500", BrokenAnswer),
    ("broken: a redirect, not followed", "redirect", BrokenAnswer),
]


async def outcome_of(url: str, *, deadline_s: float = GUARD_DEADLINE_S, **kwargs) -> object:
    """What one call to ``url`` ends in: the ToolResult, or the exception raised."""
    server = McpGatewayServer(url, **kwargs)
    try:
        return await server.call_tool(
            "loom_search", {"query": "tea"}, deadline_s=deadline_s, policy=EXTRACTION
        )
    except Exception as error:
        return error
    finally:
        await server.aclose()


def unanswered_seams(scenario: str, gateway: FaultGateway, base: str) -> dict[str, Any]:
    """How a call to a gateway that never answers ``scenario`` is brought to its end."""
    if scenario == "hang":
        return {"transport": DeadlineAfterArrival(gateway, key_of(base))}
    if scenario == "trickle":
        return {"deadline_s": PINGS_DEADLINE_S}
    return {}


class UnresolvableHost(httpx.AsyncBaseTransport):
    """Stands in for the resolver failing, with the exception httpx raises for it.

    A real DNS failure would need a resolver query, which leaves loopback.
    """

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)


class TestOutcomeTable:
    @pytest.mark.parametrize(("row", "scenario", "expected"), ROWS, ids=[r[0] for r in ROWS])
    async def test_each_answer_maps_to_exactly_one_outcome(
        self, scenario_base, fault_gateway, row, scenario, expected
    ) -> None:
        base = scenario_base(scenario)
        seams = unanswered_seams(scenario, fault_gateway, base)
        outcome = await outcome_of(base + "/s/loom/mcp", **seams)
        assert type(outcome) is expected, f"{row}: got {outcome!r}"

    async def test_connection_refused_is_unreachable(self, refused_url) -> None:
        outcome = await outcome_of(refused_url + "/s/loom/mcp")
        assert type(outcome) is GatewayUnreachable

    async def test_a_name_that_does_not_resolve_is_unreachable(self) -> None:
        outcome = await outcome_of(
            "http://gateway.invalid/s/loom/mcp", transport=UnresolvableHost()
        )
        assert type(outcome) is GatewayUnreachable


class TestOutcomeDetails:
    async def test_a_coded_fault_carries_loom_s_code(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("fault-coded") + "/s/loom/mcp")
        assert outcome.code == "BACKEND_UNAVAILABLE"

    async def test_an_uncoded_fault_has_no_code(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("fault-uncoded") + "/s/loom/mcp")
        assert outcome.code is None

    async def test_a_policy_refusal_keeps_the_gateway_s_message(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("policy") + "/s/loom/mcp")
        assert outcome.message == "no credential set for loom"

    async def test_a_refusing_tool_s_text_says_why(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("tool-refused") + "/s/loom/mcp")
        assert outcome.text == "namespace not found"

    @pytest.mark.parametrize(("scenario", "seconds"), [("http-429", 1.0), ("http-503", 3.0)])
    async def test_may_pass_carries_the_retry_after(self, scenario_base, scenario, seconds) -> None:
        outcome = await outcome_of(scenario_base(scenario) + "/s/loom/mcp")
        assert outcome.retry_after_s == seconds

    async def test_a_result_prefers_structured_content(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("result") + "/s/loom/mcp")
        assert outcome.data == {"ok": True, "arguments": {"query": "tea"}}

    async def test_a_result_without_structured_content_parses_its_text(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("text-only") + "/s/loom/mcp")
        assert outcome.data == {"from": "text"}


LOOSE_ANSWERS = [
    ("id 1.0 for id 1", "id-float"),
    ("id true for id 1", "id-true"),
    ("an error with id true for id 1", "error-id-true"),
    ("a JSON-RPC error for another id, in a non-200 body", "error-for-another-id"),
    ("both a result and an error", "result-and-error"),
    ("a result without a content list", "no-content"),
    ("content blocks that are not objects", "content-not-objects"),
]


class TestLooseAnswers:
    """Defect: answers that bent JSON-RPC or MCP were taken as results or refusals (GW-5)."""

    @pytest.mark.parametrize(("row", "scenario"), LOOSE_ANSWERS, ids=[r[0] for r in LOOSE_ANSWERS])
    async def test_an_answer_that_bends_the_protocol_is_broken(
        self, scenario_base, row, scenario
    ) -> None:
        outcome = await outcome_of(scenario_base(scenario) + "/s/loom/mcp")
        assert type(outcome) is BrokenAnswer, f"{row}: got {outcome!r}"


DEEP_ANSWERS = [
    ("100k nested brackets as the JSON body", "deep-json", BrokenAnswer),
    ("100k nested brackets as an event's data", "deep-event", BrokenAnswer),
    ("50k nested brackets in a non-200 body", "deep-error-body", BrokenAnswer),
    ("100k nested brackets as the first text block", "deep-text-block", ToolResult),
    ("a Retry-After of 400 digits on a 200 answer", "ra-400-digits", ToolResult),
    ("a Retry-After of 5,000 digits on a 200 answer", "ra-5000-digits", ToolResult),
    ("a Retry-After of 5,000 digits on a 429", "ra-5000-digits-429", MayPass),
]


class TestNothingOutsideTheTree:
    """Defect: deep nesting and huge Retry-After values raised RecursionError, OverflowError
    or ValueError out of a call (GW-5)."""

    @pytest.mark.parametrize(
        ("row", "scenario", "expected"), DEEP_ANSWERS, ids=[r[0] for r in DEEP_ANSWERS]
    )
    async def test_a_hostile_answer_ends_in_an_outcome(
        self, scenario_base, row, scenario, expected
    ) -> None:
        outcome = await outcome_of(scenario_base(scenario) + "/s/loom/mcp")
        assert type(outcome) is expected, f"{row}: got {outcome!r}"

    async def test_a_text_block_too_deep_to_parse_is_kept_as_text(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("deep-text-block") + "/s/loom/mcp")
        assert outcome.data is None and outcome.text.startswith("[[[")

    async def test_a_huge_retry_after_is_read_as_a_day(self, scenario_base) -> None:
        outcome = await outcome_of(scenario_base("ra-5000-digits-429") + "/s/loom/mcp")
        assert outcome.retry_after_s == RETRY_AFTER_CAP_S
