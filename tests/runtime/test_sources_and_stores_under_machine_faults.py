"""Nerve's nerve.db, memU's store, the migration's state and the dev gateway's store meet a
busy or damaged file with one line naming it and the status a monitor acts on (REL-4): 75 for
a file another process holds (try again later), 2 for a file to look at — never 1, which the
sweep and the migration keep for "the gateway answered and items did not go", and never a
traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.devgateway.store import DATABASE_FILE
from provisioner.migration import memu_store
from provisioner.runtime import sqlite_file
from provisioner.runtime.nerve_db import transcripts as nerve_transcripts
from provisioner.runtime.state import StateStore
from testbed.memu_db import MemuDb
from testbed.nerve_db import NerveDb
from tests.support.machine_faults import held_by_another_process

UNREACHABLE_GATEWAY = "http://127.0.0.1:9/mcp"  # nothing listens: the file fails first
FAST_BUSY_TIMEOUT_MS = 200  # wait this long for the other process, not the real five seconds
GATEWAY_EXIT_WAIT_S = 60  # a gateway that serves instead of refusing its store is killed


@pytest.fixture(autouse=True)
def short_busy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state's, Nerve's database's and memU's store's waits for a lock, all shortened."""
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_MS", FAST_BUSY_TIMEOUT_MS)
    monkeypatch.setattr(nerve_transcripts, "READ_WAIT_MS", FAST_BUSY_TIMEOUT_MS)
    monkeypatch.setattr(memu_store, "READ_WAIT_MS", FAST_BUSY_TIMEOUT_MS)


@pytest.fixture
def config_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "cfg"
    folder.mkdir()
    (folder / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {UNREACHABLE_GATEWAY}\n", encoding="utf-8"
    )
    return folder


def run(tmp_path: Path, config_dir: Path, *command: str) -> int:
    folders = ["--workspace", str(tmp_path / "ws"), "--config-dir", str(config_dir)]
    return main([*command, *folders])


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


class TestNervesDatabase:
    def test_a_nerve_db_another_process_holds_is_busy_not_someone_else_s_file(
        self, tmp_path: Path, config_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Nerve's engine writing in rollback-journal mode holds the file exclusively."""
        nerve_db = tmp_path / "nerve.db"
        NerveDb(nerve_db).close()
        with sqlite3.connect(nerve_db) as database:
            database.execute("PRAGMA journal_mode = DELETE").fetchall()
        database.close()
        with held_by_another_process(nerve_db):
            status = run(tmp_path, config_dir, "memory", "sweep", "--nerve-db", str(nerve_db))
        err = one_line(capsys)
        assert status == 75
        assert f"{nerve_db}: busy" in err
        assert "expected Nerve's nerve.db" not in err and "aside" not in err


class TestMemusStore:
    def test_a_memu_store_another_process_holds_is_75(
        self, tmp_path: Path, config_dir: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        store = tmp_path / "memu.sqlite"
        MemuDb(store).add_items(2)
        with held_by_another_process(store):
            status = run(tmp_path, config_dir, "memory", "migrate", "--memu-db", str(store))
        err = one_line(capsys)
        assert status == 75
        assert f"{store}: busy" in err and "aside" not in err

    @pytest.mark.parametrize("earlier_runs", [False, True], ids=["new", "kept"])
    def test_a_migration_state_another_process_holds_is_75(
        self,
        earlier_runs: bool,
        tmp_path: Path,
        config_dir: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """A new state file, and one earlier runs left (opened without a write, so the lock
        is met at the migration's first write); the report line or the error names it."""
        store = tmp_path / "memu.sqlite"
        MemuDb(store).add_items(2)
        state = config_dir / "memory" / "state.sqlite3"
        state.parent.mkdir()
        if earlier_runs:
            StateStore(state).close()
        with held_by_another_process(state):
            status = run(tmp_path, config_dir, "memory", "migrate", "--memu-db", str(store))
        out, err = capsys.readouterr()
        assert status == 75
        assert "Traceback" not in err and str(state) in out + err
        assert "aside" not in out + err


class TestTheDevGatewaysStore:
    def test_a_store_that_is_not_a_database_is_one_line_and_2(self, tmp_path: Path) -> None:
        data = tmp_path / "data"
        data.mkdir()
        (data / DATABASE_FILE).write_bytes(b"not a database, just text " * 200)
        command = ["dev", "gateway", "--port", "0", "--data", str(data)]
        done = subprocess.run(
            [sys.executable, "-m", "provisioner", *command],
            capture_output=True,
            text=True,
            timeout=GATEWAY_EXIT_WAIT_S,
            check=False,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, done.stderr
        assert len(lines) == 1 and "Traceback" not in done.stderr
        assert str(data / DATABASE_FILE) in lines[0]
