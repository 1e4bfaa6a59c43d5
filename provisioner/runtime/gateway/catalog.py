"""The gateway's catalog: which MCP servers this agent gets, and where (GW-2).

``GET <mcp_gateway_url>/catalog`` answers schema version 1 (contracts/gateway.md). The reader
is strict: a catalog that breaks one rule is not applied, and the last good catalog stays in
use, so a gateway that serves a bad catalog for a while does not take memory away from
sessions that already had it. Reads are throttled to one per 30 s — also while none could be
read, so an unreachable or failing gateway is not asked again by every session start — and
run one at a time: callers arriving during a read wait for it instead of finding no catalog.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from dataclasses import dataclass
from typing import Any, TypeGuard

import httpx

from provisioner.runtime.clock import Clock
from provisioner.runtime.gateway.errors import CatalogError, ServerNotListed
from provisioner.runtime.gateway.protocol import NotJson, decode_json
from provisioner.runtime.gateway.transport import (
    BodyOverLimit,
    KeptConnectionClosed,
    Lifecycle,
    LifecycleOwner,
    check_gateway_url,
    describe,
    media_type,
    new_http_client,
    read_capped,
    request_timeout,
)
from provisioner.runtime.memory_contract import NERVE_SERVER

CATALOG_PATH = "/catalog"  # GW-2
CATALOG_SCHEMA_VERSION = 1  # GW-2
CATALOG_MIN_INTERVAL_S = 30.0  # GW-2: at most one read per 30 s, also while none could be read
CATALOG_DEADLINE_S = 5.0  # GW-2 (contracts/gateway.md): the whole request within 5 s
CATALOG_MAX_BYTES = 8 * 1024 * 1024  # GW-2 (contracts/gateway.md): at most 8 MiB
ERROR_ENVELOPE_MAX_BYTES = 64 * 1024  # our choice: an error envelope is a few dozen bytes

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_SERVER_ID = re.compile(r"[a-z]([a-z0-9-]{0,30}[a-z0-9])?")
_TOOL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_ENVELOPE_REASON = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
_ENVELOPE_REASON_MAX = 64
_REQUEST_ID = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


@dataclass(frozen=True)
class CatalogServer:
    """One MCP server the gateway offers this agent, with the URL to call it at."""

    id: str
    path: str
    url: str
    tools: tuple[str, ...]
    display_name: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class Catalog:
    """A validated catalog. ``servers`` never holds Nerve's own ``nerve`` (it is not used)."""

    base_url: str
    generation: int
    digest: str
    servers: tuple[CatalogServer, ...]

    def server(self, server_id: str) -> CatalogServer | None:
        """The server with ``server_id``, or None when the catalog does not list it."""
        for server in self.servers:
            if server.id == server_id:
                return server
        return None

    def lists(self, server_id: str) -> bool:
        """Whether the catalog lists ``server_id`` (for instance ``loom``)."""
        return self.server(server_id) is not None

    def require(self, server_id: str) -> CatalogServer:
        """The server with ``server_id``, or ``ServerNotListed``."""
        server = self.server(server_id)
        if server is None:
            raise ServerNotListed(
                f"catalog generation {self.generation} does not list the server {server_id!r}"
            )
        return server


def parse_catalog(payload: Any, base_url: str) -> Catalog:
    """Validate a decoded catalog against contracts/gateway.md and build a ``Catalog``.

    ``base_url`` is the gateway's base URL; each server's URL is it plus the server's path.
    Raises ``CatalogError`` (reason ``invalid``) naming the first rule broken; unknown fields
    are ignored. A ``ValueError`` means ``base_url`` itself is not a plain http(s) URL.
    """
    base = check_gateway_url(base_url, "the gateway base URL")
    if not isinstance(payload, dict):
        raise _invalid("the catalog is not a JSON object")
    version = payload.get("schemaVersion")
    if not _is_int(version) or version != CATALOG_SCHEMA_VERSION:
        raise _invalid(f"schemaVersion must be the integer {CATALOG_SCHEMA_VERSION}")
    generation = payload.get("generation")
    if not _is_int(generation) or generation < 0:
        raise _invalid("generation must be a non-negative integer")
    digest = payload.get("digest")
    if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
        raise _invalid("digest must be 'sha256:' and 64 lowercase hex digits")
    servers = _parse_servers(payload.get("servers"), base)
    usable = tuple(server for server in servers if server.id != NERVE_SERVER)
    return Catalog(base_url=base, generation=generation, digest=digest, servers=usable)


