"""Whatever the gateway answers, only the outcome tree comes out (GW-5).

Arbitrary bytes — and bytes shaped almost like the real thing — go in as a JSON body, as an
event stream cut into arbitrary chunks, and as a catalog, with any status and any
``Retry-After``. A call returns a ``ToolResult`` or raises a ``GatewayError``; the catalog
reader never raises and records a ``CatalogError``. The gateway here is an in-process httpx
transport (``httpx.MockTransport``) so that thousands of answers take seconds; the loopback
tests cover the real sockets.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from provisioner.runtime import (
    Catalog,
    CatalogError,
    GatewayCatalog,
    GatewayError,
    McpGatewayServer,
    ToolResult,
)
from provisioner.runtime.gateway.server import EXTRACTION

from .fault_gateway import DEEP_NESTING, catalog_payload

BASE = "http://gateway.test"
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
request_ids = st.sampled_from([1, 1.0, True, "1", None, 2, -1, 10**30])
results = st.fixed_dictionaries(
    {},
    optional={
        "content": json_values | st.lists(json_values, max_size=3),
        "structuredContent": json_values,
        "isError": json_values,
    },
)
errors = st.fixed_dictionaries(
    {},
    optional={
        "code": st.sampled_from([-32000, -32001, -32002, -32601, -32602, 0]) | json_values,
        "message": st.sampled_from(["MCP server timed out", "no"]) | json_values,
        "data": st.fixed_dictionaries({"code": json_values}) | json_values,
    },
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | json_values,
        "id": request_ids | json_values,
        "result": results | json_values,
        "error": errors | json_values,
        "method": st.sampled_from(["notifications/progress"]),
    },
)
deep = st.sampled_from([b"[" * DEEP_NESTING, b'{"a":' * DEEP_NESTING, b"[" * 5000 + b"]" * 5000])
bodies = (
    st.binary(max_size=600)
    | messages.map(lambda message: json.dumps(message).encode())
    | deep
    | st.builds(lambda head, tail: head + tail, messages.map(json.dumps).map(str.encode), deep)
)
events = st.lists(
    st.tuples(
        st.sampled_from(["", "event: message\n", "event: other\n", ": ping\n", "id: 3\n"]),
        bodies,
        st.sampled_from(["\n\n", "\r\r", "\r\n\r\n", "\n", ""]),
    ),
    max_size=4,
).map(
    lambda parts: b"".join(
        head.encode() + b"data: " + body + end.encode() for head, body, end in parts
    )
)
media_types = st.sampled_from(
    ["application/json", "text/event-stream", "text/event-stream; charset=utf-8", "text/html", ""]
)
statuses = st.sampled_from([200, 200, 200, 403, 413, 429, 500, 502, 503, 504]) | st.integers(
    200, 599
)
retry_afters = (
    st.none()
    | st.text("0123456789", min_size=1, max_size=6000)
    | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40)
)
cuts = st.lists(st.integers(min_value=1, max_value=64), max_size=12)


def chunked(body: bytes, sizes: list[int]) -> list[bytes]:
    """``body`` cut into pieces of the given sizes, the rest in one last piece."""
    pieces, offset = [], 0
    for size in sizes:
        pieces.append(body[offset : offset + size])
        offset += size
    return [*pieces, body[offset:]]


class Chunks(httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece


def answering(
    status: int, media_type: str, body: bytes, retry_after: str | None, sizes: list[int]
) -> httpx.MockTransport:
    headers = {"content-type": media_type} if media_type else {}
    if retry_after is not None:
        headers["retry-after"] = retry_after

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, stream=Chunks(chunked(body, sizes)))

    return httpx.MockTransport(handler)


async def outcome_of(transport: httpx.MockTransport) -> object:
    async with McpGatewayServer(BASE + "/s/loom/mcp", transport=transport) as server:
        try:
            return await server.call_tool("loom_search", {}, deadline_s=5, policy=EXTRACTION)
        except GatewayError as error:
            return error


async def catalog_read(transport: httpx.MockTransport) -> tuple[object, object]:
    async with GatewayCatalog(BASE, transport=transport) as catalog:
        return await catalog.current(), catalog.last_error


@pytest.mark.slow
class TestOnlyOutcomesComeOut:
    @FUZZ
    @given(status=statuses, media=media_types, body=bodies, retry=retry_afters, sizes=cuts)
    @example(200, "application/json", b"[" * DEEP_NESTING, "9" * 5000, [])
    def test_any_json_body_ends_in_a_result_or_a_gateway_error(
        self, status, media, body, retry, sizes
    ) -> None:
        outcome = asyncio.run(outcome_of(answering(status, media, body, retry, sizes)))
        assert isinstance(outcome, ToolResult | GatewayError)

    @FUZZ
    @given(status=statuses, stream=events | bodies, retry=retry_afters, sizes=cuts)
    @example(200, b"data: " + b"[" * DEEP_NESTING + b"\n\n", "9" * 400, [3, 5])
    def test_any_event_stream_ends_in_a_result_or_a_gateway_error(
        self, status, stream, retry, sizes
    ) -> None:
        transport = answering(status, "text/event-stream", stream, retry, sizes)
        outcome = asyncio.run(outcome_of(transport))
        assert isinstance(outcome, ToolResult | GatewayError)

    @FUZZ
    @given(
        status=statuses,
        media=media_types,
        body=bodies | st.just(json.dumps(catalog_payload()).encode()),
        sizes=cuts,
    )
    @example(200, "application/json", b"[" * DEEP_NESTING, [])
    def test_any_catalog_answer_is_read_or_recorded_as_a_catalog_error(
        self, status, media, body, sizes
    ) -> None:
        catalog, error = asyncio.run(catalog_read(answering(status, media, body, None, sizes)))
        assert isinstance(catalog, Catalog) != isinstance(error, CatalogError)


@pytest.mark.parametrize("status", [200, 429])
def test_the_fuzzed_gateway_can_answer_well(status) -> None:
    """Guards the tests above: the same set-up does reach a result and a MayPass."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "structuredContent": {"a": 1}}}
    ).encode()
    outcome = asyncio.run(outcome_of(answering(status, "application/json", body, "1", [2])))
    assert outcome.data == {"a": 1} if status == 200 else outcome.retry_after_s == 1.0
