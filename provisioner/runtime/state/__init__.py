"""The runtime's state file and its one owner (SWEEP-2): every statement on it lives here.

``StateStore`` (``store``) opens, migrates and writes the file, each change a named method in
one transaction; ``ReadOnlyState`` (``reader``) reads it without changing it; both answer the
questions of ``reads.StateReads``. ``schema`` holds the tables, their steps and the audit log's
kinds; ``records`` the values the methods take and return. Standard library alone.
"""

from provisioner.runtime.state.reader import ReadOnlyState
from provisioner.runtime.state.reads import StateReads
from provisioner.runtime.state.records import (
    AuditEntry,
    AuditNote,
    BackfillMove,
    ErrorAsKept,
    FrozenRecall,
    KeptError,
    LedgerEntry,
    Mark,
    MigrationRun,
    QueuedBatch,
    SweepSession,
    SweepSummary,
)
from provisioner.runtime.state.schema import (
    AUDIT_BACKFILL,
    AUDIT_BACKFILL_DONE,
    AUDIT_BATCH,
    AUDIT_BATCH_KINDS,
    AUDIT_BUDGET,
    AUDIT_CUT,
    AUDIT_FAILED,
    AUDIT_FELL_BACK,
    AUDIT_FOLLOW_UP_KINDS,
    AUDIT_KINDS,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_MIGRATION_SKIPPED,
    AUDIT_QUEUED,
    AUDIT_REPLAYED,
    AUDIT_SHOWN_KINDS,
    AUDIT_SKIPPED,
    AUDIT_WENT_BACK,
    AUDIT_WRITTEN,
    MIGRATIONS,
    SCHEMA_VERSION,
    StateVersionError,
)
from provisioner.runtime.state.store import StateBusyError, StateStore

__all__ = [
    "AUDIT_BACKFILL",
    "AUDIT_BACKFILL_DONE",
    "AUDIT_BATCH",
    "AUDIT_BATCH_KINDS",
    "AUDIT_BUDGET",
    "AUDIT_CUT",
    "AUDIT_FAILED",
    "AUDIT_FELL_BACK",
    "AUDIT_FOLLOW_UP_KINDS",
    "AUDIT_KINDS",
    "AUDIT_LEFT_TO_MEMU",
    "AUDIT_MIGRATION_SKIPPED",
    "AUDIT_QUEUED",
    "AUDIT_REPLAYED",
    "AUDIT_SHOWN_KINDS",
    "AUDIT_SKIPPED",
    "AUDIT_WENT_BACK",
    "AUDIT_WRITTEN",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "AuditEntry",
    "AuditNote",
    "BackfillMove",
    "ErrorAsKept",
    "FrozenRecall",
    "KeptError",
    "LedgerEntry",
    "Mark",
    "MigrationRun",
    "QueuedBatch",
    "ReadOnlyState",
    "StateBusyError",
    "StateReads",
    "StateStore",
    "StateVersionError",
    "SweepSession",
    "SweepSummary",
]
