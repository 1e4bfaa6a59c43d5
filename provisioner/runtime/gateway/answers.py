"""Reading one HTTP answer of the gateway into a ``ToolResult`` or an outcome (GW-3, GW-5).

The status decides first; then the body is read by its media type: one JSON body, or an event
stream whose first JSON-RPC response is taken (notifications and pings before it are skipped)
and whose tail is read on for a moment, so its connection can serve the next call. Every body
is read with a byte cap, and JSON too deep to decode is a broken answer like any other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

import httpx

from provisioner.runtime.gateway.errors import BrokenAnswer, GatewayError
from provisioner.runtime.gateway.event_stream import EventStreamDecoder
from provisioner.runtime.gateway.outcomes import (
    ToolResult,
    error_for_status,
    error_of_response,
    is_rpc_error,
    outcome_of_message,
)
from provisioner.runtime.gateway.retry_after import parse_retry_after
from provisioner.runtime.gateway.wire import (
    BodyOverLimit,
    NotJson,
    decode_json,
    media_type,
    read_capped,
)

ANSWER_MAX_BYTES = 8 * 1024 * 1024  # our choice: no tool answer Nerve reads comes near this
ERROR_BODY_MAX_BYTES = 64 * 1024  # our choice: a non-200 body is read only for a JSON-RPC error
STREAM_TAIL_WAIT_S = 0.05  # our choice: how long to read on after a stream's answer
STREAM_TAIL_MAX_BYTES = 64 * 1024  # our choice: how much to read on after it


async def read_answer(
    response: httpx.Response, request_id: int, budget: asyncio.Timeout
) -> ToolResult:
    """The outcome of one HTTP answer: status first, then the body by its media type.

    ``budget`` is the call's deadline; a stream's tail is read only well within it.
    """
    retry_after_s = parse_retry_after(
        response.headers.get("retry-after"), date=response.headers.get("date"), now=time.time()
    )
    status_error = error_for_status(response.status_code, retry_after_s=retry_after_s)
    if status_error is not None:
        raise status_error
    if response.status_code != 200:
        raise await _other_status_error(response, request_id, retry_after_s)
    kind = media_type(response)
    if kind == "application/json":
        message = await _json_body(response)
    elif kind == "text/event-stream":
        message = await _message_from_stream(response, budget)
    else:
        raise BrokenAnswer(f"unexpected content type {kind or 'none'!r}")
    return outcome_of_message(message, request_id, retry_after_s=retry_after_s)


async def _other_status_error(
    response: httpx.Response, request_id: int, retry_after_s: float | None
) -> GatewayError:
    """A JSON-RPC error carried by a status the table does not name, else ``BrokenAnswer``."""
    try:
        message = decode_json(await read_capped(response, ERROR_BODY_MAX_BYTES))
    except (BodyOverLimit, NotJson):
        message = None
    if is_rpc_error(message):
        return error_of_response(message, request_id, retry_after_s=retry_after_s)
    return BrokenAnswer(f"unexpected HTTP status {response.status_code}")


async def _json_body(response: httpx.Response) -> Any:
    try:
        return decode_json(await read_capped(response, ANSWER_MAX_BYTES))
    except BodyOverLimit as error:
        raise BrokenAnswer(f"the answer is larger than {ANSWER_MAX_BYTES} bytes") from error
    except NotJson as error:
        raise BrokenAnswer("the answer is not valid JSON") from error


async def _message_from_stream(response: httpx.Response, budget: asyncio.Timeout) -> Any:
    """The first JSON-RPC response in an event stream; notifications and requests are skipped.

    Raises ``BrokenAnswer`` for an event that is not JSON, a stream over the byte cap, or a
    stream that ends before the response.
    """
    decoder = EventStreamDecoder()
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    size = 0
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > ANSWER_MAX_BYTES:
                raise BrokenAnswer(f"the event stream passed {ANSWER_MAX_BYTES} bytes")
            found = _response_in(decoder.feed(chunk))
            if found is not None:
                await _read_tail(chunks, budget)
                return found
        found = _response_in(decoder.close())
    except ValueError as error:
        raise BrokenAnswer(f"the event stream is broken: {error}") from error
    finally:
        await chunks.aclose()
    if found is None:
        raise BrokenAnswer("the event stream ended before the answer")
    return found


async def _read_tail(chunks: AsyncIterator[bytes], budget: asyncio.Timeout) -> None:
    """Read what follows the answer for a moment, so the connection can serve the next call.

    A server closes the stream right after the response; reading to its end returns the
    connection to the pool instead of dropping it. A stream that goes on is left after
    ``STREAM_TAIL_WAIT_S`` (the connection is then closed), and never past the deadline.
    """
    when = budget.when()
    if when is not None and when - asyncio.get_running_loop().time() < 2 * STREAM_TAIL_WAIT_S:
        return
    size = 0
    try:
        async with asyncio.timeout(STREAM_TAIL_WAIT_S):
            async for chunk in chunks:
                size += len(chunk)
                if size > STREAM_TAIL_MAX_BYTES:
                    return
    except (TimeoutError, httpx.TransportError):
        return


def _response_in(events: list[Any]) -> Any:
    """The first ``message`` event that is a response (no ``method``), or None."""
    for event in events:
        if event.event != "message":
            continue
        try:
            message = decode_json(event.data)
        except NotJson as error:
            raise ValueError("an event's data is not JSON") from error
        if isinstance(message, dict) and "method" in message:
            continue
        if message is None:
            raise ValueError("an event's data is null, not a JSON-RPC message")
        return message
    return None
