"""What a sweep would send now, worked out without sending or writing anything (MIG-2).

``plan_sweep`` reads the transcript source and the state the way a sweep would: each session
from its watermark — or, for a session the sweep has never seen, from where memU stopped
(``source``) — through the passes of a backfill under way (``source.BackfillView``), each
message checked as the sweep checks it (SWEEP-12), and cut into batches under the batch budget
the state keeps for the mode, context turns included (SWEEP-3…SWEEP-6). The figures are those
of a sweep in which every batch goes through: sessions, messages, batches and the bytes of
their request bodies. With a backfill scope it adds what that backfill would hand Loom, on its
own (``backfill.backfill_moves``, computed and not made).

``open_plan_state`` opens the state file read only (``state.ReadOnlyState``): the file is never
created, migrated or changed. A missing file is an empty state. Nothing of a message's text
reaches the plan.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
from collections import deque
from dataclasses import asdict, dataclass, field

from provisioner.runtime.budget import KIB, BatchBudget, ExtractionMode
from provisioner.runtime.errors import OperatorMustAct
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import SCHEMA_VERSION, ReadOnlyState, StateReads
from provisioner.runtime.sweep.backfill import BackfillScope, backfill_moves
from provisioner.runtime.sweep.batching import build_batch, pick_context
from provisioner.runtime.sweep.outcomes import BAD_SESSION_ID_KIND
from provisioner.runtime.sweep.source import BackfillView, host_memorized
from provisioner.runtime.sweep.window import CONTEXT_KEEP
from provisioner.runtime.transcripts import (
    Message,
    SourceFailed,
    TranscriptSource,
    check_message,
    check_session_id,
    shown_session_id,
)

PLAN_PAGE = 64  # our choice: messages read at once while planning


class StateUnreadable(OperatorMustAct, ValueError):
    """The state file cannot be read for a plan: one line naming it, what is wrong and what
    is expected. Nothing was changed."""


def open_plan_state(path: str | os.PathLike[str]) -> ReadOnlyState:
    """The state file at ``path``, read only, for a plan; a missing file reads as empty.

    ``StateUnreadable`` when the file is no SQLite database, or one of a newer schema.
    """
    state: ReadOnlyState | None = None
    try:
        state = ReadOnlyState(path)
        version = state.version
    except sqlite3.Error as error:
        if state is not None:
            state.close()
        raise StateUnreadable(
            f"{path}: cannot be read as the memory state ({error}); "
            "expected a file nerve memory wrote, or none"
        ) from None
    if version > SCHEMA_VERSION:
        state.close()
        raise StateUnreadable(
            f"{path}: state schema {version} is newer than this package's "
            f"{SCHEMA_VERSION}; upgrade nerve-provisioner"
        )
    return state


@dataclass
class Figures:
    """What a run of batches comes to: sessions with something to send, messages, batches,
    request-body bytes, messages cut to fit (SWEEP-11) and messages refused (SWEEP-12)."""

    sessions: int = 0
    messages: int = 0
    batches: int = 0
    bytes: int = 0
    cut: int = 0
    refused: int = 0

    def add(self, other: Figures) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    def describe(self) -> str:
        """``"240 messages in 3 batches, 61.0 KiB on the wire"``."""
        return (
            f"{counted(self.messages, 'message')} in {counted(self.batches, 'batch')}, "
            f"{self.bytes / KIB:.1f} KiB on the wire"
        )


@dataclass
class SweepPlan:
    """What a sweep would send now (``due``), and around it: the sessions listed, those that
    would start after memU's point and the messages that leaves to memU, what a backfill would
    add (None without a scope), and sessions that could not be read (kinds only)."""

    mode: str
    budget: BatchBudget
    sessions_seen: int = 0
    due: Figures = field(default_factory=Figures)
    after_memu_sessions: int = 0
    after_memu_messages: int = 0
    backfill: Figures | None = None
    backfill_scope: str | None = None
    errors: list[dict[str, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The plan as JSON takes it (``nerve memory sweep --plan --json``)."""
        return {
            "mode": self.mode,
            "budget": self.budget.as_dict(),
            "sessions_seen": self.sessions_seen,
            **asdict(self.due),
            "after_memu": {
                "sessions": self.after_memu_sessions,
                "messages": self.after_memu_messages,
            },
            "backfill": None
            if self.backfill is None
            else {"scope": self.backfill_scope, **asdict(self.backfill)},
            "errors": self.errors,
            "sent": False,
        }

    def lines(self) -> list[str]:
        """The plan as a few lines of text; sessions named by id and kinds only."""
        due = self.due
        lines = [
            f"plan ({self.mode}, budget {self.budget.describe()}): {due.sessions} of "
            f"{counted(self.sessions_seen, 'session')} with messages to send, "
            f"{due.describe()}; nothing was sent"
        ]
        if due.cut or due.refused:
            lines.append(f"  {due.cut} would be cut to fit, {due.refused} refused and skipped")
        if self.after_memu_sessions:
            lines.append(
                f"  starting after memU's point: {counted(self.after_memu_sessions, 'session')}"
                f", leaving {counted(self.after_memu_messages, 'message')} to memU"
            )
        if self.backfill is not None:
            lines.append(
                f"  --backfill {self.backfill_scope} adds "
                f"{counted(self.backfill.sessions, 'session')}: {self.backfill.describe()}"
            )
        for error in self.errors:
            lines.append(f"  {error['session_id'] or '(transcripts)'}: {error['kind']}")
        return lines


