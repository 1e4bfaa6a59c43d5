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

A batch counts as sent only when its request left for the gateway: an open breaker, no gateway
URL, no usable catalog, a gateway not reached or arguments refused before the call send
nothing, and the report never counts them (SWEEP-13). ``SweepReport`` is what one sweep did;
``stop_reason`` words why a sweep ended early, without quoting any text the gateway sent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from provisioner.runtime.budget import CUT_TIMEOUT, CUT_TOO_LARGE, BatchBudget
from provisioner.runtime.errors import FileFault, MemoryBackendUnavailable
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    CatalogError,
    CircuitOpen,
    CountsForBreaker,
    GatewayError,
    GatewayUnreachable,
    InternalFault,
    NoAnswer,
    NotNow,
    PolicyRefused,
    RequestTooBig,
    ServerFault,
    ServerNotListed,
)

# Why a sweep ended (SweepReport.stopped).
STOPPED_DONE = "done"  # every session's window was offered
STOPPED_BUSY = "already_running"  # SWEEP-11: another sweep holds the lock
STOPPED_BREAKER = "breaker_open"  # SWEEP-10
STOPPED_NO_ANSWER = "no_answer"  # SWEEP-10
STOPPED_UNREACHABLE = "unreachable"  # SWEEP-10
STOPPED_UNAVAILABLE = "unavailable"  # no gateway, no catalog, no ``loom``, policy refusal
STOPPED_SOURCE = "source_failed"  # SWEEP-12: the transcript source cannot list its sessions
STOPPED_STATE = "state_failed"  # REL-2: the state file could not be read or written
# SWEEP-13: the stops that mean memory could not be reached at all (exit status 75)
UNREACHED_STOPS = frozenset(
    {STOPPED_BREAKER, STOPPED_NO_ANSWER, STOPPED_UNREACHABLE, STOPPED_UNAVAILABLE}
)

# Error kinds the sweep names itself, beside the classes of failed calls (SWEEP-12).
REFUSED_KIND = "ValueError"  # a refused message waits at its window's end: what Loom would refuse
BAD_SESSION_ID_KIND = "BadSessionId"  # the source listed a session id that is no text
NOTHING_TAKEN_KIND = "NothingTaken"  # Loom answered a batch but took none of its messages


@dataclass
class SweepReport:
    """What one sweep did (also what ``nerve memory sweep --json`` prints).

    ``stopped`` says why it ended: ``done`` (every window offered), ``already_running``,
    ``breaker_open``, ``no_answer``, ``unreachable``, ``unavailable``, ``source_failed`` or
    ``state_failed``; ``reason`` words an early end (``stop_reason``), and is empty after
    ``done``. ``fault_kind`` and ``fault_path`` name a file that could not be used (REL-2:
    busy, full, read_only, permission, io or damaged, ``provisioner.runtime.errors.FileFault``)
    when that is what ended the sweep; every watermark stands where the last batch Loom took
    left it.
    ``batches_sent`` counts requests that left for the gateway, ``batches_failed`` those of
    them that did not go through, ``windows_stopped`` the windows due that stopped short for
    any failure (SWEEP-13). ``errors`` lists failed calls, windows the source could not give
    and refused messages left waiting, as ``{"session_id", "kind"}``: kinds only (never an
    error's text). ``follow_up`` is what the queued follow-up did, when it ran (SWEEP-15).
    """

    mode: str
    sessions_seen: int = 0
    sessions_swept: int = 0
    batches_sent: int = 0
    batches_failed: int = 0
    windows_stopped: int = 0
    messages_taken: int = 0
    messages_skipped: int = 0
    messages_cut: int = 0
    budget_messages: int = 0
    budget_bytes: int = 0
    budget_cut_reason: str | None = None
    stopped: str = STOPPED_DONE
    reason: str = ""
    errors: list[dict[str, str]] = field(default_factory=list)
    sessions_realigned: int = 0  # NERVE-3: watermarks moved back to a source that went back
    follow_up: dict[str, int] | None = None  # SWEEP-15: the follow-up's counts (FollowUpTally)
    fault_kind: str | None = None  # REL-2: the kind of file fault that ended the sweep
    fault_path: str | None = None  # REL-2: the file it was met on

    def note_error(self, session_id: str, kind: str) -> None:
        self.errors.append({"session_id": session_id, "kind": kind})

    def note_fault(self, fault: FileFault, stopped: str) -> None:
        """The sweep ended on a file that could not be used (REL-2): named with its cause."""
        self.stopped = stopped
        self.reason = str(fault)
        self.fault_kind = fault.kind
        self.fault_path = fault.path

    def note_budget(self, budget: BatchBudget) -> None:
        self.budget_messages = budget.messages
        self.budget_bytes = budget.bytes
        self.budget_cut_reason = budget.cut_reason

    @property
    def went_through(self) -> bool:
        """Whether every window due went through (or none was due): SWEEP-13's status 0."""
        clean = not (self.batches_failed or self.windows_stopped)
        return self.stopped == STOPPED_DONE and clean

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Reaction:
    """What one failed call leads to.

    ``ends_sweep`` names why the whole sweep ends (None: only this window stops);
    ``cut`` is the budget cut reason to apply (None: no cut); ``counts_against_batch`` is
    True only for Loom's uncoded internal error (SWEEP-8); ``sent`` is False when the request
    never left for the gateway (SWEEP-13).
    """

    ends_sweep: str | None = None
    cut: str | None = None
    counts_against_batch: bool = False
    sent: bool = True


