"""The runtime's durable state: one SQLite file, every change in one transaction (SWEEP-2).

What the Loom backend and the sweep must not lose across a crash or a restart lives here:
frozen startup recalls (REC-3), the watermark per session, the batch budget, failure counters,
isolation state and the audit log. Why SQLite: a crash at any point (kill -9 included) leaves
the old or the new state of each transaction, never a half-written one; in WAL mode a reader
(``nerve memory status``, ``nerve doctor``) never blocks the sweep that writes.

One ``StateStore`` is shared by the tasks of one process; a lock serialises their (short)
transactions, so one task's ``BEGIN`` never meets another's open transaction. Another process
waits up to ``sqlite_file.BUSY_TIMEOUT_MS`` for a write lock and then fails with
``sqlite3.OperationalError``; opening the file then fails with ``StateBusyError`` instead, so a
busy file is never taken for a damaged one (SWEEP-12).

The schema carries a version (SQLite's ``user_version``); ``MIGRATIONS``, its ordered steps,
brings an older file forward (step ``n`` takes a file from version ``n`` to ``n + 1``). Several
processes may open a new file at once (two sweeps, a sweep and a recall or doctor), so the
version is read again inside the write transaction (``BEGIN IMMEDIATE``) that migrates: whoever
takes the lock first brings the file to the latest version, and the others find it there and
change nothing. All steps go in that one transaction, so a reader sees the file before the
migration or after it, never half-way. A file of a newer version of this package is refused
with ``StateVersionError``, not misread.

The sweep, its start point and backfill, the queued follow-up and the migration all write to
the one audit table (``sweep_audit``), and ``nerve memory status``, doctor and the Diagnostics
card read it back by kind, so every kind is named here, once. This module, and what it imports,
need the standard library alone: doctor reads the kinds without loading the runtime's HTTP
client. A row names a session, a message id, a role and times, never the text of a message; the
comment on each kind says what its ``detail`` holds. The names are our choice.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from provisioner.runtime import sqlite_file
from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.errors import OperatorMustAct, StoreFault
from provisioner.runtime.sqlite_file import is_busy, open_database

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


@dataclass(frozen=True)
class KeptError:
    """An error kept in the state for another process to show (LOOM-4, REL-7): its wall time
    (seconds since the epoch), op, outcome class, one-line message and fault code; ``seq``,
    its place in the order errors arrived; ``audit_seq``, the audit log's last row then."""

    at: float
    op: str
    kind: str
    message: str
    code: str | None
    seq: int
    audit_seq: int


def put_error(
    db: sqlite3.Connection, *, at: float, op: str, kind: str, message: str, code: str | None
) -> None:
    """Keep ``op``'s error as the newest of all, in the caller's transaction (step 9)."""
    db.execute("DELETE FROM last_error WHERE op = ?", (op,))
    db.execute(
        "INSERT INTO last_error (op, at, kind, message, code, audit_seq)"
        " VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM sweep_audit))",
        (op, at, kind, message, code),
    )


def newest_kept_error(
    read: Callable[[str, Sequence[object]], Sequence[Sequence[object]]],
    ops: Collection[str] | None = None,
) -> KeptError | None:
    """The error recorded last among ``ops`` (all when None), through ``read``; None when none
    is kept. ``ValueError`` or ``TypeError`` for a time that is no number."""
    listed = sorted(ops) if ops is not None else []
    where = f" WHERE op IN ({', '.join('?' for _ in listed)})" if ops is not None else ""
    rows = read(
        "SELECT at, op, kind, message, code, seq, audit_seq FROM last_error"
        f"{where} ORDER BY seq DESC LIMIT 1",
        listed,
    )
    if not rows:
        return None
    row: Sequence[Any] = rows[0]
    at, op, kind, message, code, seq, audit_seq = row
    shown_code = code if code is None else str(code)
    return KeptError(float(at), str(op), str(kind), str(message), shown_code, seq, audit_seq)


Read = Callable[[str, Sequence[object]], Sequence[Sequence[object]]]  # SQL, values -> rows
ErrorRow = tuple[float, str, str, str, str | None]  # at, op, kind, message, code


class StateVersionError(OperatorMustAct, RuntimeError):
    """The state file was written by a newer schema than this package knows."""


class StateBusyError(StoreFault, RuntimeError):
    """Another process kept the state file locked for longer than we wait for it.

    Raised only while the file is opened. The file is fine (it was neither read as damaged nor
    changed); trying again once the other process is done works. ``str()`` is one line.
    """


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


