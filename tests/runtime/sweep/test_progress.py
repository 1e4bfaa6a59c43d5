"""A hung Loom looks like a hung Loom, not like a frozen sweep (the progress of a sweep).

The printer of ``nerve memory sweep`` is driven by an injected clock: a fake stream that says
it is a terminal gets the line redrawn in place with "waiting for Loom: N s of 130 s"; one
that is not gets a line at most every ``PROGRESS_EVERY_S``. The sweep tells the printer each
batch that goes out and comes back; with several windows in flight (SWEEP-14) the line shows
the batch held longest and how many are in flight. One test runs the real command on a
pseudo-terminal against the dev gateway with Loom hanging, and interrupts it.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provisioner.cli.sweep_progress import (
    LINE_WIDTH,
    PROGRESS_EVERY_S,
    ProgressPrinter,
    sweep_with_progress,
)
from provisioner.devgateway import serve_in_thread
from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.loom.backend import EXTRACT_DEADLINE_S
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.outcomes import SweepProgress
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import FakeLoom
from tests.support.clock import FakeClock, fixed_clock
from tests.support.processes import clean_environment

from .sessions import add_session

BUDGET = BatchBudget.default(100, 128 * 1024)
PTY_WAIT_S = 60.0  # how long the pty test waits for a line before it gives up (a stuck run)


class FakeStream(io.StringIO):
    """A text stream that says whether it is a terminal."""

    def __init__(self, *, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


class BrokenStream(FakeStream):
    def write(self, text: str) -> int:
        raise OSError("the terminal went away")


def out(session: str = "alpha", batch: int = 1, done: int = 0) -> SweepProgress:
    return SweepProgress(done, 2, 40, BUDGET, session, batch, waiting=True)


def back(session: str = "alpha", batch: int = 1, done: int = 0) -> SweepProgress:
    return SweepProgress(done, 2, 40, BUDGET, session, batch, waiting=False)


def redraws(stream: FakeStream) -> list[str]:
    """What a terminal shows after each redraw: the text after each carriage return."""
    return [part.rstrip(" \n") for part in stream.getvalue().split("\r") if part.strip()]


class TestOnATerminal:
    def test_the_line_names_the_session_the_batch_and_the_time_loom_has_waited(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=EXTRACT_DEADLINE_S)
        printer(out(batch=3))
        clock.now += 35
        printer.tick()
        assert redraws(stream) == [
            "session 1/2 alpha, batch 3: waiting for Loom: 0 s of 130 s",
            "session 1/2 alpha, batch 3: waiting for Loom: 35 s of 130 s",
        ]

    def test_the_deadline_shown_is_the_extraction_deadline(self) -> None:
        """SWEEP-3: up to 130 s per call; the printer says "of 130 s" from that constant."""
        stream = FakeStream(terminal=True)
        ProgressPrinter(stream, clock=FakeClock())(out())
        assert redraws(stream)[-1].endswith(f"of {EXTRACT_DEADLINE_S:g} s")

    def test_when_the_batch_comes_back_the_line_counts_again(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(out())
        clock.now += 4
        printer(back())
        printer(SweepProgress(1, 2, 40, BUDGET))
        printer.finish()
        assert redraws(stream)[-2:] == [
            "sessions 0/2, 40 messages taken, budget 100 messages / 128 KiB",
            "sessions 1/2, 40 messages taken, budget 100 messages / 128 KiB",
        ]
        assert stream.getvalue().endswith("\n")  # the report starts on a line of its own

    def test_a_second_batch_restarts_the_wait(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(out(batch=1))
        clock.now += 50
        printer(back(batch=1))
        printer(out(batch=2))
        clock.now += 2
        printer.tick()
        assert redraws(stream)[-1] == "session 1/2 alpha, batch 2: waiting for Loom: 2 s of 130 s"

    def test_a_tick_that_changes_nothing_draws_nothing(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(out())
        clock.now += 0.4
        printer.tick()
        printer.tick()
        assert len(redraws(stream)) == 1

    def test_a_hostile_or_long_session_id_is_shown_printable_and_the_line_fits(self) -> None:
        stream = FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=FakeClock(), deadline_s=130)
        printer(out(session="\x1b[2Jwipe" + "x" * 300))
        written = stream.getvalue()
        assert "\x1b" not in written
        for line in written.split("\r"):
            assert len(line) <= LINE_WIDTH
        assert "?[2Jwipe" in written and "…" in written

    def test_a_stream_that_fails_ends_the_printing_not_the_sweep(self) -> None:
        printer = ProgressPrinter(BrokenStream(terminal=True), clock=FakeClock(), deadline_s=130)
        printer(out())
        printer.tick()
        printer.finish()  # nothing raised


def several(session: str, batch: int, in_flight: int, *, waiting: bool = True) -> SweepProgress:
    """A step of one of several windows in flight (SWEEP-14)."""
    return SweepProgress(3, 9, 40, BUDGET, session, batch, waiting, in_flight)


class TestSeveralWindowsInFlight:
    """SWEEP-14: each window tells its own batches; the line follows the one held longest."""

    def test_the_line_shows_the_batch_held_longest_and_how_many_are_in_flight(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(several("alpha", 2, 1))
        clock.now += 5
        printer(several("beta", 1, 2))
        clock.now += 3
        printer.tick()
        assert redraws(stream)[-1] == (
            "session 4/9 alpha, batch 2: waiting for Loom: 8 s of 130 s; 2 in flight"
        )
        printer(several("alpha", 2, 2, waiting=False))  # alpha's answer: beta waits on
        assert redraws(stream)[-1] == (
            "session 4/9 beta, batch 1: waiting for Loom: 3 s of 130 s; 2 in flight"
        )
        printer(several("alpha", 3, 2))  # alpha's next batch starts its own wait
        clock.now += 10
        printer.tick()
        assert redraws(stream)[-1] == (
            "session 4/9 beta, batch 1: waiting for Loom: 13 s of 130 s; 2 in flight"
        )
        printer(several("beta", 1, 1, waiting=False))
        assert redraws(stream)[-1] == "session 4/9 alpha, batch 3: waiting for Loom: 10 s of 130 s"

    def test_a_window_that_ends_takes_its_wait_with_it_and_counts_show_when_none_waits(
        self,
    ) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(several("alpha", 1, 2))
        printer(several("beta", 1, 2))
        printer(several("beta", 1, 2, waiting=False))
        printer(SweepProgress(4, 9, 80, BUDGET, in_flight=1))  # beta's window done
        assert redraws(stream)[-1].startswith("session 5/9 alpha, batch 1: waiting for Loom")
        printer(several("alpha", 1, 1, waiting=False))
        assert redraws(stream)[-1] == (
            "sessions 3/9, 40 messages taken, budget 100 messages / 128 KiB"
        )

    def test_with_long_session_ids_the_count_in_flight_still_fits_the_line(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(SweepProgress(122, 4567, 40, BUDGET, "x" * 200, 12, True, 32))
        clock.now += 125
        printer.tick()
        line = redraws(stream)[-1]
        assert len(line) <= LINE_WIDTH and line.endswith("125 s of 130 s; 32 in flight")
        assert "session 123/4567 x" in line and "…" in line

    def test_without_a_terminal_the_line_says_it_too(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=False)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(several("alpha", 1, 1))
        printer(several("beta", 4, 2))
        clock.now += PROGRESS_EVERY_S
        printer.tick()
        assert stream.getvalue() == (
            "sweep: session 4/9 alpha, batch 1: waiting for Loom: 10 s of 130 s; "
            "40 messages taken; 2 in flight\n"
        )


class TestWithoutATerminal:
    def test_a_short_sweep_prints_no_progress(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=False)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        for step in range(9):
            clock.now += 1
            printer(out(batch=step + 1))
            printer(back(batch=step + 1))
        printer.finish()
        assert stream.getvalue() == ""

    def test_a_long_sweep_prints_a_line_at_most_every_ten_seconds(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=False)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        printer(out())
        written_at = []
        for _ in range(45):  # a hung Loom: ticks every second for 45 s
            clock.now += 1
            before = stream.getvalue().count("\n")
            printer.tick()
            if stream.getvalue().count("\n") > before:
                written_at.append(clock.now - 1_000.0)
        assert written_at == [10.0, 20.0, 30.0, 40.0]
        assert PROGRESS_EVERY_S == 10
        lines = stream.getvalue().splitlines()
        assert lines[0] == (
            "sweep: session 1/2 alpha, batch 1: waiting for Loom: 10 s of 130 s; 40 messages taken"
        )
        assert lines[-1].startswith("sweep: session 1/2 alpha, batch 1: waiting for Loom: 40 s")

    def test_steps_between_two_lines_do_not_add_lines(self) -> None:
        clock, stream = FakeClock(), FakeStream(terminal=False)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        clock.now += 10
        for batch in range(1, 50):
            printer(out(batch=batch))
            printer(back(batch=batch))
        assert stream.getvalue().count("\n") == 1
        assert "\r" not in stream.getvalue()


@pytest.mark.anyio
class TestTheSweepTellsEachBatch:
    async def test_each_batch_is_told_going_out_and_coming_back(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        add_session(transcripts, "a", 150)
        add_session(transcripts, "b", 10)
        seen: list[SweepProgress] = []
        await Sweeper(loom, transcripts, state, clock=fixed_clock).run_once(progress=seen.append)
        steps = [(p.session_id, p.batch, p.waiting, p.sessions_done) for p in seen]
        assert steps == [
            ("a", 1, True, 0),
            ("a", 1, False, 0),
            ("a", 2, True, 0),
            ("a", 2, False, 0),
            (None, 0, False, 1),
            ("b", 1, True, 1),
            ("b", 1, False, 1),
            (None, 0, False, 2),
        ]
        assert seen[-1].messages_taken == 160 and seen[-1].sessions_total == 2

    async def test_a_failed_batch_is_told_coming_back_too(
        self, loom: FakeLoom, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        from provisioner.runtime.gateway.errors import GatewayUnreachable

        add_session(transcripts, "a", 3)
        loom.fail_every_batch = GatewayUnreachable("refused")
        seen: list[SweepProgress] = []
        await Sweeper(loom, transcripts, state, clock=fixed_clock).run_once(progress=seen.append)
        assert [p.waiting for p in seen] == [True, False]

    async def test_the_ticker_redraws_the_wait_while_loom_holds_the_batch(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """The waiting time comes from the printer's clock, moved by the test; the ticker only
        redraws it, and stops with the sweep."""
        add_session(transcripts, "hung", 3)
        held, clock, stream = FakeLoom(held=True), FakeClock(), FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        sweeper = Sweeper(held, transcripts, state, clock=fixed_clock)
        sweep = asyncio.create_task(sweep_with_progress(sweeper, printer, tick_s=0.001))
        while held.held_calls == 0:
            await asyncio.sleep(0.001)
        clock.now += 35
        for _ in range(10_000):  # until a tick has redrawn it
            if "waiting for Loom: 35 s of 130 s" in stream.getvalue():
                break
            await asyncio.sleep(0.001)
        assert "session 1/1 hung, batch 1: waiting for Loom: 35 s of 130 s" in stream.getvalue()
        held.release.set()
        report = await sweep
        assert report.messages_taken == 3
        assert redraws(stream)[-1].startswith("sessions 1/1, 3 messages taken")
        assert stream.getvalue().endswith("\n")

    async def test_two_windows_held_at_once_show_on_one_line(
        self, transcripts: SqliteTranscripts, state: StateStore
    ) -> None:
        """SWEEP-14: the first window goes alone and through, so two go side by side; Loom
        holds both, and the line counts the wait of the one held longest, and the two."""
        for session in ("a", "b", "c"):
            add_session(transcripts, session, 3)
        held, clock = FakeLoom(held=frozenset({"b", "c"})), FakeClock()
        stream = FakeStream(terminal=True)
        printer = ProgressPrinter(stream, clock=clock, deadline_s=130)
        sweeper = Sweeper(held, transcripts, state, clock=fixed_clock, concurrency=4)
        sweep = asyncio.create_task(sweep_with_progress(sweeper, printer, tick_s=0.001))
        while held.held_calls < 2:
            await asyncio.sleep(0.001)
        clock.now += 7
        wanted = "session 2/3 b, batch 1: waiting for Loom: 7 s of 130 s; 2 in flight"
        for _ in range(10_000):  # until a tick has redrawn it
            if wanted in stream.getvalue():
                break
            await asyncio.sleep(0.001)
        assert wanted in stream.getvalue()
        held.release.set()
        report = await sweep
        assert (report.sessions_swept, report.messages_taken) == (3, 9)
        assert redraws(stream)[-1].startswith("sessions 3/3, 9 messages taken")


def _read_until(descriptor: int, wanted: str, limit_s: float) -> str:
    """What the pseudo-terminal shows until ``wanted`` appears (or ``limit_s`` passes)."""
    shown = b""
    give_up = time.monotonic() + limit_s
    while wanted.encode() not in shown and time.monotonic() < give_up:
        ready, _, _ = select.select([descriptor], [], [], 0.2)
        if ready:
            try:
                shown += os.read(descriptor, 65536)
            except OSError:
                break
    return shown.decode(errors="replace")


@pytest.mark.slow
def test_a_hung_loom_shows_on_a_terminal_and_an_interrupt_keeps_everything(
    tmp_path: Path,
) -> None:
    """The real command on a pseudo-terminal, Loom hanging on the extraction: the line names
    the session and the batch and counts the wait; Ctrl-C ends it with 130, nothing taken and
    nothing lost."""
    config, options = tmp_path / "cfg", ["--config-dir", str(tmp_path / "cfg")]
    options += ["--workspace", str(tmp_path / "ws")]
    env = clean_environment(tmp_path / "home")
    with serve_in_thread(faults="hang@loom_memory_set_from_messages") as gateway:
        config.mkdir()
        (config / "config.local.yaml").write_text(
            f"memory:\n  backend: loom\nmcp_gateway_url: {gateway.base_url}\n", encoding="utf-8"
        )
        record = {
            "session_id": "kitchen",
            "role": "user",
            "content": "the kettle is blue",
            "created_at": "2026-11-30T10:00:00+00:00",
        }
        (tmp_path / "in.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
        command = [sys.executable, "-m", "provisioner", "memory"]
        subprocess.run(
            [*command, "import", str(tmp_path / "in.jsonl"), *options], check=True, env=env
        )
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [*command, "sweep", *options], stdout=subprocess.PIPE, stderr=follower, env=env
        )
        os.close(follower)
        try:
            shown = _read_until(leader, "waiting for Loom: 0 s of 130 s", PTY_WAIT_S)
        finally:
            process.send_signal(signal.SIGINT)
            stdout, _ = process.communicate(timeout=60)
            os.close(leader)
    assert "session 1/1 kitchen, batch 1: waiting for Loom: 0 s of 130 s" in shown
    assert "kettle" not in shown
    assert process.returncode == 130 and stdout == b""
    with StateStore(config / "memory" / "state.sqlite3") as state:
        assert state.watermark("kitchen") == 0
