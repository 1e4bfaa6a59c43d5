"""SWEEP-15 as a property: random faults and queue outcomes during queued sweeps, then sweeps
run to the end, leave every message written into Loom exactly once.

"Exactly once" is counted where Loom writes: a waiting extraction writes its messages at once;
a queued batch writes them only when it is done. A batch Loom failed wrote nothing, so its
replay, or its window sent again in waiting mode, writes it for the first time. What may
legitimately write twice — a queued extraction whose answer is lost after Loom queued it —
is not drawn here: the scripted Loom fails those calls before it looks at them.

Drawn per example: the sessions and their sizes; for each call to Loom (extraction, status,
retry) no fault, a "not now", an open breaker, no answer, a process stopped in the middle, or
a status or retry Loom carried out whose answer was lost; and for each status answer about a
batch still in the queue: queued, running, done, failed, left out, or a state Loom's contract
does not know. After every sweep, no watermark stands past a message Loom has not written.
Through the dev gateway as well, with its ``queue`` fault and a flaky ``loom_op``.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.budget import QUEUED
from provisioner.runtime.gateway.errors import CircuitOpen, CodedFault, MayPass, NoAnswer
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import SqliteTranscripts
from testbed.loom import MISSING, AfterLoom, FakeLoom, QueuedBatch
from tests.support.clock import fixed_clock

from .sessions import add_session


class Interrupted(BaseException):
    """The process stopping in the middle of a call."""


FAULTS: dict[str, Callable[[], BaseException | AfterLoom | None]] = {
    "none": lambda: None,
    "may_pass": lambda: MayPass("upstream unavailable"),
    "coded": lambda: CodedFault("busy", code="GRANT_BUSY"),
    "breaker": lambda: CircuitOpen("open", retry_in_s=15.0),
    "no_answer": lambda: NoAnswer("no answer", deadline_s=10.0),
    "stopped": lambda: Interrupted(),
    "answer_lost": lambda: AfterLoom(Interrupted()),
}
STEPS = ("queued", "running", "done", "failed", MISSING, "finished")
RANDOM_SWEEPS_MAX = 40
CALM_SWEEPS_MAX = 30  # with no faults and every batch done at once, a backlog drains by then


def run_sweep(sweeper: Sweeper) -> None:
    with contextlib.suppress(Interrupted):
        asyncio.run(sweeper.run_once())


def assert_no_watermark_past_an_unwritten_message(
    loom: FakeLoom, state: StateStore, sessions: dict[str, list[int]]
) -> None:
    for session, ids in sessions.items():
        watermark = state.watermark(session)
        unwritten = [i for i in ids if i <= watermark and loom.written[i] == 0]
        assert not unwritten, f"{session}: the watermark {watermark} passed {unwritten[:3]}"


def assert_each_message_is_written_once(
    sizes: list[int], faults: list[str], steps: list[str], restart_every: int
) -> None:
    """Sessions of ``sizes`` swept through ``faults`` and Loom's queue ``steps``, restarted
    every ``restart_every`` sweeps, then calmly to the end: no watermark ever passes an
    unwritten message, and each message is written once."""
    drawn = deque(steps)

    def step(queue_id: str, batch: QueuedBatch) -> str:
        return drawn.popleft() if drawn else "queued"

    loom = FakeLoom(queue=True, step=step, faults=deque(FAULTS[name]() for name in faults))
    with tempfile.TemporaryDirectory(prefix="queued-property-") as folder:
        path = Path(folder) / "state.sqlite3"
        with SqliteTranscripts(Path(folder) / "transcripts.sqlite3") as transcripts:
            sessions = {
                f"s{n}": add_session(transcripts, f"s{n}", size) for n, size in enumerate(sizes)
            }
            state = StateStore(path)
            try:
                for number in range(RANDOM_SWEEPS_MAX + CALM_SWEEPS_MAX):
                    if number == RANDOM_SWEEPS_MAX or not (loom.faults or drawn):
                        loom.faults.clear()
                        drawn.clear()
                        loom.step = lambda queue_id, batch: "done"
                    if restart_every and number % restart_every == 0:  # a new process
                        state.close()
                        state = StateStore(path)
                    run_sweep(Sweeper(loom, transcripts, state, clock=fixed_clock, mode=QUEUED))
                    assert_no_watermark_past_an_unwritten_message(loom, state, sessions)
                    if all(state.watermark(s) == ids[-1] for s, ids in sessions.items()):
                        break
                every = [i for ids in sessions.values() for i in ids]
                assert all(state.watermark(s) == ids[-1] for s, ids in sessions.items())
            finally:
                state.close()
    assert {i: loom.written[i] for i in every} == dict.fromkeys(every, 1)


EXAMPLES = 80  # CI's slow tier (-m slow); the default run tries a tenth of them
_SIZES = st.lists(st.integers(min_value=1, max_value=450), min_size=1, max_size=3)
_FAULTS = st.lists(st.sampled_from(sorted(FAULTS)), max_size=40)
_STEPS = st.lists(st.sampled_from(STEPS), max_size=60)
_RESTART_EVERY = st.integers(min_value=0, max_value=4)


@settings(
    max_examples=EXAMPLES // 10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(sizes=_SIZES, faults=_FAULTS, steps=_STEPS, restart_every=_RESTART_EVERY)
def test_random_faults_then_sweeps_to_the_end_write_each_message_once(
    sizes: list[int], faults: list[str], steps: list[str], restart_every: int
) -> None:
    assert_each_message_is_written_once(sizes, faults, steps, restart_every)


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(sizes=_SIZES, faults=_FAULTS, steps=_STEPS, restart_every=_RESTART_EVERY)
def test_random_faults_then_sweeps_to_the_end_write_each_message_once_over_all_the_examples(
    sizes: list[int], faults: list[str], steps: list[str], restart_every: int
) -> None:
    assert_each_message_is_written_once(sizes, faults, steps, restart_every)


# --- the same through the real backend and the dev gateway ------------------------------------

GATEWAY_EXAMPLES = 6
GATEWAY_SWEEPS_MAX = 40


@settings(
    max_examples=GATEWAY_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=420), min_size=1, max_size=3),
    seed=st.integers(min_value=0, max_value=2**16),
    failed=st.sampled_from(["0.2", "0.5", "1"]),
    flaky=st.sampled_from(["0.1", "0.3"]),
)
def test_through_the_dev_gateway_each_message_is_written_once(
    sizes: list[int], seed: int, failed: str, flaky: str
) -> None:
    """Batches Loom fails (``queue:failed``), a ``loom_op`` that answers 503 or a
    coded fault now and then, extractions turned away before Loom looks at them; then the
    faults go and the sweeps run to the end."""
    spec = (
        f"queue:failed@loom_op={failed},503@loom_op={flaky},"
        f"coded:GRANT_BUSY@loom_op={flaky},503@loom_memory_set_from_messages={flaky}"
    )
    with (
        tempfile.TemporaryDirectory(prefix="queued-gateway-") as folder,
        serve_in_thread(seed=seed, faults=spec, answers="mixed") as gateway,
        SqliteTranscripts(Path(folder) / "transcripts.sqlite3") as transcripts,
        StateStore(Path(folder) / "state.sqlite3") as state,
    ):
        for number, size in enumerate(sizes):
            add_session(transcripts, f"s{number}", size)
        sessions = {
            session: [(m.id, m.content) for m in transcripts.messages_after(session, 0, 1000)]
            for session in transcripts.sessions()
        }
        asyncio.run(sweep_to_the_end(gateway, transcripts, state, sessions))
        texts = gateway.app.store.extracted_texts()
    assert len(texts) == sum(sizes) == len(set(texts))


async def sweep_to_the_end(
    gateway: RunningGateway,
    transcripts: SqliteTranscripts,
    state: StateStore,
    sessions: dict[str, list[tuple[int, str]]],
) -> None:
    """Sweep until every watermark is at its session's end; after every sweep, no watermark
    stands past a message the stand-in has not written."""
    async with LoomMemory(gateway_url=gateway.base_url, state=state) as memory:
        sweeper = Sweeper(memory, transcripts, state, clock=fixed_clock, mode=QUEUED)
        for number in range(GATEWAY_SWEEPS_MAX):
            if number == GATEWAY_SWEEPS_MAX // 2:
                gateway.app.faults.switch("")
            await sweeper.run_once()
            written = set(gateway.app.store.extracted_texts())
            for session, messages in sessions.items():
                watermark = state.watermark(session)
                passed = [text for message_id, text in messages if message_id <= watermark]
                assert set(passed) <= written, f"{session}: the watermark passed an unwritten one"
            if all(state.watermark(s) == m[-1][0] for s, m in sessions.items()):
                return
    raise AssertionError(f"not swept to the end in {GATEWAY_SWEEPS_MAX} sweeps")
