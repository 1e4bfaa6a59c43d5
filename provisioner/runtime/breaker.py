"""The client's own circuit breaker for the gateway (GW-7).

When the gateway is not reached, or a call gets no answer within the caller's deadline, every
session start and every sweep would otherwise wait out its own timeout against a gateway that
is down or stuck. The breaker turns that into an immediate ``CircuitOpen``: it opens for 15 s,
doubles the wait while failures go on (30, 60, … capped at 5 min), and closes on the first
answer. The gateway has a circuit of its own, but it never sees the calls this client gave up
on, so only this one can count them.

After the open period one trial call is let through (half-open); the others keep failing fast
until the trial ends. A trial that fails reopens the breaker for twice as long.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from provisioner.runtime.errors import CircuitOpen

BREAKER_FIRST_OPEN_S = 15.0  # GW-7: the first opening
BREAKER_MAX_OPEN_S = 300.0  # GW-7: doubling stops at 5 min

Clock = Callable[[], float]


class Breaker:
    """Counts unreachable and unanswered calls and fails fast while they go on.

    ``clock`` is a monotonic clock in seconds (``time.monotonic`` unless a test injects one).
    The breaker never sleeps and never touches the network; the caller asks ``before_call``
    and reports how the call ended with exactly one of ``record_failure``,
    ``record_answer`` or ``release``.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or time.monotonic
        self._open_until: float | None = None
        self._open_for_s = 0.0
        self._trial_in_flight = False
        self._consecutive_failures = 0

    @property
    def state(self) -> str:
        """``closed``, ``open`` (failing fast) or ``half-open`` (a trial may go)."""
        if self._open_until is None:
            return "closed"
        if self._clock() < self._open_until:
            return "open"
        return "half-open"

    def raise_if_open(self) -> None:
        """Raise ``CircuitOpen`` while the breaker fails fast; take no trial slot.

        For a caller that wants to stop before doing other network work (such as reading the
        catalog) and still let ``before_call`` decide on the trial.
        """
        if self._open_until is None:
            return
        now = self._clock()
        if now < self._open_until:
            raise self._open_error(self._open_until - now)
        if self._trial_in_flight:
            raise self._open_error(0.0)

    def before_call(self) -> None:
        """Let a call go, or raise ``CircuitOpen`` without it touching the network.

        Past the open period the first caller becomes the trial; until it ends, others fail fast.
        """
        self.raise_if_open()
        if self._open_until is not None:
            self._trial_in_flight = True

    def record_answer(self) -> None:
        """The gateway answered (whatever it said): close the breaker."""
        self._open_until = None
        self._open_for_s = 0.0
        self._trial_in_flight = False
        self._consecutive_failures = 0

    def record_failure(self) -> None:
        """The gateway was not reached, or gave no answer in time: open, or open for longer.

        A failure of a call that started before the breaker opened (not the trial) changes
        nothing: the outage it saw is already counted.
        """
        if self._open_until is None:
            self._open_for_s = BREAKER_FIRST_OPEN_S
        elif self._trial_in_flight:
            self._open_for_s = min(self._open_for_s * 2, BREAKER_MAX_OPEN_S)
        else:
            return
        self._consecutive_failures += 1
        self._trial_in_flight = False
        self._open_until = self._clock() + self._open_for_s

    def release(self) -> None:
        """The call ended without a verdict (it was cancelled): free the trial slot."""
        self._trial_in_flight = False

    def snapshot(self) -> dict[str, Any]:
        """The breaker's state for diagnostics (LOOM-4): state, open period, time left, failures."""
        retry_in = 0.0
        if self._open_until is not None:
            retry_in = max(0.0, self._open_until - self._clock())
        return {
            "state": self.state,
            "open_for_s": self._open_for_s,
            "retry_in_s": retry_in,
            "consecutive_failures": self._consecutive_failures,
        }

    def _open_error(self, retry_in_s: float) -> CircuitOpen:
        if retry_in_s > 0:
            text = f"the gateway breaker is open for another {retry_in_s:.1f} s"
        else:
            text = "the gateway breaker is open while a trial call is under way"
        return CircuitOpen(text, retry_in_s=retry_in_s)
