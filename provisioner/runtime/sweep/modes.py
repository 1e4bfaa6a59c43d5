"""Waiting or queued extraction (SWEEP-3, SWEEP-4).

A mode is a batch limit: how many messages and request bytes one extraction call may carry,
and whether Loom answers at once or queues the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.runtime.budget import (
    QUEUED_MAX_BYTES,
    QUEUED_MAX_MESSAGES,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
)


@dataclass(frozen=True)
class ExtractionMode:
    """Waiting (SWEEP-3) or queued (SWEEP-4) extraction, with its batch limits."""

    name: str
    defer: bool
    max_messages: int
    max_bytes: int

    def default_budget(self) -> BatchBudget:
        return BatchBudget.default(self.max_messages, self.max_bytes)


WAITING = ExtractionMode("waiting", False, WAITING_MAX_MESSAGES, WAITING_MAX_BYTES)  # SWEEP-3
QUEUED = ExtractionMode("queued", True, QUEUED_MAX_MESSAGES, QUEUED_MAX_BYTES)  # SWEEP-4


def extraction_mode(defer_extraction: bool) -> ExtractionMode:
    """The mode ``memory.loom.defer_extraction`` asks for (SWEEP-3, SWEEP-4, SWEEP-15).

    Waiting is the default: a batch Loom fails fails the call, and the watermark stays.
    Queued hands batches over with ``defer: true``; Loom extracts them later, with tries of
    its own out of sight. Where the catalog lists ``loom_op``, each queued batch is followed
    up (``followup``): ``memory.extraction_status_mine`` says how it stands, the watermark
    moves only once it is written, a failed one is queued again once with
    ``memory.extraction_retry_mine``, and after that its window is sent in waiting mode.
    Without ``loom_op`` the watermark moves when Loom queues a batch, so a batch Loom's own
    tries fail is lost (the audit log names each queued batch; ``nerve doctor`` warns).
    """
    return QUEUED if defer_extraction else WAITING
