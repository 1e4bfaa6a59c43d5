"""Where the sweep reads conversations from (SWEEP-1).

``TranscriptSource`` is what Nerve plugs in: the ids of sessions that have messages, and a
session's messages after a given id, oldest first, a bounded page at a time — so no sweep ever
holds a whole history in memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Message:
    """One transcript message.

    ``id`` increases with each message a source stores (across its sessions, or at least
    within one session); the watermark is the ``id`` of the last message Loom took.
    ``created_at`` is an ISO 8601 timestamp, as Loom's ``messages[].created_at`` takes it.
    """

    id: int
    role: str
    content: str
    created_at: str


class TranscriptSource(Protocol):
    """The transcripts the sweep extracts from."""

    def sessions(self) -> Sequence[str]:
        """Ids of the sessions that have messages."""
        ...

    def messages_after(self, session_id: str, after_id: int, limit: int) -> Sequence[Message]:
        """At most ``limit`` messages of ``session_id`` with ``id > after_id``, oldest first."""
        ...