def reaction_to(error: Exception) -> Reaction:
    """The sweep's reaction to ``error`` raised by an extraction call."""
    if isinstance(error, CircuitOpen):
        return Reaction(ends_sweep=STOPPED_BREAKER, sent=False)
    if isinstance(error, CountsForBreaker):
        if isinstance(error, NoAnswer):
            return Reaction(ends_sweep=STOPPED_NO_ANSWER, cut=CUT_TIMEOUT)
        return Reaction(ends_sweep=STOPPED_UNREACHABLE, sent=False)
    if isinstance(error, RequestTooBig):
        return Reaction(cut=CUT_TOO_LARGE if isinstance(error, BodyTooLarge) else CUT_TIMEOUT)
    if isinstance(error, InternalFault):
        return Reaction(counts_against_batch=True)
    if isinstance(error, NotNow):
        return Reaction()
    if isinstance(error, PolicyRefused):
        return Reaction(ends_sweep=STOPPED_UNAVAILABLE)
    if isinstance(error, CatalogError | MemoryBackendUnavailable):
        return Reaction(ends_sweep=STOPPED_UNAVAILABLE, sent=False)
    if isinstance(error, GatewayError):
        return Reaction()
    return Reaction(sent=False)  # ValueError: refused before any call


def stop_reason(error: Exception, wall_now: float) -> str:
    """Why ``error`` ended the sweep, in a few words for the report's one line (SWEEP-13).

    Fixed wording per outcome, never the error's own message (a gateway may echo request text
    in it). ``wall_now`` (seconds since the epoch) dates an open breaker's end.
    """
    if isinstance(error, CircuitOpen):
        return f"breaker open until {_utc(wall_now + max(error.retry_in_s, 0.0))}"
    if isinstance(error, NoAnswer):
        deadline = f" within {error.deadline_s:g} s" if error.deadline_s else ""
        return f"no answer{deadline}"
    if isinstance(error, GatewayUnreachable):
        return "not reached"
    if isinstance(error, ServerNotListed):
        return "the catalog lists no loom"
    if isinstance(error, CatalogError):
        if error.reason == "unreachable":
            return "not reached"  # its catalog could not be fetched
        return f"the catalog could not be read ({error.reason})"
    if isinstance(error, PolicyRefused):
        return "its policy refused the extraction"
    if isinstance(error, MemoryBackendUnavailable):
        no_url = "mcp_gateway_url" in str(error)  # LoomMemory built without a gateway
        return "no mcp_gateway_url is set" if no_url else "memory is unavailable"
    return error_kind(error)


def _utc(when: float) -> str:
    """``when`` as ISO 8601 in UTC to the second; ``?`` for a time that cannot be shown."""
    try:
        return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return "?"


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


@dataclass(frozen=True)
class SweepProgress:
    """Where a sweep is: told after each session, and as each batch goes out and comes back.

    ``session_id`` and ``batch`` (its number in the session's window, from 1) name the batch
    while ``waiting`` is True: it went out and Loom has not answered yet, for up to
    ``EXTRACT_DEADLINE_S``. A progress line that times the wait makes a hung Loom look like
    one, not like a frozen sweep. ``in_flight`` is how many sessions' windows are under way
    (SWEEP-14): each window's batches are told on their own, in whatever order they go.
    """

    sessions_done: int
    sessions_total: int
    messages_taken: int
    budget: BatchBudget
    session_id: str | None = None
    batch: int = 0
    waiting: bool = False
    in_flight: int = 0
