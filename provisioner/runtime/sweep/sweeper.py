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

Whatever the source yields, ``run_once`` does not raise for it (SWEEP-12): every message is
checked as it is read (``transcripts.check_message``) and one that cannot go is skipped with an
audit row; a source method that raises stops only the window it was reading; a source that
cannot list its sessions ends the sweep with ``stopped == "source_failed"``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from provisioner.runtime.budget import (
    QUEUED_MAX_BYTES,
    QUEUED_MAX_MESSAGES,
    WAITING_MAX_BYTES,
    WAITING_MAX_MESSAGES,
    BatchBudget,
)
from provisioner.runtime.gateway.errors import NoAnswer
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.loom.backend import EXTRACT_DEADLINE_S
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.state import (
    AUDIT_BATCH,
    AUDIT_CUT,
    AUDIT_FAILED,
    AUDIT_QUEUED,
    AuditEntry,
    Mark,
    StateStore,
)
from provisioner.runtime.sweep.backfill import sweep_source
from provisioner.runtime.sweep.batching import Batch, wire_size
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.outcomes import (
    BAD_SESSION_ID_KIND,
    STOPPED_BUSY,
    STOPPED_SOURCE,
    SweepReport,
)
from provisioner.runtime.sweep.realign import note_source, tell_host
from provisioner.runtime.sweep.window import SessionWindow, refused_entries, skip_entries
from provisioner.runtime.transcripts import (
    Message,
    ReadWindow,
    Refused,
    SourceFailed,
    TranscriptSource,
    check_message,
    check_session_id,
    shown_session_id,
)

EXTRACT_GUARD_S = 10  # our choice: past this beyond the deadline, the sweep stops waiting
READ_PAGE_MESSAGES = 25  # our choice: messages read from the source per query
QUEUE_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,128}")  # our choice: what an audit row keeps

Clock = Callable[[], float]

