"""Nerve's real rows (NERVE-9): what Nerve's own writers put in ``nerve.db`` — its turns, and a
Codex thread ingested by its ``CodexIngester`` — and what of it the sweep sends to Loom.

Only conversation text reaches Loom: a Codex tool-call row (the tool's name in ``content``),
the fallback row for an output that came before its call, a reasoning row and a tool-only turn
are passed over; the turns of both sides are sent.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

nerve_db = pytest.importorskip("nerve.db", reason=NO_NERVE)

from nerve.sources.codex_threads.base import ThreadEvent, WorkspaceFilter  # noqa: E402
from nerve.sources.codex_threads.ingester import CodexIngester  # noqa: E402

from provisioner.integrations.nerve import NerveTranscripts  # noqa: E402
from provisioner.runtime.state import StateStore  # noqa: E402
from provisioner.runtime.sweep.sweeper import Sweeper  # noqa: E402
from testbed.loom import FakeLoom  # noqa: E402
from tests.support.clock import fixed_clock  # noqa: E402

THREAD = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def codex_events(cwd: Path) -> list[ThreadEvent]:
    """A Codex thread as its origin hands it to Nerve: a question, a call of ``shell`` with its
    output, an answer, reasoning, and an output whose call never came."""

    def event(kind: str, sequence: int, **payload: object) -> ThreadEvent:
        return ThreadEvent(kind, THREAD, sequence, AT, dict(payload))  # type: ignore[arg-type]

    return [
        event("thread_in_scope", 1, id=THREAD, cwd=str(cwd), originator="codex_cli"),
        event("user_message", 2, message="Which files changed today?"),
        event("tool_call", 3, call_id="c1", name="shell", arguments='{"command": ["ls"]}'),
        event("tool_result", 4, call_id="c1", output="a.txt\nb.txt"),
        event("reasoning", 5, summary=[]),
        event("assistant_message", 6, message="Two files: a.txt and b.txt."),
        event("tool_result", 7, call_id="c9", output="output before its call"),
    ]


async def write_nerves_rows(path: Path, workspace: Path) -> None:
    """Nerve's own writers: a native turn with a tool-only assistant row, then a Codex
    thread through Nerve's ingester."""
    database = nerve_db.Database(path)
    await database.connect()
    try:
        await database.create_session("native")
        await database.add_message("native", "user", "Remind me to call Ada.")
        await database.add_message(
            "native",
            "assistant",
            "",
            blocks=[{"type": "tool_call", "tool": "reminder", "input": {"who": "Ada"}}],
        )
        await database.add_message(
            "native",
            "assistant",
            "Done: a reminder to call Ada.",
            blocks=[
                {"type": "tool_call", "tool": "reminder", "input": {"who": "Ada"}},
                {"type": "text", "content": "Done: a reminder to call Ada."},
            ],
        )
        ingester = CodexIngester(
            database,
            origin_id="test-origin",
            workspace_filter=WorkspaceFilter(mode="any"),
        )
        for event in codex_events(workspace):
            await ingester.ingest(event)
    finally:
        await database.close()


@pytest.fixture
def nerve_db_path(machine: Machine) -> Path:
    path = machine.state / "nerve.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(write_nerves_rows(path, machine.workspace))
    return path


def sweep(path: Path, state_path: Path) -> FakeLoom:
    loom = FakeLoom()

    async def run() -> None:
        with NerveTranscripts(path) as source, StateStore(state_path) as state:
            await Sweeper(loom, source, state, clock=fixed_clock).run_once()

    asyncio.run(run())
    return loom


class TestOnlyConversationReachesLoom:
    def test_the_rows_nerve_wrote_are_the_shapes_the_docs_list(self, nerve_db_path: Path) -> None:
        """The Codex rows are as docs/sweep.md says: the tool's name in content, the early
        output in the fallback row's content, both with a tool_call block and no text."""
        import sqlite3

        rows = sqlite3.connect(nerve_db_path).execute(
            "SELECT role, content, external_id FROM messages WHERE session_id = ? ORDER BY id",
            (f"codex:{THREAD}",),
        )
        shapes = [
            (role, content, (external or "").split(":")[0]) for role, content, external in rows
        ]
        assert ("assistant", "shell", "tool_call") in shapes
        assert ("assistant", "output before its call", "tool_call") in shapes
        assert ("assistant", "", "reasoning") in shapes

    def test_the_sweep_sends_the_turns_of_both_sides_and_nothing_of_the_tools(
        self, nerve_db_path: Path, machine: Machine
    ) -> None:
        loom = sweep(nerve_db_path, machine.home / "state.sqlite3")
        sent = {call.session_id: list(call.contents) for call in loom.calls}
        assert sent == {
            "native": ["Remind me to call Ada.", "Done: a reminder to call Ada."],
            f"codex:{THREAD}": ["Which files changed today?", "Two files: a.txt and b.txt."],
        }


HOLD_LOCK = textwrap.dedent(
    """
    import sqlite3, sys
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("PRAGMA locking_mode = EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
    print("held", flush=True)
    sys.stdin.read()
    """
)


class TestABusyNerveDb:
    def test_an_exclusive_lock_is_busy_exit_75_not_a_file_that_is_not_nerves(
        self, nerve_db_path: Path, run_package: RunHost
    ) -> None:
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(nerve_db_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            done = run_package("memory", "sweep", "--plan", "--nerve-db", str(nerve_db_path))
        finally:
            holder.communicate("", timeout=60)
        assert done.returncode == 75, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert str(nerve_db_path) in done.stderr and "busy" in done.stderr
        assert "expected Nerve's nerve.db" not in done.stderr
