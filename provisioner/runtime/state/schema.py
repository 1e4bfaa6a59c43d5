"""The state file's schema: its tables, the steps that bring an older file forward, and the
audit log's kinds (SWEEP-2).

The schema carries a version (SQLite's ``user_version``); ``MIGRATIONS``, its ordered steps,
brings an older file forward (step ``n`` takes a file from version ``n`` to ``n + 1``). All
steps go in the one transaction of whoever opens the file first (``store.StateStore``), so a
reader sees the file before the migration or after it, never half-way. A file of a newer
version of this package is refused with ``StateVersionError``, not misread.

The sweep, its start point and backfill, the queued follow-up and the migration all write to
the one audit table (``sweep_audit``), and ``nerve memory status``, doctor and the Diagnostics
card read it back by kind, so every kind is named here, once. This package, and what it
imports, need the standard library alone: doctor reads the state without loading the
runtime's HTTP client. A row names a session, a message id, a role and times, never the text
of a message; the comment on each kind says what its ``detail`` holds. The names are our choice.
"""

from __future__ import annotations

import sqlite3

from provisioner.runtime.errors import OperatorMustAct

# The sweep (SWEEP-4, SWEEP-5, SWEEP-8, SWEEP-11, NERVE-3).
AUDIT_QUEUED = "queued"  # SWEEP-4: a batch Loom queued (detail: its queue id and size)
AUDIT_SKIPPED = "skipped"  # SWEEP-8: the one message Loom fails on, left out for good
AUDIT_CUT = "cut"  # SWEEP-11: a message sent cut to fit the byte budget
AUDIT_BUDGET = "budget"  # SWEEP-5: the batch budget was halved (detail: why, and the new one)
AUDIT_WENT_BACK = "went_back"  # NERVE-3: the source went back; the watermark was re-aligned

# SWEEP-13: a row per batch, which `nerve memory status` counts; ``audit()`` leaves them out.
AUDIT_BATCH = "batch"  # a batch Loom took in waiting mode (detail: how many messages)
AUDIT_FAILED = "failed"  # a batch sent that did not go through (detail: its kind and code)
AUDIT_BATCH_KINDS = (AUDIT_BATCH, AUDIT_FAILED)

# Where the sweep starts after a switch from memU, and backfill (MIG-2).
AUDIT_LEFT_TO_MEMU = "left_to_memu"  # a session started after memU's point (detail: messages=N)
AUDIT_BACKFILL = "backfill"  # a watermark moved back on purpose (detail: through=W resume=P)
AUDIT_BACKFILL_DONE = "backfill_done"  # memU's share sent: on to where it stood (detail: W -> P)

# The queued follow-up (SWEEP-15): ids, counts and states only.
AUDIT_WRITTEN = "written"  # a queued batch written; the watermark moved past it
AUDIT_REPLAYED = "replayed"  # a failed batch queued again, its one replay
AUDIT_FELL_BACK = "fell_back"  # a batch that will be sent again in waiting mode
AUDIT_FOLLOW_UP_KINDS = (AUDIT_WRITTEN, AUDIT_REPLAYED, AUDIT_FELL_BACK)

# The migration from memU (MIG-1).
AUDIT_MIGRATION_SKIPPED = "migration_skipped"  # an item skipped (detail: its id and why)

AUDIT_KINDS = (
    AUDIT_QUEUED,
    AUDIT_SKIPPED,
    AUDIT_CUT,
    AUDIT_BUDGET,
    AUDIT_WENT_BACK,
    *AUDIT_BATCH_KINDS,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_BACKFILL,
    AUDIT_BACKFILL_DONE,
    *AUDIT_FOLLOW_UP_KINDS,
    AUDIT_MIGRATION_SKIPPED,
)
"""Every kind, in the order above."""
AUDIT_SHOWN_KINDS = tuple(kind for kind in AUDIT_KINDS if kind not in AUDIT_BATCH_KINDS)
"""What ``nerve memory status`` lists by default: every kind but the per-batch rows."""

