"""``nerve memory status`` after a sweep: the budget it left, the fault's code, and whether
Loom has taken batches since its last error (LOOM-4, SWEEP-13).

``status`` runs in a process of its own, so all of it comes from the state file the sweep
kept: the budget table, the last error, and the sweep's per-batch audit rows. Through the
real command line against the dev gateway; the state file's reading on its own, hostile
values included; and doctor's line, which reads the same rows read-only.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli.memory_recall import age_words
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.doctor import sweep as doctor_sweep
from provisioner.runtime.loom.diagnostics import since_last_error
from provisioner.runtime.state import (
    AUDIT_BATCH,
    AUDIT_FAILED,
    AUDIT_QUEUED,
    AuditEntry,
    StateStore,
)
from tests.support.processes import RunNerve

EXTRACTION = "loom_memory_set_from_messages"
BUSY = "Loom busy with this agent's earlier calls"  # FLEET-4: what GRANT_BUSY means


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=7, answers="mixed") as running:
        yield running


def options(tmp_path: Path) -> list[str]:
    (tmp_path / "ws").mkdir(exist_ok=True)  # memory status refuses a workspace not there
    return ["--config-dir", str(tmp_path / "cfg"), "--workspace", str(tmp_path / "ws")]


def prepare(tmp_path: Path, run_nerve: RunNerve, gateway_url: str, count: int) -> None:
    """A Loom configuration and ``count`` messages of session ``s`` to sweep."""
    folder = tmp_path / "cfg"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {gateway_url}\n", encoding="utf-8"
    )
    records = [
        {
            "session_id": "s",
            "role": "user",
            "content": f"remember item {n} " + "x" * 900,
            "created_at": f"2026-11-30T10:{n % 60:02d}:00+00:00",
        }
        for n in range(count)
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert run_nerve("memory", "import", str(source), *options(tmp_path)).returncode == 0


def status_json(run_nerve: RunNerve, tmp_path: Path) -> dict:
    done = run_nerve("memory", "status", "--json", *options(tmp_path))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class TestStatusAfterASweep:
    def test_the_fault_s_code_and_the_batches_through_since_are_shown(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """A coded fault on the extraction: status names its code and no batch since; after a
        sweep that went through, the same error is shown with the batches taken since."""
        prepare(tmp_path, run_nerve, gateway.base_url, 150)
        gateway.app.faults.switch(f"coded:GRANT_BUSY@{EXTRACTION}")
        assert run_nerve("memory", "sweep", *options(tmp_path)).returncode == 1
        gateway.app.faults.switch("")
        failed = status_json(run_nerve, tmp_path)["last_error"]
        assert (failed["op"], failed["kind"], failed["code"]) == (
            "extract",
            "CodedFault",
            "GRANT_BUSY",
        )
        assert failed["batches_through_since"] == 0 and isinstance(failed["age_s"], int)
        assert run_nerve("memory", "sweep", *options(tmp_path)).returncode == 0
        later = status_json(run_nerve, tmp_path)["last_error"]
        assert (later["at"], later["code"]) == (failed["at"], "GRANT_BUSY")
        assert later["batches_through_since"] >= 2

    def test_the_text_says_the_age_and_what_went_through_since(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        prepare(tmp_path, run_nerve, gateway.base_url, 3)
        gateway.app.faults.switch(f"coded:OVERLOADED@{EXTRACTION}")
        run_nerve("memory", "sweep", *options(tmp_path))
        gateway.app.faults.switch("")
        run_nerve("memory", "sweep", *options(tmp_path))
        done = run_nerve("memory", "status", *options(tmp_path))
        assert done.returncode == 0, done.stderr
        assert "  kind: Loom overloaded (OVERLOADED)\n" in done.stdout
        assert " ago, 1 batch went through since\n" in done.stdout
        assert "remember item" not in done.stdout

    def test_the_batch_budget_the_sweep_cut_is_shown(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-5, LOOM-4: a 413 halves the budget; status, run later, shows the cut one."""
        prepare(tmp_path, run_nerve, gateway.base_url, 150)
        gateway.app.faults.switch(f"too-large:40000@{EXTRACTION}")
        run_nerve("memory", "sweep", *options(tmp_path))
        budget = status_json(run_nerve, tmp_path)["batch_budget"]
        assert budget["cut_reason"] == "too_large"
        assert budget["bytes"] < budget["default_bytes"] == 128 * 1024

    def test_before_any_sweep_the_budget_is_the_default_and_no_error_is_kept(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        prepare(tmp_path, run_nerve, gateway.base_url, 1)
        report = status_json(run_nerve, tmp_path)
        assert report["batch_budget"]["messages"] == report["batch_budget"]["default_messages"]
        assert report["last_error"] is None

    def test_queued_mode_shows_the_batches_still_in_loom_s_queue(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-15: a batch Loom keeps queued holds its session's window (and keeps it out
        of a backfill); status says how many there are. Waiting mode shows no such key."""
        prepare(tmp_path, run_nerve, gateway.base_url, 3)
        assert "queued_batches" not in status_json(run_nerve, tmp_path)
        local = tmp_path / "cfg" / "config.local.yaml"
        local.write_text(
            local.read_text().replace(
                "backend: loom\n", "backend: loom\n  loom:\n    defer_extraction: true\n"
            ),
            encoding="utf-8",
        )
        gateway.app.faults.switch("queue:queued")
        assert run_nerve("memory", "sweep", *options(tmp_path)).returncode == 0
        report = status_json(run_nerve, tmp_path)
        assert report["queued_batches"] == {"in_loom_queue": 1, "fell_back": 0}
        text = run_nerve("memory", "status", *options(tmp_path)).stdout
        assert "queued_batches:\n  in_loom_queue: 1\n  fell_back: 0\n" in text

    def test_a_coded_fault_of_the_status_probe_itself_names_its_code(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        prepare(tmp_path, run_nerve, gateway.base_url, 1)
        gateway.app.faults.switch("coded:BACKEND_UNAVAILABLE@loom_namespace_summary")
        last = status_json(run_nerve, tmp_path)["last_error"]
        assert (last["op"], last["code"]) == ("health", "BACKEND_UNAVAILABLE")

    def test_the_probe_s_code_is_kept_for_the_next_run_and_for_doctor(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """LOOM-4: the code is kept with the error, so a later status (whose own probe goes
        through) still names it; doctor's sweep line does not, since the sweep never failed
        (REL-7: a status probe's error is its own)."""
        prepare(tmp_path, run_nerve, gateway.base_url, 1)
        gateway.app.faults.switch("coded:BACKEND_UNAVAILABLE@loom_namespace_summary")
        status_json(run_nerve, tmp_path)
        gateway.app.faults.switch("")
        later = status_json(run_nerve, tmp_path)["last_error"]
        assert (later["op"], later["kind"], later["code"]) == (
            "health",
            "CodedFault",
            "BACKEND_UNAVAILABLE",
        )
        doctor = run_nerve("doctor", "--offline", "--json", *options(tmp_path))
        sweep = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "loom.sweep")
        assert "last error" not in sweep["message"]
        assert "BACKEND_UNAVAILABLE" not in sweep["message"]


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "state.sqlite3") as store:
        yield store


