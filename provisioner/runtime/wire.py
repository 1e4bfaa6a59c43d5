"""HTTP plumbing shared by the catalog reader and the tool client.

Both talk only to the gateway, which knows the agent from its connection: requests carry no
credential, read no proxy or ``.netrc`` settings from the environment (``trust_env=False``),
and follow no redirect (a redirect would send the request somewhere the configuration did not
name). Bodies are read with a byte cap, so a runaway answer cannot fill memory.
"""

from __future__ import annotations

import ssl
from functools import cache
from urllib.parse import urlsplit

import httpx

CONNECT_TIMEOUT_S = 2.0  # GW-2 (contracts/gateway.md): connect within 2 s


class BodyOverLimit(Exception):
    """An answer's body went past the reader's byte cap."""


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
    own connection pool. Timeouts are given per request, from the caller's deadline.
    """
    return httpx.AsyncClient(
        transport=transport,
        verify=_tls_context(),
        trust_env=False,
        follow_redirects=False,
        timeout=httpx.Timeout(None),
    )


@cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the CA bundle costs tens of ms.

    Every client shares it, so replacing a client (GW-8) stays cheap.
    """
    return httpx.create_ssl_context()


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