def plan_sweep(
    source: TranscriptSource,
    reader: StateReads,
    *,
    mode: ExtractionMode,
    scope: BackfillScope | None = None,
) -> SweepPlan:
    """What a sweep of ``source`` in ``mode`` would send now; nothing is sent or written.

    Never raises for the source: a source that cannot list its sessions gives a plan of
    none with one error, a session that cannot be read is named in ``errors``.
    """
    plan = SweepPlan(mode.name, reader.batch_budget(mode.name, mode.default_budget()))
    view = BackfillView(source, reader)
    try:
        listed = list(view.sessions())
    except Exception as error:
        plan.errors.append({"session_id": "", "kind": SourceFailed(error).kind})
        return plan
    plan.sessions_seen = len(listed)
    watermarks = reader.watermarks()
    starting: dict[str, int] = {}  # sessions that would start after memU's point
    for raw in listed:
        session_id = check_session_id(raw)
        if session_id is None:
            plan.errors.append({"session_id": shown_session_id(raw), "kind": BAD_SESSION_ID_KIND})
            continue
        start = watermarks.get(session_id, 0)
        if session_id not in watermarks:
            memorized = host_memorized(source, session_id)
            if memorized is not None:
                start = starting[session_id] = memorized.through_id
                plan.after_memu_sessions += 1
                plan.after_memu_messages += memorized.messages
        _add_window(plan, plan.due, view, session_id, start, None)
    if scope is not None:
        plan.backfill, plan.backfill_scope = Figures(), scope.text
        moves, errors = backfill_moves(source, reader, scope, starting=starting)
        plan.errors.extend(errors)
        for move in moves:
            _add_window(plan, plan.backfill, source, move.session_id, move.floor, move.through)
    return plan


def plan_from_file(
    source: TranscriptSource,
    state_path: str | os.PathLike[str],
    *,
    mode: ExtractionMode,
    scope: BackfillScope | None = None,
) -> SweepPlan:
    """``plan_sweep`` over the state file at ``state_path``, opened read only (a missing one is
    an empty state); ``StateUnreadable`` when it cannot be read."""
    with open_plan_state(state_path) as state:
        return plan_sweep(source, state, mode=mode, scope=scope)


def _add_window(
    plan: SweepPlan,
    total: Figures,
    source: TranscriptSource,
    session_id: str,
    after: int,
    through: int | None,
) -> None:
    """Add one session's window to ``total``; a source that raises is named in ``errors``."""
    try:
        figures = window_figures(source, session_id, after, plan.budget, through=through)
    except SourceFailed as failure:
        plan.errors.append({"session_id": session_id, "kind": failure.kind})
        return
    total.add(figures)


def window_figures(
    source: TranscriptSource,
    session_id: str,
    after: int,
    budget: BatchBudget,
    *,
    through: int | None = None,
) -> Figures:
    """The batches one window after ``after`` (up to ``through`` when given) would take.

    Batches are cut as the sweep cuts them when every one goes through: the first of the
    window without context, later ones with the context turns the sweep would pick. At most
    a batch's worth of messages and a page are held at once. ``SourceFailed`` when the
    source raises.
    """
    figures = Figures()
    waiting: deque[Message] = deque()
    recent: list[Message] = []
    ended = False
    while True:
        while not ended and len(waiting) < budget.messages:
            ended, after = _read_page(source, session_id, after, through, waiting, figures)
        if not waiting:
            break
        context = pick_context(recent, budget)
        batch = build_batch(list(waiting), context, budget, session_id=session_id)
        for _ in batch.messages:
            waiting.popleft()
        figures.messages += len(batch.messages)
        figures.batches += 1
        figures.bytes += batch.body_bytes
        figures.cut += len(batch.cut_ids)
        recent = [*recent, *batch.messages][-CONTEXT_KEEP:]
    figures.sessions = 1 if figures.batches else 0
    return figures


def _read_page(
    source: TranscriptSource,
    session_id: str,
    after: int,
    through: int | None,
    waiting: deque[Message],
    figures: Figures,
) -> tuple[bool, int]:
    """Read one page into ``waiting``; whether the window ended, and where the next starts."""
    try:
        page = list(
            itertools.islice(source.messages_after(session_id, after, PLAN_PAGE), PLAN_PAGE)
        )
    except Exception as error:
        raise SourceFailed(error) from error
    last = after
    for raw in page:
        item = check_message(raw, after_id=last, roles=MESSAGE_ROLES)
        if through is not None and item.id is not None and item.id > through:
            return True, last
        if isinstance(item, Message):
            waiting.append(item)
            last = item.id
            continue
        figures.refused += 1
        if item.usable and item.id is not None:
            last = item.id
    return last == after, last


def counted(count: int, word: str) -> str:
    """``"1 batch"``, ``"3 batches"``: a count with its noun."""
    if count == 1:
        return f"1 {word}"
    return f"{count} {word}es" if word.endswith("ch") else f"{count} {word}s"
