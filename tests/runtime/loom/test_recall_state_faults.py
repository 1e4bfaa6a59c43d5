"""Startup recall never blocks the loop on its state, and never raises for it (REL-3, REL-4).

The state file is a real SQLite file and each fault a real one: another process holds its lock
(a child Python in ``BEGIN EXCLUSIVE``), its pages are damaged on disk, or SQLite finds no room
for the write (``max_page_count`` caps the store where a full disk would). Loom is the dev
gateway on loopback. Nothing here compares a duration with a bound: the order of events shows
that the loop ran while the state was held, and the recall's budget is injected short where a
test must see it run out. A lookup the loop makes itself is shown by its answer being ready in
the recall's first turn of the loop, which no hand-off to the state's worker thread allows.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli.main import main
from provisioner.devgateway import RunningGateway
from provisioner.runtime.errors import EXIT_LOOK_AT_FILE, EXIT_TRY_LATER, FileFault
from provisioner.runtime.loom import backend as backend_module
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.state import StateStore
from tests.support.machine_faults import process_holding
from tests.support.state_sql import state_rows, state_transaction

from .config_files import loom_config

pytestmark = pytest.mark.anyio

LONG_BUDGET_S = 60.0  # never reached: the test releases the lock first
SHORT_BUDGET_S = 1.0  # reached: the lock is held past it
# Holds the write lock until a line arrives on stdin: an empty one (closed) rolls back, and
# "SESSION ITEM" freezes ITEM for SESSION in the same transaction before letting go.
LOCK_HOLDER = """
import json, sqlite3, sys
database = sqlite3.connect(sys.argv[1], isolation_level=None)
database.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
line = sys.stdin.readline().split()
if line:
    session, item = line
    database.execute(
        "INSERT INTO frozen_recall (session_id, source, items, frozen_at) VALUES (?, ?, ?, ?)",
        (session, "pack", json.dumps([item]), 1.0),
    )
    database.execute("COMMIT")
else:
    database.execute("ROLLBACK")
"""


@contextmanager
def held_by_another_process(path: Path) -> Iterator[subprocess.Popen[str]]:
    """``path`` write-locked by a second process until the block ends; the process is given."""
    with process_holding(LOCK_HOLDER, str(path)) as holder:
        yield holder


def new_state_file(path: Path) -> Path:
    """A state file at the latest schema, as the engine leaves it, closed."""
    StateStore(path).close()
    return path


def frozen_items(path: Path, session_id: str) -> tuple[str, ...] | None:
    with StateStore(path) as state:
        frozen = state.frozen_recall(session_id)
    return None if frozen is None else frozen.items


def damage_every_page_but_the_first(path: Path) -> None:
    """Overwrite the tables' pages on disk; the header and schema (page 1) stay readable."""
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    assert len(data) > 2 * page_size
    data[page_size:] = b"\xa5" * (len(data) - page_size)
    path.write_bytes(bytes(data))