def _parse_servers(value: Any, base: str) -> list[CatalogServer]:
    if not isinstance(value, list):
        raise _invalid("servers must be a list")
    servers = [_parse_server(index, item, base) for index, item in enumerate(value)]
    for before, after in itertools.pairwise(servers):
        if not before.id < after.id:
            raise _invalid(f"servers must be in strictly ascending id order ({after.id!r})")
    return servers


def _parse_server(index: int, item: Any, base: str) -> CatalogServer:
    if not isinstance(item, dict):
        raise _invalid(f"servers[{index}] is not an object")
    server_id = item.get("id")
    if not isinstance(server_id, str) or not _SERVER_ID.fullmatch(server_id):
        raise _invalid(f"servers[{index}].id is not a valid server id")
    path = item.get("path")
    if path != f"/s/{server_id}/mcp":
        raise _invalid(f"servers[{index}].path must be /s/{server_id}/mcp")
    tools = _parse_tools(index, item.get("tools"))
    names = {key: item.get(key) for key in ("displayName", "description")}
    for key, text in names.items():
        if key in item and not isinstance(text, str):
            raise _invalid(f"servers[{index}].{key} must be a string")
    return CatalogServer(
        id=server_id,
        path=path,
        url=base + path,
        tools=tools,
        display_name=names["displayName"],
        description=names["description"],
    )


