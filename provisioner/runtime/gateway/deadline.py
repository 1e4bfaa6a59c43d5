"""One call's overall deadline (GW-4), on an injectable monotonic clock."""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.runtime.clock import Clock


@dataclass(frozen=True)
class Deadline:
    """How long a call was given (``given_s``) and when, on ``clock``, that time is up.

    Everything a call does — a catalog read, connecting, a ``Retry-After`` wait, the retry —
    draws on this one deadline, so nothing can stretch it. Messages name ``given_s``, the
    caller's number, not whatever happened to be left when the time ran out.
    """

    given_s: float
    at: float
    clock: Clock

    @classmethod
    def starting_now(cls, given_s: float, clock: Clock) -> Deadline:
        """A deadline of ``given_s`` seconds from now; ``ValueError`` unless it is positive."""
        if not given_s > 0:
            raise ValueError(f"deadline_s must be positive, got {given_s!r}")
        return cls(given_s=given_s, at=clock() + given_s, clock=clock)

    def left_s(self) -> float:
        """Seconds left, never below 0."""
        return max(self.at - self.clock(), 0.0)

    def passed(self) -> bool:
        """Whether no time is left."""
        return self.at - self.clock() <= 0
