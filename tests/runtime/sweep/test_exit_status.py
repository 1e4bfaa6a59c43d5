"""``nerve memory sweep`` tells a monitor the truth (SWEEP-13): its exit status, its one line.

Through the real command line (``python -m provisioner`` in a clean temporary home) against
loopback gateways the tests start and stop: the dev gateway with its fault rules, the gateway
client's fault gateway for a catalog without ``loom``, and a port nothing listens on. What
cannot be reached in a test's time (no answer within 140 s) is held by the sweep's own report
and the status it maps to, with a scripted Loom.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.cli.common import EXIT_INCOMPLETE, EXIT_OK
from provisioner.cli.memory_sweep import exit_status, why_it_stopped
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.errors import EXIT_TRY_LATER, EXIT_USAGE, MemoryBackendUnavailable
from provisioner.runtime.gateway.errors import (
    BrokenAnswer,
    CatalogError,
    CircuitOpen,
    CodedFault,
    GatewayUnreachable,
    MayPass,
    NoAnswer,
    PolicyRefused,
    ServerNotListed,
)
from provisioner.runtime.state import AUDIT_FAILED, StateStore
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from tests.runtime.gateway.fault_gateway import FaultGateway
from tests.support.clock import NOW, fixed_clock
from tests.support.loopback import LoopbackServer, closed_port_url
from tests.support.processes import RunNerve, clean_environment

from .sessions import add_session

EXTRACTION = "loom_memory_set_from_messages"
SWEEPS_BEFORE_THE_IMPORT_MAX = 30  # --every 1s sweeps with nothing due until the import lands


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5, answers="mixed") as running:
        yield running


@pytest.fixture(scope="module")
def fault_gateway() -> Iterator[FaultGateway]:
    app = FaultGateway()
    server = LoopbackServer(app, date_header=False, server_header=False)
    app.base_url = server.start()
    yield app
    server.stop()


def options(tmp_path: Path) -> list[str]:
    return ["--config-dir", str(tmp_path / "cfg"), "--workspace", str(tmp_path / "ws")]


def configure(tmp_path: Path, gateway_url: str | None) -> None:
    lines = ["memory:", "  backend: loom"]
    if gateway_url is not None:
        lines.append(f"mcp_gateway_url: {gateway_url}")
    folder = tmp_path / "cfg"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.local.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def import_messages(run_nerve: RunNerve, tmp_path: Path, sessions: dict[str, int]) -> None:
    """Import ``count`` messages for each session through the CLI; each import adds new ones."""
    records = []
    for session, count in sessions.items():
        for n in range(count):
            stamp = uuid.uuid4().hex[:8]
            records.append(
                {
                    "session_id": session,
                    "role": "user",
                    "content": f"fact {n} {stamp} of {session}",
                    "created_at": f"2026-11-30T10:{n:02d}:00+00:00",
                }
            )
    source = tmp_path / f"in-{uuid.uuid4().hex[:6]}.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    done = run_nerve("memory", "import", str(source), *options(tmp_path))
    assert done.returncode == 0, done.stderr


def sweep_json(run_nerve: RunNerve, tmp_path: Path) -> tuple[int, dict]:
    done = run_nerve("memory", "sweep", "--json", *options(tmp_path))
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(done.stdout)


def sweep_line(run_nerve: RunNerve, tmp_path: Path) -> tuple[int, str]:
    done = run_nerve("memory", "sweep", *options(tmp_path))
    assert "Traceback" not in done.stderr
    return done.returncode, done.stdout


class TestStatusZero:
    def test_every_window_through_exits_0_and_the_json_says_why(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-13: every window due went through: 0, and ``exit_status`` in the JSON."""
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 3, "b": 2})
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == EXIT_OK == report["exit_status"]
        assert report["reason"] == "every window due went through"
        assert (report["batches_sent"], report["batches_failed"]) == (2, 0)
        assert report["messages_taken"] == 5

    def test_a_sweep_with_nothing_due_exits_0(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-13: none was due is as good as all through."""
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 2})
        assert sweep_json(run_nerve, tmp_path)[0] == EXIT_OK
        status, line = sweep_line(run_nerve, tmp_path)
        assert status == EXIT_OK
        assert line.startswith("sweep done: 1 of 1 session, 0 batches sent, 0 messages taken")

    def test_another_sweep_running_exits_0_and_the_line_says_so(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve, nerve_process: RunNerve
    ) -> None:
        """SWEEP-11, SWEEP-13: the lock holder sweeps these windows and reports on them; this
        run is neither a failure of memory nor a sweep that left windows behind. The lock is
        held by this process; the sweeps run in processes of their own."""
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 1})
        state_path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        StateStore(state_path).close()
        with sweep_lock(str(state_path), None) as held:
            assert held
            status, line = sweep_line(nerve_process, tmp_path)
            json_status, report = sweep_json(nerve_process, tmp_path)
        assert status == json_status == report["exit_status"] == EXIT_OK
        assert line.startswith("sweep already_running: another sweep of this state file")
        assert report["stopped"] == "already_running" and report["batches_sent"] == 0
        assert not [call for call in gateway.app.calls if call.tool == EXTRACTION]


class TestStatusOne:
    def test_a_coded_fault_exits_1_names_its_code_and_keeps_the_watermark(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-7, SWEEP-13: the gateway answered, the batches did not go through."""
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 2, "b": 2})
        gateway.app.faults.switch(f"coded:GRANT_BUSY@{EXTRACTION}")
        status, line = sweep_line(run_nerve, tmp_path)
        assert status == EXIT_INCOMPLETE
        first = line.splitlines()[0]
        assert first.startswith(
            "sweep incomplete: 2 of 2 batches did not go through (CodedFault(GRANT_BUSY)); "
            "2 of 2 sessions, 2 batches sent, 0 messages taken"
        )
        assert "fact" not in line  # kinds only, never a message's text
        with StateStore(tmp_path / "cfg" / "memory" / "state.sqlite3") as state:
            assert state.watermark("a") == state.watermark("b") == 0

    @pytest.mark.parametrize(("fault", "kind"), [("503", "MayPass"), ("429:1", "MayPass")])
    def test_a_5xx_or_429_exits_1(
        self,
        tmp_path: Path,
        gateway: RunningGateway,
        run_nerve: RunNerve,
        fault: str,
        kind: str,
    ) -> None:
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 2})
        gateway.app.faults.switch(f"{fault}@{EXTRACTION}")
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == report["exit_status"] == EXIT_INCOMPLETE
        assert (report["batches_sent"], report["batches_failed"]) == (1, 1)
        assert report["reason"] == f"1 of 1 batch did not go through ({kind})"

    def test_after_a_failed_sweep_a_clean_one_exits_0_again(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """The status is the sweep's own, not a memory of an earlier failure."""
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 2})
        gateway.app.faults.switch(f"uncoded@{EXTRACTION}")
        assert sweep_json(run_nerve, tmp_path)[0] == EXIT_INCOMPLETE
        gateway.app.faults.switch("")
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == EXIT_OK and report["messages_taken"] == 2


