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
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import httpx


class CancellationSafeTransport(httpx.AsyncBaseTransport):
    """Wraps a transport: responses always close to the end, orphaned connections are dropped."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
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
    pool = getattr(transport, "_pool", None)
    connections = getattr(pool, "_connections", None)
    requests = getattr(pool, "_requests", None)
    if not isinstance(connections, list) or not isinstance(requests, list):
        return 0
    held = {id(getattr(request, "connection", None)) for request in requests}
    orphans = [
        connection
        for connection in connections
        if id(connection) not in held and not connection.is_idle() and not connection.is_closed()
    ]
    for connection in orphans:
        connections.remove(connection)
    for connection in orphans:
        await finish_despite_cancellation(connection.aclose())
    return len(orphans)
