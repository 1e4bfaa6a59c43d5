"""A scripted stand-in for ``LoomMemory.extract``: the seam the sweep's logic tests use.

It behaves like Loom as the contract describes it: a batch with a *poison* message (its content
contains ``poison_marker``) fails with Loom's uncoded internal error; otherwise Loom takes the
messages in order (all of them, or the first ``accept_limit``). ``faults`` is a queue of
outcomes for the next calls: an exception class instance to raise before Loom looks at the
batch, or ``LOST_ANSWER`` — Loom takes the batch but the answer is lost (the gateway's call
limit) — so tests can see exactly what was sent and taken. Every call is recorded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provisioner.runtime.gateway.errors import GatewayCallTimeout, InternalFault
from provisioner.runtime.loom.types import Extracted
from provisioner.runtime.transcripts import Message

LOST_ANSWER = object()  # Loom takes the batch, the caller never learns it


@dataclass
class Call:
    """One extraction call as Loom saw it."""

    session_id: str
    message_ids: tuple[int, ...]
    context_ids: tuple[int, ...]
    defer: bool
    outcome: str  # "taken", "poison", or the fault's class name
    contents: tuple[str, ...] = ()


@dataclass
class ScriptedLoom:
    poison_marker: str = "POISON"
    faults: deque[object] = field(default_factory=deque)
    fault_for_call: Callable[[int], object | None] | None = None
    accept_limit: int | None = None
    calls: list[Call] = field(default_factory=list)
    taken: dict[int, int] = field(default_factory=dict)  # message id -> times taken
    fail_every_batch: Exception | None = None
    queue_ids: int = 0

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        ids = tuple(message.id for message in messages)
        context_ids = tuple(message.id for message in context)
        contents = tuple(message.content for message in messages)
        fault = self._next_fault()
        if fault is not None and fault is not LOST_ANSWER:
            assert isinstance(fault, BaseException)
            self.calls.append(
                Call(session_id, ids, context_ids, defer, type(fault).__name__, contents)
            )
            raise fault
        if any(self.poison_marker in m.content for m in [*messages, *context]):
            self.calls.append(Call(session_id, ids, context_ids, defer, "poison", contents))
            raise InternalFault("internal error")
        accepted = len(messages) if self.accept_limit is None or defer else self.accept_limit
        accepted = min(accepted, len(messages))  # a queued batch is taken whole
        for message_id in ids[:accepted]:
            self.taken[message_id] = self.taken.get(message_id, 0) + 1
        outcome = "lost" if fault is LOST_ANSWER else "taken"
        self.calls.append(Call(session_id, ids, context_ids, defer, outcome, contents))
        if fault is LOST_ANSWER:
            raise GatewayCallTimeout("MCP server timed out")
        if defer:
            self.queue_ids += 1
            return Extracted(accepted=len(messages), queue_id=f"q-{self.queue_ids}")
        return Extracted(accepted=accepted)

    def _next_fault(self) -> object | None:
        if self.fail_every_batch is not None:
            return self.fail_every_batch
        if self.faults:
            return self.faults.popleft()
        if self.fault_for_call is not None:
            return self.fault_for_call(len(self.calls))
        return None

    def sent_ids(self) -> list[int]:
        return [message_id for call in self.calls for message_id in call.message_ids]
