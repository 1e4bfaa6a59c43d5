"""What the Loom backend answers its callers: recalls, extractions, writes, identity, queues.

Plain frozen dataclasses in a module of their own, so the sweep, the CLI and the web page can
name them without importing the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# loom-ops.md: what loom_memory_set answers of a write; there is no "pending".
WRITE_VERDICTS = ("clear", "merge", "duplicate", "conflict", "refines", "rejected")
# SWEEP-15 (the status and retry ops' result schema): what Loom says of a queued batch.
QUEUE_QUEUED = "queued"
QUEUE_RUNNING = "running"
QUEUE_DONE = "done"  # written: the batch's memories are in Loom
QUEUE_FAILED = "failed"  # Loom gave up on it (after its own tries); nothing of it was written
QUEUE_STATES = (QUEUE_QUEUED, QUEUE_RUNNING, QUEUE_DONE, QUEUE_FAILED)


@dataclass(frozen=True)
class Recall:
    """A startup recall (REC-1…REC-4).

    ``items`` are one-line strings already made safe for the session-context block.
    ``recalled`` is False when memories could not be recalled (unavailable, refused, no
    answer): that is never the same as a recall that found no memories (``recalled`` True,
    ``items`` empty). ``source`` is ``"pack"``, ``"search"``, or None when nothing was recalled.
    """

    items: tuple[str, ...]
    recalled: bool
    source: str | None


@dataclass(frozen=True)
class WrittenMemory:
    """One memory an extraction wrote, with Loom's verdict (``clear``, ``merge``, …)."""

    memory_key: str
    verdict: str


@dataclass(frozen=True)
class Extracted:
    """What one ``loom_memory_set_from_messages`` call answered (SWEEP-3, SWEEP-4).

    Waiting mode: ``accepted`` is how many of the messages sent Loom took, in order (the
    watermark moves past exactly those), and ``written`` the memories it wrote. Queued mode:
    ``queue_id`` names the queued batch and ``accepted`` counts every message sent.
    """

    accepted: int
    written: tuple[WrittenMemory, ...] = ()
    queue_id: str | None = None


@dataclass(frozen=True)
class MemoryWrite:
    """One memory to write with ``loom_memory_set`` under a key the caller chose (MIG-1).

    ``memory_key`` makes the write idempotent: sent again (after a crash, say) Loom finds the
    key and answers ``duplicate``. ``kind`` and ``tags`` say what sort of memory it is and
    where it was filed; the dates are RFC 3339 in UTC (``2026-11-30T09:00:00Z``) or None.
    """

    memory_key: str
    text: str
    kind: str | None = None
    tags: tuple[str, ...] = ()
    created_at: str | None = None
    updated_at: str | None = None
    happened_at: str | None = None


@dataclass(frozen=True)
class WriteVerdict:
    """What Loom decided about one write: ``verdict`` is one of ``WRITE_VERDICTS``.

    ``memory_key`` is the key Loom answered (for ``merge`` or ``duplicate``, possibly that of
    the memory it already held); ``reason`` is Loom's code for a rejection, such as
    ``PINNED_CONFLICT``, or None. ``left_out`` names the write's fields the live Loom does not
    declare, which were not sent (REL-8).
    """

    memory_key: str
    verdict: str
    reason: str | None = None
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True)
class Identity:
    """Who Loom says the agent is (LOOM-3), with overrides from ``memory.loom`` applied.

    ``org_source`` and ``namespace_source`` are ``"loom"`` (what Loom resolved) or
    ``"config"`` (``memory.loom.org`` / ``memory.loom.namespace`` overrode it).
    """

    org: str
    namespace: str
    shared_namespaces: tuple[str, ...]
    memory_count: int
    org_source: str
    namespace_source: str


@dataclass(frozen=True)
class QueueStates:
    """What Loom answered about queued batches (SWEEP-15).

    ``states`` maps each queue id Loom answered for, among those asked, to one of
    ``QUEUE_STATES``. ``odd`` counts the items that could not be taken at their word: a state
    outside ``QUEUE_STATES``, an id that was not asked, or an id answered twice (then that id
    is left out of ``states`` altogether). An id asked and absent from ``states`` is one Loom
    did not vouch for; the follow-up never takes it for written.
    """

    states: Mapping[str, str] = field(default_factory=dict)
    odd: int = 0
