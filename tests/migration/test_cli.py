"""MIG-1: ``nerve memory migrate`` as a real process, against the dev gateway on loopback."""

from __future__ import annotations

import errno
import json
import os
import pty
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.doctor.check import OK, WARN
from provisioner.doctor.migration import migration_checks
from provisioner.migration.migrate import NOT_NOW_WAIT_MAX_S
from provisioner.runtime.state import AUDIT_MIGRATION_SKIPPED
from testbed.memu_db import MemuDb
from tests.support.processes import read_terminal

from .migrate_process import Nerve
from .test_memu_store import damage

CANARY = "zebra-canary"  # in every item's text; never in what the command prints
LONG_RETRY_AFTER_S = int(NOT_NOW_WAIT_MAX_S) + 30  # a "not now" a run does not wait out


def fill(memu: MemuDb, count: int) -> list[str]:
    return memu.add_items(count, prefix=f"{CANARY} fact")


def default_memu(nerve: Nerve) -> MemuDb:
    """memU's store where Nerve keeps it by default: memu.sqlite in its state folder."""
    return MemuDb(nerve.config_dir / "memu.sqlite")


def ledger_rows(nerve: Nerve, sql: str, *parameters: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(nerve.state_path) as db:
        return db.execute(sql, parameters).fetchall()


def assert_each_item_once(gateway: RunningGateway, memu: MemuDb) -> None:
    """Every memU item is in Loom once, under its key, with its text, and nothing else is."""
    summaries = memu.summaries()
    keys = gateway.app.store.memory_keys()
    assert sorted(keys) == sorted(f"memu-{item_id}" for item_id in summaries)
    for item_id, text in summaries.items():
        memory = gateway.app.store.memory(f"memu-{item_id}")
        assert memory is not None and memory["text"] == text


class TestAWholeRun:
    def test_every_item_goes_into_loom_and_a_second_run_writes_nothing(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        ids = fill(memu, 12)
        status, report = nerve.migrate_json()
        assert (status, report["exit_status"], report["stopped"]) == (0, 0, "done")
        assert report["verdicts"]["clear"] == 12 and report["left"] == 0
        assert_each_item_once(gateway, memu)
        kept = gateway.app.store.memory(f"memu-{ids[2]}")
        assert kept is not None and kept["tags"] == ["People", "Work"]
        assert kept["kind"] == "knowledge" and kept["created_at"] == "2025-03-03T09:02:00.123456Z"
        calls = len(gateway.app.calls)
        again = nerve.migrate()
        assert again.returncode == 0 and len(gateway.app.calls) == calls
        assert again.stdout.startswith("migrate done: 12 of 12 memU items done, 0 left")
        assert CANARY not in again.stdout + again.stderr

    def test_the_store_nerve_s_config_names_is_the_one_read(
        self, nerve: Nerve, gateway: RunningGateway, tmp_path: Path
    ) -> None:
        (tmp_path / "elsewhere").mkdir()
        memu = MemuDb(tmp_path / "elsewhere" / "memu.sqlite")
        fill(memu, 3)
        nerve.loom(gateway.base_url, f"  sqlite_dsn: sqlite:///{memu.path}")
        status, report = nerve.migrate_json()
        assert status == 0 and report["source"] == str(memu.path)
        assert_each_item_once(gateway, memu)

    @pytest.mark.slow
    def test_a_terminal_gets_a_progress_line(self, nerve: Nerve, gateway: RunningGateway) -> None:
        nerve.loom(gateway.base_url)
        fill(default_memu(nerve), 130)
        leader, follower = pty.openpty()
        done = subprocess.run(
            nerve.command(),
            stdout=subprocess.PIPE,
            stderr=follower,
            env=nerve.environment(),
            cwd=nerve.cwd,
            timeout=180,
            check=False,
        )
        os.close(follower)
        shown = read_terminal(leader)
        assert done.returncode == 0
        assert "memU items 100/130, 100 sent to Loom" in shown
        assert "memU items 130/130, 130 sent to Loom" in shown
        assert CANARY not in shown


class TestDryRun:
    def test_a_dry_run_counts_and_sends_and_writes_nothing(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        fill(default_memu(nerve), 9)
        status, report = nerve.migrate_json("--dry-run")
        assert (status, report["dry_run"], report["would_write"]) == (0, True, 9)
        assert report["bytes"] > 9 * 50 and report["kinds"]["profile"] == 3
        assert list(gateway.app.calls) == [] and not nerve.state_path.exists()

    def test_a_dry_run_works_under_memu_before_the_switch(self, nerve: Nerve) -> None:
        nerve.configure("memory:", "  backend: memu")
        fill(default_memu(nerve), 2)
        done = nerve.migrate("--dry-run")
        assert done.returncode == 0, done.stderr
        assert "2 would be written" in done.stdout and "nothing was sent or written" in done.stdout
        assert CANARY not in done.stdout


class TestBadInput:
    """One line on stderr naming what, where and what is expected; exit 2; nothing written."""

    def assert_refused(self, nerve: Nerve, *args: str, says: str) -> None:
        done = nerve.migrate(*args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
        assert says in done.stderr
        assert not nerve.state_path.exists()

    def test_a_named_memu_database_that_is_missing(
        self, nerve: Nerve, gateway: RunningGateway, tmp_path: Path
    ) -> None:
        nerve.loom(gateway.base_url)
        missing = tmp_path / "typo.sqlite"
        self.assert_refused(
            nerve, "--memu-db", str(missing), says="typo.sqlite: no such file; expected memU's"
        )

    def test_a_file_that_is_not_a_memu_database(self, nerve: Nerve, tmp_path: Path) -> None:
        nerve.loom("http://127.0.0.1:9")
        other = tmp_path / "notes.sqlite"
        with sqlite3.connect(other) as db:
            db.execute("CREATE TABLE notes (body TEXT)")
        self.assert_refused(nerve, "--memu-db", str(other), says="has no memu_memory_items table")
        garbage = tmp_path / "garbage.bin"
        garbage.write_bytes(os.urandom(4096))
        self.assert_refused(nerve, "--memu-db", str(garbage), says="cannot be read as a SQLite")

    def test_a_dsn_that_names_no_sqlite_file(self, nerve: Nerve) -> None:
        nerve.loom("http://127.0.0.1:9", "  sqlite_dsn: postgresql://db/memu")
        self.assert_refused(nerve, says="memory.sqlite_dsn")

    def test_a_real_run_under_memu_is_refused(self, nerve: Nerve) -> None:
        nerve.configure("memory:", "  backend: memu")
        fill(default_memu(nerve), 1)
        self.assert_refused(nerve, says="memory.backend is 'memu'")

    def test_an_empty_path_is_refused(self, nerve: Nerve) -> None:
        nerve.configure("memory:", "  backend: loom")
        self.assert_refused(nerve, "--memu-db", " ", says="--memu-db")


class TestAHostileStore:
    def test_rows_a_damaged_store_holds_never_crash_the_command(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        loose = MemuDb(nerve.config_dir / "memu.sqlite", loose=True)
        fine = loose.add_item(f"{CANARY} an ordinary fact")
        odd_text = f"{CANARY} NUL \x00, an escape \x1b[31m, a line\nbreak and \u202e"
        odd = loose.add_item(odd_text, memory_type=None, created_at="garbage", categories=[""])
        refused = {
            loose.add_item(None): "no_text",
            loose.add_item(b"\xff\xfe blob"): "not_text",
            loose.add_item(f"{CANARY} " + "x" * 25_000): "too_long",
        }
        with loose.connect() as db:
            db.execute(
                "INSERT INTO memu_memory_items (id, summary)"
                " VALUES ('bad-utf8', CAST(X'FF' AS TEXT))"
            )
        refused["bad-utf8"] = "not_utf8"
        loose.add_item(f"{CANARY} under an id that is no key", item_id="no key\n")
        status, report = nerve.migrate_json()
        assert (status, report["stopped"], report["left"]) == (0, "done", 0)
        assert {entry["id"]: entry["reason"] for entry in report["skipped"]} == refused
        assert (report["unusable_rows"], report["fields_dropped"]) == (1, 1)
        assert sorted(gateway.app.store.memory_keys()) == sorted([f"memu-{fine}", f"memu-{odd}"])
        kept = gateway.app.store.memory(f"memu-{odd}")
        assert kept is not None and kept["text"] == odd_text and kept["kind"] is None
        text = nerve.migrate()
        assert text.returncode == 0 and CANARY not in text.stdout + text.stderr
        assert "\x1b" not in text.stdout

    def test_a_store_without_its_primary_key_finishes_with_status_0_run_after_run(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        """REL-8: two rows under one id are named and not written; no run is left undone."""
        nerve.loom(gateway.base_url)
        loose = MemuDb(nerve.config_dir / "memu.sqlite", loose=True)
        fine = loose.add_item(f"{CANARY} an ordinary fact")
        loose.add_item(f"{CANARY} likes tea", item_id="twice")
        loose.add_item(f"{CANARY} likes coffee", item_id="twice")
        for _run in range(2):
            status, report = nerve.migrate_json()
            assert (status, report["stopped"], report["left"]) == (0, "done", 0)
            assert (report["unusable_rows"], report["repeated_ids"]) == (2, ["twice"])
        assert gateway.app.store.memory_keys() == [f"memu-{fine}"]
        text = nerve.migrate()
        assert text.returncode == 0 and "twice" in text.stdout


class TestAnOlderLoom:
    def test_the_run_finishes_and_the_report_counts_the_fields_left_out(self, nerve: Nerve) -> None:
        """REL-8 (b): an older loom_memory_set (no kind, tags or dates) takes every item."""
        memu = default_memu(nerve)
        fill(memu, 4)
        with serve_in_thread(seed=2, older_memory_set=True) as older:
            nerve.loom(older.base_url)
            status, report = nerve.migrate_json()
            text = nerve.migrate("--state", str(nerve.config_dir / "another-ledger.sqlite3"))
            stored = len(older.app.store.memory_keys())
        assert (status, report["stopped"], report["left"], stored) == (0, "done", 0, 4)
        assert report["left_out"]["kind"] == 4 and report["left_out"]["created_at"] == 4
        assert text.returncode == 0 and "duplicate 4" in text.stdout  # the same keys again
        assert "written without what this Loom's loom_memory_set does not take: " in text.stdout
        assert "kind 4" in text.stdout


class TestMemoryNotReachable:
    def test_no_gateway_url_is_status_75_and_nothing_is_sent(self, nerve: Nerve) -> None:
        nerve.loom(None)
        fill(default_memu(nerve), 3)
        status, report = nerve.migrate_json()
        assert (status, report["stopped"], report["sent"]) == (75, "unavailable", 0)
        assert report["ledger"]["written"] == 0

    def test_a_gateway_nobody_listens_on_is_status_75(self, nerve: Nerve) -> None:
        from tests.support.loopback import closed_port_url

        nerve.loom(closed_port_url())
        fill(default_memu(nerve), 3)
        status, report = nerve.migrate_json()
        assert (status, report["left"]) == (75, 3)
        assert report["stopped"] in ("unreachable", "unavailable")


class TestFaults:
    def test_not_now_for_longer_than_a_run_waits_stops_with_status_1_and_the_next_run_finishes(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        """A Retry-After past the longest wait within a run (REL-8) is not waited out."""
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 12)
        gateway.app.faults.switch(f"429:{LONG_RETRY_AFTER_S}@loom_memory_set=0.3", seed=4)
        status, first = nerve.migrate_json()
        assert (status, first["stopped"], first["error_kind"]) == (1, "not_now", "MayPass")
        assert (first["retries"], first["waited_s"]) == (0, 0)
        went = first["verdicts"]["clear"]
        assert first["ledger"]["written"] == went == len(gateway.app.store.memory_keys())
        assert went < 12
        gateway.app.faults.switch("")
        status, second = nerve.migrate_json()
        assert (status, second["already_done"], second["sent"]) == (0, went, 12 - went)
        assert_each_item_once(gateway, memu)

    def test_an_item_loom_fails_three_runs_in_a_row_is_skipped_with_an_audit_row(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 4)
        poison = memu.add_item(f"{CANARY} the one Loom cannot take")
        gateway.app.faults.switch("fail-text:the one Loom cannot take@loom_memory_set")
        statuses = [nerve.migrate_json()[0] for _run in range(2)]
        assert statuses == [1, 1]
        status, third = nerve.migrate_json()
        assert status == 0 and third["skipped"][0]["id"] == poison
        ((detail,),) = ledger_rows(
            nerve, "SELECT detail FROM sweep_audit WHERE kind = ?", AUDIT_MIGRATION_SKIPPED
        )
        assert detail == f"memu item {poison}: Loom's internal error 3 runs in a row"
        assert gateway.app.store.memory(f"memu-{poison}") is None
        assert len(gateway.app.store.memory_keys()) == 4
        failing_calls = [c for c in gateway.app.calls if c.fault is not None]
        assert len(failing_calls) == 3

    def test_a_text_loom_holds_under_another_key_is_a_duplicate_named_by_id(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        """The dev gateway answers ``duplicate`` for a text it holds under another key."""
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        first = memu.add_item(f"{CANARY} likes green tea")
        second = memu.add_item(f"{CANARY} likes green tea")
        done = nerve.migrate()
        assert done.returncode == 0, done.stderr
        assert "duplicate 1" in done.stdout and CANARY not in done.stdout + done.stderr
        rows = ledger_rows(
            nerve, "SELECT item_id, verdict, memory_key FROM migration_item ORDER BY verdict"
        )
        assert rows == [
            (f"{first}", "clear", f"memu-{first}"),
            (second, "duplicate", f"memu-{first}"),
        ]


class TestInterrupted:
    @pytest.mark.slow
    @pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
    def test_a_run_stopped_midway_resumes_with_every_item_in_loom_once(
        self, nerve: Nerve, gateway: RunningGateway, how: signal.Signals
    ) -> None:
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 400)
        process = subprocess.Popen(
            nerve.command("--json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=nerve.environment(),
            cwd=nerve.cwd,
        )
        stored = wait_for_memories(gateway, at_least=40, process=process)
        process.send_signal(how)
        _out, err = process.communicate(timeout=60)
        assert stored < 400, "the run ended before it could be stopped"
        assert "Traceback" not in err
        if how == signal.SIGINT:
            assert process.returncode == 130 and "interrupted" in err
        status, report = nerve.migrate_json()
        assert (status, report["left"]) == (0, 0)
        assert report["already_done"] + report["sent"] == 400
        assert report["verdicts"]["duplicate"] <= 1  # at most the write in flight
        assert_each_item_once(gateway, memu)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 1 MiB tmpfs, for a disk that really fills; skipped where this process may
    not mount one (not root). Elsewhere the full disk is an injected failing writer
    (test_migrate.py)."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"no tmpfs could be mounted: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill_the_disk(folder: Path) -> None:
    """Write a file in ``folder`` until its file system has no byte left."""
    filler = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(filler, b"\0" * 512)
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(filler)


class TestFileFaults:
    def test_a_full_disk_under_the_state_file_is_one_line_saying_so_and_status_75(
        self, nerve: Nerve, gateway: RunningGateway, small_disk: Path
    ) -> None:
        """REL-4: the real thing on a small tmpfs: full, never "locked"."""
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 2)
        state = small_disk / "state.sqlite3"
        assert nerve.migrate_json("--state", str(state))[0] == 0
        fill(memu, 200)
        holder = sqlite3.connect(state)  # keeps the WAL's files in place while the disk fills
        try:
            holder.execute("SELECT COUNT(*) FROM migration_item").fetchall()
            fill_the_disk(small_disk)
            done = nerve.migrate("--state", str(state))
        finally:
            holder.close()
        assert done.returncode == 75, done.stdout + done.stderr
        assert "Traceback" not in done.stderr and "lock" not in done.stdout
        assert f"the state file {state} could not be written: the disk is full" in done.stdout

    def test_a_damaged_memu_store_is_named_with_status_2(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 40)
        damage(memu.path)
        done = nerve.migrate()
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert f"memU's store {memu.path} could not be read on: damaged" in done.stdout
        dry = nerve.migrate("--dry-run")
        assert dry.returncode == 2 and "Traceback" not in dry.stderr
        assert len(dry.stderr.strip().splitlines()) == 1 and str(memu.path) in dry.stderr

    @pytest.mark.slow
    def test_a_memu_store_nerve_keeps_locked_is_busy_with_status_75(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 2)
        holder = sqlite3.connect(memu.path)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            done = nerve.migrate()
        finally:
            holder.rollback()
            holder.close()
        assert done.returncode == 75 and done.stdout == ""
        assert done.stderr.strip() == (
            f"python -m provisioner: error: {memu.path}: busy: another process holds it; "
            "try again later"
        )


class TestStoppedBySignal:
    @pytest.mark.parametrize(
        ("how", "status", "said"),
        [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
        ids=["SIGTERM", "SIGINT"],
    )
    def test_a_stop_signal_mid_write_prints_the_report_and_exits_with_its_status(
        self, nerve: Nerve, gateway: RunningGateway, how: signal.Signals, status: int, said: str
    ) -> None:
        """REL-9: a service manager's SIGTERM ends the run as Ctrl-C does, report first."""
        nerve.loom(gateway.base_url)
        memu = default_memu(nerve)
        fill(memu, 12)
        gateway.app.faults.switch("hang@loom_memory_set=0.25", seed=3)
        process = subprocess.Popen(
            nerve.command("--json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=nerve.environment(),
            cwd=nerve.cwd,
        )
        try:
            assert wait_for_a_hanging_write(gateway, process), "no write was left hanging"
            process.send_signal(how)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert "Traceback" not in err and err.strip().endswith(f"python -m provisioner: {said}")
        report = json.loads(out)
        assert (process.returncode, report["exit_status"], report["stopped"]) == (
            status,
            status,
            "interrupted",
        )
        stored = len(gateway.app.store.memory_keys())
        assert report["ledger"]["written"] == stored == report["verdicts"]["clear"]
        assert report["left"] == 12 - stored
        gateway.app.faults.switch("")
        assert nerve.migrate_json()[0] == 0
        assert_each_item_once(gateway, memu)

    def test_the_text_report_says_the_run_was_stopped_and_how_to_go_on(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        fill(default_memu(nerve), 2)
        gateway.app.faults.switch("hang@loom_memory_set")
        process = subprocess.Popen(
            nerve.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=nerve.environment(),
            cwd=nerve.cwd,
        )
        try:
            assert wait_for_a_hanging_write(gateway, process), "no write was left hanging"
            process.send_signal(signal.SIGTERM)
            out, _err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert process.returncode == 143
        assert out.startswith("migrate interrupted: 0 of 2 memU items done, 2 left")
        assert "stopped by a signal (SIGINT or SIGTERM)" in out and "run again" in out


class TestDoctor:
    def test_doctor_shows_how_far_the_migration_got(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        assert migration_checks(nerve.config_dir) == []
        nerve.loom(gateway.base_url)
        fill(default_memu(nerve), 6)
        gateway.app.faults.switch(f"429:{LONG_RETRY_AFTER_S}@loom_memory_set=0.5", seed=2)
        assert nerve.migrate_json()[0] == 1
        (check,) = migration_checks(nerve.config_dir)
        written = len(gateway.app.store.memory_keys())
        assert check.status == WARN and check.id == "memory.migration"
        assert f"{written} of 6 items done" in check.message and "not_now" in check.message
        assert (
            check.advice is not None
            and "run nerve-provisioner memory migrate again" in check.advice
        )
        gateway.app.faults.switch("")
        assert nerve.migrate_json()[0] == 0
        (check,) = migration_checks(nerve.config_dir)
        assert check.status == OK and "6 of 6 items done" in check.message
        assert "0 left" in check.message and CANARY not in check.message


def wait_for_a_hanging_write(gateway: RunningGateway, process: subprocess.Popen[str]) -> bool:
    """Poll the stand-in until a write it answers with ``hang`` has arrived: from then on the
    command is waiting for an answer that never comes (bounded by count of polls)."""
    for _poll in range(60_000):
        if any((call.fault or "").startswith("hang") for call in list(gateway.app.calls)):
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.001)
    return False


def wait_for_memories(
    gateway: RunningGateway, *, at_least: int, process: subprocess.Popen[str]
) -> int:
    """Poll the stand-in until it holds ``at_least`` memories (bounded by count of polls)."""
    for _poll in range(60_000):
        stored = len(gateway.app.store.memory_keys())
        if stored >= at_least or process.poll() is not None:
            return stored
        time.sleep(0.001)
    return len(gateway.app.store.memory_keys())


class TestAnInstanceWithoutMemU:
    """No memU store where Nerve keeps it, none named: nothing to migrate, said, exit 0."""

    def test_nothing_to_migrate_is_one_line_and_nothing_is_written(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        for args in ((), ("--dry-run",)):
            done = nerve.migrate(*args)
            assert done.returncode == 0, done.stdout + done.stderr
            assert done.stdout.count("\n") == 1 and "nothing to migrate" in done.stdout
            assert "memu.sqlite" in done.stdout
        assert not nerve.state_path.exists()

    def test_the_json_says_the_store_was_not_found(
        self, nerve: Nerve, gateway: RunningGateway
    ) -> None:
        nerve.loom(gateway.base_url)
        done = nerve.migrate("--json")
        answer = json.loads(done.stdout)
        assert (answer["found"], answer["items"], answer["exit_status"]) == (False, 0, 0)
