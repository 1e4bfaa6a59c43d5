"""The dev gateway's ASGI plumbing: request bodies read with a cap, answers started and sent.

Kept apart from the routes (``provisioner.devgateway.app``) so each reads on its own. Nothing
here knows about MCP or Loom; every function works on ASGI's ``receive`` and ``send``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from provisioner.base.errors import UserError

JSON_CONTENT_TYPE = "application/json"
LENGTH_MAX_DIGITS = 18  # a Content-Length of more digits is past every limit here

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class IncomingBodyTooLarge(UserError, ValueError):
    """A request body over the route's limit, declared so or found so while reading; the
    route answers 413. (The gateway client's ``BodyTooLarge`` is the same refusal seen from
    the other side.)"""


async def read_body(receive: Receive, limit: int, scope: dict[str, Any] | None = None) -> bytes:
    """The whole request body, at most ``limit`` bytes (``IncomingBodyTooLarge`` past it).

    With the request's ``scope``, a ``Content-Length`` over ``limit`` is refused before a byte
    is read, so a client cannot hold the gateway waiting for a body it was never going to
    take. A body sent in chunks is counted as it arrives. A client that disconnects midway
    leaves what arrived until then.
    """
    if scope is not None and declared_length(scope) > limit:
        raise IncomingBodyTooLarge("request body over the limit")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise IncomingBodyTooLarge("request body over the limit")
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def declared_length(scope: dict[str, Any]) -> int:
    """The request's ``Content-Length`` (0 when it sends none; uvicorn refuses a malformed one).

    A length of more digits than any body could have is read as too long without converting
    it: Python refuses to turn thousands of digits into an integer.
    """
    for name, value in scope["headers"]:
        digits = value.strip()
        if name.lower() == b"content-length" and digits.isdigit():
            return int(digits) if len(digits) <= LENGTH_MAX_DIGITS else sys.maxsize
    return 0


def sends_json(scope: dict[str, Any]) -> bool:
    """Whether the request's ``Content-Type`` is JSON (parameters such as a charset aside)."""
    for name, value in scope["headers"]:
        if name.lower() == b"content-type":
            media_type = value.decode("latin-1").split(";", 1)[0].strip().lower()
            return media_type == JSON_CONTENT_TYPE
    return False


def ending_first(send: Send, end: Callable[[], None]) -> Send:
    """A ``send`` that calls ``end`` just before the answer's last body message goes out."""

    async def sending(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            end()
        await send(message)

    return sending


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then passes on to the real one."""
    sent = False

    async def replayed() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def start_answer(
    send: Send, status: int, content_type: str, extra: Sequence[tuple[str, str]] = ()
) -> None:
    headers = [(b"content-type", content_type.encode())]
    headers += [(name.encode(), value.encode()) for name, value in extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def json_answer(
    send: Send, status: int, payload: Any, extra: list[tuple[str, str]] | None = None
) -> None:
    body = json.dumps(payload).encode()
    headers = [("content-length", str(len(body))), *(extra or [])]
    await start_answer(send, status, "application/json", headers)
    await send({"type": "http.response.body", "body": body, "more_body": False})
