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
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.clock import Clock
from provisioner.runtime.loom.answers import QUEUE_IDS_PER_CALL
from provisioner.runtime.loom.queue import QueueCalls, extraction_queue
from provisioner.runtime.loom.types import QUEUE_FAILED, QueueStates
from provisioner.runtime.state import AuditEntry, Mark, QueuedBatch, StateStore
from provisioner.runtime.state.records import QUEUE_CLOSED_UNFOLLOWED, QUEUE_WAITING
from provisioner.runtime.sweep.outcomes import (
    SWEEP_ERRORS,
    SweepReport,
    error_kind,
    reaction_to,
    stop_reason,
)
from provisioner.runtime.transcripts import Message

WAITING = QUEUE_WAITING  # failed after its replay, its window goes in waiting mode
DOUBT_KIND = "QueueStateUnknown"  # the report's error kind for a batch Loom gave no usable word on

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
        open_batches = [b for b in self._state.open_batches() if b.status != WAITING]
        gate = await self._follow(open_batches, report)
        for session_id in sorted({batch.session_id for batch in open_batches}):
            self.tally.written += self._state.pass_done_batches(session_id, now=self._clock())
        if gate.ended is not None and gate.error is not None:
            report.note_error("", error_kind(gate.error))
            report.reason = stop_reason(gate.error, self._clock())
        return gate.ended

    async def before_window(self, session_id: str, report: SweepReport) -> Gate:
        """Whether ``session_id``'s window may go now (SWEEP-15); when a follow-up call failed,
        ``report`` counts the window stopped and, for the first that ends the sweep, says why.

        Open batches of the session not asked about in this sweep are asked about first; the
        written ones are passed. The window may go when no batch of the session is in
        Loom's queue any more (a batch that fell back sends its window in waiting mode).
        """
        batches = [b for b in self._state.open_batches(session_id) if b.status != WAITING]
        failed = next(
            (self._unanswered[b.queue_id] for b in batches if b.queue_id in self._unanswered), None
        )
        pending = [batch for batch in batches if batch.queue_id not in self._asked]
        gate = _gate_of(failed) if failed is not None else await self._follow(pending, report)
        if gate.go:
            self.tally.written += self._state.pass_done_batches(session_id, now=self._clock())
            if any(batch.status != WAITING for batch in self._state.open_batches(session_id)):
                self.tally.held += 1
                return HELD
            return GO
        if gate.error is not None:  # the window stops (SWEEP-7), or ends the sweep (SWEEP-10)
            report.note_error(session_id, error_kind(gate.error))
            report.windows_stopped += 1
            if gate.ended is not None and not report.reason:  # the first end says why
                report.reason = stop_reason(gate.error, self._clock())
        return gate

    def waits(self, session_id: str) -> bool:
        """Whether ``session_id``'s window goes in waiting mode now: a batch of it fell back
        and the watermark has not passed it yet."""
        return self._state.falls_back(session_id)

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
        held = self._state.record_queued(
            session_id,
            first_id=taken[0].id,
            last_id=taken[-1].id,
            queue_id=queue_id,
            budget=budget,
            suspect_last_id=suspect_last_id,
            audit=audit,
            mark=mark,
            now=self._clock(),
        )
        if held:
            self.tally.fell_back += 1
            self.tally.doubtful += 1

    # --- asking Loom ---------------------------------------------------------------------------

    async def _follow(self, batches: Sequence[QueuedBatch], report: SweepReport) -> Gate:
        """Ask about ``batches`` (and replay the failed ones) when ``loom_op`` is listed.

        When it is not, they are passed as queued mode did before the follow-up: trusted as
        written (their sessions' watermarks pass them), but a failed one falls back.
        """
        if not batches:
            return GO
        if self._queue.listed():  # asked about, then those that failed replayed, once
            asking, gate = list(batches), GO
            for call, replay in ((self._queue.status, False), (self._queue.retry, True)):
                gate = await self._ask(call, asking, report, replay=replay)
                if replay or not gate.go:
                    return gate
                asked = {batch.queue_id for batch in asking}
                again = [b for b in self._state.open_batches() if b.queue_id in asked]
                asking = [b for b in again if b.status == QUEUE_FAILED and not b.replayed]
            return gate
        note = "failed, and loom_op is no longer listed"
        self.tally.fell_back += self._state.unfollow(batches, note=note, now=self._clock())
        for session_id in sorted({batch.session_id for batch in batches}):
            closed_as = QUEUE_CLOSED_UNFOLLOWED
            self._state.pass_done_batches(session_id, closed_as=closed_as, now=self._clock())
        return GO

    async def _ask(
        self, call: QueueCall, batches: Sequence[QueuedBatch], report: SweepReport, *, replay: bool
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
        by_id: dict[str, QueuedBatch],
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

    def _note_state(self, batch: QueuedBatch, state: str, *, replay: bool) -> None:
        """Keep what Loom said of an open batch; a failed batch already replayed falls back."""
        self.tally.replayed += replay
        if self._state.record_queue_answer(batch, said=state, replay=replay, now=self._clock()):
            self.tally.fell_back += 1
            log.info("session %s: a queued batch failed twice; waiting mode", batch.session_id)


def _gate_of(error: Exception) -> Gate:
    """A failed follow-up call as the window meets it: "not now", or the sweep's end."""
    return Gate(False, error, reaction_to(error).ends_sweep)
