"""How much one extraction call may carry, and how that shrinks and grows back (SWEEP-3…SWEEP-6).

A batch budget is a number of messages and a number of request-body bytes. An extraction mode
(``ExtractionMode``) is a batch limit: whether Loom answers a batch at once (waiting, SWEEP-3)
or queues it (queued, SWEEP-4), and the most one call may carry. Each mode's budget starts
from those limits (``WAITING``: 100 messages in 128 KiB; ``QUEUED``: 400 in 768 KiB). When the
gateway refuses a body as too large (413), gives up after its call limit, or the client's own
deadline passes with no answer, the budget halves, messages and bytes, never below 10 messages
in 16 KiB. A cut made by a timeout grows back, doubling toward the default, after ten batches
in a row went through; a cut made by a body too large stays, since the gateway's body limit
does not change by itself.

Context turns sent with a batch come out of the same budget (SWEEP-6): they get a fixed share
of it, which shrinks as the budget does, so a budget at its minimum still leaves room for the
batch itself.

``BatchBudget`` is a plain frozen value; ``StateStore`` keeps it across sweeps and restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

KIB = 1024

WAITING_MAX_MESSAGES = 100  # SWEEP-3
WAITING_MAX_BYTES = 128 * KIB  # SWEEP-3
QUEUED_MAX_MESSAGES = 400  # SWEEP-4
QUEUED_MAX_BYTES = 768 * KIB  # SWEEP-4
MIN_MESSAGES = 10  # SWEEP-5: the budget never halves below this
MIN_BYTES = 16 * KIB  # SWEEP-5
GOOD_BATCHES_TO_GROW = 10  # SWEEP-5: a timeout cut grows back after this many in a row
CONTEXT_SHARE_DIVISOR = 8  # SWEEP-6 (our choice of share): context gets 1/8 of the budget

CUT_TOO_LARGE = "too_large"  # SWEEP-5: a 413 cut; stays
CUT_TIMEOUT = "timeout"  # SWEEP-5: the gateway's call limit or the client's own deadline


@dataclass(frozen=True)
class BatchBudget:
    """The current limits of one extraction mode, and why they were cut.

    ``cut_reason`` is None at the default, ``CUT_TIMEOUT`` or ``CUT_TOO_LARGE`` below it (a
    budget once cut for a body too large keeps that reason: it never grows back).
    ``good_streak`` counts batches in a row that went through since the last change.
    """

    messages: int
    bytes: int
    default_messages: int
    default_bytes: int
    cut_reason: str | None = None
    good_streak: int = 0

    @classmethod
    def default(cls, messages: int, max_bytes: int) -> BatchBudget:
        """A budget at a mode's default limits."""
        return cls(messages, max_bytes, messages, max_bytes)

    @property
    def at_default(self) -> bool:
        return self.messages >= self.default_messages and self.bytes >= self.default_bytes

    @property
    def at_minimum(self) -> bool:
        return self.messages <= MIN_MESSAGES and self.bytes <= MIN_BYTES

    @property
    def context_messages(self) -> int:
        """How many context turns a batch may carry (SWEEP-6); at least one."""
        return max(1, self.messages // CONTEXT_SHARE_DIVISOR)

    @property
    def context_bytes(self) -> int:
        """How many bytes of the body the context turns may take (SWEEP-6)."""
        return self.bytes // CONTEXT_SHARE_DIVISOR

    def halved(self, reason: str) -> BatchBudget:
        """The budget after a 413 (``CUT_TOO_LARGE``) or a timeout (``CUT_TIMEOUT``) (SWEEP-5).

        A too-large cut is sticky: halving a budget already cut for size keeps that reason.
        """
        sticky = CUT_TOO_LARGE if CUT_TOO_LARGE in (reason, self.cut_reason) else reason
        return replace(
            self,
            messages=max(MIN_MESSAGES, self.messages // 2),
            bytes=max(MIN_BYTES, self.bytes // 2),
            cut_reason=sticky,
            good_streak=0,
        )

    def after_good_batch(self) -> BatchBudget:
        """The budget after one batch went through: a timeout cut doubles every tenth time."""
        streak = self.good_streak + 1
        if self.cut_reason != CUT_TIMEOUT or streak < GOOD_BATCHES_TO_GROW:
            return replace(self, good_streak=streak)
        grown = replace(
            self,
            messages=min(self.default_messages, self.messages * 2),
            bytes=min(self.default_bytes, self.bytes * 2),
            good_streak=0,
        )
        return replace(grown, cut_reason=None) if grown.at_default else grown

    def as_dict(self) -> dict[str, object]:
        """The budget for diagnostics (LOOM-4): limits, defaults and why it was cut."""
        return {
            "messages": self.messages,
            "bytes": self.bytes,
            "default_messages": self.default_messages,
            "default_bytes": self.default_bytes,
            "cut_reason": self.cut_reason,
        }

    def describe(self) -> str:
        """``"100 messages / 128 KiB"``, with the cut reason when there is one."""
        text = f"{self.messages} messages / {self.bytes // KIB} KiB"
        return f"{text} (cut: {self.cut_reason})" if self.cut_reason else text


@dataclass(frozen=True)
class ExtractionMode:
    """Waiting (SWEEP-3) or queued (SWEEP-4) extraction, with its batch limits."""

    name: str
    defer: bool
    max_messages: int
    max_bytes: int

    def default_budget(self) -> BatchBudget:
        """The budget at this mode's limits: where it starts, and what a cut grows back to."""
        return BatchBudget.default(self.max_messages, self.max_bytes)


WAITING = ExtractionMode("waiting", False, WAITING_MAX_MESSAGES, WAITING_MAX_BYTES)  # SWEEP-3
QUEUED = ExtractionMode("queued", True, QUEUED_MAX_MESSAGES, QUEUED_MAX_BYTES)  # SWEEP-4


def extraction_mode(defer_extraction: bool) -> ExtractionMode:
    """The mode ``memory.loom.defer_extraction`` asks for (SWEEP-3, SWEEP-4, SWEEP-15).

    Waiting is the default: a batch Loom fails fails the call, and the watermark stays.
    Queued hands batches over with ``defer: true``; Loom extracts them later, with tries of
    its own out of sight. Where the catalog lists ``loom_op``, each queued batch is followed
    up (``sweep.followup``): ``memory.extraction_status_mine`` says how it stands, the watermark
    moves only once it is written, a failed one is queued again once with
    ``memory.extraction_retry_mine``, and after that its window is sent in waiting mode.
    Without ``loom_op`` the watermark moves when Loom queues a batch, so a batch Loom's own
    tries fail is lost (the audit log names each queued batch; ``nerve doctor`` warns).
    """
    return QUEUED if defer_extraction else WAITING
