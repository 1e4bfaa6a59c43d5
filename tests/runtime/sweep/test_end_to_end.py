"""The sweep through the real ``LoomMemory`` and the dev gateway on loopback.

The gateway's faults are switched while it runs, as an operator would with ``POST
/_dev/faults``: ``fail-text:TEXT`` fails calls carrying TEXT with Loom's uncoded error (a
poison message), ``too-large:BYTES`` answers 413 to bigger bodies, ``call-limit`` plays the
gateway's "MCP server timed out", ``coded``/``uncoded`` fail every call.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from provisioner.config.loader import Config, load_config
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from tests.support.clock import fixed_clock

from .sessions import add_session

pytestmark = pytest.mark.anyio


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=11, answers="mixed") as running:
        yield running


def config_for(tmp_path: Path, url: str) -> Config:
    folder = tmp_path / "cfg"
    folder.mkdir(exist_ok=True)
    text = f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n"
    (folder / "config.local.yaml").write_text(text, encoding="utf-8")
    return load_config(folder, None, env={})


@pytest.fixture
async def memory(
    tmp_path: Path, gateway: RunningGateway, state: StateStore
) -> AsyncIterator[LoomMemory]:
    async with LoomMemory.from_config(config_for(tmp_path, gateway.base_url), state=state) as m:
        yield m


def sweeper(memory: LoomMemory, transcripts: SqliteTranscripts, state: StateStore) -> Sweeper:
    return Sweeper(memory, transcripts, state, clock=fixed_clock)


def extraction_calls(gateway: RunningGateway) -> list[dict]:
    return [
        call.arguments for call in gateway.app.calls if call.tool == "loom_memory_set_from_messages"
    ]


class TestThroughTheDevGateway:
    async def test_every_message_reaches_loom_once(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """SWEEP-3, SWEEP-9: 3 sessions, one sweep; a second sweep sends nothing."""
        for session in ("a", "b", "c"):
            add_session(transcripts, session, 130)
        sweep = sweeper(memory, transcripts, state)
        report = await sweep.run_once()
        again = await sweep.run_once()
        assert report.messages_taken == 390 and report.batches_sent == 6
        assert again.batches_sent == 0
        assert len(gateway.app.store.memory_texts()) == 390
        assert all(not call["defer"] for call in extraction_calls(gateway))

    async def test_a_session_loom_would_refuse_stops_only_its_own_window(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """A role Loom does not take is refused before any call; other sessions still go."""
        transcripts.add_message("odd", "narrator", "once upon a time", "2026-11-30T10:00Z")
        ids = add_session(transcripts, "fine", 5)
        report = await sweeper(memory, transcripts, state).run_once()
        assert report.errors == [{"session_id": "odd", "kind": "ValueError"}]
        assert report.stopped == "done" and state.watermark("fine") == ids[-1]
        assert state.watermark("odd") == 0

    async def test_a_poison_message_is_skipped_after_three_sweeps(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """SWEEP-8 through the wire: fail-text plays Loom's uncoded error on one message."""
        ids = add_session(transcripts, "a", 100, poison_at=(42,))
        gateway.app.faults.switch("fail-text:POISON")
        sweep = sweeper(memory, transcripts, state)
        reports = [await sweep.run_once() for _ in range(3)]
        assert [r.messages_skipped for r in reports] == [0, 0, 1]
        assert len(extraction_calls(gateway)) <= 3 + 7 + 1
        (row,) = state.audit()
        assert (row["kind"], row["message_id"]) == ("skipped", ids[42])
        assert len(gateway.app.store.memory_texts()) == 99

    @pytest.mark.parametrize("fault", ["uncoded", "coded", "may-pass"])
    async def test_a_loom_failing_every_batch_for_100_sweeps_skips_nothing(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
        fault: str,
    ) -> None:
        """SWEEP-7, SWEEP-8: an outage is never taken for poison; afterwards all goes in."""
        ids = add_session(transcripts, "a", 40)
        gateway.app.faults.switch(fault)
        sweep = sweeper(memory, transcripts, state)
        for _ in range(100):
            await sweep.run_once()
        assert state.audit() == [] and state.watermark("a") == 0
        gateway.app.faults.switch("")
        await sweep.run_once()
        assert state.watermark("a") == ids[-1]

    async def test_a_413_halves_the_budget_until_the_body_fits_and_the_cut_stays(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """SWEEP-5: a 20,000-byte gateway limit: 128 → 64 → 32 → 16 KiB, then it goes."""
        ids = add_session(transcripts, "a", 200, size=1000)
        gateway.app.faults.switch("too-large:20000")
        sweep = sweeper(memory, transcripts, state)
        reports = [await sweep.run_once() for _ in range(4)]
        assert [r.budget_bytes // 1024 for r in reports] == [64, 32, 16, 16]
        assert reports[-1].budget_cut_reason == "too_large"
        assert state.watermark("a") == ids[-1]
        assert [row["kind"] for row in state.audit()] == ["budget"] * 3
        assert memory.diagnostics()["batch_budget"]["cut_reason"] == "too_large"

    async def test_the_gateway_call_limit_halves_and_good_batches_grow_it_back(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """SWEEP-5: "MCP server timed out" cuts; ten batches in a row through restore it."""
        add_session(transcripts, "a", 1500)
        gateway.app.faults.switch("call-limit")
        sweep = sweeper(memory, transcripts, state)
        cut = await sweep.run_once()
        assert (cut.budget_messages, cut.budget_cut_reason) == (50, "timeout")
        gateway.app.faults.switch("")
        grown = await sweep.run_once()
        assert (grown.budget_messages, grown.budget_cut_reason) == (100, None)
        sizes = [len(call["messages"]) for call in extraction_calls(gateway)[1:]]
        assert sizes[:11] == [50] * 10 + [100]

    async def test_a_gateway_gone_ends_the_sweep_and_the_open_breaker_ends_the_next(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
    ) -> None:
        """SWEEP-10: the gateway stops after its catalog was read: the first call is refused
        and ends the sweep; the breaker it opened ends the next sweep before any call."""
        for session in ("a", "b"):
            add_session(transcripts, session, 5)
        gateway.stop()
        sweep = sweeper(memory, transcripts, state)
        first = await sweep.run_once()
        second = await sweep.run_once()
        assert (first.stopped, first.batches_sent) == ("unreachable", 0)  # never sent
        assert second.stopped == "breaker_open"
        assert [e["kind"] for e in second.errors] == ["CircuitOpen"]
        assert state.watermark("a") == 0


class TestCanaries:
    async def test_no_message_text_reaches_audit_rows_reports_diagnostics_or_logs(
        self,
        gateway: RunningGateway,
        memory: LoomMemory,
        transcripts: SqliteTranscripts,
        state: StateStore,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Every message carries a canary; poison, a 413 and a cut message make every kind of
        audit row and error, and no canary shows up anywhere but in Loom."""
        canaries = []
        for n in range(60):
            canary = f"CANARY-{uuid.uuid4().hex}"
            canaries.append(canary)
            poison = "POISON " if n == 20 else ""
            transcripts.add_message("s", "user", f"{poison}{canary} fact {n}", "2026-11-30T10:00Z")
        huge = f"CANARY-{uuid.uuid4().hex}"
        canaries.append(huge)
        transcripts.add_message("s", "user", (huge + " ") * 20_000, "2026-11-30T11:00Z")
        transcripts.add_message("s", "user", "a last plain message", "2026-11-30T12:00Z")
        caplog.set_level(logging.DEBUG)
        sweep = sweeper(memory, transcripts, state)
        gateway.app.faults.switch("too-large:200000,fail-text:POISON")
        reports = [(await sweep.run_once()).as_dict() for _ in range(5)]
        kinds = {row["kind"] for row in state.audit()}
        assert {"skipped", "cut"} <= kinds
        visible = json.dumps([state.audit(), reports, memory.diagnostics()]) + caplog.text
        leaked = [c for c in canaries if c in visible]
        assert not leaked
        assert memory.diagnostics()["last_error"] is not None
