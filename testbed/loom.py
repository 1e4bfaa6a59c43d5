"""One stand-in for Loom as the runtime's callers meet it: the ``memory`` seam the sweep, the
follow-up of queued batches (SWEEP-15) and the migration call, without a gateway.

It behaves as the contract describes Loom, and each test configures only what it needs:

- **Extraction** (``extract``): a batch holding a *poison* message (its content contains
  ``poison_marker``) fails with Loom's uncoded internal error; otherwise Loom takes the
  messages in order (all of them, or the first ``accept_limit``). ``plays`` scripts what the
  next calls answer (``"all"``, ``"one"``, ``"none"`` or ``"not now"``); ``check_contract``
  builds each call's arguments with the runtime's own ``extraction_arguments`` and holds them
  to the op's params schema from the contract fixture (CON-2), ``date-time`` format included:
  a call the schema refuses is kept in ``refusals`` and fails as the gateway's -32602 does.
- **The queue** (``queue=True``): a queued batch (``defer``) gets a queue id and is written
  only when a status call finds it ``done``; ``failed`` writes nothing, and the retry op puts a
  failed batch back in the queue. ``step`` decides what a pending batch becomes at each status
  call; it may answer a state the contract does not know, or ``MISSING`` to leave the id out.
  Answers go through the runtime's own reader (``queue_states_from``), so what the follow-up
  gets is what it would get from the wire. Without ``queue`` a queued batch only gets its id.
- **Writes** (``set_memory``): Loom keeps what it stored by key; a key it holds is answered
  ``duplicate`` and stored no second time. ``verdicts`` names the verdict a key gets when it
  is first stored (``clear`` otherwise), ``reasons`` the reason given with it.
- **Faults**: ``faults`` is a queue of outcomes for the next calls of any op, one each
  (``None``: no fault for that call); ``fault_for_call(n)`` decides one per extraction,
  ``fault_for(key, n)`` one per write, and ``fail_every_batch`` fails every extraction. An
  exception instance is raised before Loom looks at the call. ``LOST``: Loom does what was
  asked and the answer never comes back (the gateway's call limit). ``CRASH``: Loom does it
  and then the process dies (``Crash``, not an ``Exception``). ``AfterLoom(error)``: a status
  or retry call Loom carried out whose answer is lost; for an extraction it is raised before
  Loom looks, since a queued batch whose answer is lost is sent again and written twice by
  design.
- **Time**: ``held`` makes extractions (every session's, or only those named) wait until the
  test sets ``release``; ``entered`` is set when the first of them arrives. ``call_s`` is the
  work each extraction takes, slept through the injected ``sleep`` (on a virtual-time loop in
  the tests that use it), so no test waits on a real clock.

Every call is recorded: ``calls`` (extractions, with their outcome), ``queue_calls``,
``writes`` and ``log`` (per write key, what happened), the calls in flight and their peaks.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from provisioner.devgateway.contract import served_tools
from provisioner.runtime.gateway.errors import (
    BrokenAnswer,
    GatewayCallTimeout,
    InternalFault,
    MayPass,
)
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import extraction_arguments, queue_states_from
from provisioner.runtime.loom.types import Extracted, MemoryWrite, QueueStates, WriteVerdict
from provisioner.runtime.transcripts import Message

LOST = "lost"  # Loom does what the call asked; the caller never learns it
CRASH = "crash"  # Loom does it; the process dies before the caller could note the answer
MISSING = "missing"  # a queue step that leaves the id out of the status answer
PENDING = ("queued", "running")
ACCEPTED_BY_PLAY = {"all": None, "one": 1, "none": 0}  # None: every message of the batch


class Crash(BaseException):
    """The process died between Loom's answer and the caller's note of it."""


@dataclass(frozen=True)
class AfterLoom:
    """A fault raised once Loom has done what a status or retry call asked."""

    error: BaseException


@dataclass
class Call:
    """One extraction call as Loom saw it."""

    session_id: str
    message_ids: tuple[int, ...]
    context_ids: tuple[int, ...]
    defer: bool
    outcome: str  # "taken", "lost", "poison", "refused", "not now", or the fault's class name
    contents: tuple[str, ...] = ()


@dataclass
class Taken:
    """One message Loom took: its session, the id the sweep had for it, and the wire item
    (kept when ``check_contract`` builds the call's arguments)."""

    session_id: str
    message_id: int
    wire: dict[str, object]


@dataclass
class QueuedBatch:
    session_id: str
    ids: tuple[int, ...]
    state: str = "queued"
    attempts: int = 1


def _every_batch_done(queue_id: str, batch: QueuedBatch) -> str:
    return "done"


@dataclass
class FakeLoom:
    # --- extraction
    poison_marker: str = "POISON"
    accept_limit: int | None = None
    plays: list[str] = field(default_factory=list)
    check_contract: bool = False
    # --- the queue
    queue: bool = False
    listed_now: bool = True
    step: Callable[[str, QueuedBatch], str] = _every_batch_done
    shared_queue_id: str | None = None  # answer every queued batch with this id (hostile)
    # --- writes
    verdicts: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    # --- faults
    faults: deque[object] = field(default_factory=deque)
    fault_for_call: Callable[[int], object | None] | None = None
    fault_for: Callable[[str, int], object | None] | None = None
    fail_every_batch: BaseException | None = None
    # --- time
    held: Collection[str] | bool = False
    release: asyncio.Event = field(default_factory=asyncio.Event)
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    call_s: float = 0.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # --- what Loom saw and did
    calls: list[Call] = field(default_factory=list)
    taken: dict[int, int] = field(default_factory=dict)  # message id -> times taken
    taken_items: list[Taken] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    written: Counter[int] = field(default_factory=Counter)  # message id -> times written
    batches: dict[str, QueuedBatch] = field(default_factory=dict)
    queue_calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    held_calls: int = 0
    in_flight: int = 0
    peak: int = 0  # the most extractions Loom was working on at once
    per_session: dict[str, int] = field(default_factory=dict)
    session_peak: int = 0
    order: list[str] = field(default_factory=list)  # the session of each extraction, in order
    stored: dict[str, MemoryWrite] = field(default_factory=dict)
    times_stored: Counter[str] = field(default_factory=Counter)
    writes: list[str] = field(default_factory=list)  # the key of each write, in order
    answers: list[str] = field(default_factory=list)  # the verdict of each answered write
    log: list[tuple[str, str]] = field(default_factory=list)  # (key, what happened), per write

    def __post_init__(self) -> None:
        self._validator: jsonschema.Draft202012Validator | None = None
        if self.check_contract:
            checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
            schema = served_tools()["loom_memory_set_from_messages"].params_schema
            self._validator = jsonschema.Draft202012Validator(schema, format_checker=checker)

    # --- extraction ---------------------------------------------------------------------------

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        self.order.append(session_id)
        self.in_flight += 1
        self.per_session[session_id] = self.per_session.get(session_id, 0) + 1
        self.peak = max(self.peak, self.in_flight)
        self.session_peak = max(self.session_peak, self.per_session[session_id])
        try:
            await self._wait_for_the_test(session_id)
            return self._extract(messages, context, session_id, defer)
        finally:
            self.in_flight -= 1
            self.per_session[session_id] -= 1

    async def _wait_for_the_test(self, session_id: str) -> None:
        if self.held is True or (self.held and session_id in self.held):
            self.held_calls += 1
            self.entered.set()
            await self.release.wait()
        if self.call_s:
            await self.sleep(self.call_s)

    def _extract(
        self, messages: Sequence[Message], context: Sequence[Message], session_id: str, defer: bool
    ) -> Extracted:
        ids = tuple(message.id for message in messages)
        context_ids = tuple(message.id for message in context)
        contents = tuple(message.content for message in messages)

        def note(outcome: str) -> None:
            self.calls.append(Call(session_id, ids, context_ids, defer, outcome, contents))

        fault = self._next_extraction_fault()
        if isinstance(fault, AfterLoom):
            fault = fault.error
        if isinstance(fault, BaseException):
            note(type(fault).__name__)
            raise fault
        wire: list[Any] = [None] * len(messages)
        if self._validator is not None:
            arguments = extraction_arguments(
                messages, context, session_id=session_id, defer=defer, namespace=None
            )
            problems = [error.message for error in self._validator.iter_errors(arguments)]
            if problems:
                note("refused")
                self.refusals.extend(problems)
                raise BrokenAnswer("-32602: invalid params")
            wire = arguments["messages"]
        if any(self.poison_marker in m.content for m in [*messages, *context]):
            note("poison")
            raise InternalFault("internal error")
        play = self.plays.pop(0) if self.plays else "all"
        if play == "not now":
            note(play)
            raise MayPass("upstream unavailable")
        accepted = len(messages) if self.accept_limit is None or defer else self.accept_limit
        played = ACCEPTED_BY_PLAY[play]
        accepted = min(accepted, len(messages) if played is None else played)
        for message, item in list(zip(messages, wire, strict=True))[:accepted]:
            self.taken[message.id] = self.taken.get(message.id, 0) + 1
            self.taken_items.append(Taken(session_id, message.id, item))
        note("taken" if fault is None else str(fault))
        if not defer:
            self.written.update(ids[:accepted])
        self._after(fault)
        if not defer:
            return Extracted(accepted=accepted)
        queue_id = self.shared_queue_id or f"q-{len(self.batches) + 1}"
        self.batches[queue_id] = QueuedBatch(session_id, ids)
        return Extracted(accepted=len(messages), queue_id=queue_id)

    def _next_extraction_fault(self) -> object | None:
        if self.fail_every_batch is not None:
            return self.fail_every_batch
        if self.faults:
            return self.faults.popleft()
        if self.fault_for_call is not None:
            return self.fault_for_call(len(self.calls))
        return None

    def sent_ids(self) -> list[int]:
        return [message_id for call in self.calls for message_id in call.message_ids]

    def sent_in(self, session_id: str) -> list[tuple[tuple[int, ...], bool]]:
        """The batches sent for ``session_id``: their ids and whether they were queued."""
        return [
            (call.message_ids, call.defer) for call in self.calls if call.session_id == session_id
        ]

    def taken_ids(self, session_id: str) -> list[int]:
        return [t.message_id for t in self.taken_items if t.session_id == session_id]

    # --- the queue ----------------------------------------------------------------------------

    def extraction_queue(self) -> FakeLoom | None:
        return self if self.queue else None

    def listed(self) -> bool:
        return self.listed_now

    async def status(self, queue_ids: Sequence[str]) -> QueueStates:
        self.queue_calls.append(("status", tuple(queue_ids)))
        after = self._queue_fault()
        items = []
        for queue_id in queue_ids:
            batch = self.batches.get(queue_id)
            if batch is None:
                continue
            if batch.state in PENDING:
                state = self.step(queue_id, batch)
                if state == MISSING:
                    continue
                if state == "done":
                    self.written.update(batch.ids)
                if state in (*PENDING, "done", "failed"):
                    batch.state = state
                items.append({"queue_id": queue_id, "state": state})
            else:
                items.append({"queue_id": queue_id, "state": batch.state})
        if after is not None:
            raise after.error
        return queue_states_from({"items": items}, contract.EXTRACTION_STATUS, queue_ids)

    async def retry(self, queue_ids: Sequence[str]) -> QueueStates:
        self.queue_calls.append(("retry", tuple(queue_ids)))
        after = self._queue_fault()
        items = []
        for queue_id in queue_ids:
            batch = self.batches.get(queue_id)
            if batch is None:
                continue
            if batch.state == "failed":
                batch.state = "queued"
                batch.attempts += 1
            items.append({"queue_id": queue_id, "state": batch.state})
        if after is not None:
            raise after.error
        return queue_states_from({"items": items}, contract.EXTRACTION_RETRY, queue_ids)

    def _queue_fault(self) -> AfterLoom | None:
        fault = self.faults.popleft() if self.faults else None
        if isinstance(fault, BaseException):
            raise fault
        assert fault is None or isinstance(fault, AfterLoom), fault
        return fault

    # --- writes -------------------------------------------------------------------------------

    async def set_memory(self, write: MemoryWrite) -> WriteVerdict:
        key = write.memory_key
        fault = self._next_write_fault(key)
        self.writes.append(key)
        if isinstance(fault, BaseException):
            self.log.append((key, type(fault).__name__))
            raise fault
        if key in self.stored:
            verdict = WriteVerdict(key, "duplicate")
        else:
            self.stored[key] = write
            self.times_stored[key] += 1
            verdict = WriteVerdict(key, self.verdicts.get(key, "clear"), self.reasons.get(key))
        if fault in (LOST, CRASH):
            self.log.append((key, str(fault)))
            self._after(fault)
        self.log.append((key, "answered"))
        self.answers.append(verdict.verdict)
        return verdict

    def _next_write_fault(self, key: str) -> object | None:
        if self.faults:
            return self.faults.popleft()
        if self.fault_for is not None:
            return self.fault_for(key, len(self.writes))
        return None

    @staticmethod
    def _after(fault: object | None) -> None:
        """The answer of a call Loom carried out, lost (``LOST``) or never noted (``CRASH``)."""
        if fault == LOST:
            raise GatewayCallTimeout("MCP server timed out")
        if fault == CRASH:
            raise Crash