def batch(kind: str, detail: str) -> list[AuditEntry]:
    return [AuditEntry(kind, "s", 1, detail=detail)]


class TestWhatTheStateSays:
    def test_batches_are_counted_from_after_the_error(self, state: StateStore) -> None:
        state.record_audit(batch(AUDIT_BATCH, "100"), now=100.0)
        state.record_last_error(at=200.0, op="extract", kind="CodedFault", message="busy")
        state.record_audit(batch(AUDIT_FAILED, "CodedFault(GRANT_BUSY)"), now=200.0)
        for second in (300.0, 400.0, 500.0):
            state.record_audit(batch(AUDIT_BATCH, "100"), now=second)
        since = since_last_error(state)
        assert since == {
            "at": 200.0,
            "op": "extract",
            "kind": "CodedFault",
            "batches_through_since": 3,
            "code": "GRANT_BUSY",
        }

    @pytest.mark.parametrize(
        ("kept", "shown"),
        [("GRANT_BUSY", "GRANT_BUSY"), ("A\x1b[2J", None), ("", None), ("X" * 129, None)],
        ids=["kept", "a control character", "empty", "too long"],
    )
    def test_a_code_kept_with_the_error_is_shown_when_it_is_short_printable_text(
        self, state: StateStore, kept: str, shown: str | None
    ) -> None:
        """LOOM-4: any op's code is kept with it; a file may hold anything, so it is checked."""
        state.record_last_error(at=5.0, op="recall", kind="CodedFault", message="x", code=kept)
        since = since_last_error(state)
        assert since is not None and since["code"] == shown

    def test_queued_batches_count_as_gone_through(self, state: StateStore) -> None:
        state.record_last_error(at=10.0, op="recall", kind="NoAnswer", message="slow")
        state.record_audit(batch(AUDIT_QUEUED, "queue_id=q1"), now=11.0)
        since = since_last_error(state)
        assert since is not None and since["batches_through_since"] == 1
        assert since["code"] is None  # only an extraction's failed batch carries one

    def test_a_failed_batch_of_another_kind_gives_no_code(self, state: StateStore) -> None:
        state.record_last_error(at=10.0, op="extract", kind="CodedFault", message="busy")
        state.record_audit(batch(AUDIT_FAILED, "MayPass"), now=10.0)
        since = since_last_error(state)
        assert since is not None and since["code"] is None

    def test_nothing_kept_is_none(self, state: StateStore) -> None:
        assert since_last_error(state) is None

    def test_hostile_values_in_the_file_give_nothing_rather_than_a_crash(
        self, tmp_path: Path, state: StateStore
    ) -> None:
        state.record_last_error(at=10.0, op="extract", kind="CodedFault", message="busy")
        database = sqlite3.connect(tmp_path / "state.sqlite3")
        database.execute("UPDATE last_error SET at = 'not a time'")
        database.execute(
            "INSERT INTO sweep_audit (kind, recorded_at, detail) VALUES ('failed', 11, ?)",
            ("CodedFault(\x1b[2J)",),
        )
        database.commit()
        database.close()
        assert since_last_error(state) is None

    def test_a_control_character_in_a_code_is_never_shown(self, state: StateStore) -> None:
        state.record_last_error(at=10.0, op="extract", kind="CodedFault", message="busy")
        state.record_audit(batch(AUDIT_FAILED, "CodedFault(\x1b[2J)"), now=10.0)
        since = since_last_error(state)
        assert since is not None and since["code"] is None


