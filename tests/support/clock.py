"""Time the tests decide: a fixed wall time, a monotonic clock that moves only when told, and
sleeps that return at once and keep each wait they were asked for, so backoff, deadlines and
ages are seen without any time passing (REL-8)."""

from __future__ import annotations

NOW = 1_790_000_000.0  # a fixed wall time for ledger and audit rows


def fixed_clock() -> float:
    """The wall clock at ``NOW``, always."""
    return NOW


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordedSleep:
    """An async sleep that returns at once and keeps each wait it was asked for."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class FakeSleep(RecordedSleep):
    """A recorded sleep that also moves a fake clock by each wait, as a real sleep would."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        await super().__call__(seconds)
        self.clock.advance(seconds)


async def no_wait(seconds: float) -> None:
    """An async sleep that returns at once."""
