"""Which fault the dev gateway plays on a call: a spec of rules, drawn per call from a seed.

A spec is a comma-separated list of rules ``NAME[:ARG][@TOOL][=PROBABILITY]``. For each call
the rules are tried in order; a rule applies when its tool (if named) is the one called and its
condition (``too-large:BYTES``, ``fail-text:TEXT``) holds, and then plays with its probability
(default 1), drawn from a random generator seeded with ``--seed``: the same seed and the same
calls give the same faults. The first rule that plays decides the answer; none plays → Loom
answers. ``latency`` and ``queue`` decide no answer: when Loom answers, the first latency rule
that plays makes that answer wait (a fault that plays answers at once, as a gateway's refusal
does), and when Loom answers a status call about its queue (SWEEP-15), the first ``queue``
rule that plays for a batch still in the queue moves that batch to its state, drawn per batch
(``failed`` writes nothing of it). The names cover every row of contracts/gateway.md, a slow
Loom and a queue whose batches fail:

========================  ==============================================================
``policy``                JSON-RPC -32001: the gateway's policy refused the call
``may-pass``              JSON-RPC -32002: upstream unavailable, a limit, an open circuit
``coded[:CODE]``          JSON-RPC -32000 with ``data.code`` (default BACKEND_UNAVAILABLE)
``uncoded``               JSON-RPC -32000 without a code: Loom's internal error
``fail-text:TEXT``        ``uncoded``, only for calls whose arguments contain TEXT
``call-limit``            the gateway's call limit: an error "MCP server timed out"
``too-large[:BYTES]``     HTTP 413, for every body or only for bodies over BYTES
``429[:SECONDS]``         HTTP 429 with ``Retry-After`` (default 1)
``502`` ``503`` ``504``   that HTTP status
``hang``                  no answer at all until the caller gives up
``trickle``               an event stream of keep-alive pings that never brings the answer
``cut``                   an event stream cut off in the middle of the answer
``reset``                 the connection reset before any answer
``latency:SECONDS``       Loom's own answer comes SECONDS later (up to 600, e.g. ``0.5``)
``queue:STATE``           a queued batch moves to STATE (queued, running, done, failed)
========================  ==============================================================

Examples: ``policy@loom_context_pack`` (the pack refused, the search fallback answered),
``503=0.2,hang=0.05`` (a flaky gateway), ``too-large:16384`` (a 16 KiB body limit),
``latency:1@loom_memory_set_from_messages,429=0.2`` (Loom spends a second on every extraction,
and the gateway turns a fifth of the calls away at once: a backlog swept concurrently,
SWEEP-14), ``queue:failed=0.3`` (Loom fails three queued batches in ten, replays
included, SWEEP-15).

``FaultPlan.decide`` says both what answers and how long Loom's answer waits; the app plays
the wait only for Loom's own answer, and ends it early when the caller goes away.
"""

from __future__ import annotations

import random
import re
import threading
from dataclasses import dataclass

from provisioner.base.errors import UserError

FAULT_NAMES = (
    "policy",
    "may-pass",
    "coded",
    "uncoded",
    "fail-text",
    "call-limit",
    "too-large",
    "429",
    "502",
    "503",
    "504",
    "hang",
    "trickle",
    "cut",
    "reset",
    "latency",
    "queue",
)
LATENCY = "latency"  # the rule that delays Loom's answer instead of deciding it
QUEUE_STATUS = "queue"  # the rule that moves a queued batch instead of deciding an answer
QUEUE_STATES = ("queued", "running", "done", "failed")  # SWEEP-15: what a status may say
NOT_ANSWERING = frozenset({LATENCY, QUEUE_STATUS})  # rules that decide no answer of their own
# What each fault's argument is, as help and error lines write it; a fault not named here
# takes none.
ARGUMENT_NAMES = {
    "coded": "CODE",
    "fail-text": "TEXT",
    "too-large": "BYTES",
    "429": "SECONDS",
    LATENCY: "SECONDS",
    QUEUE_STATUS: "STATE",
}
ARGUMENT_REQUIRED = frozenset({"fail-text", LATENCY, QUEUE_STATUS})
ARGUMENT_ALLOWED = frozenset(ARGUMENT_NAMES)
DEFAULT_FAULT_CODE = "BACKEND_UNAVAILABLE"
DEFAULT_RETRY_AFTER_S = 1
COUNT_MAX_DIGITS = 30  # our choice: far past any body size or Retry-After worth a test
RULE_SHOWN_MAX_CHARS = 80  # our choice: how much of a bad rule its error line quotes
LATENCY_MAX_S = 600.0  # our choice: as long as a hanging answer lasts in the dev gateway
# our choice: seconds as ASCII digits, at most three decimals (0.001 s is finer than needed)
LATENCY_PATTERN = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3})?", re.ASCII)