class TestStatusSeventyFive:
    def test_no_gateway_url_exits_75_and_counts_no_batch(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        """SWEEP-13: memory could not be reached at all; nothing was sent, nothing is counted."""
        configure(tmp_path, None)
        import_messages(run_nerve, tmp_path, {"a": 1})
        status, line = sweep_line(run_nerve, tmp_path)
        assert status == EXIT_TRY_LATER
        assert line.startswith("sweep unavailable: no mcp_gateway_url is set; ")
        assert "0 batches sent" in line
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == report["exit_status"] == EXIT_TRY_LATER
        assert (report["batches_sent"], report["batches_failed"]) == (0, 0)

    def test_a_gateway_nothing_listens_on_exits_75_and_names_it(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        url = closed_port_url()
        configure(tmp_path, url)
        import_messages(run_nerve, tmp_path, {"a": 1})
        status, line = sweep_line(run_nerve, tmp_path)
        assert status == EXIT_TRY_LATER
        assert line.startswith(f"sweep unavailable: gateway {url}: not reached; ")
        assert "0 batches sent" in line

    def test_a_catalog_that_lists_no_loom_exits_75(
        self, tmp_path: Path, fault_gateway: FaultGateway, run_nerve: RunNerve
    ) -> None:
        url = f"{fault_gateway.base_url}/catalog-no-loom/{uuid.uuid4().hex[:8]}"
        configure(tmp_path, url)
        import_messages(run_nerve, tmp_path, {"a": 1})
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == report["exit_status"] == EXIT_TRY_LATER
        assert report["reason"] == f"gateway {url}: the catalog lists no loom"
        assert report["batches_sent"] == 0

    def test_a_policy_refusal_exits_75(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        configure(tmp_path, gateway.base_url)
        import_messages(run_nerve, tmp_path, {"a": 1, "b": 1})
        gateway.app.faults.switch(f"policy@{EXTRACTION}")
        status, report = sweep_json(run_nerve, tmp_path)
        assert status == report["exit_status"] == EXIT_TRY_LATER
        assert report["reason"] == f"gateway {gateway.base_url}: its policy refused the extraction"
        assert report["sessions_swept"] == 0  # the sweep ended at the first refusal

    @pytest.mark.slow
    def test_a_gateway_gone_then_its_open_breaker_each_exit_75(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        """SWEEP-10, SWEEP-13 with ``--every``: each report carries its own status. The gateway
        stops after the first sweep read its catalog; the next batch finds nothing listening
        (not sent, not counted) and opens the breaker, which ends the sweep after it."""
        configure(tmp_path, gateway.base_url)
        command = [sys.executable, "-m", "provisioner", "memory", "sweep", "--every", "1s"]
        process = subprocess.Popen(
            [*command, "--json", *options(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=clean_environment(tmp_path / "home"),
            cwd=tmp_path,
        )
        assert process.stdout is not None
        try:
            first = json.loads(process.stdout.readline())
            assert (first["exit_status"], first["reason"]) == (EXIT_OK, "no window was due")
            gateway.stop()
            import_messages(run_nerve, tmp_path, {"a": 1})
            gone = json.loads(process.stdout.readline())
            for _ in range(SWEEPS_BEFORE_THE_IMPORT_MAX):
                if gone["stopped"] != "done":
                    break
                gone = json.loads(process.stdout.readline())
            breaker = json.loads(process.stdout.readline())
        finally:
            process.send_signal(signal.SIGINT)
            process.communicate(timeout=60)
        assert gone["stopped"] == "unreachable" and gone["exit_status"] == EXIT_TRY_LATER
        assert gone["reason"] == f"gateway {gateway.base_url}: not reached"
        assert gone["batches_sent"] == 0
        assert breaker["stopped"] == "breaker_open" and breaker["exit_status"] == EXIT_TRY_LATER
        assert breaker["reason"].startswith(f"gateway {gateway.base_url}: breaker open until 20")
        assert process.returncode == 130  # an interrupt ends --every as it ends every command


class TestBadInput:
    def test_a_nerve_db_that_is_not_there_stays_2(
        self, tmp_path: Path, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        configure(tmp_path, gateway.base_url)
        missing = tmp_path / "no-nerve.db"
        done = run_nerve("memory", "sweep", "--nerve-db", str(missing), *options(tmp_path))
        assert done.returncode == EXIT_USAGE
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


# --- the report behind the status, against a scripted Loom -----------------------------------


def sweeper(loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore) -> Sweeper:
    return Sweeper(loom, transcripts, state, clock=fixed_clock)


@pytest.mark.anyio
class TestWhatTheReportCounts:
    """A batch is counted only when its request left; each early end is worded (SWEEP-13)."""

    @pytest.mark.parametrize(
        ("error", "stopped", "reason"),
        [
            (CircuitOpen("open", retry_in_s=15), "breaker_open", "breaker open until "),
            (GatewayUnreachable("refused"), "unreachable", "not reached"),
            (MemoryBackendUnavailable("mcp_gateway_url is not set"), "unavailable", "no mcp_"),
            (ServerNotListed("no loom"), "unavailable", "the catalog lists no loom"),
            (CatalogError("x", reason="http_503"), "unavailable", "the catalog could not be"),
        ],
    )
    async def test_a_request_that_never_left_is_not_counted_as_sent(
        self,
        loom: FakeLoom,
        transcripts: SqliteTranscripts,
        state: StateStore,
        error: Exception,
        stopped: str,
        reason: str,
    ) -> None:
        add_session(transcripts, "a", 3)
        loom.fail_every_batch = error
        report = await sweeper(loom, transcripts, state).run_once()
        assert (report.stopped, report.batches_sent, report.batches_failed) == (stopped, 0, 0)
        assert report.reason.startswith(reason)
        assert exit_status(report) == EXIT_TRY_LATER
        assert state.audit(kinds=(AUDIT_FAILED,)) == []

    async def test_an_open_breaker_is_worded_with_the_time_it_closes(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 1)
        loom.fail_every_batch = CircuitOpen("open", retry_in_s=15)
        report = await sweeper(loom, transcripts, state).run_once()
        closes = datetime.fromtimestamp(NOW + 15, UTC).isoformat(timespec="seconds")
        assert report.reason == f"breaker open until {closes}"
        assert why_it_stopped(report, "http://gw") == f"gateway http://gw: {report.reason}"

    async def test_no_answer_was_sent_and_ends_the_sweep_with_status_75(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-10: the batch went out and the gateway did not answer by the deadline."""
        add_session(transcripts, "a", 2)
        add_session(transcripts, "b", 2)
        loom.fail_every_batch = NoAnswer("slow", deadline_s=140)
        report = await sweeper(loom, transcripts, state).run_once()
        assert (report.stopped, report.batches_sent, report.batches_failed) == ("no_answer", 1, 1)
        assert report.reason == "no answer within 140 s"
        assert exit_status(report) == EXIT_TRY_LATER

    async def test_a_policy_refusal_reached_the_gateway_and_counts_as_sent(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 2)
        loom.fail_every_batch = PolicyRefused("not allowed")
        report = await sweeper(loom, transcripts, state).run_once()
        assert (report.stopped, report.batches_sent) == ("unavailable", 1)
        assert exit_status(report) == EXIT_TRY_LATER

    @pytest.mark.parametrize(
        ("error", "kind"),
        [
            (CodedFault("busy", code="GRANT_BUSY"), "CodedFault(GRANT_BUSY)"),
            (MayPass("429"), "MayPass"),
            (BrokenAnswer("bad json"), "BrokenAnswer"),
        ],
    )
    async def test_an_answered_failure_is_a_failed_batch_with_status_1(
        self,
        loom: FakeLoom,
        transcripts: SqliteTranscripts,
        state: StateStore,
        error: Exception,
        kind: str,
    ) -> None:
        for session in ("a", "b"):
            add_session(transcripts, session, 2)
        loom.fail_every_batch = error
        report = await sweeper(loom, transcripts, state).run_once()
        assert report.stopped == "done" and not report.went_through
        assert (report.batches_sent, report.batches_failed, report.windows_stopped) == (2, 2, 2)
        assert exit_status(report) == EXIT_INCOMPLETE
        assert why_it_stopped(report, None) == f"2 of 2 batches did not go through ({kind})"
        rows = state.audit(kinds=(AUDIT_FAILED,))
        assert [(row["session_id"], row["detail"]) for row in rows] == [("a", kind), ("b", kind)]
        assert state.audit() == []  # the per-batch rows stay out of the message audit

    async def test_a_batch_loom_took_none_of_is_a_failed_batch(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 3)
        loom.accept_limit = 0
        report = await sweeper(loom, transcripts, state).run_once()
        assert (report.batches_sent, report.batches_failed) == (1, 1)
        assert report.errors == [{"session_id": "a", "kind": "NothingTaken"}]
        assert exit_status(report) == EXIT_INCOMPLETE

    async def test_arguments_refused_before_any_call_stop_the_window_unsent(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 1)
        loom.fail_every_batch = ValueError("session id too long")
        report = await sweeper(loom, transcripts, state).run_once()
        assert (report.batches_sent, report.windows_stopped) == (0, 1)
        assert exit_status(report) == EXIT_INCOMPLETE
        assert why_it_stopped(report, None) == "1 window could not go (ValueError)"

    async def test_a_refused_message_waiting_for_the_next_is_no_failure(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-12: the newest message has a role Loom does not take; it waits for one to
        follow it, and the window is through."""
        add_session(transcripts, "a", 2)
        transcripts.add_message("a", "robot", "beep", "2026-11-30T11:00:00Z")
        report = await sweeper(loom, transcripts, state).run_once()
        assert report.errors == [{"session_id": "a", "kind": "ValueError"}]
        assert exit_status(report) == EXIT_OK

    async def test_every_batch_through_is_status_0_and_kept_for_status(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 150)
        report = await sweeper(loom, transcripts, state).run_once()
        assert exit_status(report) == EXIT_OK and report.batches_sent == 2
        rows = state.audit(kinds=("batch",))
        assert [row["detail"] for row in rows] == ["100", "50"]


def test_the_source_failing_to_list_sessions_is_status_1() -> None:
    """SWEEP-12, SWEEP-13: not memory's fault, and not a sweep that went through."""
    from provisioner.runtime.sweep.outcomes import SweepReport

    report = SweepReport("waiting", stopped="source_failed", reason="the transcripts cannot")
    assert exit_status(report) == EXIT_INCOMPLETE
    assert why_it_stopped(report, "http://gw") == "the transcripts cannot"


def test_the_exit_statuses_are_named_once() -> None:
    """SWEEP-13: 0, 1, 75, and 2 for bad input."""
    assert (EXIT_OK, EXIT_INCOMPLETE, EXIT_TRY_LATER, EXIT_USAGE) == (0, 1, 75, 2)
    assert os.EX_TEMPFAIL == EXIT_TRY_LATER
