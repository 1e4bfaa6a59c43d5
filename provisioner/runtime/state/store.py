"""The runtime's durable state: one SQLite file, every change in one transaction (SWEEP-2).

What the Loom backend, the sweep and the migration must not lose across a crash or a restart
lives here: frozen startup recalls (REC-3), the watermark per session, the batch budget,
failure counters, isolation state, the queued batches followed up (SWEEP-15), the migration's
ledger (MIG-1), the last errors and the audit log. Why SQLite: a crash at any point (kill -9
included) leaves the old or the new state of each transaction, never a half-written one; in
WAL mode a reader (``nerve memory status``, ``nerve doctor``) never blocks the sweep that
writes.

``StateStore`` is the one writer: each change is a named method that takes records
(``records``) and makes the change in one transaction; the questions it answers are
``reads.StateReads``'. No caller sees a statement or the connection.

One ``StateStore`` is shared by the tasks of one process; a lock serialises their (short)
transactions, so one task's ``BEGIN`` never meets another's open transaction. Another process
waits up to ``sqlite_file.BUSY_TIMEOUT_MS`` for a write lock and then fails with
``sqlite3.OperationalError``; opening the file then fails with ``StateBusyError`` instead, so a
busy file is never taken for a damaged one (SWEEP-12).

Several processes may open a new file at once (two sweeps, a sweep and a recall or doctor), so
the schema's version is read again inside the write transaction (``BEGIN IMMEDIATE``) that
migrates (``schema``): whoever takes the lock first brings the file to the latest version, and
the others find it there and change nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress

from provisioner.runtime import sqlite_file
from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.errors import StoreFault
from provisioner.runtime.loom.types import QUEUE_DONE, QUEUE_FAILED, QUEUE_QUEUED
from provisioner.runtime.sqlite_file import OwnsConnection, is_busy, open_database
from provisioner.runtime.state.reads import (
    FROZEN_RECALL_QUERY,
    QUEUED_BATCH_COLUMNS,
    StateReads,
    frozen_recall_of,
    queued_batch_of,
)
from provisioner.runtime.state.records import (
    LEDGER_FAILING,
    QUEUE_CLOSED_PASSED,
    QUEUE_CLOSED_STALE,
    QUEUE_CLOSED_WRITTEN,
    QUEUE_WAITING,
    AuditEntry,
    BackfillMove,
    FrozenRecall,
    LedgerEntry,
    Mark,
    QueuedBatch,
    SweepSession,
    shown_queue_id,
)
from provisioner.runtime.state.schema import (
    AUDIT_BACKFILL,
    AUDIT_BACKFILL_DONE,
    AUDIT_FELL_BACK,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_REPLAYED,
    AUDIT_WRITTEN,
    SCHEMA_VERSION,
    apply_migrations,
    schema_version,
)


class StateBusyError(StoreFault, RuntimeError):
    """Another process kept the state file locked for longer than we wait for it.

    Raised only while the file is opened. The file is fine (it was neither read as damaged nor
    changed); trying again once the other process is done works. ``str()`` is one line.
    """


class StateStore(OwnsConnection, StateReads):
    """One SQLite state file, opened (and migrated) on construction.

    ``path`` may be ``":memory:"`` for a store that lives as long as the object (tests, a
    backend built without a state path); a file path's parent folder is created. Use it as a
    context manager, or call ``close()``; a closed store raises ``sqlite3.ProgrammingError``.
    Opening raises ``StateVersionError`` for a file of a newer schema, ``StateBusyError`` when
    another process kept it locked past ``sqlite_file.BUSY_TIMEOUT_MS``, and ``sqlite3.Error``
    or ``OSError`` when it cannot be opened as a database at all. Every method raises what
    SQLite raises; a write that raises left nothing behind.
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

    def wait_for_locks(self, wait_s: float) -> None:
        """Wait at most ``wait_s`` for another process's lock from now on (REC-3: a recall's
        freeze waits no longer than its share of the recall's budget)."""
        with self._lock:
            self._db.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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

    def _rows(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Rows of one read-only query (no transaction needed: WAL gives a consistent view)."""
        with self._lock:
            cursor = self._db.execute(sql, tuple(parameters))
            cursor.row_factory = sqlite3.Row
            return list(cursor.fetchall())

    # --- frozen recalls (REC-3) -------------------------------------------------------------------

    def frozen_recall_at_once(self, session_id: str) -> tuple[bool, FrozenRecall | None]:
        """``(True, frozen_recall(session_id))``, or ``(False, None)`` at once while another
        thread is using the store: for a caller that must never wait for a thread (the event
        loop, REL-3)."""
        if not self._lock.acquire(blocking=False):
            return False, None
        try:
            rows = self._rows(FROZEN_RECALL_QUERY, (session_id,))
        finally:
            self._lock.release()
        return True, frozen_recall_of(rows, session_id)

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
        with self._transaction() as db:
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

    # --- the sweep (SWEEP-2) ----------------------------------------------------------------------

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
        with self._transaction() as db:
            current = _watermark_in(db, session_id)
            if last_taken_id < current:
                raise ValueError(
                    f"watermark of {session_id!r} would move back from {current} to {last_taken_id}"
                )
            _put_session(db, SweepSession(session_id, last_taken_id, 0, suspect_last_id))
            _put_budget(db, *budget)
            _put_audit(db, audit, now)
            if mark is not None:
                _put_mark(db, session_id, mark)

    def record_went_back(
        self, session_id: str, *, watermark: int, audit: AuditEntry, now: float
    ) -> None:
        """The source went back (NERVE-3): the watermark moves back to ``watermark``, marks
        past it go (their ids name other messages now), the failures and isolation end and
        ``audit`` says so, in one transaction. The only way a watermark ever moves back but
        a backfill's."""
        with self._transaction() as db:
            _put_session(db, SweepSession(session_id, watermark))
            db.execute(
                "DELETE FROM sweep_mark WHERE session_id = ? AND message_id > ?",
                (session_id, watermark),
            )
            _put_audit(db, [audit], now)

    def keep_mark(self, session_id: str, mark: Mark) -> None:
        """Keep ``mark`` (NERVE-3: a watermark from before marks, trusted on first use)."""
        with self._transaction() as db:
            _put_mark(db, session_id, mark)

    def record_failure(
        self, session_id: str, *, failures: int, suspect_last_id: int | None
    ) -> None:
        """Store a session's failure count and isolation state; the watermark stays."""
        with self._transaction() as db:
            watermark = _watermark_in(db, session_id)
            _put_session(db, SweepSession(session_id, watermark, failures, suspect_last_id))

    def record_budget(
        self, mode: str, budget: BatchBudget, *, audit: Sequence[AuditEntry], now: float
    ) -> None:
        """Store the budget of ``mode`` (after a cut, with its audit row) in one transaction."""
        with self._transaction() as db:
            _put_budget(db, mode, budget)
            _put_audit(db, audit, now)

    def record_audit(self, audit: Sequence[AuditEntry], *, now: float) -> None:
        """Write ``audit`` rows alone, in one transaction (a failed batch, SWEEP-13)."""
        with self._transaction() as db:
            _put_audit(db, audit, now)

    def note_source(self, kind: str, location: str, *, now: float) -> None:
        """Keep which host source the sweep reads (NERVE-3), for doctor; written only when it
        changed, so a sweep that reads the same source writes nothing."""
        if self.kept_source() == (kind, location):
            return
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO sweep_source (id, kind, location, recorded_at)"
                " VALUES (1, ?, ?, ?)",
                (kind, location, now),
            )

    # --- where a session starts, and backfill (MIG-2) ---------------------------------------------

    def start_after_memu(
        self, session_id: str, *, through_id: int, messages: int, now: float
    ) -> bool:
        """Store a session's first watermark at ``through_id`` (what memU took of it, covering
        ``messages``) with its audit row ``left_to_memu``, in one transaction; whether it was
        stored. Only for a session without a row: a watermark another sweep stored meanwhile
        is never overwritten."""
        with self._transaction() as db:
            inserted = db.execute(
                "INSERT INTO sweep_session (session_id, watermark, failures, suspect_last_id)"
                " VALUES (?, ?, 0, NULL) ON CONFLICT (session_id) DO NOTHING",
                (session_id, through_id),
            ).rowcount
            if inserted:
                detail = f"messages={messages}"
                left = AuditEntry(AUDIT_LEFT_TO_MEMU, session_id, through_id, detail=detail)
                _put_audit(db, [left], now)
        return bool(inserted)

    def move_back(self, moves: Sequence[BackfillMove], *, now: float) -> None:
        """Move every watermark of ``moves`` back to its ``floor``, in one transaction with an
        audit row ``backfill`` each (``through=W resume=P``).

        ``resume`` is read again inside the transaction (another writer may have moved it since
        the moves were computed); failures and isolation end, since their suspects stood on the
        old watermark. Nothing is changed when anything fails.
        """
        with self._transaction() as db:
            for move in moves:
                resume = _watermark_in(db, move.session_id)
                _put_session(db, SweepSession(move.session_id, move.floor))
                detail = f"through={move.through} resume={resume}"
                entry = AuditEntry(AUDIT_BACKFILL, move.session_id, move.floor, detail=detail)
                _put_audit(db, [entry], now)

    def settle_backfills(
        self, passed: Mapping[str, Sequence[tuple[int, int]]], *, now: float
    ) -> int:
        """Move each watermark standing in a range ``(through, resume]`` of ``passed`` on to
        its ``resume``, with an audit row ``backfill_done`` each, in one transaction; how many
        moved. A watermark another writer moved meanwhile is left where it is."""
        moved = 0
        with self._transaction() as db:
            for session_id, ranges in sorted(passed.items()):
                watermark = start = _watermark_in(db, session_id)
                for through, resume in sorted(ranges):
                    if through <= watermark < resume:
                        watermark = resume
                if watermark == start:
                    continue
                db.execute(
                    "UPDATE sweep_session SET watermark = ? WHERE session_id = ? AND watermark = ?",
                    (watermark, session_id, start),
                )
                done = AuditEntry(
                    AUDIT_BACKFILL_DONE, session_id, watermark, detail=f"{start} -> {watermark}"
                )
                _put_audit(db, [done], now)
                moved += 1
        return moved

    # --- queued batches followed up (SWEEP-15) ----------------------------------------------------

    def record_queued(
        self,
        session_id: str,
        *,
        first_id: int,
        last_id: int,
        queue_id: str,
        budget: tuple[str, BatchBudget],
        suspect_last_id: int | None,
        audit: Sequence[AuditEntry],
        mark: Mark | None,
        now: float,
    ) -> bool:
        """Keep a batch Loom queued, in one transaction, instead of moving the watermark.

        The same transaction writes ``audit`` (the queued row, skips and cuts), stores the
        budget after this batch and the session's isolation state (``suspect_last_id``), as
        ``record_taken`` does; the watermark stays where it is. A queue id that is followed
        already (Loom answered the same id for another batch) cannot tell the two apart: the
        batch is kept fallen back (``QUEUE_WAITING``) with an audit row saying why, and True
        is returned.
        """
        with self._transaction() as db:
            after_id = _watermark_in(db, session_id)
            held = db.execute(
                "SELECT 1 FROM queued_batch WHERE queue_id = ? AND closed_at IS NULL"
                " AND status <> ?",
                (queue_id, QUEUE_WAITING),
            ).fetchone()
            status = QUEUE_WAITING if held else QUEUE_QUEUED
            kept_mark = (mark.created_at, mark.digest) if mark else (None, None)
            db.execute(
                "INSERT INTO queued_batch (queue_id, session_id, after_id, first_id, last_id,"
                " status, mark_created_at, mark_digest, queued_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (queue_id, session_id, after_id, first_id, last_id, status, *kept_mark, now),
            )
            db.execute(
                "INSERT INTO sweep_session (session_id, watermark, failures, suspect_last_id)"
                " VALUES (?, ?, 0, ?) ON CONFLICT (session_id) DO UPDATE SET failures = 0,"
                " suspect_last_id = excluded.suspect_last_id",
                (session_id, after_id, suspect_last_id),
            )
            _put_budget(db, *budget)
            entries = list(audit)
            if held:
                detail = f"queue id {shown_queue_id(queue_id)} answered twice"
                entries.append(AuditEntry(AUDIT_FELL_BACK, session_id, first_id, detail=detail))
            _put_audit(db, entries, now)
        return bool(held)

    def record_queue_answer(
        self, batch: QueuedBatch, *, said: str, replay: bool, now: float
    ) -> bool:
        """Keep what Loom said (``said``) of an open batch, asked about or replayed (``replay``),
        with an audit row for a replay; whether the batch fell back to waiting mode: it
        failed again after its one replay (audit row ``fell_back``)."""
        replayed = batch.replayed or replay
        fell_back = said == QUEUE_FAILED and replayed
        status = QUEUE_WAITING if fell_back else said
        audit = [_queue_note(AUDIT_REPLAYED, batch, f"now {said}")] if replay else []
        if fell_back:
            audit.append(_queue_note(AUDIT_FELL_BACK, batch, "failed after its replay"))
        with self._transaction() as db:
            db.execute(
                "UPDATE queued_batch SET status = ?, replayed = ?, checked_at = ? WHERE seq = ?",
                (status, int(replayed), now, batch.seq),
            )
            _put_audit(db, audit, now)
        return fell_back

    def unfollow(self, batches: Sequence[QueuedBatch], *, note: str, now: float) -> int:
        """``loom_op`` is gone: ``batches`` are trusted as queued mode did before the follow-up
        (done, for their sessions' watermarks to pass), but a failed one falls back, with an
        audit row saying ``note``; in one transaction. How many fell back."""
        fell_back = 0
        with self._transaction() as db:
            for batch in batches:
                status = QUEUE_WAITING if batch.status == QUEUE_FAILED else QUEUE_DONE
                db.execute("UPDATE queued_batch SET status = ? WHERE seq = ?", (status, batch.seq))
                if status == QUEUE_WAITING:
                    _put_audit(db, [_queue_note(AUDIT_FELL_BACK, batch, note)], now)
                    fell_back += 1
        return fell_back

    def pass_done_batches(
        self, session_id: str, *, closed_as: str = QUEUE_CLOSED_WRITTEN, now: float
    ) -> int:
        """Move ``session_id``'s watermark over its leading run of done batches, in order, and
        close the batches it has passed, in one transaction; how many it moved over.

        A batch read after another watermark than the one it would move from closes as stale
        (NERVE-3: the source went back meanwhile), with an audit row; one the watermark has
        passed otherwise closes as passed. Each batch moved over keeps its mark and an audit
        row ``written`` saying ``closed_as``.
        """
        moved = 0
        with self._transaction() as db:
            watermark = _watermark_in(db, session_id)
            rows = db.execute(
                f"SELECT {QUEUED_BATCH_COLUMNS} FROM queued_batch"
                " WHERE closed_at IS NULL AND session_id = ? ORDER BY first_id, seq",
                (session_id,),
            ).fetchall()
            for batch in map(queued_batch_of, rows):
                if batch.last_id <= watermark:
                    _close_batch(db, batch, QUEUE_CLOSED_PASSED, now)
                    continue
                if batch.status != QUEUE_DONE:
                    break
                if batch.after_id != watermark:  # NERVE-3: the source went back meanwhile
                    _close_batch(db, batch, QUEUE_CLOSED_STALE, now)
                    note = "the source went back; read again"
                    _put_audit(db, [_queue_note(AUDIT_FELL_BACK, batch, note)], now)
                    continue
                watermark = batch.last_id
                db.execute(
                    "UPDATE sweep_session SET watermark = ? WHERE session_id = ?",
                    (watermark, session_id),
                )
                if batch.mark is not None:
                    _put_mark(db, session_id, batch.mark)
                _close_batch(db, batch, closed_as, now)
                _put_audit(db, [_queue_note(AUDIT_WRITTEN, batch, closed_as)], now)
                moved += 1
        return moved

    # --- the migration's ledger (MIG-1) -----------------------------------------------------------

    def record_ledger_entry(
        self, entry: LedgerEntry, *, now: float, audit: Sequence[AuditEntry] = ()
    ) -> None:
        """Keep ``entry`` as its item's row (with ``audit``, in one transaction)."""
        with self._transaction() as db:
            _put_ledger_entry(db, entry, now)
            _put_audit(db, audit, now)

    def record_ledger_failure(self, item_id: str, reason: str, *, now: float) -> LedgerEntry:
        """Loom failed the item with its uncoded error once more: one more run in a row."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT failures FROM migration_item WHERE item_id = ?", (item_id,)
            ).fetchone()
            failures = (row[0] if row else 0) + 1
            entry = LedgerEntry(item_id, LEDGER_FAILING, reason=reason, failures=failures)
            _put_ledger_entry(db, entry, now)
        return entry

    def start_migration_run(self, source: str, items_total: int, *, now: float) -> None:
        """A migration run starts on ``source``, which holds ``items_total`` items."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO migration_run"
                " (id, source, items_total, started_at, finished_at, stopped)"
                " VALUES (1, ?, ?, ?, NULL, NULL)",
                (source, items_total, now),
            )

    def finish_migration_run(self, stopped: str, *, rows_without_id: int, now: float) -> None:
        """The migration run ended, and why; ``rows_without_id`` counts the rows it met that
        can never go."""
        with self._transaction() as db:
            db.execute(
                "UPDATE migration_run SET finished_at = ?, stopped = ?, rows_without_id = ?"
                " WHERE id = 1",
                (now, stopped, rows_without_id),
            )

    # --- the last error (LOOM-4) ------------------------------------------------------------------

    def record_last_error(
        self, *, at: float, op: str, kind: str, message: str, code: str | None = None
    ) -> None:
        """Keep ``op``'s error, ``at`` in seconds since the epoch, as the newest whatever its
        time (REL-7: a clock set back never hides it); each op keeps its own. ``message`` is
        one bounded line quoting no sent text; ``code`` a checked short printable code."""
        with self._transaction() as db:
            db.execute("DELETE FROM last_error WHERE op = ?", (op,))
            db.execute(
                "INSERT INTO last_error (op, at, kind, message, code, audit_seq)"
                " VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM sweep_audit))",
                (op, at, kind, message, code),
            )

    # --- schema -----------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Bring the file to ``SCHEMA_VERSION``, exactly once however many processes open it.

        A file already at the latest version takes no write lock (a reader such as ``nerve
        memory status`` opens it alongside a sweep). Otherwise the version is read again under
        the write lock, since another process may have migrated the file in between; running
        a step twice would fail on its ``CREATE TABLE``. Raises ``StateVersionError`` for a
        newer file, and SQLite's busy error when the lock is not had within the busy timeout.
        """
        if schema_version(self._db, self._path) == SCHEMA_VERSION:
            return
        with self._transaction() as db:
            apply_migrations(db, schema_version(db, self._path))

    def _busy(self) -> StateBusyError:
        return StateBusyError(
            f"{self._path}: busy — another nerve process (a sweep, a recall, doctor or Nerve "
            f"itself) kept it locked for more than {sqlite_file.BUSY_TIMEOUT_MS / 1000:g} s; "
            "the file is fine, try again once that process is done"
        )


def _watermark_in(db: sqlite3.Connection, session_id: str) -> int:
    """``session_id``'s watermark as the caller's transaction sees it; 0 for a new session."""
    row = db.execute(
        "SELECT watermark FROM sweep_session WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def _put_session(db: sqlite3.Connection, session: SweepSession) -> None:
    db.execute(
        "INSERT INTO sweep_session (session_id, watermark, failures, suspect_last_id)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " watermark = excluded.watermark, failures = excluded.failures,"
        " suspect_last_id = excluded.suspect_last_id",
        (session.session_id, session.watermark, session.failures, session.suspect_last_id),
    )


def _put_budget(db: sqlite3.Connection, mode: str, budget: BatchBudget) -> None:
    db.execute(
        "INSERT OR REPLACE INTO sweep_budget (mode, messages, bytes, cut_reason, good_streak)"
        " VALUES (?, ?, ?, ?, ?)",
        (mode, budget.messages, budget.bytes, budget.cut_reason, budget.good_streak),
    )


def _put_mark(db: sqlite3.Connection, session_id: str, mark: Mark) -> None:
    """Keep ``mark`` in the caller's transaction (the newest fingerprint of an id wins)."""
    db.execute(
        "INSERT OR REPLACE INTO sweep_mark (session_id, message_id, created_at, digest)"
        " VALUES (?, ?, ?, ?)",
        (session_id, mark.message_id, mark.created_at, mark.digest),
    )