class FaultSpecError(UserError, ValueError):
    """A fault spec that cannot be read; the message is one line naming the rule."""


@dataclass(frozen=True)
class FaultRule:
    """One rule of a spec."""

    name: str
    argument: str | None = None
    tool: str | None = None
    probability: float = 1.0

    def applies_to(self, tool: str, body: bytes) -> bool:
        """Whether this rule may play on a call of ``tool`` with request ``body``."""
        if self.tool is not None and self.tool != tool:
            return False
        if self.name == "too-large" and self.argument is not None:
            return len(body) > int(self.argument)
        if self.name == "fail-text":
            return (self.argument or "").encode() in body
        return True

    @property
    def delay_s(self) -> float:
        """How long a ``latency`` rule makes Loom's answer wait; 0 for every other rule."""
        if self.name != LATENCY or self.argument is None:
            return 0.0
        return float(self.argument)

    def __str__(self) -> str:
        text = self.name
        if self.argument is not None:
            text += f":{self.argument}"
        if self.tool is not None:
            text += f"@{self.tool}"
        if self.probability != 1.0:
            text += f"={self.probability:g}"
        return text


@dataclass(frozen=True)
class FaultDecision:
    """What answers one call: ``rule``, the fault that plays (None: Loom answers), and
    ``delay_s``, how long Loom's own answer waits first (always 0 when a fault plays)."""

    rule: FaultRule | None = None
    delay_s: float = 0.0


def fault_usage() -> tuple[str, ...]:
    """Every fault as a rule writes it (``coded[:CODE]``, ``latency:SECONDS``), in
    ``FAULT_NAMES`` order: what ``nerve dev gateway --help`` lists."""
    written = []
    for name in FAULT_NAMES:
        argument = ARGUMENT_NAMES.get(name)
        if argument is None:
            written.append(name)
        elif name in ARGUMENT_REQUIRED:
            written.append(f"{name}:{argument}")
        else:
            written.append(f"{name}[:{argument}]")
    return tuple(written)


def parse_fault_spec(spec: str) -> tuple[FaultRule, ...]:
    """The rules of ``spec`` (empty for an empty spec); ``FaultSpecError`` on a bad rule.

    Everything a rule holds is checked here, once, so that a spec taken in force can be played
    on every call without failing: a rule that would only break when a call comes (a count
    Python cannot turn into a number, text that cannot be encoded) is refused now.
    """
    return tuple(_parse_rule(part.strip()) for part in spec.split(",") if part.strip())


def _parse_rule(text: str) -> FaultRule:
    if not _is_unicode_text(text):
        raise FaultSpecError(
            f"fault rule {_shown(text)}: holds a lone surrogate, which is not Unicode text"
        )
    body, _, probability_text = text.partition("=")
    body, at, tool = body.partition("@")
    if at and not tool.strip():
        raise FaultSpecError(
            f"fault rule {_shown(text)}: names no tool after '@'; expected NAME@TOOL, "
            "or NAME alone for every tool"
        )
    name, colon, argument = body.partition(":")
    if name not in FAULT_NAMES:
        raise FaultSpecError(
            f"fault rule {_shown(text)}: unknown fault {_shown(name)}; "
            f"expected one of {', '.join(FAULT_NAMES)}"
        )
    if colon and name not in ARGUMENT_ALLOWED:
        raise FaultSpecError(f"fault rule {_shown(text)}: {name} takes no argument")
    if not colon and name in ARGUMENT_REQUIRED:
        raise FaultSpecError(
            f"fault rule {_shown(text)}: {name} needs an argument ({name}:{ARGUMENT_NAMES[name]})"
        )
    if name in ("too-large", "429") and colon and not _is_count(argument):
        raise FaultSpecError(
            f"fault rule {_shown(text)}: {name} takes a whole number of ASCII digits 0-9 "
            f"(at most {COUNT_MAX_DIGITS})"
        )
    if name == LATENCY and not _is_latency(argument):
        raise FaultSpecError(
            f"fault rule {_shown(text)}: latency takes seconds above 0 and at most "
            f"{LATENCY_MAX_S:g}, in ASCII digits with at most three decimals (latency:1.5)"
        )
    if name == QUEUE_STATUS and argument not in QUEUE_STATES:
        raise FaultSpecError(
            f"fault rule {_shown(text)}: queue takes one of {', '.join(QUEUE_STATES)}"
        )
    return FaultRule(
        name=name,
        argument=argument if colon else None,
        tool=tool or None,
        probability=_probability(text, probability_text),
    )


