"""A scripted Loom with a queue: the seam the follow-up's logic tests use (SWEEP-15).

Waiting extractions are written at once. A queued one (``defer: true``) gets a queue id and is
written only when a status call finds it ``done``; ``failed`` writes nothing, and the retry op
puts a failed batch back in the queue, as Loom's caller-bound ops do. ``step`` decides what a
pending batch becomes at each status call (``done`` by default); it may also answer a state
Loom's contract does not know, or ``MISSING`` to leave the id out of the answer. Answers go
through the runtime's own reader (``queue_states_from``), so what the follow-up gets is what it
would get from the wire. ``faults`` are raised by the next calls, one each, before Loom looks
at them (None: no fault for that call; ``AfterLoom``: a status or retry call Loom carried out
whose answer is lost — for an extraction, raised before Loom looks, since a queued batch whose
answer is lost is sent again and written twice by design). ``written`` counts, per message
id, how many times Loom wrote it.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import queue_states_from
from provisioner.runtime.loom.types import Extracted, QueueStates
from provisioner.runtime.transcripts import Message

MISSING = "missing"  # a step that leaves the id out of the status answer
PENDING = ("queued", "running")


@dataclass(frozen=True)
class AfterLoom:
    """A fault raised once Loom has done what a status or retry call asked."""

    error: BaseException


@dataclass
class QueuedBatch:
    session_id: str
    ids: tuple[int, ...]
    state: str = "queued"
    attempts: int = 1


@dataclass
class QueuedLoom:
    listed_now: bool = True
    step: Callable[[str, QueuedBatch], str] = lambda queue_id, batch: "done"
    faults: deque[BaseException | AfterLoom | None] = field(default_factory=deque)
    batches: dict[str, QueuedBatch] = field(default_factory=dict)
    written: Counter[int] = field(default_factory=Counter)
    extracts: list[tuple[str, tuple[int, ...], bool]] = field(default_factory=list)
    queue_calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    shared_queue_id: str | None = None  # answer every queued batch with this id (hostile)

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        ids = tuple(message.id for message in messages)
        self.extracts.append((session_id, ids, defer))
        after = self._fault()
        if after is not None:
            raise after.error
        if not defer:
            self.written.update(ids)
            return Extracted(accepted=len(ids))
        queue_id = self.shared_queue_id or f"q-{len(self.batches) + 1}"
        self.batches[queue_id] = QueuedBatch(session_id, ids)
        return Extracted(accepted=len(ids), queue_id=queue_id)

    def extraction_queue(self) -> QueuedLoom:
        return self

    def listed(self) -> bool:
        return self.listed_now

    async def status(self, queue_ids: Sequence[str]) -> QueueStates:
        self.queue_calls.append(("status", tuple(queue_ids)))
        after = self._fault()
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
        after = self._fault()
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

    def _fault(self) -> AfterLoom | None:
        fault = self.faults.popleft() if self.faults else None
        if isinstance(fault, BaseException):
            raise fault
        return fault

    def sent_in(self, session_id: str) -> list[tuple[tuple[int, ...], bool]]:
        """The batches sent for ``session_id``: their ids and whether they were queued."""
        return [(ids, defer) for session, ids, defer in self.extracts if session == session_id]
