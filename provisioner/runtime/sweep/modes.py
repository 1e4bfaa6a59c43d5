"""Waiting or queued extraction, and how much of a session's window a step reads for it.

A mode (SWEEP-3, SWEEP-4) is a batch limit: how many messages and request bytes one
extraction call may carry, and whether Loom answers at once or queues the batch. The same
limits bound what the sweep reads from the transcript source for one step of a window
(SWEEP-1): never a whole history, only as much as the next batch can use, in pages. Every item
read is checked on the way (``transcripts.check_message``, SWEEP-12), and whatever the source
raises becomes ``SourceFailed``, which stops only the window that was reading.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provisioner.runtime.budget import (
    QUEUED_MAX_BYTES,
    QUEUED_MAX_MESSAGES,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
)
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import AUDIT_QUEUED, AuditEntry
from provisioner.runtime.sweep.batching import wire_size
from provisioner.runtime.transcripts import (
    Message,
    ReadWindow,
    Refused,
    SourceFailed,
    TranscriptSource,
    check_message,
)

QUEUE_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # our choice: what an audit row keeps

Page = Callable[[str, int, int], list[object]]


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


def queued_entry(session_id: str, taken: Sequence[Message], queue_id: str | None) -> AuditEntry:
    """The audit row naming a queued batch (SWEEP-4): its queue id, size and last message."""
    shown = queue_id if queue_id and QUEUE_ID_PATTERN.fullmatch(queue_id) else "?"
    return AuditEntry(
        AUDIT_QUEUED,
        session_id,
        taken[0].id,
        detail=f"queue_id={shown} messages={len(taken)} last_id={taken[-1].id}",
    )


def read_window(
    page: Page, session_id: str, watermark: int, *, wanted: int, byte_cap: int, page_size: int
) -> ReadWindow:
    """The session's next messages after ``watermark``, read through ``page``, checked.

    At most ``wanted`` items, in pages of ``page_size``, and no more pages once ``byte_cap``
    bytes were read: the caller asks for what one batch can use (SWEEP-1). Each item goes
    through ``check_message`` (SWEEP-12). The next page starts after the last usable id, so
    refused items behind that id are dropped from this page (the next one yields them again);
    a page without a usable id ends the reading, since the source cannot be asked past it.
    ``SourceFailed`` when ``page`` raises it.
    """
    messages: list[Message] = []
    refused: list[Refused] = []
    size = 0
    after = watermark
    while len(messages) + len(refused) < wanted and size <= byte_cap:
        limit = min(page_size, wanted - len(messages) - len(refused))
        last, behind = after, len(refused)  # refused[behind:] lie after ``last``
        for raw in page(session_id, after, limit):
            item = check_message(raw, after_id=last, roles=MESSAGE_ROLES)
            if isinstance(item, Message):
                messages.append(item)
                size += wire_size(item)
                last, behind = item.id, len(refused)
            else:
                refused.append(item)
                if item.usable and item.id is not None:
                    last, behind = item.id, len(refused)
        if last == after:
            break
        del refused[behind:]
        after = last
    return ReadWindow(tuple(messages), tuple(refused))


def source_page(source: TranscriptSource, session_id: str, after: int, limit: int) -> list[object]:
    """One page of ``source``, at most ``limit`` items whatever it yields; ``SourceFailed``
    when it raises, on the call or while its items are read (SWEEP-12)."""
    try:
        items = source.messages_after(session_id, after, limit)
        return list(itertools.islice(items, limit))
    except Exception as error:
        raise SourceFailed(error) from error
