"""Queued batches followed up until Loom has written them (SWEEP-15, SWEEP-4).

In queued mode Loom answers a batch with a queue id and extracts it later, with a few tries of
its own out of sight. Moving the watermark at that answer would lose the window when those
tries fail, and tell Nerve the messages were memorized before they were (NERVE-3). Where the
catalog lists ``loom_op``, the sweep follows its batches up (``runtime.loom.queue``) and the
watermark moves only past batches Loom reports written (the ``queued_batch`` table):

1. Loom queued a batch: its row keeps the queue id, the watermark it was read after and its
   first and last message id; the watermark stays and the session's window ends there (one
   batch in flight per session: the next waits until this one is written).
2. Before the windows (at the start of a sweep, and before a window whose batches were not
   asked about yet), Loom is asked how the open batches stand, ``QUEUE_IDS_PER_CALL`` ids a
   call at most. ``done``: the watermark moves past it — over a session's leading run of done
   batches only, from the watermark it was read after — with the fingerprint of its last
   message and an audit row, in one transaction. ``queued``, ``running``: the window waits.
   ``failed``: queued again once (retry), marked replayed; failed after that, it *falls
   back*: the window is sent in waiting mode (SWEEP-3) from the watermark, which never moved,
   until it has passed the batch. Any other state, or no word on an id: not written, counted.
3. A status or retry call that fails is "not now" for the windows behind it (SWEEP-7); one
   that says the sweep must end (an open breaker, no answer) ends it (SWEEP-10).

Without ``loom_op`` in the catalog the watermark moves when Loom queues a batch, as before
(``nerve doctor`` warns); so are batches followed when it went away passed, but a failed one
falls back. A batch the source went back below (NERVE-3) closes without moving the watermark.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.clock import Clock
from provisioner.runtime.loom.answers import QUEUE_IDS_PER_CALL
from provisioner.runtime.loom.queue import QueueCalls, extraction_queue
from provisioner.runtime.loom.types import QUEUE_DONE, QUEUE_FAILED, QueueStates
from provisioner.runtime.state import (
    AUDIT_FELL_BACK,
    AUDIT_REPLAYED,
    AUDIT_WRITTEN,
    AuditEntry,
    Mark,
    StateStore,
    put_audit,
    put_mark,
    watermark_in,
)
from provisioner.runtime.sweep.outcomes import (
    SWEEP_ERRORS,
    SweepReport,
    error_kind,
    reaction_to,
    stop_reason,
)
from provisioner.runtime.transcripts import Message

WAITING = "waiting"  # our status: failed after its replay, its window goes in waiting mode
# How a batch was closed (its status once ``closed_at`` is set).
CLOSED_WRITTEN = "written"  # Loom reported it written; the watermark moved past it
CLOSED_UNFOLLOWED = "unfollowed"  # passed without loom_op, as queued mode did before SWEEP-15
CLOSED_PASSED = "passed"  # the watermark passed it otherwise (its waiting batches went through)
CLOSED_STALE = "stale"  # the source went back below it (NERVE-3); read again from the source
DOUBT_KIND = "QueueStateUnknown"  # the report's error kind for a batch Loom gave no usable word on
QUEUE_ID_SHOWN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # our choice: what an audit row names

QueueCall = Callable[[Sequence[str]], Awaitable[QueueStates]]
log = logging.getLogger("provisioner.runtime.sweep.sweeper")


@dataclass
class FollowUpTally:
    """What the follow-up did in one sweep, counts only (SWEEP-15): ``as_dict`` for a report."""

    asked: int = 0  # queue ids asked about
    written: int = 0  # batches reported written, the watermark moved past them
    replayed: int = 0  # failed batches queued again
    fell_back: int = 0  # batches failed after their replay, sent again in waiting mode
    doubtful: int = 0  # ids without a usable word (unknown state, left out, answered twice)
    held: int = 0  # windows not offered: a batch of theirs is still in Loom's queue
    calls_failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class Gate:
    """Whether a session's window may go now (``go``); when not, why: a batch in flight
    (``error`` None), or a follow-up call that failed (``error``), which ends the whole sweep
    when ``ended`` names why (SWEEP-10)."""

    go: bool
    error: Exception | None = None
    ended: str | None = None


GO = Gate(True)
HELD = Gate(False)


class _Batch(NamedTuple):
    """One row of ``queued_batch``."""

    seq: int
    queue_id: str
    session_id: str
    after_id: int
    first_id: int
    last_id: int
    status: str
    replayed: bool
    mark: Mark | None


class FollowUp:
    """The follow-up of one sweep's queued batches over ``state``, asking ``queue``.

    Build it with ``for_sweep`` once per sweep. ``clock`` gives the wall time of audit rows.
    Nothing here raises for a gateway or Loom failure: a failed call becomes a ``Gate`` that
    stops the windows behind it, or ends the sweep.
    """

    def __init__(self, queue: QueueCalls, state: StateStore, *, clock: Clock) -> None:
        self._queue = queue
        self._state = state
        self._clock = clock
        self._asked: set[str] = set()  # ids Loom answered for (or was asked about) this sweep
        self._unanswered: dict[str, Exception] = {}  # ids whose call failed this sweep
        self.tally = FollowUpTally()

    @classmethod
    def for_sweep(
        cls, memory: Any, state: StateStore, *, defer: bool, clock: Clock
    ) -> FollowUp | None:
        """The follow-up for a sweep in queued mode (``defer``) over a backend with a queue
        to ask (``LoomMemory`` with a gateway); None otherwise."""
        queue = extraction_queue(memory) if defer else None
        return None if queue is None else cls(queue, state, clock=clock)

    def follows(self, queue_id: str | None) -> bool:
        """Whether a batch Loom answered with ``queue_id`` is kept with ``record_queued``
        (the watermark waits for it) rather than passed at once: queued, ``loom_op`` listed."""
        return queue_id is not None and self._queue.listed()

    # --- before the windows --------------------------------------------------------------------

    async def at_sweep_start(self, report: SweepReport) -> str | None:
        """Ask about every open batch, pass the written ones; the sweep's end reason, or None
        (with ``report.reason`` set when there is one).

        Ids whose call failed are remembered: their sessions' windows stop without asking
        again (``before_window``), so a gateway that is down costs one call, not one per
        session.
        """
        open_batches = [batch for batch in self._open() if batch.status != WAITING]
        gate = await self._follow(open_batches, report)
        for session_id in sorted({batch.session_id for batch in open_batches}):
            self._pass(session_id)
        if gate.ended is not None and gate.error is not None:
            report.note_error("", error_kind(gate.error))
            report.reason = stop_reason(gate.error, self._clock())
        return gate.ended

    async def before_window(self, session_id: str, report: SweepReport) -> Gate:
        """Whether ``session_id``'s window may go now (SWEEP-15).

        Open batches of the session not asked about in this sweep are asked about first; the
        written ones are passed. The window may go when no batch of the session is in
        Loom's queue any more (a batch that fell back sends its window in waiting mode).
        """
        batches = [batch for batch in self._open(session_id) if batch.status != WAITING]
        failed = next(
            (self._unanswered[b.queue_id] for b in batches if b.queue_id in self._unanswered), None
        )
        pending = [batch for batch in batches if batch.queue_id not in self._asked]
        gate = _gate_of(failed) if failed is not None else await self._follow(pending, report)
        if not gate.go:
            if gate.error is not None:
                report.note_error(session_id, error_kind(gate.error))
            return gate
        self._pass(session_id)
        if any(batch.status != WAITING for batch in self._open(session_id)):
            self.tally.held += 1
            return HELD
        return GO

    def waits(self, session_id: str) -> bool:
        """Whether ``session_id``'s window goes in waiting mode now: a batch of it fell back
        and the watermark has not passed it yet."""
        rows = self._state.read(
            "SELECT 1 FROM queued_batch q WHERE q.session_id = ? AND q.closed_at IS NULL"
            " AND q.status = ? AND q.last_id > COALESCE((SELECT watermark FROM sweep_session s"
            " WHERE s.session_id = q.session_id), 0) LIMIT 1",
            (session_id, WAITING),
        )
        return bool(rows)

    # --- a batch Loom queued -------------------------------------------------------------------

    def record_queued(
        self,
        session_id: str,
        taken: Sequence[Message],
        *,
        queue_id: str,
        budget: tuple[str, BatchBudget],
        suspect_last_id: int | None,
        audit: Sequence[AuditEntry],
        mark: Mark | None,
    ) -> None:
        """Keep a batch Loom queued, in one transaction, instead of moving the watermark.

        The same transaction writes ``audit`` (the queued row, skips and cuts), stores the
        budget after this batch and the session's isolation state (``suspect_last_id``),
        as ``StateStore.record_taken`` does; the watermark stays where it is. A queue id that
        is followed already (Loom answered the same id for another batch) cannot tell the two
        apart: the batch falls back at once, and its window is sent again in waiting mode.
        """
        now = self._clock()
        with self._state.transaction() as db:
            after_id = watermark_in(db, session_id)
            held = db.execute(
                "SELECT 1 FROM queued_batch WHERE queue_id = ? AND closed_at IS NULL"
                " AND status <> ?",
                (queue_id, WAITING),
            ).fetchone()
            ids = (after_id, taken[0].id, taken[-1].id)
            kept_mark = (mark.created_at, mark.digest) if mark else (None, None)
            row = (queue_id, session_id, *ids, WAITING if held else "queued", *kept_mark, now)
            db.execute(
                "INSERT INTO queued_batch (queue_id, session_id, after_id, first_id, last_id,"
                " status, mark_created_at, mark_digest, queued_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                row,
            )
            db.execute(
                "INSERT INTO sweep_session (session_id, watermark, failures, suspect_last_id)"
                " VALUES (?, ?, 0, ?) ON CONFLICT (session_id) DO UPDATE SET failures = 0,"
                " suspect_last_id = excluded.suspect_last_id",
                (session_id, after_id, suspect_last_id),
            )
            mode, kept = budget
            db.execute(
                "INSERT OR REPLACE INTO sweep_budget"
                " (mode, messages, bytes, cut_reason, good_streak) VALUES (?, ?, ?, ?, ?)",
                (mode, kept.messages, kept.bytes, kept.cut_reason, kept.good_streak),
            )
            entries = list(audit)
            if held:
                detail = f"queue id {_shown(queue_id)} answered twice"
                entries.append(AuditEntry(AUDIT_FELL_BACK, session_id, taken[0].id, detail=detail))
            put_audit(db, entries, now)
        if held:
            self.tally.fell_back += 1
            self.tally.doubtful += 1

    # --- asking Loom ---------------------------------------------------------------------------

    async def _follow(self, batches: Sequence[_Batch], report: SweepReport) -> Gate:
        """Ask about ``batches`` (and replay the failed ones) when ``loom_op`` is listed;
        pass them as queued mode did before the follow-up when it is not."""
        if not batches:
            return GO
        if not self._queue.listed():
            self._unfollow(batches)
            return GO
        gate = await self._ask(self._queue.status, batches, report, replay=False)
        if gate.go:
            asked = {batch.queue_id for batch in batches}
            again = [b for b in self._open() if b.queue_id in asked and b.status == QUEUE_FAILED]
            replays = [b for b in again if not b.replayed]
            gate = await self._ask(self._queue.retry, replays, report, replay=True)
        return gate

    async def _ask(
        self, call: QueueCall, batches: Sequence[_Batch], report: SweepReport, *, replay: bool
    ) -> Gate:
        """``call`` for ``batches``, ``QUEUE_IDS_PER_CALL`` ids at a time, until one fails:
        then every id not answered yet is remembered with that failure for this sweep."""
        by_id = {batch.queue_id: batch for batch in batches}
        ids = list(by_id)
        for start in range(0, len(ids), QUEUE_IDS_PER_CALL):
            chunk = ids[start : start + QUEUE_IDS_PER_CALL]
            try:
                answer: QueueStates = await call(chunk)
            except SWEEP_ERRORS as error:
                self.tally.calls_failed += 1
                self._unanswered.update(dict.fromkeys(ids[start:], error))
                log.info("queued batches: a follow-up call failed: %s", error_kind(error))
                return _gate_of(error)
            self._took_word(chunk, answer, report, by_id, replay=replay)
        return GO

    def _took_word(
        self,
        chunk: list[str],
        answer: QueueStates,
        report: SweepReport,
        by_id: dict[str, _Batch],
        *,
        replay: bool,
    ) -> None:
        """What one status or retry call said of ``chunk``, kept batch by batch."""
        self._asked.update(chunk)
        if not replay:
            self.tally.asked += len(chunk)
        self.tally.doubtful += answer.odd
        for queue_id in chunk:
            state = answer.states.get(queue_id)
            if state is None:
                self.tally.doubtful += 1
                report.note_error(by_id[queue_id].session_id, DOUBT_KIND)
            else:
                self._note_state(by_id[queue_id], state, replay=replay)

    def _note_state(self, batch: _Batch, state: str, *, replay: bool) -> None:
        """Keep what Loom said of an open batch; a failed batch already replayed falls back."""
        replayed = batch.replayed or replay
        status = WAITING if state == QUEUE_FAILED and replayed else state
        entries = []
        if replay:
            self.tally.replayed += 1
            entries.append(_entry(AUDIT_REPLAYED, batch, f"now {state}"))
        if status == WAITING:
            self.tally.fell_back += 1
            entries.append(_entry(AUDIT_FELL_BACK, batch, "failed after its replay"))
            log.info("session %s: a queued batch failed twice; waiting mode", batch.session_id)
        now = self._clock()
        with self._state.transaction() as db:
            db.execute(
                "UPDATE queued_batch SET status = ?, replayed = ?, checked_at = ? WHERE seq = ?",
                (status, int(replayed), now, batch.seq),
            )
            put_audit(db, entries, now)

    def _unfollow(self, batches: Sequence[_Batch]) -> None:
        """``loom_op`` is gone: batches in Loom's queue are trusted as queued mode did before
        the follow-up (their sessions' watermarks pass them); a failed one falls back."""
        now = self._clock()
        with self._state.transaction() as db:
            for batch in batches:
                status = WAITING if batch.status == QUEUE_FAILED else QUEUE_DONE
                db.execute("UPDATE queued_batch SET status = ? WHERE seq = ?", (status, batch.seq))
                if status == WAITING:
                    detail = "failed, and loom_op is no longer listed"
                    put_audit(db, [_entry(AUDIT_FELL_BACK, batch, detail)], now)
                    self.tally.fell_back += 1
        for session_id in sorted({batch.session_id for batch in batches}):
            self._pass(session_id, closed_as=CLOSED_UNFOLLOWED)

    # --- the watermark -------------------------------------------------------------------------

    def _pass(self, session_id: str, *, closed_as: str = CLOSED_WRITTEN) -> None:
        """Move ``session_id``'s watermark over its leading run of done batches, in order, and
        close the batches it has passed; one transaction."""
        now = self._clock()
        with self._state.transaction() as db:
            watermark = watermark_in(db, session_id)
            for batch in _open_in(db, session_id):
                if batch.last_id <= watermark:
                    _close(db, batch, CLOSED_PASSED, now)
                    continue
                if batch.status != QUEUE_DONE:
                    break
                if batch.after_id != watermark:  # NERVE-3: the source went back meanwhile
                    _close(db, batch, CLOSED_STALE, now)
                    detail = "the source went back; read again"
                    put_audit(db, [_entry(AUDIT_FELL_BACK, batch, detail)], now)
                    continue
                watermark = batch.last_id
                db.execute(
                    "UPDATE sweep_session SET watermark = ? WHERE session_id = ?",
                    (watermark, session_id),
                )
                if batch.mark is not None:
                    put_mark(db, session_id, batch.mark)
                _close(db, batch, closed_as, now)
                put_audit(db, [_entry(AUDIT_WRITTEN, batch, closed_as)], now)
                if closed_as == CLOSED_WRITTEN:
                    self.tally.written += 1

    # --- reading the table ---------------------------------------------------------------------

    def _open(self, session_id: str | None = None) -> list[_Batch]:
        where = "closed_at IS NULL" + (" AND session_id = ?" if session_id is not None else "")
        rows = self._state.read(
            f"SELECT {_COLUMNS} FROM queued_batch WHERE {where} ORDER BY session_id, first_id",
            () if session_id is None else (session_id,),
        )
        return [_batch_of(row) for row in rows]


def _gate_of(error: Exception) -> Gate:
    """A failed follow-up call as the window meets it: "not now", or the sweep's end."""
    return Gate(False, error, reaction_to(error).ends_sweep)


_COLUMNS = (
    "seq, queue_id, session_id, after_id, first_id, last_id, status, replayed,"
    " mark_created_at, mark_digest"
)


def _batch_of(row: sqlite3.Row | tuple[Any, ...]) -> _Batch:
    seq, queue_id, session, after, first, last, status, replayed, at, digest = tuple(row)
    mark = Mark(last, at, digest) if digest is not None else None
    return _Batch(seq, queue_id, session, after, first, last, status, bool(replayed), mark)


def _open_in(db: sqlite3.Connection, session_id: str) -> list[_Batch]:
    rows = db.execute(
        f"SELECT {_COLUMNS} FROM queued_batch WHERE closed_at IS NULL AND session_id = ?"
        " ORDER BY first_id, seq",
        (session_id,),
    ).fetchall()
    return [_batch_of(row) for row in rows]


def _close(db: sqlite3.Connection, batch: _Batch, how: str, now: float) -> None:
    db.execute(
        "UPDATE queued_batch SET status = ?, closed_at = ? WHERE seq = ?", (how, now, batch.seq)
    )


def _entry(kind: str, batch: _Batch, note: str) -> AuditEntry:
    detail = f"queue_id={_shown(batch.queue_id)} last_id={batch.last_id} {note}"
    return AuditEntry(kind, batch.session_id, batch.first_id, detail=detail)


def _shown(queue_id: str) -> str:
    return queue_id if QUEUE_ID_SHOWN.fullmatch(queue_id) else "?"
