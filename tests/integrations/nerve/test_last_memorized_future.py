"""A future time never strips a message (REL-6, NERVE-3).

Nerve's retention compaction strips the blocks of messages older than a session's
``last_memorized_at``. A message whose time lies ahead of the sweep (a clock that ran ahead,
a bogus ingested time) must not carry the column past the moment of the sweep, and a value
found in the future is moved back: never later than the last message Loom took, never later
than now. The sweep's moment is the reader's injected clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.integrations.nerve import NerveTranscripts
from provisioner.runtime.gateway.errors import CodedFault
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.source import sweep_source
from provisioner.runtime.sweep.sweeper import Sweeper
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb, native
from tests.support.clock import fixed_clock

pytestmark = pytest.mark.anyio

SWEEP_MOMENT = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC).timestamp()  # the reader's clock
SWEEP_MOMENT_SHOWN = "2026-11-30 12:00:00"  # as Nerve writes it


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def nerve(tmp_path: Path) -> Iterator[NerveDb]:
    database = NerveDb(tmp_path / "nerve" / "nerve.db")
    yield database
    database.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.sqlite3") as store:
        yield store


async def sweep(nerve: NerveDb, state: StateStore, loom: FakeLoom) -> None:
    with NerveTranscripts(nerve.path, clock=lambda: SWEEP_MOMENT) as reader:
        view = sweep_source(reader, state, fixed_clock)
        await Sweeper(loom, view, state, clock=fixed_clock).run_once()


class TestAMessageFromTheFuture:
    async def test_a_message_dated_after_the_sweep_moves_the_column_only_to_the_sweep_s_moment(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "now", created_at=native(0))
        nerve.add("a", "user", "from a clock that ran ahead", created_at="2031-01-01 00:00:00")
        await sweep(nerve, state, FakeLoom())
        assert nerve.last_memorized_at("a") == SWEEP_MOMENT_SHOWN

    async def test_a_message_after_one_from_the_future_is_not_stripped_before_loom_took_it(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "bogus time", created_at="2031-01-01 00:00:00")
        await sweep(nerve, state, FakeLoom())
        fresh = nerve.add("a", "user", "written after it", created_at=native(0, 30, hour=12))
        assert fresh not in nerve.compactable_ids()


class TestAFutureValueIsRepaired:
    async def test_a_future_value_goes_back_to_the_last_message_loom_took(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "first", created_at=native(1))
        taken = nerve.add("a", "user", "second", created_at=native(2))
        nerve.set_last_memorized_at("a", "2031-01-01 00:00:00")
        loom = FakeLoom()
        await sweep(nerve, state, loom)
        assert taken in loom.taken
        assert nerve.last_memorized_at("a") == native(2)

    async def test_a_future_value_goes_back_to_the_sweep_s_moment_past_a_later_message(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "ahead too", created_at="2030-06-01 00:00:00")
        nerve.set_last_memorized_at("a", "2031-01-01 00:00:00")
        await sweep(nerve, state, FakeLoom())
        assert nerve.last_memorized_at("a") == SWEEP_MOMENT_SHOWN

    async def test_a_future_value_is_repaired_by_a_sweep_that_sends_nothing_new(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "fact", created_at=native(1))
        await sweep(nerve, state, FakeLoom())
        nerve.set_last_memorized_at("a", "2031-01-01 00:00:00")
        loom = FakeLoom()
        await sweep(nerve, state, loom)
        assert loom.calls == []
        assert nerve.last_memorized_at("a") == native(1)

    async def test_the_repair_strips_no_message_loom_has_not_taken(
        self, nerve: NerveDb, state: StateStore
    ) -> None:
        nerve.session("a")
        taken = [nerve.add("a", "user", f"fact {n}", created_at=native(n)) for n in range(3)]
        nerve.set_last_memorized_at("a", "2031-01-01 00:00:00")
        loom = FakeLoom(accept_limit=2)
        loom.faults = deque([None, CodedFault("busy", code="GRANT_BUSY")])
        await sweep(nerve, state, loom)
        assert set(loom.taken) == set(taken[:2])
        assert nerve.compactable_ids() <= set(taken[:2])
