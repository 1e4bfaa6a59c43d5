"""The extraction sweep: every session's new messages into Loom, nothing lost (SWEEP-1…SWEEP-11).

A sweep walks the sessions of a ``TranscriptSource`` and offers each one's window — the
messages after its watermark — to Loom in batches, through ``memory.extract`` (one
``loom_memory_set_from_messages`` call each). What a batch did is stored in the
``StateStore`` in one transaction: the watermark moves past exactly the messages Loom says it
took, so a crash at any point loses nothing and at most the batch in flight is sent again.

``Sweeper(memory, source, state)`` takes the Loom backend (or anything with its ``extract``
method), the transcripts and the state. ``await sweeper.run_once()`` sweeps once and returns a
``SweepReport``; a second caller while a sweep runs returns at once with ``stopped ==
"already_running"`` (SWEEP-11). How each failure is answered is in ``sweep_outcomes``; the
window, its budget and the isolation of a failing batch are in ``window``.

Nothing of a message's text reaches a report, an audit row or a log line: they name sessions,
message ids, roles, times, counts and error kinds only.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from provisioner.runtime.batching import Batch, wire_size
from provisioner.runtime.budget import (
    QUEUED_MAX_BYTES,
    QUEUED_MAX_MESSAGES,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
)
from provisioner.runtime.errors import NoAnswer
from provisioner.runtime.loom import EXTRACT_DEADLINE_S
from provisioner.runtime.loom_types import Extracted
from provisioner.runtime.state import AUDIT_CUT, AUDIT_QUEUED, AuditEntry, StateStore
from provisioner.runtime.sweep_lock import sweep_lock
from provisioner.runtime.sweep_outcomes import STOPPED_BUSY, STOPPED_DONE
from provisioner.runtime.transcripts import Message, TranscriptSource
from provisioner.runtime.window import SessionWindow, skip_entries

EXTRACT_GUARD_S = 10  # our choice: past this beyond the deadline, the sweep stops waiting
READ_PAGE_MESSAGES = 25  # our choice: messages read from the source per query
QUEUE_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # our choice: what an audit row keeps

Clock = Callable[[], float]


class Extractor(Protocol):
    """What the sweep needs of the Loom backend: ``LoomMemory.extract``."""

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted: ...


@runtime_checkable
class BudgetListener(Protocol):
    """A backend that shows the batch budget in its diagnostics (``LoomMemory``, LOOM-4)."""

    def note_batch_budget(self, budget: Any) -> None: ...


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
    """The mode ``memory.loom.defer_extraction`` asks for (SWEEP-3, SWEEP-4).

    Waiting is the default: a batch Loom fails then fails the call, and the watermark stays.
    Queued mode moves the watermark once Loom queued a batch; Loom tries a failed batch three
    times within about a minute out of sight, so a window can be lost, and the audit log
    names each queued batch so that a loss can at least be traced.
    """
    # TODO(SWEEP-4): once Loom serves the caller-bound ops `memory.extraction_status_mine`
    # and `memory.extraction_retry_mine` ({"queue_ids": [...], "namespace"?}) through
    # `loom_op`, the queued mode stops moving the watermark at queue time: it stores each
    # queue id with its batch's first and last message id, asks `extraction_status_mine`
    # for the open ones at the start of every sweep, moves the watermark past a batch only
    # once its status says it was written, and replays a failed batch once with
    # `extraction_retry_mine` before treating it as a batch failure (SWEEP-8).
    return QUEUED if defer_extraction else WAITING


@dataclass
class SweepReport:
    """What one sweep did (also what ``nerve memory sweep --json`` prints).

    ``stopped`` says why it ended: ``done`` (every window offered), ``already_running``,
    ``breaker_open``, ``no_answer``, ``unreachable`` or ``unavailable``. ``errors`` lists
    failed calls as ``{"session_id", "kind"}``, kinds only (never an error's text).
    """

    mode: str
    sessions_seen: int = 0
    sessions_swept: int = 0
    batches_sent: int = 0
    messages_taken: int = 0
    messages_skipped: int = 0
    messages_cut: int = 0
    budget_messages: int = 0
    budget_bytes: int = 0
    budget_cut_reason: str | None = None
    stopped: str = STOPPED_DONE
    errors: list[dict[str, str]] = field(default_factory=list)

    def note_error(self, session_id: str, kind: str) -> None:
        self.errors.append({"session_id": session_id, "kind": kind})

    def note_budget(self, budget: BatchBudget) -> None:
        self.budget_messages = budget.messages
        self.budget_bytes = budget.bytes
        self.budget_cut_reason = budget.cut_reason

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is, after each session (for a progress line on a terminal)."""

    sessions_done: int
    sessions_total: int
    messages_taken: int
    budget: BatchBudget


ProgressCallback = Callable[[SweepProgress], None]


class Sweeper:
    """Sweeps ``source`` into ``memory``, keeping watermarks and budgets in ``state``.

    ``clock`` gives the wall time (seconds since the epoch) stamped on audit rows; ``mode``
    is ``WAITING`` (default) or ``QUEUED`` — see ``extraction_mode``.
    """

    def __init__(
        self,
        memory: Extractor,
        source: TranscriptSource,
        state: StateStore,
        *,
        clock: Clock | None = None,
        mode: ExtractionMode = WAITING,
    ) -> None:
        self._memory = memory
        self._source = source
        self._state = state
        self._clock = clock or time.time
        self._mode = mode

    @property
    def mode(self) -> ExtractionMode:
        return self._mode

    def budget(self) -> BatchBudget:
        """The batch budget kept for this sweeper's mode (its default when none was kept)."""
        return self._state.batch_budget(self._mode.name, self._mode.default_budget())

    async def run_once(self, progress: ProgressCallback | None = None) -> SweepReport:
        """Sweep every session once; never raises for a gateway or Loom failure.

        ``progress`` is called after each session. Returns at once, with ``stopped ==
        "already_running"``, while another sweep over the same state runs (SWEEP-11).
        """
        report = SweepReport(self._mode.name)
        with sweep_lock(self._state.path, self._state) as held:
            if not held:
                report.stopped = STOPPED_BUSY
            else:
                run = SweepRun(self._memory, self._source, self._state, self._mode, self._clock)
                await run.sweep(report, progress)
        budget = self.budget()
        report.note_budget(budget)
        if isinstance(self._memory, BudgetListener):
            self._memory.note_batch_budget(budget.as_dict())
        return report


class SweepRun:
    """One sweep in progress: what its windows share (state, budget, report, the call)."""

    def __init__(
        self,
        memory: Extractor,
        source: TranscriptSource,
        state: StateStore,
        mode: ExtractionMode,
        clock: Clock,
    ) -> None:
        self.state = state
        self.report = SweepReport(mode.name)
        self._memory = memory
        self._source = source
        self._mode = mode
        self._clock = clock

    async def sweep(self, report: SweepReport, progress: ProgressCallback | None) -> None:
        """Offer every session's window in turn; fill ``report`` as it goes."""
        self.report = report
        sessions = list(self._source.sessions())
        self.report.sessions_seen = len(sessions)
        for index, session_id in enumerate(sessions, start=1):
            ended = await SessionWindow(self, session_id).run()
            if ended is not None:
                self.report.stopped = ended
                return
            self.report.sessions_swept = index
            if progress is not None:
                taken = self.report.messages_taken
                progress(SweepProgress(index, len(sessions), taken, self.budget()))

    def budget(self) -> BatchBudget:
        return self.state.batch_budget(self._mode.name, self._mode.default_budget())

    def read_window(self, session_id: str, watermark: int, extra: int) -> list[Message]:
        """The session's next messages after ``watermark``, in bounded pages (SWEEP-1).

        At most the mode's batch size plus ``extra`` (found messages still in front), and no
        more pages once twice the mode's byte limit was read: no batch can use more.
        """
        wanted = self._mode.max_messages + extra
        byte_cap = 2 * self._mode.max_bytes
        window: list[Message] = []
        size = 0
        after = watermark
        while len(window) < wanted and size <= byte_cap:
            page = self._source.messages_after(
                session_id, after, min(READ_PAGE_MESSAGES, wanted - len(window))
            )
            if not page:
                break
            window.extend(page)
            size += sum(wire_size(message) for message in page)
            after = page[-1].id
        return window

    async def extract(self, batch: Batch, session_id: str) -> Extracted:
        """One extraction call; no answer past the deadline and its guard is ``NoAnswer``."""
        limit_s = EXTRACT_DEADLINE_S + EXTRACT_GUARD_S
        try:
            async with asyncio.timeout(limit_s):
                return await self._memory.extract(
                    batch.messages,
                    context=batch.context,
                    session_id=session_id,
                    defer=self._mode.defer,
                )
        except TimeoutError:
            raise NoAnswer(f"no answer within {limit_s} s", deadline_s=limit_s) from None

    def record_taken(
        self,
        session_id: str,
        taken: Sequence[Message],
        *,
        step: tuple[Batch, BatchBudget],
        skipped: tuple[Message, ...],
        queue_id: str | None,
        suspect_last_id: int | None,
    ) -> None:
        """Store what Loom took, skips and audit rows included, in one transaction."""
        batch, budget = step
        audit = skip_entries(session_id, skipped)
        audit += [
            AuditEntry(AUDIT_CUT, session_id, message.id, message.role, message.created_at)
            for message in taken
            if message.id in batch.cut_ids
        ]
        if self._mode.defer:
            audit.append(_queued_entry(session_id, taken, queue_id))
        self.state.record_taken(
            session_id,
            last_taken_id=taken[-1].id,
            budget=(self._mode.name, budget.after_good_batch()),
            suspect_last_id=suspect_last_id,
            audit=audit,
            now=self._clock(),
        )
        self.report.messages_taken += len(taken)
        self.report.messages_skipped += len(skipped)
        self.report.messages_cut += sum(1 for m in taken if m.id in batch.cut_ids)

    def record_skips(self, session_id: str, skipped: tuple[Message, ...], *, last_id: int) -> None:
        """Skip found messages at the end of a window (SWEEP-8), in one transaction."""
        self.state.record_taken(
            session_id,
            last_taken_id=last_id,
            budget=(self._mode.name, self.budget()),
            suspect_last_id=None,
            audit=skip_entries(session_id, skipped),
            now=self._clock(),
        )
        self.report.messages_skipped += len(skipped)

    def store_budget(self, budget: BatchBudget, entry: AuditEntry) -> None:
        self.state.record_budget(self._mode.name, budget, audit=[entry], now=self._clock())


def _queued_entry(session_id: str, taken: Sequence[Message], queue_id: str | None) -> AuditEntry:
    """The audit row naming a queued batch (SWEEP-4): its queue id, size and last message."""
    shown = queue_id if queue_id and QUEUE_ID_PATTERN.fullmatch(queue_id) else "?"
    return AuditEntry(
        AUDIT_QUEUED,
        session_id,
        taken[0].id,
        detail=f"queue_id={shown} messages={len(taken)} last_id={taken[-1].id}",
    )
