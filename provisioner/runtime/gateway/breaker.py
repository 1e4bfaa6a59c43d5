"""The client's own circuit breaker for the gateway (GW-7).

When the gateway is not reached, or a call gets no answer within the caller's deadline, every
session start and every sweep would otherwise wait out its own timeout against a gateway that
is down or stuck. The breaker turns that into an immediate ``CircuitOpen``: it opens for 15 s,
doubles the wait while failures go on (30, 60, … capped at 5 min), and closes on the first
answer. The gateway has a circuit of its own, but it never sees the calls this client gave up
on, so only this one can count them.

After the open period one trial call is let through (half-open); the others keep failing fast
until the trial ends. A trial that fails reopens the breaker for twice as long.

Each call holds an ``Attempt`` from ``before_call`` and settles it once: answered, failed or
abandoned. Only the trial's attempt can settle the trial, so a call that began before the
breaker opened cannot, by failing or being cancelled late, double the period or let a second
trial through.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from provisioner.runtime.clock import Clock
from provisioner.runtime.gateway.errors import CircuitOpen

BREAKER_FIRST_OPEN_S = 15.0  # GW-7: the first opening
BREAKER_MAX_OPEN_S = 300.0  # GW-7: doubling stops at 5 min


class Attempt:
    """One call's ticket through the breaker; the first of its three verdicts counts.

    ``answered()``: the gateway answered, whatever it said. ``failed()``: not reached, or no
    answer in time. ``abandoned()``: the call ended without a verdict (it was cancelled).
    """

    def __init__(self, breaker: Breaker, *, trial: bool, epoch: int) -> None:
        self._breaker = breaker
        self._settled = False
        self.trial = trial
        self.epoch = epoch

    def answered(self) -> None:
        """The gateway answered: the breaker closes."""
        if self._settle():
            self._breaker._answered()

    def failed(self) -> None:
        """The gateway was not reached or did not answer in time."""
        if self._settle():
            self._breaker._failed(self)

    def abandoned(self) -> None:
        """The call ended without a verdict; a trial frees its slot for the next caller."""
        if self._settle():
            self._breaker._abandoned(self)

    def _settle(self) -> bool:
        first = not self._settled
        self._settled = True
        return first


class Breaker:
    """Counts unreachable and unanswered calls and fails fast while they go on.

    ``clock`` is a monotonic clock in seconds (``time.monotonic`` unless a test injects one).
    The breaker never sleeps and never touches the network; the caller asks ``before_call``
    for an ``Attempt`` and settles it when the call ends.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or time.monotonic
        self._open_until: float | None = None
        self._open_for_s = 0.0
        self._trial: Attempt | None = None
        self._epochs = itertools.count(1)
        self._epoch = 0  # changes whenever the breaker opens or closes
        self._consecutive_failures = 0

    @property
    def state(self) -> str:
        """``closed``, ``open`` (failing fast) or ``half-open`` (a trial may go)."""
        if self._open_until is None:
            return "closed"
        if self._clock() < self._open_until:
            return "open"
        return "half-open"

    @property
    def retry_in_s(self) -> float:
        """Seconds until the breaker lets a trial call through (0 when closed or half-open)."""
        if self._open_until is None:
            return 0.0
        return max(0.0, self._open_until - self._clock())

    @property
    def open_for_s(self) -> float:
        """The length of the current (or last) open period, 0 when closed."""
        return self._open_for_s

    @property
    def consecutive_failures(self) -> int:
        """Failures counted since the last answer."""
        return self._consecutive_failures

    @property
    def trial_in_flight(self) -> bool:
        """Whether a half-open trial call is under way."""
        return self._trial is not None

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
        if self._trial is not None:
            raise self._open_error(0.0)

    def before_call(self) -> Attempt:
        """The ``Attempt`` of a call allowed to go, or ``CircuitOpen`` without touching the wire.

        Past the open period the first caller's attempt is the trial; until it is settled,
        others fail fast.
        """
        self.raise_if_open()
        attempt = Attempt(self, trial=self._open_until is not None, epoch=self._epoch)
        if attempt.trial:
            self._trial = attempt
        return attempt

    def snapshot(self) -> dict[str, Any]:
        """The breaker's state for diagnostics (LOOM-4): state, open period, time left, failures."""
        return {
            "state": self.state,
            "open_for_s": self._open_for_s,
            "retry_in_s": self.retry_in_s,
            "consecutive_failures": self._consecutive_failures,
        }

    def _answered(self) -> None:
        if self._open_until is not None:
            self._epoch = next(self._epochs)
        self._open_until = None
        self._open_for_s = 0.0
        self._trial = None
        self._consecutive_failures = 0

    def _failed(self, attempt: Attempt) -> None:
        """Open, or reopen for twice as long after a failed trial.

        A failure of a call that began before the breaker last opened or closed, other than the
        trial, changes nothing: the outage it saw is already counted, or has been answered since.
        """
        if attempt is self._trial:
            self._open_for_s = min(self._open_for_s * 2, BREAKER_MAX_OPEN_S)
        elif self._open_until is None and attempt.epoch == self._epoch:
            self._open_for_s = BREAKER_FIRST_OPEN_S
        else:
            return
        self._consecutive_failures += 1
        self._trial = None
        self._epoch = next(self._epochs)
        self._open_until = self._clock() + self._open_for_s

    def _abandoned(self, attempt: Attempt) -> None:
        if attempt is self._trial:
            self._trial = None

    def _open_error(self, retry_in_s: float) -> CircuitOpen:
        if retry_in_s > 0:
            text = f"the gateway breaker is open for another {retry_in_s:.1f} s"
        else:
            text = "the gateway breaker is open while a trial call is under way"
        return CircuitOpen(text, retry_in_s=retry_in_s)
