"""What the sweep does after an extraction call failed, decided by the outcome's group (GW-5).

Only the groups of ``provisioner.runtime.gateway.errors`` are branched on, plus the two classes the
specification names on their own (an open breaker; Loom's uncoded internal error). The order
matters: ``GatewayCallTimeout`` is both "not now" and "too big", and its budget cut wins;
``CircuitOpen`` is "not now" but ends the whole sweep.

* ``CircuitOpen``: the sweep ends at once (SWEEP-10);
* ``CountsForBreaker``: the sweep ends at once (SWEEP-10); ``NoAnswer`` (the client's own
  deadline) also halves the budget (SWEEP-5);
* ``RequestTooBig`` (413, the gateway's call limit): the budget halves, the window goes again
  with the next sweep (SWEEP-5);
* ``InternalFault`` (uncoded): counts against the batch (SWEEP-8);
* ``NotNow`` (coded faults, conditions that may pass): the window stops, nothing is counted
  (SWEEP-7);
* catalog errors, policy refusals, backend unavailable: the sweep ends, since every other
  session would meet the same;
* ``ValueError`` (arguments Loom refuses, no call made) and anything else (a broken answer, a
  tool that refused): the window stops, nothing is counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from provisioner.runtime.budget import CUT_TIMEOUT, CUT_TOO_LARGE
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    CatalogError,
    CircuitOpen,
    CountsForBreaker,
    GatewayError,
    InternalFault,
    NoAnswer,
    NotNow,
    PolicyRefused,
    RequestTooBig,
    ServerFault,
)
from provisioner.runtime.memory_contract import MemoryBackendUnavailable

# Why a sweep ended (SweepReport.stopped).
STOPPED_DONE = "done"  # every session's window was offered
STOPPED_BUSY = "already_running"  # SWEEP-11: another sweep holds the lock
STOPPED_BREAKER = "breaker_open"  # SWEEP-10
STOPPED_NO_ANSWER = "no_answer"  # SWEEP-10
STOPPED_UNREACHABLE = "unreachable"  # SWEEP-10
STOPPED_UNAVAILABLE = "unavailable"  # no gateway, no catalog, no ``loom``, policy refusal
STOPPED_SOURCE = "source_failed"  # SWEEP-12: the transcript source cannot list its sessions

# Error kinds the sweep names itself, beside the classes of failed calls (SWEEP-12).
REFUSED_KIND = "ValueError"  # a refused message waits at its window's end: what Loom would refuse
BAD_SESSION_ID_KIND = "BadSessionId"  # the source listed a session id that is no text


@dataclass(frozen=True)
class Reaction:
    """What one failed call leads to.

    ``ends_sweep`` names why the whole sweep ends (None: only this window stops);
    ``cut`` is the budget cut reason to apply (None: no cut); ``counts_against_batch`` is
    True only for Loom's uncoded internal error (SWEEP-8).
    """

    ends_sweep: str | None = None
    cut: str | None = None
    counts_against_batch: bool = False


def reaction_to(error: Exception) -> Reaction:
    """The sweep's reaction to ``error`` raised by an extraction call."""
    if isinstance(error, CircuitOpen):
        return Reaction(ends_sweep=STOPPED_BREAKER)
    if isinstance(error, CountsForBreaker):
        if isinstance(error, NoAnswer):
            return Reaction(ends_sweep=STOPPED_NO_ANSWER, cut=CUT_TIMEOUT)
        return Reaction(ends_sweep=STOPPED_UNREACHABLE)
    if isinstance(error, RequestTooBig):
        return Reaction(cut=CUT_TOO_LARGE if isinstance(error, BodyTooLarge) else CUT_TIMEOUT)
    if isinstance(error, InternalFault):
        return Reaction(counts_against_batch=True)
    if isinstance(error, NotNow):
        return Reaction()
    if isinstance(error, CatalogError | PolicyRefused | MemoryBackendUnavailable):
        return Reaction(ends_sweep=STOPPED_UNAVAILABLE)
    return Reaction()


def error_kind(error: Exception) -> str:
    """A short name of ``error`` for reports and logs: its class, and a fault's code.

    The error's own message is left out on purpose: a gateway may echo request text in it,
    and nothing of a message's text may reach a report or a log.
    """
    kind = type(error).__name__
    if isinstance(error, ServerFault) and error.code:
        return f"{kind}({error.code})"
    return kind


SWEEP_ERRORS: tuple[type[Exception], ...] = (GatewayError, MemoryBackendUnavailable, ValueError)
"""What an extraction call may raise that the sweep handles; anything else is a bug.

``ValueError`` is ``LoomMemory.extract`` refusing arguments Loom would refuse (a session id too
long) before any call: that session's window cannot go, the others still can, and the report
names the session. A message Loom would refuse never gets this far: the sweep refuses it as it
reads it (SWEEP-12).
"""
