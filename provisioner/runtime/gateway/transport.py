"""A transport wrapper that keeps httpcore's connection pool sound under cancellation.

Two gaps in httpcore 1.0 let a cancelled request spoil the pool for good, and both are met
every day by a client whose calls have deadlines and whose callers give up:

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
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, cast

import httpx

from provisioner.runtime.errors import MemoryUnavailable

# Our choice: a request up to this size goes out in one write (a tool call is far smaller).
WHOLE_WRITE_MAX_BYTES = 1024 * 1024


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
