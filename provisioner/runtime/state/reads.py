"""Every read of the state file, as named questions with typed answers (SWEEP-2).

``StateReads`` holds the queries; what it reads through is its subclass's: the store that
writes the file (``store.StateStore``) or a read-only view of it (``reader.ReadOnlyState``),
which status, doctor, a plan and a dry run use. No caller outside this package sees a query
or a row: each method answers with the records of ``records``. A read raises what SQLite
raises (``sqlite3.Error``); the few noted below read a file from before a table was added as
holding none of it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import cast

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.state.records import (
    LEDGER_FINAL_STATUSES,
    QUEUE_WAITING,
    AuditNote,
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
    AUDIT_BATCH,
    AUDIT_FAILED,
    AUDIT_QUEUED,
    AUDIT_SHOWN_KINDS,
    AUDIT_SKIPPED,
)

QUEUED_BATCH_COLUMNS = (
    "seq, queue_id, session_id, after_id, first_id, last_id, status, replayed,"
    " mark_created_at, mark_digest"
)
FROZEN_RECALL_QUERY = "SELECT source, items, frozen_at FROM frozen_recall WHERE session_id = ?"


class StateReads:
    """The state's questions; a subclass says how a query's rows are read (``_rows``)."""

    def _rows(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Rows of one read-only query, each a ``sqlite3.Row``."""
        raise NotImplementedError

    # --- frozen recalls (REC-3) -------------------------------------------------------------------

    def frozen_recall(self, session_id: str) -> FrozenRecall | None:
        """The recall frozen for ``session_id``, or None when none was frozen yet."""
        return frozen_recall_of(self._rows(FROZEN_RECALL_QUERY, (session_id,)), session_id)

    # --- the sweep (SWEEP-2, SWEEP-8) -------------------------------------------------------------

    def watermark(self, session_id: str) -> int:
        """The id of the last message of ``session_id`` Loom took (or skipped); 0 when none."""
        return self.sweep_session(session_id).watermark

    def has_session(self, session_id: str) -> bool:
        """Whether the state keeps a row for ``session_id`` (MIG-2: a session never seen)."""
        sql = "SELECT 1 FROM sweep_session WHERE session_id = ?"
        return bool(self._rows(sql, (session_id,)))

    def sweep_session(self, session_id: str) -> SweepSession:
        """The sweep's state of ``session_id`` (all defaults for a session never swept)."""
        rows = self._rows(
            "SELECT watermark, failures, suspect_last_id FROM sweep_session WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return SweepSession(session_id)
        row = rows[0]
        return SweepSession(session_id, row[0], row[1], row[2])

    def sweep_sessions(self) -> list[SweepSession]:
        """Every session the sweep has state for, by session id."""
        rows = self._rows(
            "SELECT session_id, watermark, failures, suspect_last_id FROM sweep_session"
            " ORDER BY session_id"
        )
        return [SweepSession(*tuple(row)) for row in rows]

    def watermarks(self) -> dict[str, int]:
        """Every session the state keeps a row for, with its watermark."""
        rows = self._rows("SELECT session_id, watermark FROM sweep_session")
        return {str(row[0]): int(row[1]) for row in rows}

    def batch_budget(self, mode: str, default: BatchBudget) -> BatchBudget:
        """The batch budget kept for extraction ``mode`` (SWEEP-5); ``default`` when none is
        kept or what is kept is not a budget."""
        columns = "messages, bytes, cut_reason, good_streak"
        rows = self._rows(f"SELECT {columns} FROM sweep_budget WHERE mode = ?", (mode,))
        messages, size, reason, streak = tuple(rows[0]) if rows else (0, 0, None, 0)
        if not (type(messages) is int and messages > 0 and type(size) is int and size > 0):
            return default  # none kept, or what is kept is not a budget
        reason = reason if isinstance(reason, str) else None
        streak = streak if type(streak) is int else 0
        defaults = (default.default_messages, default.default_bytes)
        return BatchBudget(messages, size, *defaults, reason, streak)

    def marks(self, session_id: str, *, only: int | None = None) -> list[Mark]:
        """The session's marks (NERVE-3), oldest first (only the one at ``only`` when given)."""
        sql = "SELECT message_id, created_at, digest FROM sweep_mark WHERE session_id = ?"
        parameters: tuple[object, ...] = (session_id,)
        if only is not None:
            sql += " AND message_id = ?"
            parameters = (session_id, only)
        rows = self._rows(sql + " ORDER BY message_id", parameters)
        return [Mark(int(row[0]), row[1], str(row[2])) for row in rows]

    def kept_source(self) -> tuple[str, str] | None:
        """Which host source the sweep read last (kind, location, NERVE-3); None when none is
        kept, or the file is from before sources were kept."""
        try:
            rows = self._rows("SELECT kind, location FROM sweep_source WHERE id = 1")
        except sqlite3.OperationalError:  # a state file from before sources were kept
            return None
        return (rows[0][0], rows[0][1]) if rows else None

    def sweep_summary(self) -> SweepSummary:
        """Sessions kept, those isolating a batch, messages skipped, and the budget per mode,
        for doctor."""
        ((sessions, isolating),) = self._rows(
            "SELECT COUNT(*), COUNT(suspect_last_id) FROM sweep_session"
        )
        ((skipped,),) = self._rows(
            "SELECT COUNT(*) FROM sweep_audit WHERE kind = ?", (AUDIT_SKIPPED,)
        )
        budgets = self._rows(
            "SELECT mode, messages, bytes, cut_reason FROM sweep_budget ORDER BY mode"
        )
        shown = tuple(cast(tuple[str, int, int, str | None], tuple(row)) for row in budgets)
        return SweepSummary(sessions, isolating, skipped, shown)

    # --- the audit log ----------------------------------------------------------------------------

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
        return [_audit_row(row) for row in self._rows(sql, parameters)]

    def audit_notes(
        self, kinds: Sequence[str], *, newest_first: bool = False, limit: int | None = None
    ) -> list[AuditNote]:
        """The audit rows of ``kinds``, in the order they were kept (the newest first when
        asked; at most ``limit``)."""
        marks = ", ".join("?" for _ in kinds)
        order = "DESC" if newest_first else ""
        rows = self._rows(
            "SELECT seq, kind, session_id, message_id, detail, recorded_at FROM sweep_audit"
            f" WHERE kind IN ({marks}) ORDER BY seq {order} LIMIT ?",
            (*kinds, -1 if limit is None else limit),
        )
        return [AuditNote(*tuple(row)) for row in rows]

    def kept_since(self, seq: int, kind: str, session_id: str) -> bool:
        """Whether a row of ``kind`` for ``session_id`` was kept after row ``seq``."""
        sql = "SELECT 1 FROM sweep_audit WHERE seq > ? AND kind = ? AND session_id = ? LIMIT 1"
        return bool(self._rows(sql, (seq, kind, session_id)))

    def batches_since(self, at: object, *, after_seq: int | None = None) -> tuple[int, object]:
        """What the audit log holds after an error kept at ``at`` (LOOM-4, SWEEP-13).

        How many batches went through since (Loom took them in waiting mode, or queued them),
        and the detail of the first batch that failed from then on (``Kind(CODE)``, never a
        message), or None. ``after_seq``, the audit log's last row when the error was kept,
        says what came after it by arrival (REL-7: a clock set back does not change it); a
        file from before it was kept is read by time, ``at`` passed to SQLite as it is kept.
        """
        if after_seq is not None:
            after, failed_after, since = "seq > ?", "seq > ?", cast(object, after_seq)
        else:  # the failed batch's row carries the error's own time
            after, failed_after, since = "recorded_at > ?", "recorded_at >= ?", at
        ((through,),) = self._rows(
            f"SELECT COUNT(*) FROM sweep_audit WHERE kind IN (?, ?) AND {after}",
            (AUDIT_BATCH, AUDIT_QUEUED, since),
        )
        failed = self._rows(
            f"SELECT detail FROM sweep_audit WHERE kind = ? AND {failed_after}"
            " ORDER BY seq LIMIT 1",
            (AUDIT_FAILED, since),
        )
        return cast(int, through), failed[0][0] if failed else None

    # --- the last error (LOOM-4, REL-7) -----------------------------------------------------------

    def newest_error(self, ops: Collection[str] | None = None) -> KeptError | None:
        """The error recorded last among ``ops`` (all when None); None when none is kept.
        ``ValueError`` or ``TypeError`` for a time that is no number."""
        listed = sorted(ops) if ops is not None else []
        where = f" WHERE op IN ({', '.join('?' for _ in listed)})" if ops is not None else ""
        rows = self._rows(
            "SELECT at, op, kind, message, code, seq, audit_seq FROM last_error"
            f"{where} ORDER BY seq DESC LIMIT 1",
            listed,
        )
        if not rows:
            return None
        at, op, kind, message, code, seq, audit_seq = tuple(rows[0])
        shown_code = code if code is None else str(code)
        return KeptError(float(at), str(op), str(kind), str(message), shown_code, seq, audit_seq)

    def last_error(
        self, ops: Collection[str] | None = None
    ) -> tuple[float, str, str, str, str | None] | None:
        """The error recorded last (of ``ops`` when given): ``(at, op, kind, message, code)``,
        or None; ``newest_error`` gives its place in the order too."""
        kept = self.newest_error(ops)
        return None if kept is None else (kept.at, kept.op, kept.kind, kept.message, kept.code)

    def error_as_kept(self, ops: Collection[str]) -> ErrorAsKept | None:
        """The error recorded last among ``ops``, its values as the file holds them (a file
        another process planted may hold anything); None when none is, or the file is from
        before errors were kept.

        Reads every layout the table had: from state schema step 9 one error per op in the
        order they arrived; before it one row, whose op must be among ``ops``, and before
        step 8 no code.
        """
        columns = {row[1] for row in self._rows("PRAGMA table_info(last_error)")}
        if not columns:
            return None  # a file from before the table
        code = "code" if "code" in columns else "NULL"  # none before state schema step 8
        if "seq" in columns:  # state schema step 9 on: one error per op, in arrival order
            listed = sorted(ops)
            rows = self._rows(
                f"SELECT at, op, kind, message, {code}, audit_seq FROM last_error"
                f" WHERE op IN ({', '.join('?' for _ in listed)}) ORDER BY seq DESC LIMIT 1",
                listed,
            )
        else:
            rows = self._rows(f"SELECT at, op, kind, message, {code}, NULL FROM last_error")
            rows = [row for row in rows[:1] if row[1] in ops]
        return ErrorAsKept(*tuple(rows[0])) if rows else None

    # --- queued batches (SWEEP-15) ----------------------------------------------------------------

    def open_batches(self, session_id: str | None = None) -> list[QueuedBatch]:
        """The batches still followed (of ``session_id`` when given), by session and first id."""
        where = "closed_at IS NULL" + (" AND session_id = ?" if session_id is not None else "")
        rows = self._rows(
            f"SELECT {QUEUED_BATCH_COLUMNS} FROM queued_batch WHERE {where}"
            " ORDER BY session_id, first_id",
            () if session_id is None else (session_id,),
        )
        return [queued_batch_of(row) for row in rows]

    def falls_back(self, session_id: str) -> bool:
        """Whether a batch of ``session_id`` fell back to waiting mode and the watermark has
        not passed it yet."""
        rows = self._rows(
            "SELECT 1 FROM queued_batch q WHERE q.session_id = ? AND q.closed_at IS NULL"
            " AND q.status = ? AND q.last_id > COALESCE((SELECT watermark FROM sweep_session s"
            " WHERE s.session_id = q.session_id), 0) LIMIT 1",
            (session_id, QUEUE_WAITING),
        )
        return bool(rows)

    def sessions_in_loom_queue(self) -> set[str]:
        """Sessions with a batch still in Loom's queue: queued, running, or written but not
        yet passed by the watermark; a batch that fell back to waiting mode is not. None in a
        file from before the follow-up."""
        try:
            rows = self._rows(
                "SELECT DISTINCT session_id FROM queued_batch"
                " WHERE closed_at IS NULL AND status <> ?",
                (QUEUE_WAITING,),
            )
        except sqlite3.OperationalError:  # a state file from before the follow-up: no such table
            return set()
        return {str(row[0]) for row in rows}

    def open_batch_counts(self) -> tuple[int, int]:
        """How many open batches are in Loom's queue, and how many fell back to waiting mode."""
        rows = self._rows(
            "SELECT status = ?, COUNT(*) FROM queued_batch WHERE closed_at IS NULL"
            " GROUP BY status = ?",
            (QUEUE_WAITING, QUEUE_WAITING),
        )
        counts = {bool(row[0]): int(row[1]) for row in rows}
        return counts.get(False, 0), counts.get(True, 0)

    # --- the migration's ledger (MIG-1) -----------------------------------------------------------

    def ledger_entries(self, item_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        """The rows of ``item_ids`` that the ledger holds, by id."""
        if not item_ids:
            return {}
        marks = ", ".join("?" for _ in item_ids)
        rows = self._rows(
            "SELECT item_id, status, verdict, memory_key, reason, failures FROM migration_item"
            f" WHERE item_id IN ({marks})",
            item_ids,
        )
        return {row[0]: LedgerEntry(*tuple(row)) for row in rows}

    def ledger_counts(self) -> dict[str, int]:
        """How many items the ledger holds per status it holds."""
        rows = self._rows("SELECT status, COUNT(*) FROM migration_item GROUP BY status")
        return {str(row[0]): int(row[1]) for row in rows}

    def last_migration_run(self) -> MigrationRun | None:
        """The migration's last run; None before any, or in a file from before the ledger."""
        try:
            rows = self._rows(
                "SELECT source, items_total, started_at, finished_at, stopped, rows_without_id"
                " FROM migration_run"
            )
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):  # a state file from before the migration
                return None
            raise
        return MigrationRun(*tuple(rows[0])) if rows else None

    def final_item_ids(self) -> set[str]:
        """The ids of the items a migration run passes over; none in a file from before the
        ledger."""
        marks = ", ".join("?" for _ in LEDGER_FINAL_STATUSES)
        try:
            rows = self._rows(
                f"SELECT item_id FROM migration_item WHERE status IN ({marks})",
                LEDGER_FINAL_STATUSES,
            )
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return set()
            raise
        return {str(row[0]) for row in rows}


def frozen_recall_of(rows: Sequence[Sequence[object]], session_id: str) -> FrozenRecall | None:
    """The recall ``FROZEN_RECALL_QUERY``'s ``rows`` hold for ``session_id``; None for none."""
    if not rows:
        return None
    source, items, frozen_at = rows[0]
    listed = tuple(str(item) for item in json.loads(cast(str, items)))
    return FrozenRecall(session_id, cast(str, source), listed, cast(float, frozen_at))


def queued_batch_of(row: Sequence[object]) -> QueuedBatch:
    """A ``queued_batch`` row read with ``QUEUED_BATCH_COLUMNS`` as its record."""
    seq, queue_id, session, after, first, last, status, replayed, at, digest = tuple(row)
    mark = Mark(cast(int, last), cast(str | None, at), str(digest)) if digest is not None else None
    return QueuedBatch(
        cast(int, seq),
        str(queue_id),
        str(session),
        cast(int, after),
        cast(int, first),
        cast(int, last),
        str(status),
        bool(replayed),
        mark,
    )


def _audit_row(row: sqlite3.Row) -> dict[str, object]:
    record = dict(row)
    record["recorded_at"] = datetime.fromtimestamp(row["recorded_at"], UTC).isoformat()
    return record
