"""Random fault schedules against the sweep's invariants (SWEEP-2, SWEEP-7…SWEEP-10).

Each schedule (one seed) builds a few sessions with planted poison messages, runs a stretch of
sweeps under faults, then sweeps with the faults gone until every window is empty. The
invariants, checked after every sweep and at the end:

* the watermark of a session never decreases, and every message at or below it was taken by
  Loom or skipped with an audit row (it never passes a message Loom did not take);
* no message Loom took is sent again, except those of a call whose answer was lost;
* at the end, every message is taken or skipped with an audit row, and only planted poison is
  skipped.

Faults are drawn per call from every "not now", "too big" and "no answer" outcome, lost answers
and interruptions; Loom's uncoded internal error is drawn per sweep (a Loom failing every
batch), since a single uncoded failure is, by design, indistinguishable from a poison message
(SWEEP-8). ``SWEEP_PROPERTY_SCHEDULES`` sets the number of schedules (300 by default);
``SWEEP_PROPERTY_SEED`` runs one seed alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
from dataclasses import dataclass, field

import pytest

from provisioner.runtime.budget import QUEUED, WAITING
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CircuitOpen,
    CodedFault,
    GatewayCallTimeout,
    GatewayUnreachable,
    InternalFault,
    MayPass,
    NoAnswer,
    ToolRefused,
)
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import LOST, FakeLoom
from tests.support.clock import fixed_clock

SCHEDULES = int(os.environ.get("SWEEP_PROPERTY_SCHEDULES", "300"))
ONE_SEED = os.environ.get("SWEEP_PROPERTY_SEED")
CLEAN_SWEEPS_MAX = 80


class Interrupted(BaseException):
    """The process stopping in the middle of a call (like a cancellation)."""


def per_call_faults() -> list[object]:
    return [
        MayPass("upstream unavailable"),
        CodedFault("db down", code="BACKEND_UNAVAILABLE"),
        CodedFault("busy", code="GRANT_BUSY"),
        GatewayCallTimeout("MCP server timed out"),
        BodyTooLarge("413"),
        NoAnswer("no answer", deadline_s=130),
        GatewayUnreachable("refused"),
        CircuitOpen("open", retry_in_s=15),
        BrokenAnswer("cut"),
        ToolRefused("refused"),
        LOST,
        Interrupted(),
    ]


@dataclass
class World:
    rng: random.Random
    transcripts: SqliteTranscripts
    poison: set[int] = field(default_factory=set)
    session_of: dict[int, str] = field(default_factory=dict)

    def add(self, session: str, count: int, poison_rate: float) -> None:
        """Messages for ``session``; poison never third in a row and never last."""
        run = 0
        for index in range(count):
            poisoned = index < count - 1 and run < 2 and self.rng.random() < poison_rate
            run = run + 1 if poisoned else 0
            content = f"{'POISON ' if poisoned else ''}{session} {index} " + "x" * self.rng.choice(
                (10, 200, 3000)
            )
            message_id = self.transcripts.add_message(
                session, self.rng.choice(("user", "assistant")), content, "2026-11-30T10:00:00Z"
            )
            self.session_of[message_id] = session
            if poisoned:
                self.poison.add(message_id)


class Checker:
    """The invariants, checked after each sweep."""

    def __init__(self, world: World, loom: FakeLoom, state: StateStore, seed: int) -> None:
        self.world, self.loom, self.state, self.seed = world, loom, state, seed
        self.watermarks: dict[str, int] = {}

    def skipped(self) -> set[object]:
        rows = self.state.audit()
        return {row["message_id"] for row in rows if row["kind"] == "skipped"}

    def after_sweep(self) -> None:
        skipped = self.skipped()
        lost = {i for call in self.loom.calls if call.outcome == "lost" for i in call.message_ids}
        for message_id, times in self.loom.taken.items():
            assert times == 1 or message_id in lost, f"seed {self.seed}: {message_id} resent"
        assert skipped <= self.world.poison, f"seed {self.seed}: good message skipped"
        for session in set(self.world.session_of.values()):
            mark = self.state.watermark(session)
            assert mark >= self.watermarks.get(session, 0), f"seed {self.seed}: watermark back"
            self.watermarks[session] = mark
            for message_id, owner in self.world.session_of.items():
                if owner == session and message_id <= mark:
                    assert message_id in self.loom.taken or message_id in skipped, (
                        f"seed {self.seed}: watermark of {session} passed {message_id}"
                    )

    def at_end(self) -> None:
        skipped = self.skipped()
        assert skipped == self.world.poison, f"seed {self.seed}: poison not all skipped"
        assert set(self.loom.taken) | skipped == set(self.world.session_of), (
            f"seed {self.seed}: messages neither taken nor skipped"
        )


def fault_plan(rng: random.Random, loom: FakeLoom) -> None:
    """Loom's behaviour for one sweep of the fault stretch."""
    loom.fail_every_batch = None
    loom.fault_for_call = None
    loom.accept_limit = rng.choice((None, None, None, 0, 1, 7, 40))
    mode = rng.random()
    if mode < 0.15:
        loom.fail_every_batch = InternalFault("internal error")
    elif mode < 0.25:
        loom.fail_every_batch = CodedFault("db down", code="BACKEND_UNAVAILABLE")
    elif mode < 0.75:
        rate = rng.uniform(0.1, 0.6)
        faults = per_call_faults()
        loom.fault_for_call = lambda _n: rng.choice(faults) if rng.random() < rate else None


async def run_schedule(seed: int) -> None:
    rng = random.Random(seed)
    transcripts, state = SqliteTranscripts(":memory:"), StateStore(":memory:")
    world = World(rng, transcripts)
    sessions = [f"s{n}" for n in range(rng.randint(1, 4))]
    for _ in range(rng.randint(1, 4)):
        world.add(rng.choice(sessions), rng.randint(1, 120), rng.choice((0.0, 0.01, 0.05)))
    loom = FakeLoom()
    mode = rng.choice((WAITING, WAITING, WAITING, QUEUED))
    sweeper = Sweeper(loom, transcripts, state, clock=fixed_clock, mode=mode)
    checker = Checker(world, loom, state, seed)
    for _ in range(rng.randint(3, 25)):
        fault_plan(rng, loom)
        if rng.random() < 0.2:
            world.add(rng.choice(sessions), rng.randint(1, 30), 0.05)
        with contextlib.suppress(Interrupted):
            await sweeper.run_once()
        checker.after_sweep()
    loom.fail_every_batch = loom.fault_for_call = loom.accept_limit = None
    for _ in range(CLEAN_SWEEPS_MAX):
        report = await sweeper.run_once()
        checker.after_sweep()
        if report.batches_sent == 0:
            break
    checker.at_end()
    transcripts.close()
    state.close()


def seeds() -> list[int]:
    return [int(ONE_SEED)] if ONE_SEED else list(range(SCHEDULES))


class TestRandomFaultSchedules:
    @pytest.mark.slow
    def test_every_message_is_taken_or_skipped_and_only_poison_is_skipped(self) -> None:
        """SWEEP-2, SWEEP-7…SWEEP-10: the invariants hold for every schedule."""
        for seed in seeds():
            asyncio.run(run_schedule(seed))
