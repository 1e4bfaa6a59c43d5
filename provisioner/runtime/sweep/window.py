"""One session's window in one sweep: batches out, watermark forward (SWEEP-3…SWEEP-9).

The window is the session's messages after its watermark. Each step reads that window afresh
from the transcript source (a bounded page), so a window offered again sends only messages
Loom has not taken yet (SWEEP-9), and every decision stands on what the state store holds.

Isolation of a batch Loom keeps failing (SWEEP-8), as this module does it:

1. A batch failing with Loom's uncoded internal error counts one failure for its session;
   the window stops. At the third sweep in a row the isolation begins, in that same sweep.
2. While isolating, the first half of the suspects is sent. A half that fails becomes the
   suspects; a half that goes through is taken, and the suspects are what is left. This goes
   on down to one suspect: the message Loom fails on is *found*.
3. A found message is left out of the next batch and of its context. When that next batch goes
   through, the found message is recorded as skipped (audit row: role and time, never text),
   in the same transaction that moves the watermark past it and the batch. At the end of the
   window it is skipped only if a batch went through since the isolation began in this sweep.
4. When the next batch fails too, its own failure is isolated at once (another bad message
   close behind the first), so halves of it can go through and prove Loom works. Once three
   messages were found with no batch through since, and the batch after them fails again,
   Loom is failing every batch: the isolation is dropped and nothing is skipped. The same
   holds at the end of a window with no batch through since the isolation began.
5. After a skip the isolation is over: the failure count starts again from zero.

Messages the source yields that cannot go at all (SWEEP-12: no text, a role Loom does not
take, a bad id or time, an object that cannot be read) never reach a batch: the window is read
through ``transcripts.check_message``, and a refused message is recorded as skipped (audit row:
role and time, never text) in the transaction that moves the watermark past it — with the batch
that takes the next messages, so the messages around it are neither lost nor sent twice. With
nothing to send after them, refused messages are passed on their own, all but the newest one
read, which waits for a message to follow it; the report names its session meanwhile.

The window reads the source itself, a step at a time (SWEEP-1): never a whole history, only as
much as the next batch can use, in pages of ``READ_PAGE_MESSAGES`` (``read_window``). Whatever
the source raises becomes ``SourceFailed``, which stops only the window that was reading.

Found messages are not stored: the state keeps the suspect range (``suspect_last_id``), which
covers them, so a sweep interrupted in between finds them again by halving instead of
trusting a failure seen in an earlier sweep.

In queued mode with the follow-up (SWEEP-15, ``followup``), a window is not offered while a
batch of its session is in Loom's queue, and it ends at the batch it queues: the watermark
moves once Loom reports that batch written. A window whose batch Loom failed twice is cut
into waiting batches (SWEEP-3) until it has passed that batch.

The run (``sweeper.SweepRun``) hands each window what the windows of one sweep share
(``SweepShared``): the state and the report it records into, the mode, the shared batch
budget, the source, the follow-up and the extraction call. What a window did is recorded here,
each step in one transaction of the state, and counted in the report; the run only lists the
sessions, schedules their windows and tells the caller's progress callback.
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from provisioner.runtime.budget import (
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
    ExtractionMode,
)
from provisioner.runtime.clock import Clock
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.state import (
    AUDIT_BATCH,
    AUDIT_BUDGET,
    AUDIT_CUT,
    AUDIT_FAILED,
    AUDIT_QUEUED,
    AUDIT_SKIPPED,
    AuditEntry,
    Mark,
    StateStore,
    SweepSession,
)
from provisioner.runtime.state.records import shown_queue_id
from provisioner.runtime.sweep.batching import Batch, build_batch, pick_context, wire_size
from provisioner.runtime.sweep.concurrency import SharedBudget
from provisioner.runtime.sweep.followup import FollowUp
from provisioner.runtime.sweep.outcomes import (
    NOTHING_TAKEN_KIND,
    REFUSED_KIND,
    SWEEP_ERRORS,
    SweepReport,
    error_kind,
    reaction_to,
    stop_reason,
)
from provisioner.runtime.sweep.realign import Page, mark_of, realign_if_went_back
from provisioner.runtime.transcripts import (
    Message,
    ReadWindow,
    Refused,
    SourceFailed,
    TranscriptSource,
    check_message,
)

FAILURES_TO_ISOLATE = 3  # SWEEP-8: three sweeps in a row
MAX_FOUND_AT_ONCE = 3  # our choice (SWEEP-8): found messages awaiting proof before giving up
CONTEXT_KEEP = 64  # our choice: recent taken messages kept for context (a cap, not a share)
READ_PAGE_MESSAGES = 25  # our choice: messages read from the source per query

REFUSED_DETAIL = "refused: "  # SWEEP-12: how a refused message's audit row begins its detail


log = logging.getLogger("provisioner.runtime.sweep.sweeper")

Send = Callable[[Batch, str], Awaitable[Extracted]]


@dataclass(frozen=True)
class SweepShared:
    """What the windows of one sweep share, handed to each by the run (SWEEP-14).

    ``send`` is the run's extraction call for a batch of a session: it keeps the deadline and
    its guard, tells the caller's progress callback, and notes each call for the window's
    verdict. Windows run side by side; all of this is changed only between ``await``s, on the
    event loop's thread, so no two windows' updates interleave.
    """

    state: StateStore
    report: SweepReport
    mode: ExtractionMode
    budget: SharedBudget
    source: TranscriptSource
    clock: Clock
    follow_up: FollowUp | None
    send: Send


class Next(enum.Enum):
    """What the window does after a step, when it does not end the sweep."""

    GO_ON = enum.auto()  # offer the window again: what is left of it, at once (SWEEP-9)
    STOP = enum.auto()  # the window stops short (SWEEP-13); the sweep goes on with the next
    HELD = enum.auto()  # SWEEP-15: its batch is in Loom's queue; the window ends there


@dataclass(frozen=True)
class EndsSweep:
    """The step ends the whole sweep (SWEEP-10): ``stopped`` is the report's reason."""

    stopped: str


