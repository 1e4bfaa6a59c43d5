"""The gateway client's HTTP transport: the one kind of httpx client the catalog reader and the
tool client use, one tool answer read off the wire, and the life of the objects that own a
client.

Both talk only to the gateway, which knows the agent from its connection: requests carry no
credential, read no proxy or ``.netrc`` settings from the environment (``trust_env=False``),
and follow no redirect (a redirect would send the request somewhere the configuration did not
name). Bodies are read with a byte cap, so a runaway answer cannot fill memory. What the bytes
mean is ``provisioner.runtime.gateway.protocol``'s to say; this module only reads them.

One answer (``read_result``, GW-3, GW-5): the status decides first; then the body is read by
its media type — one JSON body, or an event stream whose first JSON-RPC response is taken
(notifications and pings before it are skipped). The caller has its answer then; the stream's
tail is read on in the background for a moment (``StreamTails``), so its connection can serve
the next call.

``McpGatewayServer``, ``GatewayCatalog`` and ``LoomConnection`` are async context managers, as
httpx's clients are. Each holds one ``Lifecycle`` (unopened, opened, closed), so "used after
close" is one check of one field, made again after every wait, instead of a race between a
call and a shutdown. An object may also be used without ``async with`` (it opens on first use)
and closed with ``aclose()``.

Every client's transport is wrapped (``CancellationSafeTransport``) so that a cancellation —
the call's deadline or a caller's — cannot leave a pooled connection busy for good. Two gaps
in httpcore 1.0 let a cancelled request do that, and both are met every day by a client whose
calls have deadlines and whose callers give up:

* httpcore frees a pooled connection only at the end of the response's close. A cancellation
  landing inside that close (the close waits on a lock) stops it half-way, and the connection
  stays marked busy. Here every close is driven to its end whatever arrives meanwhile; a
  cancellation is held and passed on once the close has finished.
* A request cancelled after the pool gave it a new connection, but before the request went
  out on it, leaves that connection behind: neither idle nor closed nor held by any request,
  it keeps its pool slot (and, once connected, its socket) for ever (encode/httpcore#1093).
  After any failed request such connections are taken out of the pool and closed.

Once ``max_connections`` slots are lost either way, every call waits for the pool until its
deadline: the gateway looks down when it is not.

A third gap is a race no client can avoid, made wide by httpcore: a gateway may close a
kept-alive connection while it is idle, and a request can go out on it just then. httpcore
checks that an idle connection is still open when the pool hands it out, then yields to the
event loop several times (a lock, the pool's event, a pause between the request's head and its
body) before the request is written. On a busy loop another task runs in those gaps, for
milliseconds; a close that lands there is found only as the answer is read, as ``ReadError``
(the write met the gateway's reset) or a disconnect, and the healthy gateway's call is read as
broken. Here each request is written whole, in one write, right after the connection is
checked once more, with no wait in between (``_WrittenWhole``). A connection found closed then
has carried no byte of the request, so the request is sent again, once, on a fresh connection
(``KeptConnectionClosed``). Once any byte has gone out, a failure is never retried: the gateway
may have read the request, and a tool call must not run twice (GW-3, GW-5).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping
from functools import cache
from typing import Any, Self, cast
from urllib.parse import urlsplit

import httpx

from provisioner.runtime.errors import MemoryUnavailable
from provisioner.runtime.gateway.errors import BrokenAnswer, GatewayError
from provisioner.runtime.gateway.protocol import (
    EventStreamDecoder,
    NotJson,
    decode_json_off_loop,
    error_for_other_status,
    error_for_status,
    first_response_in,
    result_of_message,
    retry_after_s,
    with_long_text_decoded,
)

CONNECT_TIMEOUT_S = 2.0  # GW-2 (contracts/gateway.md): connect within 2 s
ANSWER_MAX_BYTES = 8 * 1024 * 1024  # our choice: no tool answer Nerve reads comes near this
ERROR_BODY_MAX_BYTES = 64 * 1024  # our choice: a non-200 body is read only for a JSON-RPC error
STREAM_TAIL_WAIT_S = 0.05  # our choice: how long to read on after a stream's answer
STREAM_TAIL_MAX_BYTES = 64 * 1024  # our choice: how much to read on after it
# Our choice: a request up to this size goes out in one write (a tool call is far smaller).
WHOLE_WRITE_MAX_BYTES = 1024 * 1024


# --- the life of a client's owner ----------------------------------------------------------


class ClientState(enum.Enum):
    """Where an object is in its life; it only ever moves forward."""

    UNOPENED = "unopened"
    OPENED = "opened"
    CLOSED = "closed"


class Lifecycle:
    """The state of one object; ``what`` names the object in error messages."""

    def __init__(self, what: str) -> None:
        self._what = what
        self.state = ClientState.UNOPENED

    @property
    def closed(self) -> bool:
        """True once the object was closed; nothing it starts afterwards goes on the wire."""
        return self.state is ClientState.CLOSED

    def enter(self) -> None:
        """``async with``: open an unopened object; raises ``RuntimeError`` otherwise."""
        if self.state is ClientState.OPENED:
            raise RuntimeError(f"{self._what} is already open")
        if self.state is ClientState.CLOSED:
            raise RuntimeError(f"{self._what} is closed and cannot be opened again")
        self.state = ClientState.OPENED

    def use(self) -> None:
        """Before any work: opens an unopened object; raises ``RuntimeError`` once closed."""
        if self.state is ClientState.CLOSED:
            raise RuntimeError(f"{self._what} is closed")
        self.state = ClientState.OPENED

    def close(self) -> bool:
        """Mark the object closed; True the first time, so the closing work runs once."""
        first = self.state is not ClientState.CLOSED
        self.state = ClientState.CLOSED
        return first


class LifecycleOwner:
    """The ``async with`` face of an object whose life a ``Lifecycle`` keeps.

    The catalog reader, the tool client and the Loom connection share it: ``async with``
    opens an unopened object (and refuses a second opening or a closed one), leaving it
    closes it through the object's own ``aclose()``, and ``state`` says where it is.
    """

    _lifecycle: Lifecycle

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        self._lifecycle.enter()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def state(self) -> ClientState:
        """Unopened, opened or closed; a closed object refuses work."""
        return self._lifecycle.state


# --- the httpx client ----------------------------------------------------------------------


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


class PostRequests:
    """The POST requests one client sends to one URL, the same as ``client.build_request``
    makes them, without its work on every call.

    ``build_request`` parses the URL and merges the client's headers, timeout and cookies
    anew for each request: about 50 µs, which a startup recall pays on top of the pack call
    it wraps (REL-3). Here that is done once; each request copies the merged headers and adds
    its body and its length. While the client holds cookies (a gateway that sets them), each
    request is made by ``build_request`` itself, so they are sent as before.
    """

    def __init__(self, client: httpx.AsyncClient, url: str, headers: Mapping[str, str]) -> None:
        self._client = client
        self._headers = headers
        template = client.build_request("POST", url, headers=headers)
        self._url = template.url
        self._merged = [
            (name, value)
            for name, value in template.headers.raw
            if name.lower() != b"content-length"
        ]
        self._timeout = template.extensions["timeout"]

    def build(self, body: bytes) -> httpx.Request:
        """The request that posts ``body``; its ``extensions`` are its own to change."""
        if self._client.cookies:
            return self._client.build_request(
                "POST", self._url, content=body, headers=self._headers
            )
        return httpx.Request(
            "POST",
            self._url,
            content=body,
            headers=self._merged,
            extensions={"timeout": self._timeout},
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


# --- bodies --------------------------------------------------------------------------------


class BodyOverLimit(BrokenAnswer):
    """An answer's body went past the reader's byte cap: more than the contract lets it send."""


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


# --- one answer ----------------------------------------------------------------------------


async def read_result(response: httpx.Response, request_id: int, tails: StreamTails) -> Any:
    """The JSON-RPC result of one HTTP answer, as sent, or the outcome exception it means:
    status first, then the body by its media type.

    Takes the response over: it is closed here, or, for an event stream whose answer came,
    handed to ``tails`` to be read on to its end (the caller has its answer meanwhile).
    """
    handed_on = False
    try:
        retry_after = retry_after_s(response.headers)
        status_error = error_for_status(response.status_code, retry_after_s=retry_after)
        if status_error is not None:
            raise status_error
        if response.status_code != 200:
            raise await _other_status_error(response, request_id, retry_after)
        kind = media_type(response)
        if kind == "application/json":
            message = await _json_body(response)
        elif kind == "text/event-stream":
            message, rest = await _message_from_stream(response)
            if rest is not None:
                tails.read_on(response, rest)
                handed_on = True
        else:
            raise BrokenAnswer(f"unexpected content type {kind or 'none'!r}")
    finally:
        if not handed_on:
            await response.aclose()
    message = await with_long_text_decoded(message)
    return result_of_message(message, request_id, retry_after_s=retry_after)


async def _other_status_error(
    response: httpx.Response, request_id: int, retry_after: float | None
) -> GatewayError:
    """A JSON-RPC error carried by a status the table does not name, else ``BrokenAnswer``."""
    try:
        body: bytes | None = await read_capped(response, ERROR_BODY_MAX_BYTES)
    except BodyOverLimit:
        body = None
    return error_for_other_status(response.status_code, body, request_id, retry_after_s=retry_after)


async def _json_body(response: httpx.Response) -> Any:
    try:
        return await decode_json_off_loop(await read_capped(response, ANSWER_MAX_BYTES))
    except BodyOverLimit as error:
        raise BrokenAnswer(f"the answer is larger than {ANSWER_MAX_BYTES} bytes") from error
    except NotJson as error:
        raise BrokenAnswer("the answer is not valid JSON") from error


async def _message_from_stream(
    response: httpx.Response,
) -> tuple[Any, AsyncGenerator[bytes, None] | None]:
    """The first JSON-RPC response in an event stream (notifications and requests before it
    are skipped), and the stream still open after it; None for a stream that ended with it.

    Raises ``BrokenAnswer`` for an event that is not JSON, a stream over the byte cap, or a
    stream that ends before the response.
    """
    decoder = EventStreamDecoder()
    chunks = cast(AsyncGenerator[bytes, None], response.aiter_bytes())
    size = 0
    handed_on = False
    try:
        async for chunk in chunks:
            size += len(chunk)
            if size > ANSWER_MAX_BYTES:
                raise BrokenAnswer(f"the event stream passed {ANSWER_MAX_BYTES} bytes")
            found = await first_response_in(decoder.feed(chunk))
            if found is not None:
                handed_on = True
                return found, chunks
        found = await first_response_in(decoder.close())
    except ValueError as error:
        raise BrokenAnswer(f"the event stream is broken: {error}") from error
    finally:
        if not handed_on:
            await chunks.aclose()
    if found is None:
        raise BrokenAnswer("the event stream ended before the answer")
    return found, None


class StreamTails:
    """Event streams whose answer has been read, each read on to its end in a task of its own.

    A server ends a stream right after its response, but not in the same breath: on a
    loopback gateway the end comes a few hundred microseconds after the answer, a tenth of a
    pack call. Reading to the end returns the connection to the pool instead of dropping it;
    doing that after the caller has its answer costs the caller nothing (REL-3). A stream
    that goes on is left after ``STREAM_TAIL_WAIT_S`` or ``STREAM_TAIL_MAX_BYTES`` and its
    connection closed. Nothing here raises: what a tail brings, or how it breaks, is of no
    interest once the answer is in.

    ``ended()`` waits for one tail, so that the client's next request finds that tail's
    connection free rather than opening another; ``settled()`` waits until none is left, as
    the client's ``aclose`` does before it closes its pool.
    """

    def __init__(self) -> None:
        self._reading: set[asyncio.Task[None]] = set()
        # the tails no call waits for yet, oldest first
        self._unclaimed: dict[asyncio.Task[None], None] = {}

    @property
    def reading(self) -> bool:
        """Whether a tail is being read now."""
        return bool(self._reading)

    def read_on(self, response: httpx.Response, rest: AsyncGenerator[bytes, None]) -> None:
        """Read ``rest`` of ``response`` to its end, then close it; returns at once."""
        task = asyncio.get_running_loop().create_task(_read_to_end(response, rest))
        self._reading.add(task)
        self._unclaimed[task] = None
        task.add_done_callback(self._done)

    async def ended(self) -> None:
        """Wait for the oldest tail no other call waits for (at most ``STREAM_TAIL_WAIT_S``):
        its connection is this call's then. Each call waits for one tail of its own, so as
        many calls as tails each find a connection, a call costs the same however many run at
        once, and none waits for tails handed over after it came."""
        if self._unclaimed:
            oldest = next(iter(self._unclaimed))
            del self._unclaimed[oldest]
            await asyncio.wait((oldest,))

    async def settled(self) -> None:
        """Wait until no tail is being read, those handed over meanwhile included."""
        while self._reading:
            await asyncio.wait(tuple(self._reading))

    def _done(self, task: asyncio.Task[None]) -> None:
        self._reading.discard(task)
        self._unclaimed.pop(task, None)


_TAIL_FAILURES = (TimeoutError, httpx.HTTPError, httpx.StreamError)


async def _read_to_end(response: httpx.Response, rest: AsyncGenerator[bytes, None]) -> None:
    size = 0
    try:
        async with asyncio.timeout(STREAM_TAIL_WAIT_S):
            async for chunk in rest:
                size += len(chunk)
                if size > STREAM_TAIL_MAX_BYTES:
                    return
    except _TAIL_FAILURES:
        return
    finally:
        with contextlib.suppress(*_TAIL_FAILURES):
            await finish_despite_cancellation(rest.aclose())
        with contextlib.suppress(*_TAIL_FAILURES):
            await response.aclose()  # to its end, whatever arrives meanwhile (_ClosedToTheEnd)


# --- the pool under cancellation -----------------------------------------------------------


class KeptConnectionClosed(MemoryUnavailable):
    """A kept-alive connection was found closed by the gateway before the request was written.

    No byte of the request went out, so it cannot have reached the gateway: the one failure
    that is safe to send again.
    """


class CancellationSafeTransport(httpx.AsyncBaseTransport):
    """Wraps a transport: responses always close to the end, orphaned connections are dropped.

    On httpx's own network transport it also writes each request whole, after a last check of
    a kept-alive connection, and sends a request found on a closed one again, once, on a fresh
    connection. A second closed connection raises ``KeptConnectionClosed``.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner
        pool = getattr(inner, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, _WholeWritesBackend):
            pool._network_backend = _WholeWritesBackend(backend)  # type: ignore[union-attr]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            try:
                response = await self._inner.handle_async_request(request)
            except KeptConnectionClosed:
                if not isinstance(request.stream, httpx.ByteStream):
                    raise  # a body that cannot be read twice is not sent twice
                await drop_idle_connections(self._inner)
                response = await self._inner.handle_async_request(request)
        except BaseException:
            await reclaim_orphaned_connections(self._inner)
            raise
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        response.stream = _ClosedToTheEnd(stream)
        return response

    async def aclose(self) -> None:
        await finish_despite_cancellation(self._inner.aclose())


