"""The explicit state of the gateway client's objects: unopened, opened, closed.

``McpGatewayServer``, ``GatewayCatalog`` and ``LoomConnection`` are async context managers,
as httpx's clients are. Each holds one ``Lifecycle``, so "used after close" is one check of one
field, made again after every wait, instead of a race between a call and a shutdown. An object
may also be used without ``async with`` (it opens on first use) and closed with ``aclose()``.
"""

from __future__ import annotations

import enum


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