Outcome = Next | EndsSweep  # what one step of the window comes to


@dataclass(frozen=True)
class _Step:
    """One call to make: the batch, the state and window it was planned from, whether a half."""

    batch: Batch
    state: SweepSession
    budget: BatchBudget
    half: bool
    read: ReadWindow


class SessionWindow:
    """Sweeps one session's window; ``run()`` says whether the whole sweep must end."""

    def __init__(self, shared: SweepShared, session_id: str) -> None:
        self._shared = shared
        self._state = shared.state
        self._report = shared.report  # what the window counts: batches, skips, stops, errors
        self._session = session_id
        self._found: list[Message] = []  # found messages awaiting proof, oldest first
        self._went_through = False  # a batch went through since the isolation began
        self._recent: list[Message] = []  # taken in this sweep, for context (SWEEP-6)

    async def run(self) -> str | None:
        """Offer the window until it is empty or stops; the sweep's end reason, or None.

        First the watermark is checked against the source, and re-aligned when the source
        went back below it (NERVE-3, ``realign``).
        """
        try:
            realigned = realign_if_went_back(
                self._state, self._session, page=self._page, clock=self._shared.clock
            )
        except SourceFailed as failure:
            self._source_failed(failure)
            return None
        if realigned:
            self._report.sessions_realigned += 1
        follow_up = self._follow_up
        if follow_up is not None:  # SWEEP-15: not while a batch of it is in Loom's queue
            gate = await follow_up.before_window(self._session, self._report)
            if not gate.go:  # held: a batch of it is in flight, or a follow-up call failed
                return gate.ended
        while True:
            try:
                step = self._plan()
            except SourceFailed as failure:  # SWEEP-12: this session only; the sweep goes on
                self._source_failed(failure)
                return None
            if step is None:
                return None
            try:
                extracted = await self._shared.send(step.batch, self._session)
            except SWEEP_ERRORS as error:
                outcome = self._failed(step, error)
            else:
                self._report.batches_sent += 1
                outcome = self._took(step, extracted)
            if outcome is Next.HELD:
                return None
            if outcome is not Next.GO_ON:  # the window stopped short (SWEEP-13)
                self._report.windows_stopped += 1
                return outcome.stopped if isinstance(outcome, EndsSweep) else None

    @property
    def _follow_up(self) -> FollowUp | None:
        """The sweep's follow-up of queued batches (SWEEP-15), when it has one."""
        return self._shared.follow_up

    def _source_failed(self, failure: SourceFailed) -> None:
        """SWEEP-12: the source raised; this session's window stops, the sweep goes on."""
        self._report.windows_stopped += 1
        self._report.note_error(self._session, failure.kind)
        log.info("session %s: transcripts cannot be read: %s", self._session, failure.kind)

    # --- planning -----------------------------------------------------------------------------

    def _plan(self) -> _Step | None:
        """The next batch to send, or None when the window is done (or gave up its found).

        Refused messages with nothing to send after them are passed on their own; each pass
        moves the watermark forward, so the loop ends.
        """
        while True:
            state = self._state.sweep_session(self._session)
            budget = self._shared.budget.current  # SWEEP-5: the budget the windows share
            read = self._read(state.watermark, len(self._found))
            rest = self._after_found(read)
            if state.isolating:
                planned = self._plan_isolating(state, budget, read, rest)
                if isinstance(planned, _Step):
                    return planned
                state, rest = planned
            if rest:
                sized = self._batch_limits(budget)
                context = pick_context(self._recent, sized)
                batch = build_batch(rest, context, sized, session_id=self._session)
                return _Step(batch, state, budget, half=False, read=read)
            if self._found:
                self._close_found_at_window_end(read)
                return None
            if not self._pass_refused_alone(read):
                return None

    def _read(self, watermark: int, extra: int) -> ReadWindow:
        """The session's next messages after ``watermark``, in bounded pages, checked.

        At most the mode's batch size plus ``extra`` (found messages still in front) items,
        and no more pages once twice the mode's byte limit was read: no batch can use more
        (SWEEP-1). ``SourceFailed`` when the source raises.
        """
        mode = self._shared.mode
        return read_window(
            self._page,
            self._session,
            watermark,
            wanted=mode.max_messages + extra,
            byte_cap=2 * mode.max_bytes,
            page_size=READ_PAGE_MESSAGES,
        )

    def _page(self, session_id: str, after: int, limit: int) -> list[object]:
        """One page of the source, at most ``limit`` items; ``SourceFailed`` when it raises."""
        return source_page(self._shared.source, session_id, after, limit)

    def _batch_limits(self, budget: BatchBudget) -> BatchBudget:
        """What a batch is cut to: a window that fell back to waiting mode (SWEEP-15) sends
        batches no larger than SWEEP-3 allows; the budget kept for the mode is unchanged."""
        follow_up = self._follow_up
        if follow_up is None or not follow_up.waits(self._session):
            return budget
        return fallback_budget(budget)

    def _after_found(self, read: ReadWindow) -> list[Message]:
        """The window's messages after the found ones, which must be the first it holds.

        A source that no longer yields them first drops them: they are found again by
        halving the suspects the state still keeps, never skipped on an old finding.
        """
        found_ids = [message.id for message in self._found]
        if [message.id for message in read.messages[: len(found_ids)]] != found_ids:
            self._found.clear()
        return list(read.messages[len(self._found) :])

    def _plan_isolating(
        self, state: SweepSession, budget: BatchBudget, read: ReadWindow, rest: list[Message]
    ) -> _Step | tuple[SweepSession, list[Message]]:
        """While isolating (SWEEP-8): a half of the suspects to send, or what is left after them."""
        assert state.suspect_last_id is not None
        suspects = [message for message in rest if message.id <= state.suspect_last_id]
        if len(suspects) >= 2:
            half = (len(suspects) + 1) // 2
            context = pick_context(self._recent, budget)
            batch = build_batch(suspects, context, budget, session_id=self._session, limit=half)
            return _Step(batch, state, budget, half=True, read=read)
        if len(suspects) == 1:
            self._found.append(suspects[0])
            log.info("session %s: found message %d", self._session, suspects[0].id)
            return state, rest[1:]
        if not self._found:
            state = self._end_isolation(state)
        return state, rest

    def _pass_refused_alone(self, read: ReadWindow) -> bool:
        """Nothing to send is left: pass refused messages on their own (SWEEP-12).

        Returns whether the watermark moved. When it cannot (only the newest message read is
        refused, or none has a usable id), the report names the session, as it does for any
        message Loom would refuse, and the window ends.
        """
        through = read.refused_alone_through()
        if through is None:
            if read.refused:
                self._report.note_error(self._session, REFUSED_KIND)
            return False
        refused = read.refused_before(through)
        last = next(item for item in read.refused if item.id == through)
        self._record_skips((), refused=refused, last_id=through, mark=mark_of(last))
        return True

    # --- answers ------------------------------------------------------------------------------

    def _took(self, step: _Step, extracted: Extracted) -> Outcome:
        """Loom answered: move the watermark past what it took, skip found messages proven."""
        accepted = max(0, min(extracted.accepted, len(step.batch.messages)))
        if accepted == 0:  # Loom took nothing: offer the window again next sweep
            self._report.note_error(self._session, NOTHING_TAKEN_KIND)
            self._record_failed_batch(step.batch, NOTHING_TAKEN_KIND)
            return Next.STOP
        taken = step.batch.messages[:accepted]
        as_read = next(m for m in step.read.messages if m.id == taken[-1].id)  # not cut
        skipped = tuple(self._found)
        refused = step.read.refused_before(taken[-1].id)
        suspect_last_id = step.state.suspect_last_id
        if skipped or not step.half or suspect_last_id is None or taken[-1].id >= suspect_last_id:
            suspect_last_id = None  # SWEEP-8: after a skip, or without suspects, it is over
        follow_up = self._follow_up
        held = follow_up is not None and follow_up.follows(extracted.queue_id)
        self._record_taken(
            step,
            taken,
            skipped=skipped,
            refused=refused,
            queue_id=extracted.queue_id,
            held=held,
            suspect_last_id=suspect_last_id,
            mark=mark_of(as_read),
        )
        self._found.clear()
        self._went_through = suspect_last_id is not None
        self._recent = [*self._recent, *taken][-CONTEXT_KEEP:]
        if held:  # SWEEP-15: in Loom's queue; the session's next batch waits for it
            return Next.HELD
        return Next.GO_ON  # a part taken: the rest is offered again at once (SWEEP-9)

    def _failed(self, step: _Step, error: Exception) -> Outcome:
        """The call failed: stop, end the sweep, cut the budget or count it against the batch."""
        reaction = reaction_to(error)
        kind = error_kind(error)
        self._report.note_error(self._session, kind)
        log.info("session %s: extraction failed: %s", self._session, kind)
        if reaction.sent:  # SWEEP-13: a batch that never left is not counted at all
            self._report.batches_sent += 1
            self._record_failed_batch(step.batch, kind)
        if reaction.cut is not None:
            self._cut_budget(step, reaction.cut)
        if reaction.ends_sweep is not None:
            if not self._report.reason:  # SWEEP-14: the first window to end it says why
                self._report.reason = stop_reason(error, self._shared.clock())
            return EndsSweep(reaction.ends_sweep)
        if not reaction.counts_against_batch:
            return Next.STOP  # SWEEP-7: not now; the watermark stays, nothing is counted
        return self._batch_failed(step)

    def _batch_failed(self, step: _Step) -> Outcome:
        """Loom's internal error on this batch (SWEEP-8): count it, isolate, or give up."""
        state = step.state
        if step.half:
            self._store_isolation(state.failures, step.batch.last_id)
            return Next.GO_ON
        if self._found:
            if len(self._found) >= MAX_FOUND_AT_ONCE:
                return self._give_up_isolation()
            self._store_isolation(state.failures, step.batch.last_id)
            return Next.GO_ON
        failures = state.failures + 1
        if failures < FAILURES_TO_ISOLATE:
            self._state.record_failure(self._session, failures=failures, suspect_last_id=None)
            return Next.STOP
        log.info("session %s: isolating messages up to %d", self._session, step.batch.last_id)
        self._went_through = False
        self._store_isolation(failures, step.batch.last_id)
        return Next.GO_ON

    # --- isolation bookkeeping ----------------------------------------------------------------

    def _store_isolation(self, failures: int, suspect_last_id: int) -> None:
        self._state.record_failure(
            self._session, failures=failures, suspect_last_id=suspect_last_id
        )

    def _give_up_isolation(self) -> Next:
        """Loom fails batches without the found messages too: skip nothing, start over."""
        log.info("session %s: isolation dropped, nothing skipped", self._session)
        self._found.clear()
        self._state.record_failure(self._session, failures=0, suspect_last_id=None)
        return Next.STOP

    def _end_isolation(self, state: SweepSession) -> SweepSession:
        """No suspect is left (all taken): the isolation is over."""
        self._state.record_failure(self._session, failures=0, suspect_last_id=None)
        return SweepSession(self._session, state.watermark)

    def _close_found_at_window_end(self, read: ReadWindow) -> None:
        """No message follows the found ones: skip them only with proof from this sweep."""
        if not self._went_through:
            self._give_up_isolation()
            return
        last = self._found[-1]
        refused = read.refused_before(last.id)
        self._record_skips(tuple(self._found), refused=refused, last_id=last.id, mark=mark_of(last))
        self._found.clear()

    # --- what the window records: the state in one transaction a step, the report's counts -----

    def _record_taken(
        self,
        step: _Step,
        taken: Sequence[Message],
        *,
        skipped: tuple[Message, ...],
        refused: Sequence[Refused],
        queue_id: str | None,
        held: bool,
        suspect_last_id: int | None,
        mark: Mark,
    ) -> None:
        """Store what Loom took of ``step``'s batch, skips and audit rows included, in one
        transaction. ``held``: Loom queued it and the follow-up keeps it (SWEEP-15), so the
        watermark waits until it is written.

        ``skipped`` are found messages (SWEEP-8), ``refused`` the refused ones the watermark
        passes (SWEEP-12): each gets its audit row in the same transaction. ``mark`` is the
        fingerprint of the last message taken, as the source holds it (NERVE-3). The budget
        stored is the shared one after this batch (``SharedBudget.went_through``).
        """
        session_id, batch, shared = self._session, step.batch, self._shared
        audit = skip_entries(session_id, skipped) + refused_entries(session_id, refused)
        audit += [
            AuditEntry(AUDIT_CUT, session_id, message.id, message.role, message.created_at)
            for message in taken
            if message.id in batch.cut_ids
        ]
        if queue_id is not None:  # SWEEP-4 (a batch sent waiting after a fall-back has none)
            audit.append(queued_entry(session_id, taken, queue_id))
        else:  # SWEEP-13: what `nerve memory status` counts as gone through since an error
            audit.append(AuditEntry(AUDIT_BATCH, session_id, taken[-1].id, detail=f"{len(taken)}"))
        kept = (shared.mode.name, shared.budget.went_through(step.budget))
        follow_up = shared.follow_up
        if held and follow_up is not None and queue_id is not None:
            follow_up.record_queued(  # SWEEP-15: the watermark waits until it is written
                session_id,
                taken,
                queue_id=queue_id,
                budget=kept,
                suspect_last_id=suspect_last_id,
                audit=audit,
                mark=mark,
            )
        else:
            self._state.record_taken(
                session_id,
                last_taken_id=taken[-1].id,
                budget=kept,
                suspect_last_id=suspect_last_id,
                audit=audit,
                now=shared.clock(),
                mark=mark,
            )
        self._report.messages_taken += len(taken)
        self._report.messages_skipped += len(skipped) + len(refused)
        self._report.messages_cut += sum(1 for m in taken if m.id in batch.cut_ids)

    def _record_skips(
        self,
        skipped: tuple[Message, ...],
        *,
        refused: Sequence[Refused],
        last_id: int,
        mark: Mark,
    ) -> None:
        """Skip found (SWEEP-8) or refused (SWEEP-12) messages with no batch, in one transaction."""
        session_id, shared = self._session, self._shared
        self._state.record_taken(
            session_id,
            last_taken_id=last_id,
            budget=(shared.mode.name, shared.budget.current),
            suspect_last_id=None,
            audit=skip_entries(session_id, skipped) + refused_entries(session_id, refused),
            now=shared.clock(),
            mark=mark,
        )
        self._report.messages_skipped += len(skipped) + len(refused)

    def _cut_budget(self, step: _Step, reason: str) -> None:
        """Halve the shared budget for the cut ``step``'s batch met (SWEEP-5), stored with its
        audit row; nothing when that cut was made already by another window, or the budget
        cannot shrink further (``SharedBudget.cut``, SWEEP-14)."""
        shared = self._shared
        change = shared.budget.cut(step.budget, reason)
        if change is None:
            return
        detail = f"{reason}: {change.before.describe()} -> {change.after.describe()}"
        entry = AuditEntry(AUDIT_BUDGET, self._session, step.batch.first_id, detail=detail)
        self._state.record_budget(shared.mode.name, change.after, audit=[entry], now=shared.clock())

    def _record_failed_batch(self, batch: Batch, kind: str) -> None:
        """A batch sent that did not go through: counted, and kept for ``nerve memory status``
        as an audit row naming the outcome's kind and fault code, never its message."""
        self._report.batches_failed += 1
        entry = AuditEntry(AUDIT_FAILED, self._session, batch.first_id, detail=kind)
        self._state.record_audit([entry], now=self._shared.clock())


