"""Processes opening one state file at once (SWEEP-2, SWEEP-11, SWEEP-12).

Two sweeps, or a sweep and ``nerve memory recall`` or ``nerve doctor``, often start together on
a machine where no state file exists yet. Each must open it — the first to take the write lock
creates the schema, the others find it there — and none may report a busy file as damaged: the
advice for a damaged file (move it aside) would throw every watermark away.

The races run real processes on real SQLite files. They start from a fork server that has
imported the package once, and wait at a barrier, so that the processes of a round really open
the file together and fifty rounds of four commands fit in well under a minute on two cores.
"""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli.main import main
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.doctor import sweep as doctor_sweep
from provisioner.doctor.check import OK, WARN
from provisioner.runtime import sqlite_file, state
from provisioner.runtime.sqlite_file import open_database
from provisioner.runtime.state import MIGRATIONS, SCHEMA_VERSION, StateStore
from provisioner.runtime.state import schema as state_schema
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.transcripts import SqliteTranscripts
from tests.support.state_sql import state_rows

from .racing import PRELOAD, open_state_store, read_output, run_cli

JOIN_TIMEOUT_S = 120.0  # a process still running by then is stuck; the test says so
QUEUE_TIMEOUT_S = 10.0  # a process that ended has put its result already
HOLD_S = 0.3  # how long a test's own connection keeps a lock before letting go
DAMAGE_WORDS = ("cannot be opened", "aside", "cannot be read", "damaged", "corrupt", "malformed")
ANOTHER_SWEEP = "sweep already_running: another sweep of this state file is running"
SESSIONS = {"a": 3, "b": 4}  # messages per session in the soak's transcripts


@pytest.fixture(scope="module")
def processes() -> ForkServerContext:
    """Processes forked from a server that imported the package (and no pytest) once."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def race(
    context: ForkServerContext, runs: list[tuple[Callable[..., None], tuple[Any, ...]]]
) -> list[int | None]:
    """Start one process per ``(target, args)``, all released together; their exit codes.

    Each target gets the round's barrier as its last argument. A process that does not end
    within ``JOIN_TIMEOUT_S`` is killed and its exit code is None.
    """
    barrier = context.Barrier(len(runs))
    started = [context.Process(target=target, args=(*args, barrier)) for target, args in runs]
    for process in started:
        process.start()
    codes = []
    for process in started:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()
            codes.append(None)
        else:
            codes.append(process.exitcode)
    return codes


def schema_tables(path: Path) -> set[str]:
    database = sqlite3.connect(path)
    try:
        rows = database.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        database.close()
    return {name for (name,) in rows}


def hold_then_release(
    connection: sqlite3.Connection, before_commit: Callable[[], None]
) -> threading.Thread:
    """Commit ``connection``'s open transaction after ``HOLD_S``, in a thread (started)."""

    def release() -> None:
        time.sleep(HOLD_S)
        before_commit()
        connection.execute("COMMIT")

    thread = threading.Thread(target=release)
    thread.start()
    return thread