def _shown(text: str) -> str:
    """``text`` quoted for an error line, cut so that a huge rule cannot flood it."""
    if len(text) <= RULE_SHOWN_MAX_CHARS:
        return repr(text)
    return repr(text[:RULE_SHOWN_MAX_CHARS]) + "…"


def _is_unicode_text(text: str) -> bool:
    """Whether ``text`` can be encoded: a lone surrogate (``\\ud800``) cannot be sent or logged."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes ``²`` and ``٣``, which ``int`` refuses."""
    return 0 < len(text) <= COUNT_MAX_DIGITS and text.isascii() and text.isdigit()


def _is_latency(text: str) -> bool:
    """Seconds a latency rule may take: ``1``, ``0.25``, up to ``LATENCY_MAX_S``, above 0."""
    return LATENCY_PATTERN.fullmatch(text) is not None and 0.0 < float(text) <= LATENCY_MAX_S


def _probability(rule: str, text: str) -> float:
    if not text:
        return 1.0
    try:
        value = float(text) if text.isascii() else -1.0
    except ValueError:
        value = -1.0
    if not 0.0 < value <= 1.0:
        raise FaultSpecError(
            f"fault rule {_shown(rule)}: probability must be in (0, 1], got {_shown(text)}"
        )
    return value


class FaultPlan:
    """The rules in force and the seeded draw; switchable while the gateway runs."""

    def __init__(self, spec: str = "", *, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules = parse_fault_spec(spec)
        self._random = random.Random(seed)
        self._seed = seed

    @property
    def spec(self) -> str:
        """The rules in force, written as a spec."""
        return ",".join(str(rule) for rule in self._rules)

    @property
    def seed(self) -> int:
        return self._seed

    def switch(self, spec: str, *, seed: int | None = None) -> None:
        """Put ``spec`` in force (``FaultSpecError`` leaves the old one); reseed if asked."""
        rules = parse_fault_spec(spec)
        with self._lock:
            self._rules = rules
            if seed is not None:
                self._seed = seed
                self._random = random.Random(seed)

    def decide(self, tool: str, body: bytes) -> FaultDecision:
        """What answers this call, and how long Loom's own answer waits.

        The answering rules are drawn first, in order, as they always were (a spec without
        ``latency`` draws exactly the same faults from the same seed); only when none plays
        are the ``latency`` rules drawn, the first that plays giving the wait.
        """
        with self._lock:
            for rule in self._rules:
                if rule.name not in NOT_ANSWERING and self._plays(rule, tool, body):
                    return FaultDecision(rule)
            for rule in self._rules:
                if rule.name == LATENCY and self._plays(rule, tool, body):
                    return FaultDecision(None, rule.delay_s)
        return FaultDecision()

    def queue_state(self, tool: str) -> str | None:
        """The state the first ``queue`` rule that plays gives one queued batch a
        status call of ``tool`` names, or None (the batch moves on as Loom moves it)."""
        with self._lock:
            for rule in self._rules:
                if rule.name == QUEUE_STATUS and self._plays(rule, tool, b""):
                    return rule.argument
        return None

    def choose(self, tool: str, body: bytes) -> FaultRule | None:
        """The fault that answers this call, or None for Loom's own answer (never a
        ``latency`` rule: it decides no answer; ``decide`` gives its wait)."""
        return self.decide(tool, body).rule

    def _plays(self, rule: FaultRule, tool: str, body: bytes) -> bool:
        return rule.applies_to(tool, body) and self._random.random() < rule.probability
