"""One budget of calls to Loom for a whole fleet switch, and the instances' calls through it
(FLEET-9).

A fleet switch runs hundreds of instances' migrations and sweeps in one process against one
Loom. Each instance's own sweep limit (SWEEP-14) starts at one window and knows nothing of the
others, so what keeps Loom from being flooded, or left idle, is ``FleetBudget``: how many
calls (extractions and migration writes alike) may be in flight across the fleet.

* It starts at ``FLEET_START_CALLS`` and grows by one for each call Loom answers, up to
  ``FLEET_MAX_CALLS``: while Loom keeps answering, more instances' calls overlap, which hides
  Loom's latency (a second per extraction) behind the others.
* A "not now" (a 429, any ``MayPass``, one of Loom's coded faults) cuts it to three quarters
  (``FLEET_CUT``), never below ``FLEET_MIN_CALLS``. As in SWEEP-14, each call carries the
  generation it was launched in, and only news of the current generation moves the limit:
  several calls turned away by one overload cut it once, and calls launched before the cut
  cannot grow it back. Three quarters, not half: a gateway that turns away a steady share of
  calls whatever the load (a tenth, say) meets a cut every few answers, and halving then kept
  the fleet near twenty calls where Loom could take a hundred; a gentler cut still backs off
  quickly from a real overload, whose refusals keep coming until the load falls.

``FleetLoom`` is one instance's Loom backend seen through that budget. Its ``extract`` takes a
slot for each try; an extraction the gateway turned away ("not now") is sent again, by this
instance alone, once the gateway's ``Retry-After`` has passed (else after a short backoff), at
most ``EXTRACT_TRIES`` times, and the last refusal goes to the sweep as it came. Sending it
again is safe: a refused call was not taken, and a batch Loom took after all is answered
``duplicate``. The rest of the fleet goes on meanwhile: a Retry-After says when this call may
come back, and the cut limit is what slows everyone. ``set_memory`` takes a slot for each
write; the migration keeps its own retry of a "not now" (REL-8).

``steps`` is called each time Loom answered a call, before the caller records the answer: the
fleet's kill-at-every-step test stops the process exactly there (FLEET-8).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from provisioner.runtime.face import (
    CodedFault,
    Extracted,
    MayPass,
    MemoryWrite,
    Message,
    Sleep,
    WriteVerdict,
)

FLEET_START_CALLS = 16  # FLEET-9 (our choice): calls in flight across the fleet at first
FLEET_MAX_CALLS = 128  # FLEET-9 (our choice): at most, across the fleet's connection pools
FLEET_MIN_CALLS = 4  # FLEET-9 (our choice): a cut never goes below this
FLEET_CUT = (3, 4)  # FLEET-9 (our choice): a "not now" leaves this share of the calls in flight
EXTRACT_TRIES = 5  # FLEET-9 (our choice): one send and four more while "not now" lasts
RETRY_BACKOFF_S = 1.0  # FLEET-9 (our choice): the wait when the gateway names no Retry-After
RETRY_AFTER_MAX_S = 30.0  # FLEET-9, as REL-8: a longer Retry-After is not waited out here
TURNED_AWAY = (MayPass, CodedFault)  # FLEET-9: refusals that say "not now", nothing taken

Step = Callable[[], None]


class FleetBudget:
    """How many calls to Loom may be in flight across the fleet (see the module docstring).

    Shared by the run's event loops, each in its own thread (``switch``): the counts are kept
    under a thread lock, and a call waiting for room waits on a future of its own loop, which
    the thread that frees a slot resolves through that loop. ``ValueError`` unless
    ``floor <= start <= cap``. ``peak`` is the most calls that were in flight at once,
    ``cuts`` how often a "not now" cut the limit: for the report.
    """

    def __init__(
        self,
        *,
        start: int = FLEET_START_CALLS,
        cap: int = FLEET_MAX_CALLS,
        floor: int = FLEET_MIN_CALLS,
    ) -> None:
        if not 1 <= floor <= start <= cap:
            raise ValueError(f"expected 1 <= floor ({floor}) <= start ({start}) <= cap ({cap})")
        self._limit = start
        self._cap = cap
        self._floor = floor
        self._in_flight = 0
        self._generation = 0
        self._lock = threading.Lock()
        self._waiting: deque[asyncio.Future[None]] = deque()
        self.peak = 0
        self.cuts = 0

    @property
    def limit(self) -> int:
        """How many calls may be in flight now."""
        return self._limit

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Wait for room, hold it for one call; the value is the call's generation."""
        waiter: asyncio.Future[None] | None = None
        with self._lock:
            if self._in_flight < self._limit and not self._waiting:
                self._take()
            else:
                waiter = asyncio.get_running_loop().create_future()
                self._waiting.append(waiter)
        if waiter is not None:
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._release()  # granted as the caller was cancelled: given back
                raise
        try:
            yield self._generation
        finally:
            self._release()

    def _take(self) -> None:
        self._in_flight += 1
        self.peak = max(self.peak, self._in_flight)

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._grant_what_fits()

    def _grant_what_fits(self) -> None:
        """Hand free slots to the calls waiting longest (the lock held)."""
        while self._waiting and self._in_flight < self._limit:
            waiter = self._waiting.popleft()
            self._take()
            waiter.get_loop().call_soon_threadsafe(self._grant, waiter)

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        """On the waiter's loop: wake it, or take the slot back if it stopped waiting."""
        if waiter.cancelled():
            self._release()
        else:
            waiter.set_result(None)

    def answered(self, generation: int) -> None:
        """Loom answered a call of ``generation``: one more may go, up to the cap."""
        with self._lock:
            if generation == self._generation and self._limit < self._cap:
                self._limit += 1
                self._grant_what_fits()

    def turned_away(self, generation: int) -> None:
        """A call of ``generation`` was turned away: three quarters as many, once per
        generation."""
        kept, of = FLEET_CUT
        with self._lock:
            if generation == self._generation:
                self._limit = max(self._floor, self._limit * kept // of)
                self._generation += 1
                self.cuts += 1


class FleetLoom:
    """One instance's ``LoomMemory`` with its calls going through the fleet's budget; what the
    sweep (``extract``, ``note_batch_budget``) and the migration (``set_memory``) use of it."""

    def __init__(
        self,
        memory: Any,
        budget: FleetBudget,
        *,
        steps: Step | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._memory = memory
        self._budget = budget
        self._steps = steps or (lambda: None)
        self._sleep = sleep
        self.resent = 0  # extractions sent again after a "not now"
        self.calls = 0  # calls Loom answered

    async def extract(
        self,
        messages: Sequence[Message],
        *,
        context: Sequence[Message] = (),
        session_id: str,
        defer: bool = False,
    ) -> Extracted:
        """One batch, sent again while the gateway turns it away (see the module docstring)."""
        for attempt in range(1, EXTRACT_TRIES + 1):
            async with self._budget.slot() as generation:
                try:
                    extracted: Extracted = await self._memory.extract(
                        messages, context=context, session_id=session_id, defer=defer
                    )
                except TURNED_AWAY as error:
                    self._budget.turned_away(generation)
                    wait_s = _wait_before_resend(error)
                    if attempt == EXTRACT_TRIES or wait_s is None:
                        raise
                else:
                    self._budget.answered(generation)
                    self.calls += 1
                    self._steps()
                    return extracted
            self.resent += 1
            await self._sleep(wait_s)
        raise AssertionError("unreachable: the last try returns or raises")

    async def set_memory(self, write: MemoryWrite) -> WriteVerdict:
        """One keyed write in a slot of the budget; failures go to the migration as they came."""
        async with self._budget.slot() as generation:
            try:
                verdict: WriteVerdict = await self._memory.set_memory(write)
            except TURNED_AWAY:
                self._budget.turned_away(generation)
                raise
            self._budget.answered(generation)
        self.calls += 1
        self._steps()
        return verdict

    def note_batch_budget(self, budget: Any) -> None:
        """The sweep's batch budget, for the backend's diagnostics (LOOM-4)."""
        self._memory.note_batch_budget(budget)

    def extraction_queue(self) -> Any:
        """The backend's queue of deferred extractions (SWEEP-15), for a sweep in queued mode:
        its status calls are few and light, so they go beside the budget."""
        from provisioner.runtime.face import extraction_queue

        return extraction_queue(self._memory)


def _wait_before_resend(error: BaseException) -> float | None:
    """The gateway's Retry-After, else the backoff; None when it asks for longer than we wait."""
    said = getattr(error, "retry_after_s", None)
    if said is None:
        return RETRY_BACKOFF_S
    return float(said) if said <= RETRY_AFTER_MAX_S else None
