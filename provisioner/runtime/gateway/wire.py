"""HTTP plumbing shared by the catalog reader and the tool client.

Both talk only to the gateway, which knows the agent from its connection: requests carry no
credential, read no proxy or ``.netrc`` settings from the environment (``trust_env=False``),
and follow no redirect (a redirect would send the request somewhere the configuration did not
name). Bodies are read with a byte cap, so a runaway answer cannot fill memory.

Every client's transport is wrapped so that a cancellation — the call's deadline or a caller's
— cannot leave a pooled connection busy for good (``provisioner.runtime.gateway.transport``).
"""

from __future__ import annotations

import asyncio
import json
import json.scanner
import ssl
from collections.abc import Mapping
from functools import cache
from typing import Any
from urllib.parse import urlsplit

import httpx

from provisioner.runtime.gateway.transport import CancellationSafeTransport

CONNECT_TIMEOUT_S = 2.0  # GW-2 (contracts/gateway.md): connect within 2 s
# Our choice: JSON up to this size is decoded on the event loop (about 2 ms); larger JSON in a
# worker thread (``decode_json_off_loop``).
INLINE_DECODE_MAX_CHARS = 256 * 1024


class BodyOverLimit(Exception):
    """An answer's body went past the reader's byte cap."""


class NotJson(ValueError):
    """A body that is not JSON, or JSON nested too deep for the decoder."""


def decode_json(text: bytes | str) -> Any:
    """``json.loads`` that fails only with ``NotJson``, whatever the bytes.

    Python's decoder recurses once per nesting level, so a hostile body of many thousand
    brackets raises ``RecursionError``; that is a broken answer like any other, not a crash.
    """
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise NotJson(str(error)) from error


async def decode_json_off_loop(text: bytes | str) -> Any:
    """``decode_json`` that never holds the event loop for long, whatever the size of ``text``.

    Small JSON is decoded at once. Larger JSON is decoded in a worker thread, and by the
    decoder's pure-Python scanner: the C scanner would hold the interpreter's lock for the
    whole parse (about 50 ms for 6 MB, however many threads there are), while Python code
    lets the interpreter hand the loop's thread its turn every few milliseconds. The value is
    the same as ``json.loads`` gives; failures are ``NotJson`` alike.
    """
    if len(text) <= INLINE_DECODE_MAX_CHARS:
        return decode_json(text)
    return await asyncio.to_thread(_decode_json_yielding, text)


def _decode_json_yielding(text: bytes | str) -> Any:
    """``json.loads(text)`` by the pure-Python scanner (see ``decode_json_off_loop``)."""
    if isinstance(text, str) and text.startswith("\ufeff"):
        raise NotJson("Unexpected UTF-8 BOM (decode using utf-8-sig)")  # as json.loads says
    try:
        if isinstance(text, bytes | bytearray):
            text = text.decode(json.detect_encoding(text), "surrogatepass")
        decoder = json.JSONDecoder()
        # Both names are json's own, left out of its type stubs.
        decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
        return decoder.decode(text)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise NotJson(str(error)) from error


def check_gateway_url(url: str, what: str) -> str:
    """``url`` without a trailing slash, or ``ValueError`` unless it is a plain http(s) URL.

    Plain means absolute ``http``/``https`` with a host, and no credentials, query or fragment:
    the gateway gets no secret from Nerve, and the URL is joined with paths as text.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an absolute http or https URL, got {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{what} must not carry credentials")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} must not have a query or fragment, got {url!r}")
    return url.rstrip("/")


def new_http_client(transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` that ignores the environment and follows no redirect.

    ``transport`` is the test seam (an in-process app, a stand-in resolver); None uses httpx's
    own connection pool. Either way the transport is wrapped so that cancellations cannot
    spoil its pool (``CancellationSafeTransport``).

    The client's own timeout is the connect limit alone (``CONNECT_TIMEOUT_S``): the caller
    bounds each request as a whole with its deadline (``asyncio.timeout``), which no read,
    write or wait for the pool can outlast, so per-request httpx timeouts would only repeat
    it. A caller may still pass them (``request_timeout``).
    """
    inner = transport or httpx.AsyncHTTPTransport(verify=_tls_context(), trust_env=False)
    return httpx.AsyncClient(
        transport=CancellationSafeTransport(inner),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_S),
    )


@cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the CA bundle costs tens of ms.

    Every client shares it, so replacing a client (GW-8) stays cheap.
    """
    return httpx.create_ssl_context()


class ConnectProgress:
    """Follows httpcore's trace events to know whether a timeout struck while connecting.

    A deadline that passes before the connection is made means the gateway was not reached
    (nothing went upstream), not that it failed to answer.

    Given the request's ``extensions`` (the dict httpx hands to httpcore), it stops the
    tracing once the request is being sent: connecting is over by then, and every further
    event would cost the call an await for nothing. Without them it follows every event.
    """

    __slots__ = ("_extensions", "connecting")

    def __init__(self, extensions: dict[str, Any] | None = None) -> None:
        self.connecting = False
        self._extensions = extensions

    async def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event in _CONNECT_STARTED:
            self.connecting = True
        elif event in _CONNECT_ENDED:
            self.connecting = False
        elif event.startswith("http") and self._extensions is not None:
            self._extensions.pop("trace", None)  # sending: httpcore asks this hook no more


_CONNECT_STARTED = frozenset({"connection.connect_tcp.started", "connection.start_tls.started"})
# A connect that failed (or was cut off by the deadline) leaves ``connecting`` set.
_CONNECT_ENDED = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})


def describe(error: BaseException) -> str:
    """An exception as a short text: its class name, and its message when it has one."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def request_timeout(remaining_s: float) -> httpx.Timeout:
    """httpx timeouts for a request that must end within ``remaining_s`` seconds."""
    return httpx.Timeout(remaining_s, connect=min(CONNECT_TIMEOUT_S, remaining_s))


def media_type(response: httpx.Response) -> str:
    """The response's media type, lower-cased and without parameters (``""`` if none)."""
    value = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The whole body of a streamed response, or ``BodyOverLimit`` past ``limit`` bytes.

    A ``Content-Length`` over the limit fails before any byte is read.
    """
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyOverLimit(f"body of {declared} bytes is over the {limit}-byte limit")
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise BodyOverLimit(f"body is over the {limit}-byte limit")
        parts.append(chunk)
    return b"".join(parts)
