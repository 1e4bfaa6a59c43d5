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
from provisioner.runtime.gateway.protocol import (
    ToolResult,
    error_for_status,
    error_of_response,
    is_rpc_error,
    result_of_message,
    tool_result,
)
from provisioner.runtime.gateway.retry_after import parse_retry_after
from provisioner.runtime.gateway.wire import (
    INLINE_DECODE_MAX_CHARS,
    BodyOverLimit,
    NotJson,
    decode_json,
    decode_json_off_loop,
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
    """The outcome of one HTTP answer to a ``tools/call``: see ``read_result``."""
    return tool_result(await read_result(response, request_id, budget))


async def read_result(response: httpx.Response, request_id: int, budget: asyncio.Timeout) -> Any:
    """The JSON-RPC result of one HTTP answer, as sent, or the outcome exception it means:
    status first, then the body by its media type.

    ``budget`` is the call's deadline; a stream's tail is read only well within it.
    """
    retry_after_s = _retry_after_s(response.headers)
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
    message = await _with_long_text_decoded(message)
    return result_of_message(message, request_id, retry_after_s=retry_after_s)


def _retry_after_s(headers: httpx.Headers) -> float | None:
    """The answer's ``Retry-After`` in seconds (GW-6), or None without a usable one.

    ``Date`` and the wall clock matter only to a ``Retry-After`` that is there, so they are
    read only then: most answers carry none, and every call reads this.
    """
    if "retry-after" not in headers:
        return None
    return parse_retry_after(headers["retry-after"], date=headers.get("date"), now=time.time())


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
        return await decode_json_off_loop(await read_capped(response, ANSWER_MAX_BYTES))
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
            found = await _response_in(decoder.feed(chunk))
            if found is not None:
                await _read_tail(chunks, budget)
                return found
        found = await _response_in(decoder.close())
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


async def _response_in(events: list[Any]) -> Any:
    """The first ``message`` event that is a response (no ``method``), or None."""
    for event in events:
        if event.event != "message":
            continue
        try:
            message = await decode_json_off_loop(event.data)
        except NotJson as error:
            raise ValueError("an event's data is not JSON") from error
        if isinstance(message, dict) and "method" in message:
            continue
        if message is None:
            raise ValueError("an event's data is null, not a JSON-RPC message")
        return message
    return None


async def _with_long_text_decoded(message: Any) -> Any:
    """``message``, with a long JSON text of its result decoded off the loop beforehand.

    A result without ``structuredContent`` is read from its first text block, decoded as JSON
    by ``outcome_of_message`` there and then, on the loop. For a long text that would hold the
    loop as a long body would, so that text is decoded here the way a body is
    (``decode_json_off_loop``) and, when it is an object, handed on as the result's
    ``structuredContent``: what ``outcome_of_message`` makes of the result is the same
    ``ToolResult``. Anything else — a short text, a text that is not a JSON object, a result of
    another shape — is left for ``outcome_of_message`` to judge as it is.
    """
    result = message.get("result") if isinstance(message, dict) else None
    if not isinstance(result, dict) or result.get("structuredContent") is not None:
        return message
    content = result.get("content")
    if not isinstance(content, list):
        return message
    first = next((block["text"] for block in content if _is_text_block(block)), None)
    if first is None or len(first) <= INLINE_DECODE_MAX_CHARS:
        return message
    try:
        data = await decode_json_off_loop(first)
    except NotJson:
        return message
    if not isinstance(data, dict):
        return message
    return {**message, "result": {**result, "structuredContent": data}}


def _is_text_block(block: Any) -> bool:
    """A ``{"type": "text", "text": …}`` content block, as ``outcome_of_message`` reads one."""
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )
