"""An event loop on a virtual clock, for code that waits on timers (sleeps, deadlines) only.

The sweep's tests and its backlog benchmark run windows whose extractions take seconds of
(virtual) time each: the loop's clock jumps to the next timer whenever no callback is ready,
so a thousand seconds of waiting keep their order and their durations and cost no real time.
Sockets are not for it: a loop that jumps while a socket is being waited on would skip the
wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from typing import Any


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer whenever no callback is ready.

    Sleeps and deadlines (``asyncio.sleep``, ``asyncio.timeout``) keep their order and their
    virtual durations but cost no real time. Only for code that waits on timers, not sockets.
    """

    def __init__(self) -> None:
        super().__init__()
        self._virtual_now = 0.0

    def time(self) -> float:
        return self._virtual_now

    def _run_once(self) -> None:
        ready: Sequence[object] = self._ready  # type: ignore[attr-defined]
        timers: Sequence[asyncio.TimerHandle] = self._scheduled  # type: ignore[attr-defined]
        if not ready and timers:
            self._virtual_now = max(self._virtual_now, timers[0].when())
        super()._run_once()  # type: ignore[misc]


def on_virtual_time(main: Callable[[], Coroutine[Any, Any, Any]]) -> tuple[Any, float]:
    """Run ``main()`` to its end on a virtual clock: its result and the virtual seconds taken."""
    loop = VirtualTimeLoop()
    try:
        result = loop.run_until_complete(main())
        assert not asyncio.all_tasks(loop)
        return result, loop.time()
    finally:
        loop.close()
