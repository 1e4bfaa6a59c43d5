"""What the state file holds, as the values its owner takes and hands back (SWEEP-2).

Every row the state's methods read or write is one of these frozen dataclasses, never a
``sqlite3.Row``: a caller sees what a row means, not how it is stored. The statuses of the
queued batches (SWEEP-15) and of the migration's ledger (MIG-1) are named here, once, since
both the state's statements and their callers use them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# SWEEP-15: the statuses of a queued batch. Loom's own words (queued, running, done, failed)
# are kept as it says them; these are ours.
QUEUE_WAITING = "waiting"  # failed after its replay: its window goes in waiting mode
QUEUE_CLOSED_WRITTEN = "written"  # Loom reported it written; the watermark moved past it
QUEUE_CLOSED_UNFOLLOWED = "unfollowed"  # passed without loom_op, as queued mode did before
QUEUE_CLOSED_PASSED = "passed"  # the watermark passed it otherwise (its waiting batches went)
QUEUE_CLOSED_STALE = "stale"  # the source went back below it (NERVE-3); read again

# MIG-1: the statuses of a memU item in the migration's ledger.
LEDGER_WRITTEN = "written"
LEDGER_CONFLICT = "conflict"
LEDGER_REJECTED = "rejected"
LEDGER_SKIPPED = "skipped"
LEDGER_FAILING = "failing"
LEDGER_FINAL_STATUSES = (LEDGER_WRITTEN, LEDGER_CONFLICT, LEDGER_REJECTED, LEDGER_SKIPPED)


@dataclass(frozen=True)
class KeptError:
    """An error kept in the state for another process to show (LOOM-4, REL-7): its wall time
    (seconds since the epoch), op, outcome class, one-line message and fault code; ``seq``,
    its place in the order errors arrived; ``audit_seq``, the audit log's last row then (None
    in a file from before errors were kept in order)."""

    at: float
    op: str
    kind: str
    message: str
    code: str | None
    seq: int | None
    audit_seq: int | None


@dataclass(frozen=True)
class ErrorAsKept:
    """The last error of some ops with its values as the file holds them, for doctor, which
    reads any file, a hostile one too (LOOM-4, REL-7): each value may be of any type, and
    ``code`` and ``audit_seq`` are None in a file from before they were kept."""

    at: Any
    op: Any
    kind: Any
    message: Any
    code: Any
    audit_seq: Any


@dataclass(frozen=True)
class FrozenRecall:
    """A recall kept for a session so every rebuild of its prompt is byte-identical (REC-3).

    ``items`` are the lines already made safe; ``source`` is ``"pack"`` or ``"search"``.
    Only a recall that succeeded is frozen: a failed one is tried again next time.
    """

    session_id: str
    source: str
    items: tuple[str, ...]
    frozen_at: float


@dataclass(frozen=True)
class SweepSession:
    """What the sweep keeps per session (SWEEP-2, SWEEP-8).

    ``watermark`` is the id of the last message Loom took (or that was skipped), 0 when none.
    ``failures`` counts sweeps in a row whose batch at the watermark failed with Loom's
    uncoded internal error. ``suspect_last_id`` is set while a failing batch is isolated: the
    suspects are this session's messages after the watermark up to that id.
    """

    session_id: str
    watermark: int = 0
    failures: int = 0
    suspect_last_id: int | None = None

    @property
    def isolating(self) -> bool:
        return self.suspect_last_id is not None


@dataclass(frozen=True)
class Mark:
    """The fingerprint of the message a watermark stopped on (NERVE-3): its id, its time and a
    digest of its role and text (never the text), so a source that went back is noticed."""

    message_id: int
    created_at: str | None
    digest: str


@dataclass(frozen=True)
class AuditEntry:
    """One audit row to write: never a message's text, only where and when (``detail`` is
    a short machine-made note such as a queue id or budget figures)."""

    kind: str
    session_id: str | None
    message_id: int | None
    role: str | None = None
    created_at: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class AuditNote:
    """An audit row as read back for the start-point ledger and doctor (MIG-2, NERVE-3):
    its place in the log (``seq``), kind, session, message id, detail and when it was kept."""

    seq: int
    kind: str
    session_id: object
    message_id: object
    detail: str
    recorded_at: float


@dataclass(frozen=True)
class QueuedBatch:
    """One batch Loom queued, as the follow-up keeps it (SWEEP-15): its row's ``seq``, queue
    id, session, the watermark it was read after, its first and last message id, its status
    (Loom's last word, or ``QUEUE_WAITING``), whether it was replayed, and the fingerprint of
    its last message (kept with the watermark once it is written, NERVE-3)."""

    seq: int
    queue_id: str
    session_id: str
    after_id: int
    first_id: int
    last_id: int
    status: str
    replayed: bool
    mark: Mark | None


@dataclass(frozen=True)
class LedgerEntry:
    """One memU item's row of the migration's ledger (MIG-1)."""

    item_id: str
    status: str
    verdict: str | None = None
    memory_key: str | None = None
    reason: str | None = None
    failures: int = 0

    @property
    def final(self) -> bool:
        """Whether a later run passes the item over."""
        return self.status in LEDGER_FINAL_STATUSES


@dataclass(frozen=True)
class MigrationRun:
    """The migration's last run (MIG-1): which store, how many items it held, when, why it
    stopped, and how many rows without a usable id it met."""

    source: str
    items_total: int
    started_at: float
    finished_at: float | None
    stopped: str | None
    rows_without_id: int = 0


@dataclass(frozen=True)
class SweepSummary:
    """What doctor says of the sweep's state (SWEEP-8, SWEEP-5): sessions kept, those
    isolating a batch, messages skipped, and per mode the budget (messages, bytes, why cut)."""

    sessions: int
    isolating: int
    skipped: int
    budgets: tuple[tuple[str, int, int, str | None], ...]


@dataclass(frozen=True)
class BackfillMove:
    """One session's backfill (MIG-2): the watermark goes from ``resume`` back to ``floor``;
    the messages after ``floor`` up to ``through`` (memU's point) go to Loom, those after
    ``through`` up to ``resume`` were sent already and are passed over."""

    session_id: str
    floor: int
    through: int
    resume: int


QUEUE_ID_SHOWN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # our choice: what an audit row names


def shown_queue_id(queue_id: str | None) -> str:
    """``queue_id`` as an audit row names it: itself when it is short plain text, else ``?``."""
    return queue_id if queue_id and QUEUE_ID_SHOWN.fullmatch(queue_id) else "?"