def planted(path: Path, *statements: str) -> None:
    """Run ``statements`` on the state file behind the store's back, as a hostile hand or an
    older release would have left it."""
    database = sqlite3.connect(path)
    try:
        for statement in statements:
            database.execute(statement)
        database.commit()
    finally:
        database.close()


class TestDoctorsLine:
    def test_doctor_names_the_code_and_the_batches_since(self, tmp_path: Path) -> None:
        path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        with StateStore(path) as state:
            state.record_last_error(at=1.8e9, op="extract", kind="CodedFault", message="busy")
            state.record_audit(batch(AUDIT_FAILED, "CodedFault(GRANT_BUSY)"), now=1.8e9)
            state.record_audit(batch(AUDIT_BATCH, "100"), now=1.8e9 + 60)
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert f" in extract: {BUSY}: busy (code GRANT_BUSY; 1 batch went through since)" in (
            check.message
        )

    def test_doctor_shows_a_hostile_last_error_as_text(self, tmp_path: Path) -> None:
        path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        with StateStore(path) as state:
            state.record_last_error(at=1.0, op="extract", kind="X", message="m")
        planted(path, "UPDATE last_error SET at = 'soon', message = 'a\x1b[31mred'")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert "last error ? in extract: X: a?[31mred (0 batches went through since)" in (
            check.message
        )

    def test_doctor_reads_a_file_from_before_the_code_was_kept(self, tmp_path: Path) -> None:
        """State schema step 8 added ``last_error.code``; doctor opens read only and never
        migrates, so a file of step 7 still shows its error, with the failed batch's code."""
        path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        with StateStore(path) as state:
            state.record_last_error(at=1.8e9, op="extract", kind="CodedFault", message="busy")
            state.record_audit(batch(AUDIT_FAILED, "CodedFault(GRANT_BUSY)"), now=1.8e9)
        planted(path, "ALTER TABLE last_error DROP COLUMN code", "PRAGMA user_version = 7")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert f" in extract: {BUSY}: busy (code GRANT_BUSY; 0 batches went through since)" in (
            check.message
        )

    def test_a_code_planted_with_control_characters_is_shown_as_text(self, tmp_path: Path) -> None:
        path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        with StateStore(path) as state:
            state.record_last_error(at=1.0, op="extract", kind="CodedFault", message="m")
        planted(path, "UPDATE last_error SET code = 'X\x1b[2J'")
        check = doctor_sweep.sweep_state_check(tmp_path / "cfg")
        assert "(code X?[2J; 0 batches went through since)" in check.message


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(0, "0 s"), (42.9, "42 s"), (60, "1 min"), (3599, "59 min"), (7200, "2 h"), (200_000, "2 d")],
)
def test_an_age_reads_in_whole_units(seconds: float, words: str) -> None:
    assert age_words(seconds) == words
