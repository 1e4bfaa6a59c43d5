"""REL-8: a migration finishes under a gateway that often answers "not now", against the dev
gateway on loopback, with the backend the command uses and the waits recorded, not slept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.migration.memu_store import MemuStore
from provisioner.migration.migrate import NOT_NOW_TRIES, NOT_NOW_WAIT_MAX_S, Migration
from provisioner.migration.report import MigrationReport
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import StateStore
from tests.support.clock import RecordedSleep, fixed_clock
from tests.support.contract import write_contract_problems

from .memu_db import MemuDb

pytestmark = pytest.mark.anyio

ITEMS = 30
FAULT_SEED = 5
# About three calls in ten answered "not now", each of the kinds the gateway sends.
THIRTY_PERCENT = {
    "429": "429=0.3",
    "503": "503=0.3",
    "-32002": "may-pass=0.3",
    "coded": "coded:GRANT_BUSY=0.3",
    "mixed": "429=0.1,503=0.1,coded:OVERLOADED=0.12",
}


@pytest.fixture
def faulty_gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=FAULT_SEED, answers="mixed") as running:
        yield running
        problems = write_contract_problems(running.app.calls)
    assert not problems, problems


async def migrate_through(
    gateway: RunningGateway, memu: MemuDb, state: StateStore, sleep: RecordedSleep
) -> MigrationReport:
    async with LoomMemory(gateway_url=gateway.base_url, state=state) as memory:
        with MemuStore(memu.path) as store:
            return await Migration(memory, store, state, clock=fixed_clock, sleep=sleep).run()


class TestAThirdOfTheCallsNotNow:
    @pytest.mark.parametrize("faults", THIRTY_PERCENT.values(), ids=THIRTY_PERCENT.keys())
    async def test_one_run_moves_every_item_and_each_is_in_loom_once(
        self, faulty_gateway: RunningGateway, memu: MemuDb, state: StateStore, faults: str
    ) -> None:
        ids = memu.add_items(ITEMS)
        faulty_gateway.app.faults.switch(faults, seed=FAULT_SEED)
        sleep = RecordedSleep()
        report = await migrate_through(faulty_gateway, memu, state, sleep)
        assert (report.stopped, report.left, report.sent) == ("done", 0, ITEMS)
        faulted = [call for call in faulty_gateway.app.calls if call.fault is not None]
        assert faulted, "the seed drew no fault: the test would prove nothing"
        assert report.retries == len(faulted) == len(sleep.waits)
        assert all(0 < wait <= NOT_NOW_WAIT_MAX_S for wait in sleep.waits)
        store = faulty_gateway.app.store
        assert sorted(store.memory_keys()) == sorted(f"memu-{i}" for i in ids)
        assert sum(report.verdicts.values()) == ITEMS

    async def test_a_gateway_that_answers_not_now_to_every_call_stops_the_run_after_the_tries(
        self, faulty_gateway: RunningGateway, memu: MemuDb, state: StateStore
    ) -> None:
        memu.add_items(3)
        faulty_gateway.app.faults.switch("503")
        sleep = RecordedSleep()
        report = await migrate_through(faulty_gateway, memu, state, sleep)
        assert (report.stopped, report.left, report.error_kind) == ("not_now", 3, "MayPass")
        assert len(faulty_gateway.app.calls) == NOT_NOW_TRIES
        assert len(sleep.waits) == NOT_NOW_TRIES - 1


@pytest.fixture
def older_gateway() -> Iterator[RunningGateway]:
    """A dev gateway whose loom_memory_set is an older Loom's: no kind, tags or dates."""
    with serve_in_thread(seed=FAULT_SEED, older_memory_set=True) as running:
        yield running


class TestAnOlderLoom:
    async def test_every_item_goes_without_the_fields_it_does_not_declare_counted(
        self, older_gateway: RunningGateway, memu: MemuDb, state: StateStore
    ) -> None:
        """REL-8 (b): the schema is read once per run; nothing is refused -32602."""
        ids = memu.add_items(8)
        report = await migrate_through(older_gateway, memu, state, RecordedSleep())
        assert (report.stopped, report.left, report.verdicts["clear"]) == ("done", 0, 8)
        assert older_gateway.app.listings == 1
        assert report.left_out == {
            "kind": 8,
            "tags": 5,
            "created_at": 8,
            "updated_at": 8,
            "happened_at": 2,
        }
        for call in older_gateway.app.calls:
            assert set(call.arguments) <= {"text", "memory_key", "namespace"}
        kept = older_gateway.app.store.memory(f"memu-{ids[1]}")
        assert kept is not None and kept["kind"] is None
        line = next(text for text in report.lines() if "does not take" in text)
        assert "created_at 8" in line and "kind 8" in line

    async def test_a_loom_that_declares_every_field_gets_every_field(
        self, faulty_gateway: RunningGateway, memu: MemuDb, state: StateStore
    ) -> None:
        ids = memu.add_items(3)
        report = await migrate_through(faulty_gateway, memu, state, RecordedSleep())
        assert (report.stopped, report.left, report.left_out) == ("done", 0, {})
        assert faulty_gateway.app.listings == 1
        kept = faulty_gateway.app.store.memory(f"memu-{ids[0]}")
        assert kept is not None and kept["kind"] == "profile"
