"""Sessions swept side by side under an adaptive limit (SWEEP-14).

A backlog (the first sweep after a long outage, a backfill) is slow when Loom spends seconds on
each batch and the sessions' windows go one at a time. So a sweep keeps several sessions'
windows in flight, never two of one session, under a limit that follows what the gateway and
Loom answer:

* the limit starts at 1, so a sweep's first window goes alone (when the breaker is half-open,
  that window's first call is its one trial call, GW-7);
* each window that went through (batches taken, no call failed) raises it by one, up to the cap
  ``memory.loom.sweep_concurrency`` (default 4);
* a 429, any other "not now" (SWEEP-7) and the gateway's call limit halve it, never below 1:
  the other side says it has enough to do;
* what a window launched before the last halving says is old news about a load already answered:
  it neither halves the limit again nor grows it back.

Every other rule holds per session as before: a window moves its own watermark, each batch in
one transaction of the ``StateStore``; the state's transactions never interleave, since they
hold no ``await`` and run on the event loop's thread.

A window that says the sweep must end (an open breaker, or no answer by the deadline, SWEEP-10)
stops the launching, and the windows still in flight are cancelled: the sweep ends at once
rather than waiting out their calls while it holds the lock. A cancelled window has moved its
watermark only past batches Loom answered for, so nothing is lost; the batch it had in flight
is sent again by a later sweep, as after a crash (SWEEP-2).

The pieces, each used where the sweep runs its windows:

* ``AdaptiveLimit``: the limit, and the launch ticket that dates each window's news;
* ``sweep_windows``: runs one coroutine per session under the limit, ends early, cancels
  cleanly, and leaves no task behind whatever happens;
* ``TalliedExtractor`` and ``CallTally``: what a window's calls came to (``Verdict``), noted as
  the calls return, so the window itself need not report it;
* ``SharedBudget``: the batch budget the windows share (SWEEP-5), halved once for one cut that
  several windows meet together, and never put back up by a batch planned before a cut.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Protocol

from provisioner.runtime.budget import CUT_TOO_LARGE, BatchBudget
from provisioner.runtime.gateway.errors import CircuitOpen, ClientClosed, NotNow
from provisioner.runtime.loom.settings import SWEEP_CONCURRENCY_DEFAULT, SWEEP_CONCURRENCY_MAX
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.transcripts import Message

START_LIMIT = 1  # SWEEP-14: a sweep's first window goes alone

log = logging.getLogger("provisioner.runtime.sweep.sweeper")


class Verdict(enum.Enum):
    """What a finished window tells the limit (SWEEP-14)."""

    THROUGH = "through"  # batches taken and no call failed: one more window may go
    SLOW_DOWN = "slow_down"  # a 429, a "not now" or the call limit: half as many
    NEUTRAL = "neutral"  # nothing sent, or a failure that says nothing about the load


@dataclass(frozen=True)
class WindowResult:
    """How one session's window ended: ``ended`` names why the whole sweep must end now
    (SWEEP-10; None: the sweep goes on), ``verdict`` what it tells the limit."""

    ended: str | None = None
    verdict: Verdict = Verdict.NEUTRAL


def slows_down(error: BaseException) -> bool:
    """Whether a failed extraction asks for fewer windows at once (SWEEP-14).

    A 429 and any other condition that may pass (``MayPass``), Loom's coded faults (grant
    busy, overloaded) and the gateway's call limit (``GatewayCallTimeout``) are the other side
    saying it has enough: all are ``NotNow``. An open breaker and a closed client are too, but
    they end the sweep or come at shutdown, so they say nothing about the load.
    """
    return isinstance(error, NotNow) and not isinstance(error, CircuitOpen | ClientClosed)


class AdaptiveLimit:
    """How many windows may be in flight: 1 at first, +1 per window through, halved on a
    slow-down, at most ``cap`` (SWEEP-14).

    ``ticket`` dates a window at its launch; ``observe`` ignores the verdict of a window
    launched before the last halving, so several windows meeting one overload together halve
    the limit once, and windows that were already under way when it halved cannot grow it back.
    Raises ``ValueError`` for a cap outside 1…32 (the configuration has checked it already).
    """

    def __init__(self, cap: int = SWEEP_CONCURRENCY_DEFAULT) -> None:
        if isinstance(cap, bool) or not isinstance(cap, int):
            raise ValueError(f"cap: {cap!r} is not a whole number")
        if not START_LIMIT <= cap <= SWEEP_CONCURRENCY_MAX:
            raise ValueError(f"cap: {cap} is not from {START_LIMIT} to {SWEEP_CONCURRENCY_MAX}")
        self._cap = cap
        self._current = START_LIMIT
        self._halvings = 0

    @property
    def cap(self) -> int:
        return self._cap

    @property
    def current(self) -> int:
        """How many windows may be in flight now."""
        return self._current

    @property
    def ticket(self) -> int:
        """The date a window launched now carries: how many halvings came before it."""
        return self._halvings

    def observe(self, verdict: Verdict, ticket: int) -> None:
        """Take the verdict of a window launched with ``ticket``; old news changes nothing."""
        if ticket != self._halvings:
            return
        if verdict is Verdict.THROUGH:
            self._current = min(self._cap, self._current + 1)
        elif verdict is Verdict.SLOW_DOWN:
            self._current = max(START_LIMIT, self._current // 2)
            self._halvings += 1


# --- what a window's calls came to --------------------------------------------------------------


class CallTally:
    """One window's extraction calls as they returned: batches taken, calls failed, and
    whether a failure asked to slow down."""

    def __init__(self) -> None:
        self.taken = 0
        self.failed = 0
        self.slowed = False

    def note_answer(self, extracted: Extracted) -> None:
        if extracted.accepted > 0:
            self.taken += 1

    def note_failure(self, error: BaseException) -> None:
        self.failed += 1
        self.slowed = self.slowed or slows_down(error)

    @property
    def verdict(self) -> Verdict:
        """``SLOW_DOWN`` after any slow-down; ``THROUGH`` when batches were taken and no call
        failed; ``NEUTRAL`` otherwise (nothing due, Loom took nothing, a batch's own fault)."""
        if self.slowed:
            return Verdict.SLOW_DOWN
        if self.taken and not self.failed:
            return Verdict.THROUGH
        return Verdict.NEUTRAL


class ExtractCall(Protocol):
    """The sweep's extraction call (``LoomMemory.extract``)."""

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted: ...


class TalliedExtractor:
    """Wraps the extraction call so that each call lands on its session's ``CallTally``.

    One window per session is in flight, so the session id names the window. ``start`` gives
    a window a fresh tally before it runs, ``finish`` drops it; a call for a session with no
    tally passes through unnoted. What the call returns or raises is passed on unchanged.
    """

    def __init__(self, memory: ExtractCall) -> None:
        self._memory = memory
        self._tallies: dict[str, CallTally] = {}

    def start(self, session_id: str) -> CallTally:
        tally = CallTally()
        self._tallies[session_id] = tally
        return tally

    def finish(self, session_id: str) -> None:
        self._tallies.pop(session_id, None)

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        tally = self._tallies.get(session_id)
        try:
            extracted = await self._memory.extract(
                messages, context=context, session_id=session_id, defer=defer
            )
        except Exception as error:
            if tally is not None:
                tally.note_failure(error)
            raise
        if tally is not None:
            tally.note_answer(extracted)
        return extracted


# --- the scheduler ------------------------------------------------------------------------------

WindowRunner = Callable[[str], Coroutine[Any, Any, WindowResult]]
WindowDone = Callable[[str, WindowResult], None]


@dataclass(frozen=True)
class Swept:
    """What ``sweep_windows`` did: ``ended`` is the first end reason a window gave (None:
    every window ran), ``finished`` how many windows ran to their end, ``cancelled`` the
    sessions whose windows were cut short by that end, ``not_started`` how many never began,
    and ``peak`` the most windows that were in flight at once."""

    ended: str | None
    finished: int
    cancelled: tuple[str, ...]
    not_started: int
    peak: int


async def sweep_windows(
    sessions: Iterable[str],
    run_window: WindowRunner,
    limit: AdaptiveLimit,
    *,
    on_done: WindowDone | None = None,
) -> Swept:
    """Run ``run_window(session)`` for each session, at most ``limit.current`` at once.

    Sessions start in the order given; one listed twice is swept once, so a session never has
    two windows in flight. Each finished window's verdict goes to ``limit`` and then, with its
    session, to ``on_done`` (in the order the windows finished). The first window that names
    an end reason stops the launching; the windows still in flight are cancelled and awaited.

    Never leaves a task behind: when a window raises (a bug: windows report failures in their
    result), or ``on_done`` does, the other windows are cancelled and awaited and that error
    propagates as it is; when the caller is cancelled, so is every window, and the
    cancellation propagates once they have ended.
    """
    waiting = list(dict.fromkeys(sessions))
    waiting.reverse()  # popped from the end: the first session listed starts first
    running: dict[asyncio.Task[WindowResult], tuple[str, int]] = {}
    ended: str | None = None
    finished = peak = 0
    try:
        while True:
            while ended is None and waiting and len(running) < limit.current:
                session = waiting.pop()
                task = asyncio.create_task(run_window(session), name="sweep window")
                running[task] = (session, limit.ticket)
            peak = max(peak, len(running))
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in [task for task in running if task in done]:  # in launch order
                session, ticket = running.pop(task)
                result = task.result()  # a window's own error propagates here
                finished += 1
                limit.observe(result.verdict, ticket)
                if on_done is not None:
                    on_done(session, result)
                if ended is None and result.ended is not None:
                    ended = result.ended
            if ended is not None:
                break
    finally:
        cancelled = tuple(session for session, _ in running.values())
        await _cancel_and_wait(list(running))
    return Swept(ended, finished, cancelled, len(waiting), peak)


async def _cancel_and_wait(tasks: list[asyncio.Task[WindowResult]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, even if cancelled meanwhile.

    A second cancellation of the caller while it waits is held until the tasks have ended and
    then raised, so that no task outlives the sweep. Errors the tasks end with are retrieved
    (and logged by kind), never raised: the sweep is already ending for another reason.
    """
    for task in tasks:
        task.cancel()
    interrupted = False
    while pending := [task for task in tasks if not task.done()]:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            interrupted = True
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            log.warning("a window failed while the sweep ended: %s", type(error).__name__)
    if interrupted:
        raise asyncio.CancelledError


# --- the shared batch budget --------------------------------------------------------------------


class BudgetChange(NamedTuple):
    """A cut of the shared budget: what it was and what it is now (for the audit row)."""

    before: BatchBudget
    after: BatchBudget


class SharedBudget:
    """The batch budget every window of one sweep plans with and changes (SWEEP-5, SWEEP-14).

    A budget's *generation* is its limits (messages and bytes): every batch planned while the
    limits were the same belongs to it. Windows run side by side, so a batch's answer may come
    after another window changed the budget; the rules keep the budget what one window at a
    time would have made it:

    * ``cut``: a 413, the call limit or a timeout met by a batch of the current generation
      halves the budget. The same cut met by a batch of an older, larger generation is the one
      already made: nothing is halved twice (only a 413 still makes a timeout's cut stay). A
      batch planned under smaller limits than now (the budget grew meanwhile) cuts to half of
      those.
    * ``went_through``: a batch of the current generation counts toward the ten in a row that
      grow a timeout's cut back; one planned before a change counts for nothing, and never
      puts the old limits back.

    The caller stores what these return in the same step, with no ``await`` between, so the
    state file always holds the latest budget: ``cut``'s ``after`` with its audit row
    (``StateStore.record_budget``), ``went_through``'s result with the batch
    (``StateStore.record_taken``).
    """

    def __init__(self, budget: BatchBudget) -> None:
        self._budget = budget

    @property
    def current(self) -> BatchBudget:
        """The budget a batch planned now uses."""
        return self._budget

    def cut(self, planned: BatchBudget, reason: str) -> BudgetChange | None:
        """The cut a batch planned with ``planned`` met (``CUT_TOO_LARGE`` or ``CUT_TIMEOUT``).

        Returns the change to store with its audit row, or None when there is none: the cut
        was already made for that generation, or the budget is at its minimum.
        """
        before = self._budget
        proposed = planned.halved(reason)
        messages = min(before.messages, proposed.messages)
        size = min(before.bytes, proposed.bytes)
        sticky = CUT_TOO_LARGE if CUT_TOO_LARGE in (reason, before.cut_reason) else reason
        if _same_limits(planned, before) or (messages, size) != (before.messages, before.bytes):
            after = replace(before, messages=messages, bytes=size, cut_reason=sticky, good_streak=0)
        elif reason == CUT_TOO_LARGE and before.cut_reason != CUT_TOO_LARGE:
            after = replace(before, cut_reason=CUT_TOO_LARGE, good_streak=0)
        else:
            return None
        if after == before:
            return None
        self._budget = after
        return BudgetChange(before, after)

    def went_through(self, planned: BatchBudget) -> BatchBudget:
        """The budget to store with a batch planned with ``planned`` that went through."""
        if _same_limits(planned, self._budget):
            self._budget = self._budget.after_good_batch()
        return self._budget


def _same_limits(one: BatchBudget, other: BatchBudget) -> bool:
    return (one.messages, one.bytes) == (other.messages, other.bytes)
