"""One sweep per state file, however its path is spelt (REL-5, SWEEP-11).

The lock is held by a real second process, and the state is reached by another spelling of
its path: a real symlink to the file, a symlinked folder, a path through ``..``. The sweep
that comes second sends nothing and says another sweep is running.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.backfill import BackfillBusy, parse_backfill, run_backfill
from provisioner.runtime.sweep.lock import LOCK_SUFFIX, lock_path_of, sweep_lock
from provisioner.runtime.sweep.outcomes import STOPPED_BUSY
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from tests.support.clock import NOW, fixed_clock
from tests.support.machine_faults import SWEEP_LOCK, process_holding, spellings

from .sessions import add_session

pytestmark = pytest.mark.anyio


class TestEverySpellingLocksTheSameFile:
    def test_each_spelling_of_a_state_file_gives_the_lock_beside_its_real_file(
        self, tmp_path: Path
    ) -> None:
        paths = spellings(tmp_path)
        real_lock = os.path.realpath(paths["real"]) + LOCK_SUFFIX
        assert {lock_path_of(path, LOCK_SUFFIX) for path in paths.values()} == {real_lock}

    def test_a_lock_held_through_a_symlink_is_not_had_by_the_real_path(
        self, tmp_path: Path
    ) -> None:
        paths = spellings(tmp_path)
        with (
            sweep_lock(str(paths["file symlink"]), None) as first,
            sweep_lock(str(paths["real"]), None) as second,
        ):
            assert (first, second) == (True, False)


class TestASecondSweepThroughAnotherSpelling:
    @pytest.mark.parametrize("spelling", ["file symlink", "folder symlink", "dot-dot"])
    async def test_a_sweep_while_another_process_sweeps_the_real_file_sends_nothing(
        self, tmp_path: Path, spelling: str
    ) -> None:
        paths = spellings(tmp_path)
        loom = FakeLoom()
        with SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source:
            add_session(source, "a", 3)
            with (
                process_holding(SWEEP_LOCK, str(paths["real"])),
                StateStore(paths[spelling]) as state,
            ):
                report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
                assert state.watermark("a") == 0
        assert report.stopped == STOPPED_BUSY
        assert loom.calls == []

    async def test_a_sweep_of_the_real_file_while_another_process_sweeps_a_symlink_sends_nothing(
        self, tmp_path: Path
    ) -> None:
        paths = spellings(tmp_path)
        loom = FakeLoom()
        with SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source:
            add_session(source, "a", 3)
            with (
                process_holding(SWEEP_LOCK, str(paths["file symlink"])),
                StateStore(paths["real"]) as state,
            ):
                report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
        assert report.stopped == STOPPED_BUSY
        assert loom.calls == []

    async def test_the_sweep_goes_once_the_other_process_let_go(self, tmp_path: Path) -> None:
        paths = spellings(tmp_path)
        loom = FakeLoom()
        with SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source:
            ids = add_session(source, "a", 3)
            with process_holding(SWEEP_LOCK, str(paths["real"])):
                pass
            with StateStore(paths["file symlink"]) as state:
                report = await Sweeper(loom, source, state, clock=fixed_clock).run_once()
                assert state.watermark("a") == ids[-1]
        assert report.stopped == "done"
        assert [call.message_ids for call in loom.calls] == [tuple(ids)]

    def test_a_backfill_through_a_symlink_while_another_process_sweeps_moves_nothing(
        self, tmp_path: Path
    ) -> None:
        paths = spellings(tmp_path)
        with SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source:
            add_session(source, "a", 3)
            with (
                process_holding(SWEEP_LOCK, str(paths["real"])),
                StateStore(paths["file symlink"]) as state,
                pytest.raises(BackfillBusy),
            ):
                run_backfill(source, state, parse_backfill("all"), now=NOW)