def fallback_budget(budget: BatchBudget) -> BatchBudget:
    """``budget`` no larger than a waiting batch may be (SWEEP-3), for a queued window that
    fell back to waiting mode (SWEEP-15)."""
    return BatchBudget(
        messages=min(budget.messages, WAITING_MAX_MESSAGES),
        bytes=min(budget.bytes, WAITING_MAX_BYTES),
        default_messages=min(budget.default_messages, WAITING_MAX_MESSAGES),
        default_bytes=min(budget.default_bytes, WAITING_MAX_BYTES),
        cut_reason=budget.cut_reason,
        good_streak=budget.good_streak,
    )


def skip_entries(session_id: str, skipped: tuple[Message, ...]) -> list[AuditEntry]:
    """Audit rows of skipped messages: id, role and time, never text (SWEEP-8)."""
    return [
        AuditEntry(AUDIT_SKIPPED, session_id, message.id, message.role, message.created_at)
        for message in skipped
    ]


def refused_entries(session_id: str, refused: Sequence[Refused]) -> list[AuditEntry]:
    """Audit rows of refused messages passed (SWEEP-12): id, role, time and why, never text.

    ``detail`` is ``refused: <reason>``, which tells them from the messages Loom failed on.
    """
    return [
        AuditEntry(
            AUDIT_SKIPPED,
            session_id,
            item.id,
            item.role,
            item.created_at,
            detail=f"{REFUSED_DETAIL}{item.reason}",
        )
        for item in refused
    ]


def queued_entry(session_id: str, taken: Sequence[Message], queue_id: str | None) -> AuditEntry:
    """The audit row naming a queued batch (SWEEP-4): its queue id, size and last message."""
    shown = shown_queue_id(queue_id)
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
