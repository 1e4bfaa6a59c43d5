"""Asking Loom about queued extractions, and queueing a failed one again (SWEEP-15).

A queued extraction (SWEEP-4) is only *accepted* when Loom answers with its queue id: Loom
extracts it later and gives a failing batch a few tries of its own, out of the caller's sight.
Loom's caller-bound ops ``memory.extraction_status_mine`` and ``memory.extraction_retry_mine``
say how each of the caller's batches stands (``queued``, ``running``, ``done``, ``failed``) and
put a failed one back in the queue. No tool of their own serves them: both are reached through
``loom_op``, which the gateway's catalog lists only where the platform grants it (it is not in
Loom's default list). ``ExtractionQueue.listed`` says whether it is listed now; the sweep
follows its batches up only then.

Each call asks about at most ``QUEUE_IDS_PER_CALL`` ids (Loom's schema takes no more), with
one attempt and no wait on a ``Retry-After``: the sweep asks again next time anyway. Failures
are the gateway client's outcome classes, unchanged, noted for diagnostics; an answer out of
contract is a ``BrokenAnswer``, and items that cannot be taken at their word are counted, not
trusted (``QueueStates.odd``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from provisioner.runtime.gateway.client import EXTRACTION, LoomConnection
from provisioner.runtime.gateway.errors import GatewayError
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import queue_arguments, queue_states_from
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.types import QueueStates
from provisioner.runtime.loom.write import ErrorNoter

QUEUE_CALL_DEADLINE_S = 10.0  # SWEEP-15 (our choice): a short read of Loom's queue, per call
STATUS_OP = "queue-status"  # how diagnostics name a failed status call
RETRY_OP = "queue-retry"  # how diagnostics name a failed retry call


class QueueCalls(Protocol):
    """What the sweep's follow-up needs of a queue: ``ExtractionQueue`` is the real one."""

    def listed(self) -> bool: ...

    async def status(self, queue_ids: Sequence[str]) -> QueueStates: ...

    async def retry(self, queue_ids: Sequence[str]) -> QueueStates: ...


class ExtractionQueue:
    """The caller's queued extractions in Loom, through ``loom_op`` (SWEEP-15).

    ``connection`` is the backend's own (one breaker for every call, GW-7); ``tools`` gives
    the Loom tools the last good catalog lists (``LoomMemory.agent_tools``); ``namespace`` is
    ``memory.loom.namespace`` (None: Loom's home namespace); ``note_error`` keeps a failed
    call for diagnostics (``LoomMemory.note_error``).
    """

    def __init__(
        self,
        connection: LoomConnection,
        *,
        tools: Callable[[], frozenset[str]],
        namespace: str | None,
        note_error: ErrorNoter,
    ) -> None:
        self._connection = connection
        self._tools = tools
        self._namespace = namespace
        self._note_error = note_error

    def listed(self) -> bool:
        """Whether the catalog lists ``loom_op`` for Loom now (the follow-up can be made)."""
        return contract.LOOM_OP_TOOL in self._tools()

    async def status(self, queue_ids: Sequence[str]) -> QueueStates:
        """How Loom says each of ``queue_ids`` stands: ``memory.extraction_status_mine``.

        Raises ``ValueError`` (no call made) for an empty list, more than
        ``QUEUE_IDS_PER_CALL`` ids or an id no queue call can carry; ``BrokenAnswer`` for an
        answer out of contract; the gateway client's outcome classes for the rest.
        """
        return await self._call(contract.EXTRACTION_STATUS, STATUS_OP, queue_ids)

    async def retry(self, queue_ids: Sequence[str]) -> QueueStates:
        """Queue the failed ``queue_ids`` again: ``memory.extraction_retry_mine``.

        Loom answers each id's state after the call (``queued`` for one queued again). Raises
        what ``status`` raises. A retry whose answer was lost may have been made: the caller
        asks the status before trusting either way.
        """
        return await self._call(contract.EXTRACTION_RETRY, RETRY_OP, queue_ids)

    async def _call(self, op: str, noted_as: str, queue_ids: Sequence[str]) -> QueueStates:
        params = queue_arguments(queue_ids, namespace=self._namespace)
        arguments = contract.loom_op_arguments(op, params)
        try:
            result = await self._connection.call_tool(
                contract.LOOM_OP_TOOL,
                arguments,
                deadline_s=QUEUE_CALL_DEADLINE_S,
                policy=EXTRACTION,
            )
            return queue_states_from(result.data, op, queue_ids)
        except GatewayError as error:
            self._note_error(noted_as, error)
            raise


def extraction_queue(memory: Any) -> QueueCalls | None:
    """The queue of ``memory``'s extractions, or None where there is none to ask.

    A backend that offers ``extraction_queue()`` itself is asked for it. For ``LoomMemory``
    the queue is built on its open connection, so that the follow-up shares its client and
    its breaker; a backend without a gateway URL, or not open, has none. Any other object
    (a scripted stand-in without a queue) has none.
    """
    own = getattr(memory, "extraction_queue", None)
    if callable(own):
        queue: QueueCalls | None = own()
        return queue
    if not isinstance(memory, LoomMemory):
        return None
    connection = memory._connection  # the backend's own client: one breaker for all its calls
    if connection is None:
        return None
    return ExtractionQueue(
        connection,
        tools=memory.agent_tools,
        namespace=memory._namespace,
        note_error=memory.note_error,
    )