# Each entry brings the schema from version ``index`` to ``index + 1``. Append only: a step
# that shipped is never edited, since files on disk were migrated by it.
MIGRATIONS: tuple[str, ...] = (
    # 1: frozen startup recalls (REC-3).
    """
    CREATE TABLE frozen_recall (
        session_id TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        items TEXT NOT NULL,
        frozen_at REAL NOT NULL
    );
    """,
    # 2: the extraction sweep (SWEEP-2, SWEEP-5, SWEEP-8, SWEEP-11).
    """
    CREATE TABLE sweep_session (
        session_id TEXT PRIMARY KEY,
        watermark INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        suspect_last_id INTEGER
    );
    CREATE TABLE sweep_budget (
        mode TEXT PRIMARY KEY,
        messages INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        cut_reason TEXT,
        good_streak INTEGER NOT NULL
    );
    CREATE TABLE sweep_audit (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL,
        session_id TEXT,
        message_id INTEGER,
        role TEXT,
        created_at TEXT,
        recorded_at REAL NOT NULL,
        detail TEXT NOT NULL DEFAULT ''
    );
    """,
    # 3: the last error the backend or the sweep met (LOOM-4), for a status or doctor run in
    # another process than the sweep's. One row; never any message text (loom_report sees to it).
    """
    CREATE TABLE last_error (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        at REAL NOT NULL,
        op TEXT NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL
    );
    """,
    # 4: a source that went back (NERVE-3): per session, a fingerprint of the message at each
    # watermark the sweep stored (its time and a digest of its role and text, never the text),
    # and which source the sweep read, for doctor.
    """
    CREATE TABLE sweep_mark (
        session_id TEXT NOT NULL,
        message_id INTEGER NOT NULL,
        created_at TEXT,
        digest TEXT NOT NULL,
        PRIMARY KEY (session_id, message_id)
    );
    CREATE TABLE sweep_source (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        kind TEXT NOT NULL,
        location TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    """,
    # 5: the ledger of `nerve memory migrate` (MIG-1): per memU item id, what became of it in
    # Loom (status written, conflict, rejected or skipped; failing while Loom's uncoded error
    # has not yet failed it three runs in a row), Loom's verdict and key, why it was skipped,
    # the failures in a row, and when; and one row of the last run: which memU store, how many
    # items it held, when it started and ended and why, and how many of its rows had no id
    # that can be a key (never written, so never in the ledger). Never an item's text.
    """
    CREATE TABLE migration_item (
        item_id TEXT PRIMARY KEY,
        status TEXT NOT NULL,
        verdict TEXT,
        memory_key TEXT,
        reason TEXT,
        failures INTEGER NOT NULL DEFAULT 0,
        recorded_at REAL NOT NULL
    );
    CREATE INDEX migration_item_by_status ON migration_item (status);
    CREATE TABLE migration_run (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        source TEXT NOT NULL,
        items_total INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        stopped TEXT,
        rows_without_id INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 6: queued batches followed up (SWEEP-15): per batch Loom queued, its queue id, session,
    # the watermark it was read after, its first and last message id, what Loom last said of
    # it (queued, running, done, failed) or what the sweep made of it (waiting: failed after
    # its one replay, sent again in waiting mode; and, once closed, how), whether it was
    # replayed, the fingerprint of its last message (kept with the watermark once the batch is
    # written, NERVE-3), and when it was queued, last asked about and closed. An open batch has
    # no ``closed_at``; a queue id is followed (open, not waiting) at most once.
    """
    CREATE TABLE queued_batch (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        queue_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        after_id INTEGER NOT NULL,
        first_id INTEGER NOT NULL,
        last_id INTEGER NOT NULL,
        status TEXT NOT NULL,
        replayed INTEGER NOT NULL DEFAULT 0,
        mark_created_at TEXT,
        mark_digest TEXT,
        queued_at REAL NOT NULL,
        checked_at REAL,
        closed_at REAL
    );
    CREATE UNIQUE INDEX queued_batch_followed ON queued_batch (queue_id)
        WHERE closed_at IS NULL AND status <> 'waiting';
    CREATE INDEX queued_batch_by_session ON queued_batch (session_id, first_id);
    """,
    # 7: the audit log by kind and time. It gains a row per batch for good (SWEEP-13), while
    # the sweep's start-point ledger (MIG-2), status and doctor each read a few kinds, or a
    # kind since a time; without it each of those reads walks every batch row ever kept.
    """
    CREATE INDEX sweep_audit_by_kind ON sweep_audit (kind, recorded_at);
    """,
    # 8: the last error's fault code (LOOM-4), so a coded fault met by a health probe or a
    # recall names its code in the next process too, not only the extraction's failed batch.
    """
    ALTER TABLE last_error ADD COLUMN code TEXT;
    """,
    # 9: errors kept in the order they arrived, one per op (REL-7). The one row kept the error
    # with the latest time, so after the clock was set back a stale error hid the current one,
    # and a status probe's error took the place of the sweep's. ``seq`` grows with each error
    # recorded (the newest is the highest); ``audit_seq`` is the audit log's last row when it
    # was, so what went through since is counted by arrival too, never by time.
    """
    ALTER TABLE last_error RENAME TO last_error_before_9;
    CREATE TABLE last_error (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        op TEXT NOT NULL UNIQUE,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        message TEXT NOT NULL,
        code TEXT,
        audit_seq INTEGER NOT NULL DEFAULT 0
    );
    INSERT INTO last_error (op, at, kind, message, code, audit_seq)
        SELECT op, at, kind, message, code,
            (SELECT COALESCE(MAX(seq), 0) FROM sweep_audit WHERE recorded_at < kept.at)
        FROM last_error_before_9 AS kept;
    DROP TABLE last_error_before_9;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


def apply_migrations(db: sqlite3.Connection, version: int) -> None:
    """Run every step after ``version`` and record the latest version, in the caller's
    transaction: a failure rolls all of it back with the transaction."""
    for step in range(version, SCHEMA_VERSION):
        for statement in _statements(MIGRATIONS[step]):
            db.execute(statement)
    if version < SCHEMA_VERSION:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _statements(script: str) -> list[str]:
    """The statements of a migration script (``executescript`` would commit on its own)."""
    return [part.strip() for part in script.split(";") if part.strip()]


class StateVersionError(OperatorMustAct, RuntimeError):
    """The state file was written by a newer schema than this package knows."""


def schema_version(db: sqlite3.Connection, path: str) -> int:
    """The schema version of the file open as ``db``; ``StateVersionError`` when it is newer
    than this package's."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if version > SCHEMA_VERSION:
        raise StateVersionError(
            f"{path}: state schema {version} is newer than this package's "
            f"{SCHEMA_VERSION}; upgrade nerve-provisioner"
        )
    return int(version)