class _ClosedToTheEnd(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    def __aiter__(self) -> AsyncIterator[bytes]:  # type: ignore[override]
        return self._inner.__aiter__()  # the inner iterator itself: no extra step per chunk

    async def aclose(self) -> None:
        await finish_despite_cancellation(self._inner.aclose())


async def finish_despite_cancellation(closing: Coroutine[Any, Any, Any]) -> None:
    """Await the coroutine ``closing`` to its end; a cancellation meanwhile is re-raised after.

    For clean-up that must not be cut short. ``closing`` is driven step by step here, in the
    caller's own task: each time it waits, this function does the waiting in its stead, so a
    cancellation lands here, is held, and is raised once ``closing`` has finished — it never
    reaches ``closing``. That is what ``asyncio.shield`` gives, without the task of its own
    (and the turns of the event loop) that shield costs on every call. An error of
    ``closing`` is raised as it is, unless a cancellation came first.
    """
    cancelled: BaseException | None = None
    try:
        while True:
            try:
                awaited = closing.send(None)
            except StopIteration:
                break
            cancelled = await _wait_through_cancellation(awaited) or cancelled
    except BaseException:
        if cancelled is None:
            raise
    finally:
        closing.close()
    if cancelled is not None:
        raise cancelled


async def _wait_through_cancellation(awaited: Any) -> BaseException | None:
    """Wait as a task would for what a coroutine yielded; a cancellation meanwhile is returned.

    A bare ``yield`` (None) asks for one turn of the event loop; a future is waited for until
    it is done, however many cancellations arrive in between.
    """
    cancelled: BaseException | None = None
    if awaited is None:
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError as error:
            cancelled = error
        return cancelled
    if not asyncio.isfuture(awaited):
        raise RuntimeError(f"a clean-up coroutine yielded {awaited!r}, not a future")
    awaited._asyncio_future_blocking = False  # taken over, as a task takes it
    while not awaited.done():
        try:
            await asyncio.wait((awaited,))
        except asyncio.CancelledError as error:
            cancelled = error
    return cancelled


async def reclaim_orphaned_connections(transport: httpx.AsyncBaseTransport) -> int:
    """Drop and close the pool's connections that no request holds and that are not idle.

    In httpcore's pool a connection in use is always held by a pending request until its
    response is closed, so a connection that is neither idle nor closed and held by none was
    left behind by a cancelled request: made but never connected, or connected with the
    request never sent. It would hold its slot (and maybe a socket) for ever. Returns how many
    were dropped. Transports without an httpcore pool (a test's in-process app) are left alone.
    """
    return await _drop_unheld_connections(
        transport, lambda connection: not connection.is_idle() and not connection.is_closed()
    )


async def drop_idle_connections(transport: httpx.AsyncBaseTransport) -> int:
    """Take the pool's idle connections that no request holds out of it, and close them.

    Called when a kept-alive connection was found closed: the others were kept as long or
    longer, and the request sent again must go out on a fresh connection. Returns how many.
    """
    return await _drop_unheld_connections(transport, lambda connection: connection.is_idle())


async def _drop_unheld_connections(
    transport: httpx.AsyncBaseTransport, chosen: Callable[[Any], bool]
) -> int:
    """Take the ``chosen`` connections that no pending request holds out of the transport's
    httpcore pool and close them, each to its end; returns how many. A transport without
    such a pool (a test's in-process app) is left alone."""
    pool = getattr(transport, "_pool", None)
    connections = getattr(pool, "_connections", None)
    requests = getattr(pool, "_requests", None)
    if not isinstance(connections, list) or not isinstance(requests, list):
        return 0
    held = {id(getattr(request, "connection", None)) for request in requests}
    dropped = [c for c in connections if id(c) not in held and chosen(c)]
    for connection in dropped:
        connections.remove(connection)
    for connection in dropped:
        await finish_despite_cancellation(connection.aclose())
    return len(dropped)


class _WholeWritesBackend:
    """httpcore's network backend, each stream it opens wrapped in ``_WrittenWhole``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def connect_tcp(self, *args: Any, **kwargs: Any) -> _WrittenWhole:
        return _WrittenWhole(await self._inner.connect_tcp(*args, **kwargs))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> _WrittenWhole:
        return _WrittenWhole(await self._inner.connect_unix_socket(*args, **kwargs))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _WrittenWhole:
    """A network stream that writes each request in one piece, after a last check.

    httpcore writes a request's head and body separately and yields to the event loop between
    them; here they are held and written together when httpcore starts reading the answer. On
    a connection that has carried an answer before (kept alive), the socket is checked first,
    in the same step as the write: if it is readable, the gateway closed it (or sent bytes no
    request asked for), and ``KeptConnectionClosed`` is raised with nothing written. A request
    larger than ``WHOLE_WRITE_MAX_BYTES`` goes out in more than one write. Made for HTTP/1.1,
    the only version the client speaks: one request, then its answer, on each connection.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._kept_alive = False  # has carried an answer: idle in the pool since
        self._request_started = False  # some of the current request has been written

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        self._held.append(buffer)
        self._held_bytes += len(buffer)
        if self._held_bytes > WHOLE_WRITE_MAX_BYTES:
            await self._write_held(timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._held:
            await self._write_held(timeout)
        self._request_started = False
        self._kept_alive = True
        return cast(bytes, await self._inner.read(max_bytes, timeout))

    async def _write_held(self, timeout: float | None) -> None:
        data = b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        if (
            self._kept_alive
            and not self._request_started
            and self._inner.get_extra_info("is_readable")
        ):
            raise KeptConnectionClosed(
                "the gateway had closed the kept-alive connection; the request was not sent"
            )
        self._request_started = True
        await self._inner.write(data, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> _WrittenWhole:
        return _WrittenWhole(await self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)
