"""The sweep never dies of its state or its source (REL-2).

A state file held by another process past the wait, a full disk, a read-only or forbidden
file, a disk that fails, a damaged page: ``Sweeper.run_once()`` returns a report naming the
file and the cause, every watermark stays on the last batch Loom took, and the next sweep
picks up there. ``nerve memory sweep`` exits with the fault's status and one line.

Real mechanisms where the machine allows them: a second process holding the state's write
lock, a small tmpfs filled to the last byte (as root; skipped otherwise), bytes overwritten
on a page of the file. Faults a root test cannot meet for real (read-only, permission, I/O)
come from a state store whose writes fail the way SQLite fails them.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.cli.memory_sweep import exit_status
from provisioner.runtime.errors import EXIT_STATUS_OF_KIND
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.outcomes import STOPPED_SOURCE, STOPPED_STATE, SweepReport
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from tests.support.clock import fixed_clock
from tests.support.loopback import closed_port_url
from tests.support.machine_faults import held_by_another_process

from .sessions import add_session

pytestmark = pytest.mark.anyio

TMPFS_SIZE = "1m"  # room for a fresh state file, then filled to the last byte
FILLER_CHUNK = 64 * 1024
PAGE_BYTES = 4096  # SQLite's default page size


async def sweep(source: SqliteTranscripts, state: StateStore, loom: FakeLoom) -> SweepReport:
    return await Sweeper(loom, source, state, clock=fixed_clock).run_once()


def fill(folder: Path) -> Path:
    """Write a file in ``folder`` until its file system has no byte left; the file."""
    filler = folder / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)  # unbuffered: every write
    try:  # meets the full disk here, none is left for the close
        chunk = b"\0" * FILLER_CHUNK
        while True:
            try:
                os.write(descriptor, chunk)
            except OSError as error:
                assert error.errno == errno.ENOSPC
                if len(chunk) == 1:
                    break
                chunk = chunk[: len(chunk) // 2]  # the last pages, down to the last byte
    finally:
        os.close(descriptor)
    return filler


@contextmanager
def small_tmpfs(mount_point: Path) -> Iterator[Path]:
    """A small tmpfs at ``mount_point`` while the block runs; skipped where none may be made."""
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for a full disk needs root (CI runs as root)")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {made.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)


class FailingWrites(StateStore):
    """A state store whose write transactions fail with ``error`` while ``failing`` is set:
    the way SQLite reports a read-only file, a forbidden one or a failing disk."""

    def __init__(self, path: Path, error: BaseException) -> None:
        self.error = error
        self.failing = False
        super().__init__(path)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.failing:
            raise self.error
        with super()._transaction() as db:
            yield db


def sqlite_error(text: str, code: int) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(text)
    error.sqlite_errorcode = code
    return error


INJECTED = {
    "full": sqlite_error("database or disk is full", sqlite3.SQLITE_FULL),
    "read_only": sqlite_error("attempt to write a readonly database", sqlite3.SQLITE_READONLY),
    "permission": PermissionError(errno.EACCES, "Permission denied"),
    "io": sqlite_error("disk I/O error", sqlite3.SQLITE_IOERR),
    "busy": sqlite_error("database is locked", sqlite3.SQLITE_BUSY),
}


def damage_table(path: Path, table: str) -> None:
    """Overwrite the first page of ``table`` and of each of its indexes in the closed database
    at ``path`` with bytes no b-tree page has."""
    database = sqlite3.connect(path)
    try:
        roots = database.execute(
            "SELECT rootpage FROM sqlite_master WHERE tbl_name = ? AND rootpage > 0", (table,)
        ).fetchall()
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        database.close()
    assert roots
    with path.open("r+b") as file:
        for (root,) in roots:
            file.seek((root - 1) * PAGE_BYTES)
            file.write(b"\xff" * PAGE_BYTES)


class TestAFullDisk:
    async def test_a_state_on_a_full_tmpfs_ends_the_sweep_as_full_and_the_next_picks_up(
        self, tmp_path: Path
    ) -> None:
        with (
            small_tmpfs(tmp_path / "small") as small,
            SqliteTranscripts(tmp_path / "transcripts.sqlite3") as source,
        ):
            first = add_session(source, "a", 3)
            loom = FakeLoom()
            with StateStore(small / "state.sqlite3") as state:
                assert (await sweep(source, state, loom)).stopped == "done"
            later = add_session(source, "a", 3)
            with StateStore(small / "state.sqlite3") as state:
                filler = fill(small)
                report = await sweep(source, state, loom)
                assert (report.stopped, report.fault_kind) == (STOPPED_STATE, "full")
                assert report.fault_path == str(small / "state.sqlite3")
                assert report.reason == f"{small / 'state.sqlite3'}: " + (
                    "the disk is full; free some space, then try again"
                )
                assert state.watermark("a") == first[-1]
                filler.unlink()
                again = await sweep(source, state, loom)
                assert again.stopped == "done"
                assert state.watermark("a") == later[-1]

    async def test_a_write_refused_as_full_ends_the_sweep_and_the_next_picks_up(
        self, tmp_path: Path, transcripts: SqliteTranscripts, loom: FakeLoom
    ) -> None:
        ids = add_session(transcripts, "a", 3)
        with FailingWrites(tmp_path / "state.sqlite3", INJECTED["full"]) as state:
            state.failing = True
            report = await sweep(transcripts, state, loom)
            assert (report.stopped, report.fault_kind) == (STOPPED_STATE, "full")
            assert state.watermark("a") == 0
            state.failing = False
            assert (await sweep(transcripts, state, loom)).stopped == "done"
            assert state.watermark("a") == ids[-1]


class TestEveryKindOfStateFault:
    @pytest.mark.parametrize("kind", sorted(INJECTED))
    async def test_a_state_that_cannot_be_written_is_named_with_its_cause_and_loses_nothing(
        self, tmp_path: Path, transcripts: SqliteTranscripts, loom: FakeLoom, kind: str
    ) -> None:
        first = add_session(transcripts, "a", 2)
        add_session(transcripts, "b", 2)
        path = tmp_path / "state.sqlite3"
        with FailingWrites(path, INJECTED[kind]) as state:
            assert (await sweep(transcripts, state, loom)).stopped == "done"
            later = add_session(transcripts, "a", 2)
            state.failing = True
            report = await sweep(transcripts, state, loom)
            assert (report.stopped, report.fault_kind, report.fault_path) == (
                STOPPED_STATE,
                kind,
                str(path),
            )
            assert report.reason.startswith(f"{path}: ")
            assert "aside" not in report.reason
            assert state.watermark("a") == first[-1]
            state.failing = False
            assert (await sweep(transcripts, state, loom)).stopped == "done"
            assert state.watermark("a") == later[-1]


class TestABusyState:
    @pytest.mark.slow
    async def test_a_state_another_process_holds_past_the_wait_ends_the_sweep_as_busy(
        self, tmp_path: Path, transcripts: SqliteTranscripts, loom: FakeLoom
    ) -> None:
        ids = add_session(transcripts, "a", 3)
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            with held_by_another_process(path):
                report = await sweep(transcripts, state, loom)
            assert (report.stopped, report.fault_kind) == (STOPPED_STATE, "busy")
            assert state.watermark("a") == 0
            assert (await sweep(transcripts, state, loom)).stopped == "done"
            assert state.watermark("a") == ids[-1]


class TestADamagedFile:
    async def test_a_damaged_page_of_the_state_ends_the_sweep_as_damaged(
        self, tmp_path: Path, transcripts: SqliteTranscripts, loom: FakeLoom
    ) -> None:
        add_session(transcripts, "a", 3)
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            await sweep(transcripts, state, loom)
        damage_table(path, "sweep_session")
        with StateStore(path) as state:
            report = await sweep(transcripts, state, loom)
        assert (report.stopped, report.fault_kind, report.fault_path) == (
            STOPPED_STATE,
            "damaged",
            str(path),
        )

    async def test_damaged_transcripts_end_the_sweep_naming_the_transcripts(
        self, tmp_path: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        path = tmp_path / "damaged.sqlite3"
        with SqliteTranscripts(path) as source:
            add_session(source, "a", 3)
        damage_table(path, "message")
        with SqliteTranscripts(path) as source:
            report = await sweep(source, state, loom)
        assert (report.stopped, report.fault_kind, report.fault_path) == (
            STOPPED_SOURCE,
            "damaged",
            str(path),
        )
        assert loom.calls == []


class TestTheCommandLine:
    @pytest.mark.parametrize("kind", sorted(EXIT_STATUS_OF_KIND))
    def test_a_sweep_ended_by_a_file_fault_exits_with_the_fault_s_status(self, kind: str) -> None:
        report = SweepReport("waiting", stopped=STOPPED_STATE, fault_kind=kind, fault_path="s")
        assert (
            exit_status(report)
            == {
                "busy": 75,
                "full": 75,
                "read_only": 73,
                "permission": 73,
                "io": 74,
                "damaged": 2,
            }[kind]
        )

    def test_a_damaged_state_is_one_line_naming_the_file_and_exit_2(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config = tmp_path / "cfg"
        config.mkdir()
        (config / "config.local.yaml").write_text(
            f"memory:\n  backend: loom\nmcp_gateway_url: {closed_port_url()}\n", encoding="utf-8"
        )
        transcripts = config / "memory" / "transcripts.sqlite3"
        state_path = config / "memory" / "state.sqlite3"
        with SqliteTranscripts(transcripts) as source:
            add_session(source, "a", 3)
        with StateStore(state_path) as state:
            state.record_failure("a", failures=1, suspect_last_id=None)
        damage_table(state_path, "sweep_session")
        argv = ["memory", "sweep", "--config-dir", str(config), "--workspace", str(tmp_path)]
        status = main(argv)
        out = capsys.readouterr().out
        assert status == 2
        assert len(out.splitlines()) == 1
        assert out.startswith(
            f"sweep state_failed: {state_path}: damaged: it cannot be read as what it should be; "
            "0 of 1 session, 0 batches sent"
        )
        assert "budget" not in out  # the state kept one, and it could not be read
