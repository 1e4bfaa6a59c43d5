"""The one clock and the one sleep every timed part of the runtime takes by injection.

Deadlines (GW-4), the breaker's cool-down (GW-6), the catalog's freshness (GW-2) and the
sweep's pacing all read time through a ``Clock`` and wait through a ``Sleep`` handed to them,
never through ``time`` or ``asyncio`` directly, so a test can stand time still or move it by
hand and count what happens instead of measuring how long it took.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Clock = Callable[[], float]
"""Seconds on a monotonic scale; only differences between two readings mean anything."""

Sleep = Callable[[float], Awaitable[None]]
"""Waits the given number of seconds; ``asyncio.sleep`` in production."""

__all__ = ["Clock", "Sleep"]
