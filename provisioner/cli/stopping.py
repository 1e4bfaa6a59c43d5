"""A long command stopped by SIGTERM ends as one stopped by SIGINT (REL-9).

A person stops ``nerve memory sweep`` or ``nerve memory migrate`` with Ctrl-C (SIGINT); a
service manager stops it with SIGTERM. Both end the same way here: the work under way is
cancelled (every batch or item Loom answered is already in the state file, each in its own
transaction), the command prints its report line, ``nerve: interrupted`` or
``nerve: terminated`` goes to stderr, and the process exits with 128 + the signal's number, as
a shell reports a process a signal ended: 130 for SIGINT, 143 for SIGTERM. A service manager
that should take the stop it asked for as a clean one is told that 143 is success
(``SuccessExitStatus=143`` in a systemd unit).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from provisioner.base.command import program

SIGNAL_EXIT_BASE = 128  # REL-9: a shell's status for a process a signal ended: 128 + its number
EXIT_INTERRUPTED = SIGNAL_EXIT_BASE + signal.SIGINT  # 130
STOP_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}


class StopSignals:
    """Which stop signal arrived, if any, while ``run_stoppable`` ran its work."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None

    @property
    def exit_status(self) -> int:
        """128 + the signal's number; 130 (SIGINT's) while none has arrived."""
        return SIGNAL_EXIT_BASE + (self.received or signal.SIGINT)

    @property
    def name(self) -> str:
        """The signal's name for a report line, such as ``SIGTERM``."""
        return (self.received or signal.SIGINT).name


Work = Callable[[StopSignals], Coroutine[Any, Any, int]]


def run_stoppable(work: Work) -> int:
    """Run ``work(stop)`` on a new event loop until it returns its exit status, or until SIGINT
    or SIGTERM cancels it.

    On a stop signal the work's task is cancelled once (a second signal changes nothing); the
    work may catch ``asyncio.CancelledError`` to print its report, with ``stop.exit_status``,
    and must raise it again. Then one line goes to stderr and the signal's status is returned.
    A cancellation that no signal caused is raised as it is.
    """
    stop = StopSignals()

    async def stoppable() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: signal.Signals) -> None:
            if stop.received is None:
                stop.received = signum
                task.cancel()

        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await work(stop)
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)

    try:
        return asyncio.run(stoppable())
    except asyncio.CancelledError:
        if stop.received is None:
            raise
    print(f"{program()}: {STOP_SIGNALS[stop.received]}", file=sys.stderr, flush=True)
    return stop.exit_status