log = logging.getLogger("provisioner.runtime.sweep.sweeper")


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


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is: told after each session, and as each batch goes out and comes back.

    ``session_id`` and ``batch`` (its number in the session's window, from 1) name the batch
    while ``waiting`` is True: it went out and Loom has not answered yet, for up to
    ``EXTRACT_DEADLINE_S``. A progress line that times the wait makes a hung Loom look like
    one, not like a frozen sweep.
    """

    sessions_done: int
    sessions_total: int
    messages_taken: int
    budget: BatchBudget
    session_id: str | None = None
    batch: int = 0
    waiting: bool = False


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
        """Sweep every session once; never raises for a gateway or Loom failure, nor for
        anything the transcript source yields or raises (SWEEP-12).

        ``progress`` is called after each session and as each batch goes out and comes back
        (``SweepProgress``). Returns at once, with ``stopped == "already_running"``, while
        another sweep over the same state runs (SWEEP-11).
        """
        report = SweepReport(self._mode.name)
        with sweep_lock(self._state.path, self._state) as held:
            if not held:
                report.stopped = STOPPED_BUSY
            else:
                source = sweep_source(self._source, self._state, self._clock)  # MIG-2
                run = SweepRun(self._memory, source, self._state, self._mode, self._clock)
                run.progress = progress
                await run.sweep(report)
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
        self.clock = clock
        self.progress: ProgressCallback | None = None
        self._at = (0, 0, 0)  # sessions done, sessions listed, batches of the current window

    async def sweep(self, report: SweepReport) -> None:
        """Offer every session's window in turn; fill ``report`` as it goes.

        A source that cannot list its sessions ends the sweep (``source_failed``); a session
        id that is no text is passed over and named in the report (SWEEP-12).
        """
        self.report = report
        try:
            sessions = list(self._source.sessions())
        except Exception as error:
            failure = SourceFailed(error)
            log.warning("transcripts: sessions cannot be listed: %s", failure.kind)
            self.report.note_error("", failure.kind)
            self.report.stopped = STOPPED_SOURCE
            self.report.reason = f"the transcripts cannot list their sessions ({failure.kind})"
            return
        self.report.sessions_seen = len(sessions)
        note_source(self._source, self.state, self.clock())
        for index, listed in enumerate(sessions, start=1):
            self._at = (index - 1, len(sessions), 0)
            session_id = check_session_id(listed)
            if session_id is None:
                self.report.note_error(shown_session_id(listed), BAD_SESSION_ID_KIND)
                self.report.windows_stopped += 1
            else:
                ended = await SessionWindow(self, session_id).run()
                tell_host(self._source, self.state, session_id)  # NERVE-3
                if ended is not None:
                    self.report.stopped = ended
                    return
            self.report.sessions_swept = index
            self._at = (index, len(sessions), 0)
            self.tell()

    def tell(self, session_id: str | None = None, *, waiting: bool = False) -> None:
        """Hand the caller's progress callback where the sweep is (``SweepProgress``)."""
        if self.progress is None:
            return
        done, total, batch = self._at
        taken = self.report.messages_taken
        at = SweepProgress(done, total, taken, self.budget(), session_id, batch, waiting)
        self.progress(at)

    def budget(self) -> BatchBudget:
        return self.state.batch_budget(self._mode.name, self._mode.default_budget())

    def read_window(self, session_id: str, watermark: int, extra: int) -> ReadWindow:
        """The session's next messages after ``watermark``, in bounded pages, checked.

        At most the mode's batch size plus ``extra`` (found messages still in front) items,
        and no more pages once twice the mode's byte limit was read: no batch can use more
        (SWEEP-1). Each item goes through ``check_message`` (SWEEP-12). The next page starts
        after the last usable id, so refused items behind that id are dropped from this page
        (the next one yields them again); a page without a usable id ends the reading, since
        the source cannot be asked past it. ``SourceFailed`` when the source raises.
        """
        wanted = self._mode.max_messages + extra
        byte_cap = 2 * self._mode.max_bytes
        messages: list[Message] = []
        refused: list[Refused] = []
        size = 0
        after = watermark
        while len(messages) + len(refused) < wanted and size <= byte_cap:
            limit = min(READ_PAGE_MESSAGES, wanted - len(messages) - len(refused))
            last, behind = after, len(refused)  # refused[behind:] lie after ``last``
            for raw in self.page(session_id, after, limit):
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

    def page(self, session_id: str, after: int, limit: int) -> list[object]:
        """One page of the source, at most ``limit`` items; ``SourceFailed`` when it raises."""
        try:
            page = self._source.messages_after(session_id, after, limit)
            return list(itertools.islice(page, limit))
        except Exception as error:
            raise SourceFailed(error) from error

    async def extract(self, batch: Batch, session_id: str) -> Extracted:
        """One extraction call; no answer past the deadline and its guard is ``NoAnswer``.

        The progress callback hears that the batch went out (``waiting``) and that it came
        back, whatever the outcome.
        """
        limit_s = EXTRACT_DEADLINE_S + EXTRACT_GUARD_S
        done, total, batch_number = self._at
        self._at = (done, total, batch_number + 1)
        self.tell(session_id, waiting=True)
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
        finally:
            self.tell(session_id)

    def record_taken(
        self,
        session_id: str,
        taken: Sequence[Message],
        *,
        step: tuple[Batch, BatchBudget],
        skipped: tuple[Message, ...],
        refused: Sequence[Refused] = (),
        queue_id: str | None,
        suspect_last_id: int | None,
        mark: Mark | None = None,
    ) -> None:
        """Store what Loom took, skips and audit rows included, in one transaction.

        ``skipped`` are found messages (SWEEP-8), ``refused`` the refused ones the watermark
        passes (SWEEP-12): each gets its audit row in the same transaction. ``mark`` is the
        fingerprint of the last message taken, as the source holds it (NERVE-3).
        """
        batch, budget = step
        audit = skip_entries(session_id, skipped) + refused_entries(session_id, refused)
        audit += [
            AuditEntry(AUDIT_CUT, session_id, message.id, message.role, message.created_at)
            for message in taken
            if message.id in batch.cut_ids
        ]
        if self._mode.defer:
            audit.append(_queued_entry(session_id, taken, queue_id))
        else:  # SWEEP-13: what `nerve memory status` counts as gone through since an error
            audit.append(AuditEntry(AUDIT_BATCH, session_id, taken[-1].id, detail=f"{len(taken)}"))
        self.state.record_taken(
            session_id,
            last_taken_id=taken[-1].id,
            budget=(self._mode.name, budget.after_good_batch()),
            suspect_last_id=suspect_last_id,
            audit=audit,
            now=self.clock(),
            mark=mark,
        )
        self.report.messages_taken += len(taken)
        self.report.messages_skipped += len(skipped) + len(refused)
        self.report.messages_cut += sum(1 for m in taken if m.id in batch.cut_ids)

    def record_skips(
        self,
        session_id: str,
        skipped: tuple[Message, ...],
        *,
        refused: Sequence[Refused] = (),
        last_id: int,
        mark: Mark | None = None,
    ) -> None:
        """Skip found (SWEEP-8) or refused (SWEEP-12) messages with no batch, in one transaction."""
        self.state.record_taken(
            session_id,
            last_taken_id=last_id,
            budget=(self._mode.name, self.budget()),
            suspect_last_id=None,
            audit=skip_entries(session_id, skipped) + refused_entries(session_id, refused),
            now=self.clock(),
            mark=mark,
        )
        self.report.messages_skipped += len(skipped) + len(refused)

    def store_budget(self, budget: BatchBudget, entry: AuditEntry) -> None:
        self.state.record_budget(self._mode.name, budget, audit=[entry], now=self.clock())

    def record_failed_batch(self, session_id: str, batch: Batch, kind: str) -> None:
        """A batch sent that did not go through: counted, and kept for ``nerve memory status``
        as an audit row naming the outcome's kind and fault code, never its message."""
        self.report.batches_failed += 1
        entry = AuditEntry(AUDIT_FAILED, session_id, batch.first_id, detail=kind)
        self.state.record_audit([entry], now=self.clock())


def _queued_entry(session_id: str, taken: Sequence[Message], queue_id: str | None) -> AuditEntry:
    """The audit row naming a queued batch (SWEEP-4): its queue id, size and last message."""
    shown = queue_id if queue_id and QUEUE_ID_PATTERN.fullmatch(queue_id) else "?"
    return AuditEntry(
        AUDIT_QUEUED,
        session_id,
        taken[0].id,
        detail=f"queue_id={shown} messages={len(taken)} last_id={taken[-1].id}",
    )