def _parse_tools(index: int, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise _invalid(f"servers[{index}].tools must be a non-empty list")
    for name in value:
        if not isinstance(name, str) or not _TOOL_NAME.fullmatch(name):
            raise _invalid(f"servers[{index}].tools holds an invalid tool name")
    for before, after in itertools.pairwise(value):
        if not before < after:
            raise _invalid(f"servers[{index}].tools must be sorted and without duplicates")
    return tuple(value)


def decode_catalog_json(body: bytes) -> Any:
    """Decode a catalog body as strict JSON: UTF-8, no NaN or Infinity, no duplicate keys.

    Raises ``CatalogError`` (reason ``not_json``) otherwise, also for JSON nested deeper than
    the decoder can follow.
    """
    try:
        return json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_reject_constant,
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        message = f"the catalog is not strict JSON: {describe(error)}"
        raise CatalogError(message, reason="not_json") from error


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate key in an object")
    return result


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_int(value: Any) -> TypeGuard[int]:
    """An integer that is not a boolean (Python counts ``True`` as an ``int``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _invalid(message: str) -> CatalogError:
    return CatalogError(f"catalog rejected: {message}", reason="invalid")


class GatewayCatalog(LifecycleOwner):
    """Reads ``<base_url>/catalog`` at most every 30 s and keeps the last good catalog.

    An async context manager (``async with GatewayCatalog(url) as catalog``); it may also be
    used without ``async with`` and closed with ``aclose()``. ``current()`` is cheap to call on
    every use: between reads it answers from memory. A read that fails (not reached, no answer
    in 5 s, a status other than 200, over 8 MiB, not strict JSON, a rule broken) is recorded
    in ``last_error`` and the last good catalog is returned; nothing raises.

    One read at a time: callers that arrive while a read is under way wait for that read
    (single flight), each for at most its own deadline. The read has its own 5 s budget and
    goes on when a waiting caller gives up, so a caller with little time left cannot spend the
    only read of the next 30 s. ``transport`` and ``clock`` are test seams.
    """

    def __init__(
        self,
        base_url: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._base_url = check_gateway_url(base_url, "mcp_gateway_url")
        self._clock = clock or time.monotonic
        self._client = new_http_client(transport)
        self._lifecycle = Lifecycle("the catalog reader")
        self._reading: asyncio.Task[None] | None = None
        self._latest: Catalog | None = None
        self._last_error: CatalogError | None = None
        self._last_attempt: float | None = None

    @property
    def base_url(self) -> str:
        """The gateway's base URL, without a trailing slash."""
        return self._base_url

    @property
    def latest(self) -> Catalog | None:
        """The last good catalog, or None while none could be read."""
        return self._latest

    @property
    def generation(self) -> int | None:
        """The last good catalog's generation, or None while none could be read."""
        return self._latest.generation if self._latest else None

    @property
    def servers(self) -> tuple[str, ...]:
        """The ids of the servers the last good catalog lists (empty while none was read)."""
        return tuple(server.id for server in self._latest.servers) if self._latest else ()

    @property
    def last_error(self) -> CatalogError | None:
        """Why the most recent read failed, or None when it succeeded (or none was made)."""
        return self._last_error

    @property
    def reading(self) -> bool:
        """Whether a read is under way now."""
        return self._reading is not None

    async def current(self, *, deadline_s: float = CATALOG_DEADLINE_S) -> Catalog | None:
        """The catalog to use now, read first when 30 s have passed since the last attempt.

        Waits for a read under way (starting one when it is due) for at most ``deadline_s``
        seconds; the read itself goes on when this caller stops waiting. Returns None while
        no catalog could ever be read. Raises ``RuntimeError`` once the reader is closed.
        """
        self._lifecycle.use()
        if self._reading is None and self._read_is_due():
            self._last_attempt = self._clock()
            self._reading = asyncio.create_task(self._read_and_keep())
        if self._reading is not None and deadline_s > 0:
            await asyncio.wait({self._reading}, timeout=deadline_s)
        return self._latest

    async def aclose(self) -> None:
        """Stop a read under way and close the HTTP client; the kept catalog stays readable."""
        if not self._lifecycle.close():
            return
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.wait({self._reading})
        await self._client.aclose()

    def _read_is_due(self) -> bool:
        if self._last_attempt is None:
            return True
        return self._clock() - self._last_attempt >= CATALOG_MIN_INTERVAL_S

    async def _read_and_keep(self) -> None:
        try:
            catalog = await self._read(CATALOG_DEADLINE_S)
        except CatalogError as error:
            self._last_error = error
            return
        finally:
            self._reading = None
        self._latest = catalog
        self._last_error = None

    async def _read(self, deadline_s: float) -> Catalog:
        url = self._base_url + CATALOG_PATH
        try:
            async with asyncio.timeout(deadline_s):
                async with self._client.stream(
                    "GET",
                    url,
                    headers={"Accept": "application/json"},
                    timeout=request_timeout(deadline_s),
                ) as response:
                    body = await self._read_body(response)
        except TimeoutError as error:
            raise _read_timeout(deadline_s) from error
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            message = f"the gateway was not reached: {describe(error)}"
            raise CatalogError(message, reason="unreachable") from error
        except KeptConnectionClosed as error:  # found closed twice: nothing of the read went out
            raise CatalogError(
                f"the gateway was not reached: {error}", reason="unreachable"
            ) from error
        except httpx.TimeoutException as error:
            raise _read_timeout(deadline_s) from error
        except httpx.HTTPError as error:
            message = f"the catalog answer broke off or could not be read: {describe(error)}"
            raise CatalogError(message, reason="broken") from error
        return parse_catalog(decode_catalog_json(body), self._base_url)

    async def _read_body(self, response: httpx.Response) -> bytes:
        if response.status_code != 200:
            raise await _status_error(response)
        if media_type(response) != "application/json":
            raise CatalogError("the catalog is not served as application/json", reason="not_json")
        try:
            return await read_capped(response, CATALOG_MAX_BYTES)
        except BodyOverLimit as error:
            message = f"the catalog is larger than {CATALOG_MAX_BYTES} bytes"
            raise CatalogError(message, reason="too_large") from error


def _read_timeout(deadline_s: float) -> CatalogError:
    return CatalogError(f"the catalog did not arrive within {deadline_s:g} s", reason="timeout")


async def _status_error(response: httpx.Response) -> CatalogError:
    """A ``CatalogError`` for a non-200 answer, with the envelope's values when well-formed.

    The body never goes into the error; only a ``reason`` in snake_case and a UUID
    ``requestId`` do, so a gateway cannot put arbitrary text into Nerve's logs.
    """
    status = response.status_code
    gateway_reason, request_id = None, None
    try:
        envelope = decode_json(await read_capped(response, ERROR_ENVELOPE_MAX_BYTES))
    except (BodyOverLimit, NotJson, httpx.HTTPError):
        envelope = None
    if isinstance(envelope, dict):
        gateway_reason = _shaped(envelope.get("reason"), _ENVELOPE_REASON, _ENVELOPE_REASON_MAX)
        request_id = _shaped(envelope.get("requestId"), _REQUEST_ID, 36)
    detail = f" ({gateway_reason})" if gateway_reason else ""
    return CatalogError(
        f"the gateway answered the catalog read with HTTP {status}{detail}",
        reason=f"http_{status}",
        gateway_reason=gateway_reason,
        request_id=request_id,
    )


def _shaped(value: Any, pattern: re.Pattern[str], max_len: int) -> str | None:
    if isinstance(value, str) and len(value) <= max_len and pattern.fullmatch(value):
        return value
    return None
