"""One migration per state file, however its path is spelt (REL-5).

A real second process holds the migration lock of the state; this run reaches the same
file through a real symlink (of the file, or of its folder) or through ``..``, and must
return at once without a write.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.migration.memu_store import MemuStore
from provisioner.migration.migrate import Migration
from provisioner.migration.report import STOPPED_BUSY, MigrationReport
from provisioner.runtime.state import StateStore
from testbed.loom import FakeLoom
from testbed.memu_db import MemuDb
from tests.support.clock import fixed_clock
from tests.support.machine_faults import MIGRATION_LOCK, process_holding, spellings

pytestmark = pytest.mark.anyio


async def migrate(memu: MemuDb, state_path: Path, loom: FakeLoom) -> MigrationReport:
    with MemuStore(memu.path) as store, StateStore(state_path) as state:
        return await Migration(loom, store, state, clock=fixed_clock).run()


class TestASecondMigrationThroughAnotherSpelling:
    @pytest.mark.parametrize("spelling", ["file symlink", "folder symlink", "dot-dot"])
    async def test_a_migration_while_another_process_migrates_the_real_file_writes_nothing(
        self, tmp_path: Path, memu: MemuDb, loom: FakeLoom, spelling: str
    ) -> None:
        memu.add_items(3)
        paths = spellings(tmp_path)
        with process_holding(MIGRATION_LOCK, str(paths["real"])):
            report = await migrate(memu, paths[spelling], loom)
        assert report.stopped == STOPPED_BUSY
        assert loom.writes == []

    async def test_a_migration_of_the_real_file_while_a_symlink_is_held_elsewhere_writes_nothing(
        self, tmp_path: Path, memu: MemuDb, loom: FakeLoom
    ) -> None:
        memu.add_items(3)
        paths = spellings(tmp_path)
        with process_holding(MIGRATION_LOCK, str(paths["file symlink"])):
            report = await migrate(memu, paths["real"], loom)
        assert report.stopped == STOPPED_BUSY
        assert loom.writes == []

    async def test_the_migration_goes_once_the_other_process_let_go(
        self, tmp_path: Path, memu: MemuDb, loom: FakeLoom
    ) -> None:
        memu.add_items(3)
        paths = spellings(tmp_path)
        with process_holding(MIGRATION_LOCK, str(paths["real"])):
            pass
        report = await migrate(memu, paths["file symlink"], loom)
        assert (report.stopped, report.left) == ("done", 0)
        assert len(loom.writes) == 3