class StateStore:
    """One SQLite state file, opened (and migrated) on construction.

    ``path`` may be ``":memory:"`` for a store that lives as long as the object (tests, a
    backend built without a state path); a file path's parent folder is created. Use it as a
    context manager, or call ``close()``; a closed store raises ``sqlite3.ProgrammingError``.
    Opening raises ``StateVersionError`` for a file of a newer schema, ``StateBusyError`` when
    another process kept it locked past ``sqlite_file.BUSY_TIMEOUT_MS``, and ``sqlite3.Error``
    or ``OSError`` when it cannot be opened as a database at all.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)
        self._lock = threading.RLock()
        try:
            self._db = open_database(self._path)
        except sqlite3.OperationalError as error:
            if is_busy(error):
                raise self._busy() from error
            raise
        try:
            self._migrate()
        except BaseException as error:
            self._db.close()
            if isinstance(error, sqlite3.OperationalError) and is_busy(error):
                raise self._busy() from error
            raise

    @property
    def path(self) -> str:
        """Where the state lives (``":memory:"`` for an in-memory store)."""
        return self._path

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database; safe to call more than once."""
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises.

        ``BEGIN IMMEDIATE`` takes the write lock at the start, so two processes never both
        read a value and then each write their own update of it.
        A failure, at ``COMMIT`` too, leaves nothing behind and is raised itself, never
        hidden by a rollback SQLite may have made already (REL-2).
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLite ends it itself on a full disk, an I/O error
                    with suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise

    def read(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Rows of one read-only query (no transaction needed: WAL gives a consistent view)."""
        with self._lock:
            cursor = self._db.execute(sql, tuple(parameters))
            cursor.row_factory = sqlite3.Row
            return list(cursor.fetchall())

    def read_at_once(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row] | None:
        """``read``, or None at once while another thread is using the store: for a caller that
        must never wait for a thread (the event loop, REL-3)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            return self.read(sql, parameters)
        finally:
            self._lock.release()

    # --- frozen recalls (REC-3) ---------------------------------------------------------------

    def frozen_recall(self, session_id: str) -> FrozenRecall | None:
        """The recall frozen for ``session_id``, or None when none was frozen yet."""
        return frozen_recall_of(self.read(FROZEN_RECALL_QUERY, (session_id,)), session_id)

    def freeze_recall(
        self,
        session_id: str,
        *,
        source: str,
        items: Sequence[str],
        now: float,
        on_locked: Callable[[], object] | None = None,
    ) -> FrozenRecall:
        """Keep a successful recall for ``session_id``; the first one frozen wins.

        Two tasks starting the same session at once both recall; whichever commits first is
        what every later prompt of that session shows, and both callers get that one back.
        ``on_locked`` is called once the write lock is held: from then on the freeze waits for
        no other process, and a reader never waits for it (WAL).
        """
        with self.transaction() as db:
            if on_locked is not None:
                on_locked()
            db.execute(
                "INSERT OR IGNORE INTO frozen_recall (session_id, source, items, frozen_at)"
                " VALUES (?, ?, ?, ?)",
                (session_id, source, json.dumps(list(items), ensure_ascii=False), now),
            )
        frozen = self.frozen_recall(session_id)
        assert frozen is not None  # just inserted, or inserted before by another task
        return frozen

    # --- the sweep (SWEEP-2) ------------------------------------------------------------------

    def watermark(self, session_id: str) -> int:
        """The id of the last message of ``session_id`` Loom took (or skipped); 0 when none."""
        return self.sweep_session(session_id).watermark

    def sweep_session(self, session_id: str) -> SweepSession:
        """The sweep's state of ``session_id`` (all defaults for a session never swept)."""
        rows = self.read(
            "SELECT watermark, failures, suspect_last_id FROM sweep_session WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return SweepSession(session_id)
        row = rows[0]
        return SweepSession(session_id, row[0], row[1], row[2])

    def sweep_sessions(self) -> list[SweepSession]:
        """Every session the sweep has state for, by session id."""
        rows = self.read(
            "SELECT session_id, watermark, failures, suspect_last_id FROM sweep_session"
            " ORDER BY session_id"
        )
        return [SweepSession(*tuple(row)) for row in rows]

    def batch_budget(self, mode: str, default: BatchBudget) -> BatchBudget:
        """The batch budget kept for extraction ``mode`` (see ``kept_budget``)."""
        return kept_budget(self.read, mode, default)

    def record_taken(
        self,
        session_id: str,
        *,
        last_taken_id: int,
        budget: tuple[str, BatchBudget],
        suspect_last_id: int | None,
        audit: Sequence[AuditEntry],
        now: float,
        mark: Mark | None = None,
    ) -> None:
        """Loom took messages up to ``last_taken_id``: move the watermark, in one transaction.

        The same transaction resets the failure count, keeps or ends the isolation
        (``suspect_last_id``), stores the budget after this batch, writes ``audit`` and keeps
        ``mark``, the fingerprint of the message at ``last_taken_id``. The watermark never
        moves back here: a smaller ``last_taken_id`` raises ``ValueError``.
        """
        with self.transaction() as db:
            current = watermark_in(db, session_id)
            if last_taken_id < current:
                raise ValueError(
                    f"watermark of {session_id!r} would move back from {current} to {last_taken_id}"
                )
            self._put_session(db, SweepSession(session_id, last_taken_id, 0, suspect_last_id))
            self._put_budget(db, *budget)
            put_audit(db, audit, now)
            if mark is not None:
                put_mark(db, session_id, mark)

    def record_went_back(
        self, session_id: str, *, watermark: int, audit: AuditEntry, now: float
    ) -> None:
        """The source went back (NERVE-3): the watermark moves back to ``watermark``, marks
        past it go (their ids name other messages now), the failures and isolation end and
        ``audit`` says so, in one transaction. The only way a watermark ever moves back."""
        with self.transaction() as db:
            self._put_session(db, SweepSession(session_id, watermark))
            db.execute(
                "DELETE FROM sweep_mark WHERE session_id = ? AND message_id > ?",
                (session_id, watermark),
            )
            put_audit(db, [audit], now)

    def record_failure(
        self, session_id: str, *, failures: int, suspect_last_id: int | None
    ) -> None:
        """Store a session's failure count and isolation state; the watermark stays."""
        with self.transaction() as db:
            watermark = watermark_in(db, session_id)
            self._put_session(db, SweepSession(session_id, watermark, failures, suspect_last_id))

    def record_budget(
        self, mode: str, budget: BatchBudget, *, audit: Sequence[AuditEntry], now: float
    ) -> None:
        """Store the budget of ``mode`` (after a cut, with its audit row) in one transaction."""
        with self.transaction() as db:
            self._put_budget(db, mode, budget)
            put_audit(db, audit, now)

    def record_audit(self, audit: Sequence[AuditEntry], *, now: float) -> None:
        """Write ``audit`` rows alone, in one transaction (a failed batch, SWEEP-13)."""
        with self.transaction() as db:
            put_audit(db, audit, now)

    def audit(
        self, *, limit: int | None = None, kinds: Sequence[str] | None = None
    ) -> list[dict[str, object]]:
        """Audit rows of ``kinds`` (None: ``AUDIT_SHOWN_KINDS``, all but the per-batch rows),
        oldest first (the newest ``limit`` when given), as plain dicts: ``kind``, ``session_id``,
        ``message_id``, ``role``, ``created_at`` (the message's time), ``recorded_at`` (ISO
        8601, UTC) and ``detail``. Never message text.
        """
        listed = AUDIT_SHOWN_KINDS if kinds is None else kinds
        marks = f"IN ({', '.join('?' for _ in listed)})"
        rows = f"SELECT * FROM sweep_audit WHERE kind {marks} ORDER BY seq DESC LIMIT ?"
        columns = "kind, session_id, message_id, role, created_at, recorded_at, detail"
        sql = f"SELECT {columns} FROM ({rows}) ORDER BY seq"
        parameters = (*listed, -1 if limit is None else limit)
        return [_audit_row(row) for row in self.read(sql, parameters)]

    # --- the last error (LOOM-4) ---------------------------------------------------------------

    def record_last_error(
        self, *, at: float, op: str, kind: str, message: str, code: str | None = None
    ) -> None:
        """Keep ``op``'s error, ``at`` in seconds since the epoch, as the newest whatever its
        time (REL-7: a clock set back never hides it); each op keeps its own. ``message`` is
        one bounded line quoting no sent text; ``code`` a checked short printable code."""
        with self.transaction() as db:
            put_error(db, at=at, op=op, kind=kind, message=message, code=code)

    def last_error(self, ops: Collection[str] | None = None) -> ErrorRow | None:
        """The error recorded last (of ``ops`` when given): ``(at, op, kind, message, code)``,
        or None; ``newest_kept_error(store.read)`` gives its place in the order too."""
        kept = newest_kept_error(self.read, ops)
        return None if kept is None else (kept.at, kept.op, kept.kind, kept.message, kept.code)

    @staticmethod
    def _put_session(db: sqlite3.Connection, session: SweepSession) -> None:
        db.execute(
            "INSERT INTO sweep_session (session_id, watermark, failures, suspect_last_id)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
            " watermark = excluded.watermark, failures = excluded.failures,"
            " suspect_last_id = excluded.suspect_last_id",
            (session.session_id, session.watermark, session.failures, session.suspect_last_id),
        )

    @staticmethod
    def _put_budget(db: sqlite3.Connection, mode: str, budget: BatchBudget) -> None:
        db.execute(
            "INSERT OR REPLACE INTO sweep_budget (mode, messages, bytes, cut_reason, good_streak)"
            " VALUES (?, ?, ?, ?, ?)",
            (mode, budget.messages, budget.bytes, budget.cut_reason, budget.good_streak),
        )

    # --- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Bring the file to ``SCHEMA_VERSION``, exactly once however many processes open it.

        A file already at the latest version takes no write lock (a reader such as ``nerve
        memory status`` opens it alongside a sweep). Otherwise the version is read again under
        the write lock, since another process may have migrated the file in between; running
        a step twice would fail on its ``CREATE TABLE``. Raises ``StateVersionError`` for a
        newer file, and SQLite's busy error when the lock is not had within the busy timeout.
        """
        if self._version(self._db) == SCHEMA_VERSION:
            return
        with self.transaction() as db:
            version = self._version(db)
            apply_migrations(db, version)

    def _version(self, db: sqlite3.Connection) -> int:
        """The file's schema version; ``StateVersionError`` when it is newer than ours."""
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise StateVersionError(
                f"{self._path}: state schema {version} is newer than this package's "
                f"{SCHEMA_VERSION}; upgrade nerve-provisioner"
            )
        return int(version)

    def _busy(self) -> StateBusyError:
        return StateBusyError(
            f"{self._path}: busy — another nerve process (a sweep, a recall, doctor or Nerve "
            f"itself) kept it locked for more than {sqlite_file.BUSY_TIMEOUT_MS / 1000:g} s; "
            "the file is fine, try again once that process is done"
        )


def kept_budget(read: Read, mode: str, default: BatchBudget) -> BatchBudget:
    """The batch budget a state file keeps for ``mode``, through ``read`` (a store's, or a
    read-only reader's); ``default`` when none is kept or what is kept is not a budget."""
    columns = "messages, bytes, cut_reason, good_streak"
    rows = read(f"SELECT {columns} FROM sweep_budget WHERE mode = ?", (mode,))
    messages, size, reason, streak = tuple(rows[0]) if rows else (0, 0, None, 0)
    if not (type(messages) is int and messages > 0 and type(size) is int and size > 0):
        return default  # none kept, or what is kept is not a budget
    reason = reason if isinstance(reason, str) else None
    streak = streak if type(streak) is int else 0
    defaults = (default.default_messages, default.default_bytes)
    return BatchBudget(messages, size, *defaults, reason, streak)


FROZEN_RECALL_QUERY = "SELECT source, items, frozen_at FROM frozen_recall WHERE session_id = ?"


def frozen_recall_of(rows: Sequence[Sequence[object]], session_id: str) -> FrozenRecall | None:
    """The recall ``FROZEN_RECALL_QUERY``'s ``rows`` hold for ``session_id``; None for none."""
    if not rows:
        return None
    source, items, frozen_at = rows[0]
    listed = tuple(str(item) for item in json.loads(cast(str, items)))
    return FrozenRecall(session_id, cast(str, source), listed, cast(float, frozen_at))


def watermark_in(db: sqlite3.Connection, session_id: str) -> int:
    """``session_id``'s watermark as the caller's transaction sees it; 0 for a new session."""
    row = db.execute(
        "SELECT watermark FROM sweep_session WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def put_mark(db: sqlite3.Connection, session_id: str, mark: Mark) -> None:
    """Keep ``mark`` in the caller's transaction (the newest fingerprint of an id wins)."""
    db.execute(
        "INSERT OR REPLACE INTO sweep_mark (session_id, message_id, created_at, digest)"
        " VALUES (?, ?, ?, ?)",
        (session_id, mark.message_id, mark.created_at, mark.digest),
    )


def _audit_row(row: sqlite3.Row) -> dict[str, object]:
    record = dict(row)
    record["recorded_at"] = datetime.fromtimestamp(row["recorded_at"], UTC).isoformat()
    return record


def put_audit(db: sqlite3.Connection, entries: Sequence[AuditEntry], now: float) -> None:
    """Write ``entries`` as audit rows recorded at ``now``, inside the caller's transaction."""
    db.executemany(
        "INSERT INTO sweep_audit (kind, session_id, message_id, role, created_at,"
        " recorded_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (e.kind, e.session_id, e.message_id, e.role, e.created_at, now, e.detail)
            for e in entries
        ],
    )
