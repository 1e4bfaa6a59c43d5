"""Transports that remember what became of them, and the process's open descriptors.

``TrackedTransport`` is httpx's own network transport (a real connection pool on real
sockets); it only records whether its client closed it, and lets a test look at its pool.
"""

from __future__ import annotations

import asyncio
import os

import httpx

TLS = httpx.create_ssl_context()  # built once: a context per transport costs tens of ms
SETTLE_S = 3.0


class TrackedTransport(httpx.AsyncHTTPTransport):
    """httpx's network transport, remembering whether its client closed it."""

    def __init__(self) -> None:
        super().__init__(verify=TLS)
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True
        await super().aclose()

    @property
    def connections(self) -> int:
        """Connections in the pool now, busy or idle."""
        return len(self._pool.connections)

    @property
    def busy_connections(self) -> int:
        """Connections the pool holds as in use (a freed one is idle or gone)."""
        return sum(1 for connection in self._pool.connections if not connection.is_idle())


class TransportLog:
    """A ``transport_factory`` that keeps every transport it built."""

    def __init__(self) -> None:
        self.built: list[TrackedTransport] = []

    def __call__(self) -> TrackedTransport:
        self.built.append(TrackedTransport())
        return self.built[-1]

    @property
    def all_closed(self) -> bool:
        return all(transport.closed for transport in self.built)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def settled_fds() -> int:
    """The fd count once it has stopped changing for a moment.

    The servers run in this process (in other threads), so their side of each connection
    closes a little after the client's; the count is read once both sides are done.
    """
    loop = asyncio.get_running_loop()
    give_up = loop.time() + SETTLE_S
    last, steady = open_fds(), 0
    while steady < 5 and loop.time() < give_up:
        await asyncio.sleep(0.02)
        now = open_fds()
        steady = steady + 1 if now == last else 0
        last = now
    return last
