"""Probes of how much work holds the event loop, for tests of work that must not hold it.

``WorkProbe`` counts: a task that runs once per turn of the loop notes how much work (a
counter the work moves) was done between two of its turns. With ``TickingClock`` standing in
for the clock the work reads to know when to yield, the count depends on nothing but the code,
so a test can hold it to an exact bound however busy the machine is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class TickingClock:
    """A clock that moves ``step_s`` each time it is read: work that reads it once per item
    sees time pass in proportion to the items it did, whatever the machine's speed."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * self.step_s


class WorkProbe:
    """How much work was done on the loop between two of its turns, counted, not timed.

    ``async with WorkProbe(done) as probe:`` around the work, where ``done()`` reads a counter
    the work moves (memories cleaned, say). A task on the same loop gives the loop back at
    once every time it runs (``asyncio.sleep(0)``), so it runs once per turn of the loop, and
    each time notes how far the counter moved since its last run. ``most_between_turns`` is
    then the most work any one callback did while holding the loop, the work done after the
    last turn included; ``turns`` how often the loop came round.
    """

    def __init__(self, done: Callable[[], int]) -> None:
        self._done = done
        self._last = 0
        self.most_between_turns = 0
        self.turns = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> WorkProbe:
        self._last = self._done()
        self._task = asyncio.create_task(self._turn())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._note()

    async def _turn(self) -> None:
        while True:  # noted first: the work ran before this task's first turn
            self._note()
            self.turns += 1
            await asyncio.sleep(0)

    def _note(self) -> None:
        done = self._done()
        self.most_between_turns = max(self.most_between_turns, done - self._last)
        self._last = done