def damage_the_frozen_recalls(path: Path) -> None:
    """Overwrite the root pages of the frozen recalls' table and index; the rest stays whole,
    so the file opens."""
    with closing(sqlite3.connect(path)) as database:
        roots = [
            root
            for (root,) in database.execute(
                "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'frozen_recall'"
            )
        ]
    data = bytearray(path.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    for root in roots:
        data[(root - 1) * page_size : root * page_size] = b"\xa5" * page_size
    path.write_bytes(bytes(data))


def backend(gateway: RunningGateway, **options: object) -> LoomMemory:
    return LoomMemory(gateway_url=gateway.base_url, **options)  # type: ignore[arg-type]


class TestAStateAnotherProcessHolds:
    async def test_the_session_is_told_at_once_and_the_recall_is_frozen_once_the_lock_goes(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3, REC-3: the recall answers while the state is locked; freezing waits for the
        lock off the loop, and lands as soon as the other process lets go."""
        gateway.app.store.remember("first fact")
        path = new_state_file(tmp_path / "state.sqlite3")
        memory = backend(gateway, state_path=path, recall_deadline_s=LONG_BUDGET_S)
        async with memory:
            with held_by_another_process(path):
                recall = await memory.startup_recall("s-1")
                assert recall.items == ("first fact",)
                gateway.app.store.remember("second fact")
                assert await memory.startup_recall("s-1") == recall  # same bytes, still held
                assert frozen_items(path, "s-1") is None  # not frozen while held
        assert memory.state_fault is None
        assert frozen_items(path, "s-1") == ("first fact",)

    async def test_the_loop_runs_while_a_recall_waits_for_the_state(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3: a recall whose state step waits behind the lock lets every other task run,
        and sends Loom nothing until the state has said the session is not frozen; it answers
        once the lock goes."""
        gateway.app.store.remember("first fact")
        path = new_state_file(tmp_path / "state.sqlite3")
        memory = backend(gateway, state_path=path, recall_deadline_s=LONG_BUDGET_S)
        async with memory:
            with held_by_another_process(path):
                await memory.startup_recall("s-1")  # its freeze now waits for the lock
                calls_before = len(gateway.app.calls)
                waiting = asyncio.create_task(memory.startup_recall("s-2"))
                turns = 0
                for _ in range(20):  # the loop keeps turning: this task runs, again and again
                    await asyncio.sleep(0)
                    turns += 1
                assert turns == 20
                assert not waiting.done()  # its lookup waits behind the held lock
                assert len(gateway.app.calls) == calls_before  # and its read waits for that
            recall = await waiting
        assert recall.items == ("first fact",)
        assert memory.state_fault is None
        assert frozen_items(path, "s-2") == ("first fact",)

    async def test_a_recall_another_process_froze_first_is_what_later_rebuilds_show(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REC-3: the first one frozen wins, also against a recall this process told first
        (the other process froze it between this one's lookup and its freeze)."""
        gateway.app.store.remember("first fact")
        path = new_state_file(tmp_path / "state.sqlite3")
        memory = backend(gateway, state_path=path, recall_deadline_s=LONG_BUDGET_S)
        async with memory:
            with held_by_another_process(path) as holder:
                told = await memory.startup_recall("s-1")  # its freeze waits for the lock
                assert holder.stdin is not None
                holder.stdin.write("s-1 theirs\n")  # freezes s-1, then lets go
                holder.stdin.flush()
                assert holder.wait(timeout=30) == 0
            # s-1's freeze runs once the lock goes, and meets theirs; the loop hears of it
            # only once the worker is done with it, which settled() waits for.
            assert memory._frozen is not None
            await memory._frozen.settled()
            again = await memory.startup_recall("s-1")
        assert told.items == ("first fact",)
        assert again.items == ("theirs",)
        assert frozen_items(path, "s-1") == ("theirs",)
        assert memory.state_fault is None

    async def test_a_lock_held_past_the_budget_leaves_the_recall_unfrozen(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3: busy past the recall's budget: told, not kept, the fault named, no raise."""
        gateway.app.store.remember("first fact")
        path = new_state_file(tmp_path / "state.sqlite3")
        memory = backend(gateway, state_path=path, recall_deadline_s=SHORT_BUDGET_S)
        async with memory:
            with held_by_another_process(path):
                recall = await memory.startup_recall("s-1")
                await memory.aclose()  # waits for the freeze to give up, within the budget
        assert recall.items == ("first fact",)
        assert memory.state_fault is not None
        assert (memory.state_fault.kind, memory.state_fault.path) == ("busy", str(path))
        assert frozen_items(path, "s-1") is None


class TestTheLookupOnTheLoopNeverWaits:
    async def test_a_session_frozen_before_is_read_in_one_turn_while_another_process_holds_the_lock(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3, REC-3: with the worker idle, the loop reads the frozen recall itself through
        its read-only connection, which waits for no writer: the answer is ready in the
        recall's first turn while a second process holds the write lock, and Loom is not
        asked."""
        path = new_state_file(tmp_path / "state.sqlite3")
        with StateStore(path) as state:
            state.freeze_recall("s-old", source="pack", items=["kept before"], now=1.0)
            state.freeze_recall("s-1", source="search", items=["frozen fact"], now=1.0)
        memory = backend(gateway, state_path=path, recall_deadline_s=LONG_BUDGET_S)
        async with memory:
            first = await memory.startup_recall("s-old")  # the worker's first step opens the reader
            with held_by_another_process(path):
                answering = asyncio.create_task(memory.startup_recall("s-1"))
                await asyncio.sleep(0)  # one turn: the recall's first step
                assert answering.done()
                recall = answering.result()
        assert first.items == ("kept before",)
        assert (recall.items, recall.recalled, recall.source) == (("frozen fact",), True, "search")
        assert len(gateway.app.calls) == 0
        assert memory.state_fault is None

    async def test_a_freeze_that_holds_the_write_lock_holds_no_lookup_back(
        self, tmp_path: Path, gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """REL-3: once the worker's freeze holds the write lock it waits for no other process,
        and a reader never waits for it; a lookup made while it is still under way (held
        here just after it took the lock) is read on the loop, in the recall's first turn."""
        gateway.app.store.remember("first fact")
        path = new_state_file(tmp_path / "state.sqlite3")
        with StateStore(path) as state:
            state.freeze_recall("s-old", source="pack", items=["kept before"], now=1.0)
            state.freeze_recall("s-2", source="pack", items=["kept for s-2"], now=1.0)
        locked, release = threading.Event(), threading.Event()
        freeze_recall = StateStore.freeze_recall

        def freeze_held_once_locked(store: StateStore, *args: Any, **kwargs: Any) -> Any:
            def cue_then_hold() -> None:
                kwargs["on_locked"]()
                locked.set()
                release.wait()

            return freeze_recall(store, *args, **{**kwargs, "on_locked": cue_then_hold})

        monkeypatch.setattr(StateStore, "freeze_recall", freeze_held_once_locked)
        memory = backend(gateway, state_path=path, recall_deadline_s=LONG_BUDGET_S)
        async with memory:
            await memory.startup_recall("s-old")  # the worker's first step opens the reader
            told = await memory.startup_recall("s-1")  # its freeze goes to the worker
            await asyncio.to_thread(locked.wait)
            try:
                answering = asyncio.create_task(memory.startup_recall("s-2"))
                await asyncio.sleep(0)  # one turn: the recall's first step
                assert answering.done()
            finally:
                release.set()  # the freeze goes on, also when the assertion failed
        assert answering.result().items == ("kept for s-2",)
        assert told.items == ("first fact",)
        assert frozen_items(path, "s-1") == ("first fact",)
        assert memory.state_fault is None

    async def test_a_store_another_thread_holds_sends_the_lookup_to_the_worker_and_the_loop_runs(
        self, gateway: RunningGateway
    ) -> None:
        """REL-3: the loop never waits for a thread holding the store; the lookup goes to the
        worker, every other task runs meanwhile, Loom is sent nothing, and the lookup reads
        what the holder froze once it lets go."""
        gateway.app.store.remember("first fact")
        holding, release = threading.Event(), threading.Event()
        with StateStore(":memory:") as state:

            def hold_then_freeze() -> None:
                with state_transaction(state) as db:
                    holding.set()
                    release.wait()
                    db.execute(
                        "INSERT INTO frozen_recall (session_id, source, items, frozen_at)"
                        " VALUES ('s-1', 'pack', '[\"theirs\"]', 1.0)"
                    )

            holder = threading.Thread(target=hold_then_freeze)
            async with backend(gateway, state=state, recall_deadline_s=LONG_BUDGET_S) as memory:
                holder.start()
                await asyncio.to_thread(holding.wait)
                try:
                    answering = asyncio.create_task(memory.startup_recall("s-1"))
                    turns = 0
                    for _ in range(20):  # the loop keeps turning while the lookup waits
                        await asyncio.sleep(0)
                        turns += 1
                    assert turns == 20
                    assert not answering.done()
                    assert len(gateway.app.calls) == 0
                finally:
                    release.set()  # the holder lets go, also when an assertion failed
                recall = await answering
                await asyncio.to_thread(holder.join)
        assert (recall.items, recall.recalled) == (("theirs",), True)
        assert len(gateway.app.calls) == 0
        assert memory.state_fault is None


class TestADamagedState:
    async def test_a_state_damaged_on_disk_gives_the_recall_unfrozen(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3: the lookup and the freeze both meet damaged pages; the session is told."""
        gateway.app.store.remember("first fact")
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            for number in range(40):
                state.freeze_recall(f"old-{number}", source="pack", items=["x" * 400], now=1.0)
        damage_every_page_but_the_first(path)
        async with backend(gateway, state_path=path) as memory:
            recall = await memory.startup_recall("s-1")
            assert await memory.startup_recall("s-1") == recall
        assert recall.items == ("first fact",)
        assert memory.state_fault is not None
        assert memory.state_fault.kind == "damaged"
        last_error = memory.diagnostics()["last_error"]
        assert (last_error["op"], last_error["kind"]) == ("recall", "FileFault")

    async def test_a_damaged_page_met_on_the_loop_is_left_to_the_worker_and_the_session_is_told(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-3: the file opens, but the frozen recalls' pages are damaged. The first lookup
        (the worker's) opens the loop's reader; the next session's, read on the loop while
        the worker is idle, meets the damage, goes to the worker, and nothing raises."""
        gateway.app.store.remember("first fact")
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            for number in range(40):
                state.freeze_recall(f"old-{number}", source="pack", items=["x" * 400], now=1.0)
        damage_the_frozen_recalls(path)
        async with backend(gateway, state_path=path) as memory:
            first = await memory.startup_recall("s-1")
            recall = await memory.startup_recall("s-2")  # no turn between: the worker is idle
        assert first.items == recall.items == ("first fact",)
        assert memory.state_fault is not None
        assert (memory.state_fault.kind, memory.state_fault.path) == ("damaged", str(path))

    async def test_a_state_that_cannot_be_opened_is_never_handed_to_a_sweep(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-2, REL-3: the recall runs on a stand-in, but ``state`` raises the fault, so no
        sweeper keeps its watermarks where they would be lost."""
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            for number in range(40):
                state.freeze_recall(f"old-{number}", source="pack", items=["x" * 400], now=1.0)
        damage_every_page_but_the_first(path)
        async with backend(gateway, state_path=path) as memory:
            await memory.startup_recall("s-1")
            with pytest.raises(FileFault) as raised:
                memory.state  # noqa: B018 - the property is what is tested
        assert (raised.value.kind, raised.value.path) == ("damaged", str(path))


class TestAFullState:
    async def test_a_state_with_no_room_gives_the_recall_unfrozen(
        self, gateway: RunningGateway
    ) -> None:
        """REL-3: SQLite's own "database or disk is full" on the freeze: told, not kept."""
        facts = [f"fact {number}: " + "tea " * 100 for number in range(12)]
        for fact in facts:
            gateway.app.store.remember(fact)
        with StateStore(":memory:") as state:
            state_rows(state, "VACUUM")  # no free page left over from the schema's steps to reuse
            (pages,) = state_rows(state, "PRAGMA page_count")[0]
            state_rows(state, f"PRAGMA max_page_count = {pages}")  # no page more: the disk is full
            async with backend(gateway, state=state) as memory:
                recall = await memory.startup_recall("s-1")
                assert await memory.startup_recall("s-1") == recall
            assert state.frozen_recall("s-1") is None
        assert len(recall.items) == len(facts)
        assert memory.state_fault is not None
        assert memory.state_fault.kind == "full"


def recall_command(
    tmp_path: Path, gateway: RunningGateway, state: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    loom_config(tmp_path, gateway.base_url)
    folders = ["--config-dir", str(tmp_path / "config"), "--workspace", str(tmp_path / "ws")]
    status = main(["memory", "recall", "s-1", *folders, "--state", str(state)])
    out, err = capsys.readouterr()
    return status, out, err


class TestTheRecallCommand:
    def test_a_state_file_that_is_no_database_is_one_line_and_exit_2(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """REL-4: the file and the cause on one line, the status of a file to look at; a file
        that is no database at all is not the package's, the one file worth moving aside."""
        state = tmp_path / "state.sqlite3"
        state.write_bytes(b"not a database at all\n" * 400)
        status, out, err = recall_command(tmp_path, gateway, state, capsys)
        assert status == EXIT_LOOK_AT_FILE
        assert out == ""
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert f"{state}: cannot be opened as the memory state (not a database)" in err

    def test_a_state_another_process_holds_prints_the_block_then_one_line_and_exit_75(
        self,
        tmp_path: Path,
        gateway: RunningGateway,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """REL-3, REL-4: the block the session is told, then why it is not kept; try later."""
        monkeypatch.setattr(backend_module, "RECALL_DEADLINE_S", SHORT_BUDGET_S)
        gateway.app.store.remember("first fact")
        state = new_state_file(tmp_path / "state.sqlite3")
        with held_by_another_process(state):
            status, out, err = recall_command(tmp_path, gateway, state, capsys)
        assert status == EXIT_TRY_LATER
        assert "first fact" in out and out.rstrip().endswith("</session-context>")
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert str(state) in err and "busy" in err
        assert frozen_items(state, "s-1") is None