def _put_audit(db: sqlite3.Connection, entries: Sequence[AuditEntry], now: float) -> None:
    """Write ``entries`` as audit rows recorded at ``now``, inside the caller's transaction."""
    db.executemany(
        "INSERT INTO sweep_audit (kind, session_id, message_id, role, created_at,"
        " recorded_at, detail) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (e.kind, e.session_id, e.message_id, e.role, e.created_at, now, e.detail)
            for e in entries
        ],
    )


def _close_batch(db: sqlite3.Connection, batch: QueuedBatch, how: str, now: float) -> None:
    db.execute(
        "UPDATE queued_batch SET status = ?, closed_at = ? WHERE seq = ?", (how, now, batch.seq)
    )


def _put_ledger_entry(db: sqlite3.Connection, entry: LedgerEntry, now: float) -> None:
    db.execute(
        "INSERT OR REPLACE INTO migration_item"
        " (item_id, status, verdict, memory_key, reason, failures, recorded_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            entry.item_id,
            entry.status,
            entry.verdict,
            entry.memory_key,
            entry.reason,
            entry.failures,
            now,
        ),
    )


def _queue_note(kind: str, batch: QueuedBatch, note: str) -> AuditEntry:
    """The audit row of a queued batch's follow-up (SWEEP-15): ids, counts and states only."""
    detail = f"queue_id={shown_queue_id(batch.queue_id)} last_id={batch.last_id} {note}"
    return AuditEntry(kind, batch.session_id, batch.first_id, detail=detail)