def loom_config(config_dir: Path, gateway_url: str | None) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    lines = ["memory:", "  backend: loom"]
    if gateway_url:
        lines.append(f"mcp_gateway_url: {gateway_url}")
    (config_dir / "config.local.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def cli_paths(tmp_path: Path, config_dir: Path) -> list[str]:
    (tmp_path / "ws").mkdir(exist_ok=True)  # memory status refuses a workspace not there
    return ["--workspace", str(tmp_path / "ws"), "--config-dir", str(config_dir)]


class TestOpeningAtOnce:
    def test_processes_opening_a_new_state_file_at_once_all_open_it(
        self, processes: ForkServerContext, tmp_path: Path
    ) -> None:
        """SWEEP-12: six processes open one new file together, ten times over; every one
        opens it at the latest schema version, and the schema is whole."""
        for round_number in range(10):
            path = tmp_path / f"round-{round_number}" / "state.sqlite3"
            results = processes.Queue()
            codes = race(processes, [(open_state_store, (str(path), results))] * 6)
            assert codes == [0] * 6
            outcomes = [results.get(timeout=QUEUE_TIMEOUT_S) for _ in codes]
            assert outcomes == [("opened", SCHEMA_VERSION)] * 6, f"round {round_number}"
            assert {"frozen_recall", "sweep_session", "last_error"} <= schema_tables(path)

    def test_an_opener_that_finds_the_file_migrated_meanwhile_changes_nothing(
        self, tmp_path: Path
    ) -> None:
        """SWEEP-2, SWEEP-12: the version is read again under the write lock. Another process
        creates the schema while this opener waits for the lock; the opener then finds the
        file at the latest version and runs no step again (running one would fail on its
        ``CREATE TABLE``), and what the other process wrote is kept."""
        path = tmp_path / "state.sqlite3"
        other = open_database(path)
        other.execute("BEGIN IMMEDIATE")

        def migrate_as_another_process() -> None:
            for script in MIGRATIONS:
                for statement in state_schema._statements(script):
                    other.execute(statement)
            other.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            other.execute("INSERT INTO sweep_session (session_id, watermark) VALUES ('kept', 41)")

        releaser = hold_then_release(other, migrate_as_another_process)
        try:
            with StateStore(path) as store:
                assert state_rows(store, "PRAGMA user_version")[0][0] == SCHEMA_VERSION
                assert store.watermark("kept") == 41
        finally:
            releaser.join()
            other.close()

    def test_an_opener_waits_for_a_lock_held_a_moment_rather_than_failing(
        self, tmp_path: Path
    ) -> None:
        """SWEEP-12: another connection is writing a new file that has not turned WAL on yet,
        where SQLite answers "locked" at once rather than waiting its busy timeout; the opener
        waits for the writer instead of failing, then opens the file at the latest version."""
        path = tmp_path / "state.sqlite3"
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE unrelated (x)")
        releaser = hold_then_release(other, lambda: None)
        try:
            with StateStore(path) as store:
                assert state_rows(store, "PRAGMA user_version")[0][0] == SCHEMA_VERSION
                assert state_rows(store, "PRAGMA journal_mode")[0][0] == "wal"
        finally:
            releaser.join()
            other.close()


class TestABusyFile:
    """A file kept locked past the busy timeout is busy, said in one line; never damaged."""

    @pytest.fixture
    def held_state(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
        """A new state file whose write lock another connection holds throughout the test."""
        monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_MS", 200)
        path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        holder = open_database(path)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield path
        finally:
            holder.execute("ROLLBACK")
            holder.close()

    def test_opening_a_file_locked_past_the_busy_timeout_raises_busy(
        self, held_state: Path
    ) -> None:
        """SWEEP-12: ``StateBusyError``, one line naming the file and saying it is fine."""
        with pytest.raises(state.StateBusyError) as raised:
            StateStore(held_state)
        message = str(raised.value)
        assert message.startswith(f"{held_state}: busy")
        assert "\n" not in message and "the file is fine" in message

    @pytest.mark.parametrize(
        "command", [["memory", "sweep"], ["memory", "recall", "s1"], ["memory", "status"]]
    )
    def test_a_command_meeting_a_busy_file_says_busy_in_one_line(
        self,
        command: list[str],
        held_state: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        """SWEEP-12, REL-4: exit 75 (try again later) with one line saying the file is busy; no
        advice to move it aside, no traceback, and the file is left as it was."""
        loom_config(tmp_path / "cfg", None)
        before = held_state.read_bytes()
        assert main([*command, *cli_paths(tmp_path, tmp_path / "cfg")]) == 75
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"{held_state}: busy" in err
        assert not [word for word in DAMAGE_WORDS if word in err]
        assert held_state.read_bytes() == before

    def test_an_import_meeting_busy_transcripts_says_busy_in_one_line(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """SWEEP-12: the transcripts file too is busy and fine when another process holds it
        locked, never a damaged file to move aside; nothing is imported."""
        monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_MS", 200)
        transcripts = tmp_path / "cfg" / "memory" / "transcripts.sqlite3"
        holder = open_database(transcripts)
        holder.execute("BEGIN EXCLUSIVE")
        lines = tmp_path / "chat.jsonl"
        lines.write_text(
            '{"session_id": "s1", "role": "user", "content": "hi",'
            ' "created_at": "2026-11-30T10:00:00Z"}\n',
            encoding="utf-8",
        )
        try:
            status = main(["memory", "import", str(lines), *cli_paths(tmp_path, tmp_path / "cfg")])
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        err = capsys.readouterr().err
        assert status == 75
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"{transcripts}: busy" in err and "the file is fine" in err
        assert not [word for word in DAMAGE_WORDS if word in err]


class TestDoctorAlongsideASweep:
    def test_a_state_file_no_process_has_set_up_yet_is_a_sweep_not_run(
        self, tmp_path: Path
    ) -> None:
        """SWEEP-12: doctor may read the file between its creation and its schema; that is
        a sweep that has not run yet, not a file that cannot be read."""
        path = tmp_path / "memory" / "state.sqlite3"
        path.parent.mkdir()
        sqlite3.connect(path).close()  # created, nothing in it yet
        check = doctor_sweep.sweep_state_check(tmp_path)
        assert (check.status, check.message) == (
            OK,
            f"no sweep has run yet ({path} is not set up yet)",
        )

    def test_a_state_file_locked_past_doctors_wait_is_busy_not_unreadable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """SWEEP-12: a WARN saying the file is busy and fine, with advice to ask again."""
        monkeypatch.setattr(doctor_sweep, "READ_TIMEOUT_S", 0.05)
        path = tmp_path / "memory" / "state.sqlite3"
        path.parent.mkdir()
        holder = sqlite3.connect(path, isolation_level=None)  # rollback journal: locks readers
        for script in MIGRATIONS:
            holder.executescript(script)
        holder.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        holder.execute("BEGIN EXCLUSIVE")
        try:
            check = doctor_sweep.sweep_state_check(tmp_path)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert check.status == WARN
        assert (
            check.message
            == f"the sweep's state {path} is busy: another nerve process is writing it"
        )
        assert check.advice is not None and "the file is fine" in check.advice


class TestASecondSweep:
    def test_a_second_sweep_says_in_one_line_that_another_is_running(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """SWEEP-11: while the lock is held, ``nerve memory sweep`` exits 0 with one line
        saying another sweep is running, not a report of zero sessions."""
        config_dir = tmp_path / "cfg"
        loom_config(config_dir, None)
        path = config_dir / "memory" / "state.sqlite3"
        StateStore(path).close()
        with sweep_lock(str(path), None) as held:
            assert held
            assert main(["memory", "sweep", *cli_paths(tmp_path, config_dir)]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        assert out.startswith(ANOTHER_SWEEP)


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5, answers="json") as running:
        yield running


class TestFourCommandsAtOnce:
    @pytest.mark.slow
    def test_two_sweeps_a_recall_and_doctor_on_a_new_state_file_lose_nothing(
        self, processes: ForkServerContext, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """SWEEP-2, SWEEP-11, SWEEP-12: fifty times, ``nerve memory sweep`` twice, ``nerve
        memory recall`` and ``nerve doctor`` start together on a new state file. Every one
        opens it: no traceback, no word of a damaged file, the sweeps end done or already
        running (one line), the recall prints its block, doctor reads the sweep's state or
        finds none yet, and afterwards every session's watermark is at its last message."""
        transcripts_path = tmp_path / "transcripts.sqlite3"
        last_ids = {}
        with SqliteTranscripts(transcripts_path) as transcripts:
            for session, count in SESSIONS.items():
                for n in range(count):
                    created_at = f"2026-11-30T10:{n:02d}:00+00:00"
                    last_ids[session] = transcripts.add_message(
                        session, "user", f"fact {n} of {session}", created_at
                    )
        environment = {"NO_PROXY": "*", "no_proxy": "*"}
        commands = {
            "sweep-1": ["memory", "sweep", "--transcripts", str(transcripts_path)],
            "sweep-2": ["memory", "sweep", "--transcripts", str(transcripts_path)],
            "recall": ["memory", "recall", "new-session"],
            "doctor": ["doctor", "--offline", "--json"],
        }
        for round_number in range(50):
            round_dir = tmp_path / f"round-{round_number}"
            config_dir = round_dir / "cfg"
            loom_config(config_dir, gateway.base_url)
            outputs = {name: str(round_dir / name) for name in commands}
            runs = [
                (run_cli, ([*argv, *cli_paths(tmp_path, config_dir)], outputs[name], environment))
                for name, argv in commands.items()
            ]
            codes = dict(zip(commands, race(processes, runs), strict=True))
            seen = {name: read_output(output) for name, output in outputs.items()}
            where = f"round {round_number}: {codes} {seen}"
            for out, err in seen.values():
                assert "Traceback" not in out + err, where
                assert not [word for word in DAMAGE_WORDS if word in out + err], where
            for name in ("sweep-1", "sweep-2", "recall"):
                assert seen[name][1] == "", where
            sweeps = [(codes[name], seen[name][0]) for name in ("sweep-1", "sweep-2")]
            for code, out in sweeps:
                assert out.count("\n") == 1, where
                assert (code == 0 and out.startswith("sweep done: ")) or (
                    code == 0 and out.startswith(ANOTHER_SWEEP)
                ), where
            assert codes["recall"] == 0 and "<session-context>" in seen["recall"][0], where
            assert codes["doctor"] in (0, 1), where  # 1: the workspace is not provisioned
            doctor = json.loads(seen["doctor"][0])
            [sweep_check] = [c for c in doctor["checks"] if c["id"] == "loom.sweep"]
            assert sweep_check["status"] == OK or "is busy" in sweep_check["message"], where
            with StateStore(config_dir / "memory" / "state.sqlite3") as store:
                watermarks = {session: store.watermark(session) for session in SESSIONS}
            assert watermarks == last_ids, where
