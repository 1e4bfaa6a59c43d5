"""The newest error is the one shown (REL-7, LOOM-4).

Errors are kept in the order they arrive, never by the time they carry: after the clock was
set back the current error has the earlier time and is still the one shown. Each op keeps its
own, so a status probe's error never stands in for the sweep's on doctor's sweep line. A time
ahead of the clock reading it is said to be in the future, never "0 s ago".
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.doctor import sweep as doctor_sweep
from provisioner.runtime.loom.diagnostics import since_last_error
from provisioner.runtime.loom.queue import RETRY_OP, STATUS_OP
from provisioner.runtime.loom.report import SWEEP_OPS
from provisioner.runtime.state import (
    AUDIT_BATCH,
    MIGRATIONS,
    SCHEMA_VERSION,
    AuditEntry,
    StateStore,
)
from tests.support.state_sql import state_rows

HOUR_S = 3600.0


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "cfg" / "memory" / "state.sqlite3") as store:
        yield store


def batch_through(state: StateStore, *, now: float) -> None:
    state.record_audit([AuditEntry(AUDIT_BATCH, "s", 1, detail="100")], now=now)


class TestArrivalOrder:
    def test_an_error_recorded_after_the_clock_was_set_back_is_the_last_error(
        self, state: StateStore
    ) -> None:
        state.record_last_error(at=2_000.0, op="extract", kind="NoAnswer", message="stale")
        state.record_last_error(at=1_000.0, op="extract", kind="CodedFault", message="current")
        assert state.last_error() == (1_000.0, "extract", "CodedFault", "current", None)

    def test_the_newest_of_every_op_is_the_one_that_arrived_last(self, state: StateStore) -> None:
        state.record_last_error(at=3_000.0, op="extract", kind="A", message="first")
        state.record_last_error(at=2_000.0, op="health", kind="B", message="second")
        state.record_last_error(at=1_000.0, op="recall", kind="C", message="third")
        last = state.last_error()
        assert last is not None and last[2] == "C"

    def test_each_op_keeps_its_own_error(self, state: StateStore) -> None:
        state.record_last_error(at=1_000.0, op="extract", kind="CodedFault", message="sweep")
        state.record_last_error(at=2_000.0, op="health", kind="GatewayUnreachable", message="p")
        sweep_error = state.last_error(SWEEP_OPS)
        assert sweep_error is not None and sweep_error[1:3] == ("extract", "CodedFault")

    def test_batches_since_an_error_are_counted_by_arrival_not_by_time(
        self, state: StateStore
    ) -> None:
        batch_through(state, now=5_000.0)
        state.record_last_error(at=9_000.0, op="extract", kind="CodedFault", message="busy")
        batch_through(state, now=6_000.0)  # the clock was set back meanwhile
        batch_through(state, now=7_000.0)
        since = since_last_error(state)
        assert since is not None and since["batches_through_since"] == 2

    def test_the_sweep_s_ops_are_the_ones_its_calls_are_noted_as(self) -> None:
        assert {"extract", STATUS_OP, RETRY_OP} == SWEEP_OPS


class TestAFileFromBeforeArrivalOrder:
    def test_the_error_a_file_of_step_8_kept_is_kept_by_its_migration(self, tmp_path: Path) -> None:
        path = tmp_path / "old.sqlite3"
        database = sqlite3.connect(path, isolation_level=None)
        database.execute("BEGIN")
        for step in MIGRATIONS[:8]:
            for statement in filter(None, (part.strip() for part in step.split(";"))):
                database.execute(statement)
        database.execute("INSERT INTO sweep_audit (kind, recorded_at) VALUES ('batch', 10)")
        database.execute(
            "INSERT INTO last_error (id, at, op, kind, message, code)"
            " VALUES (1, 20.0, 'extract', 'CodedFault', 'busy', 'GRANT_BUSY')"
        )
        database.execute("INSERT INTO sweep_audit (kind, recorded_at) VALUES ('batch', 30)")
        database.execute("PRAGMA user_version = 8")
        database.execute("COMMIT")
        database.close()
        with StateStore(path) as state:
            assert state_rows(state, "PRAGMA user_version")[0][0] == SCHEMA_VERSION
            assert state.last_error() == (20.0, "extract", "CodedFault", "busy", "GRANT_BUSY")
            since = since_last_error(state)
        assert since is not None and since["batches_through_since"] == 1


class TestDoctorsSweepLine:
    def test_a_status_probe_s_error_is_not_shown_as_a_sweep_failure(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        state.record_last_error(at=1.8e9, op="health", kind="GatewayUnreachable", message="down")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert "last error" not in check.message

    def test_the_sweep_s_error_is_shown_though_a_probe_failed_after_it(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        state.record_last_error(at=1.8e9, op="extract", kind="CodedFault", message="busy")
        state.record_last_error(at=1.8e9 + 1, op="health", kind="GatewayUnreachable", message="x")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert " in extract: Loom could not do it now: busy " in check.message
        assert "GatewayUnreachable" not in check.message

    def test_an_error_dated_in_the_future_is_said_to_be_in_the_future(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        ahead = time.time() + 24 * HOUR_S
        state.record_last_error(at=ahead, op="extract", kind="CodedFault", message="busy")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert "(in the future: the clock was set back since)" in check.message


class TestStatusAge:
    @pytest.fixture
    def gateway(self) -> Iterator[RunningGateway]:
        with serve_in_thread(seed=7, answers="mixed") as running:
            yield running

    def status(self, tmp_path: Path, gateway: RunningGateway, *extra: str) -> int:
        folder = tmp_path / "cfg"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.local.yaml").write_text(
            f"memory:\n  backend: loom\nmcp_gateway_url: {gateway.base_url}\n", encoding="utf-8"
        )
        argv = ["memory", "status", "--config-dir", str(folder), "--workspace", str(tmp_path)]
        return main([*argv, *extra])

    def test_a_future_time_is_never_shown_as_0_s_ago(
        self,
        tmp_path: Path,
        state: StateStore,
        gateway: RunningGateway,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        ahead = time.time() + 2 * HOUR_S + 60
        state.record_last_error(at=ahead, op="extract", kind="CodedFault", message="busy")
        assert self.status(tmp_path, gateway) == 0
        out = capsys.readouterr().out
        assert "h in the future (the clock was set back since)" in out
        assert "0 s ago" not in out

    def test_a_future_time_has_a_negative_age_in_json(
        self,
        tmp_path: Path,
        state: StateStore,
        gateway: RunningGateway,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        state.record_last_error(at=time.time() + HOUR_S, op="extract", kind="X", message="m")
        assert self.status(tmp_path, gateway, "--json") == 0
        last = json.loads(capsys.readouterr().out)["last_error"]
        assert last["age_s"] < 0
