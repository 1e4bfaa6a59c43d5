"""Sweeping from Nerve's own ``nerve.db`` (NERVE-2, NERVE-3).

The database is built by ``testbed/nerve_db.py`` from the facts of Nerve's schema. The sweep runs
against the scripted Loom of the sweep's tests (the real outcome classes), the state is a real
SQLite file, and the command line runs as a real process against the dev gateway.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.doctor import sweep as doctor_sweep
from provisioner.doctor.check import OK, WARN
from provisioner.integrations.nerve import NerveTranscripts
from provisioner.runtime.budget import WAITING_MAX_BYTES, WAITING_MAX_MESSAGES
from provisioner.runtime.gateway.errors import CodedFault
from provisioner.runtime.nerve_db.transcripts import PROBE_MIN_IDS, PROBE_ROWS, NerveDatabaseError
from provisioner.runtime.state import (
    AUDIT_CUT,
    AUDIT_SKIPPED,
    AUDIT_WENT_BACK,
    AuditEntry,
    StateStore,
)
from provisioner.runtime.sweep.outcomes import SweepReport
from provisioner.runtime.sweep.realign import GONE, REPLACED, newest_matching
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import RFC3339, Message
from testbed.loom import FakeLoom
from testbed.nerve_db import NerveDb, ingested, native, restore, text_blocks
from tests.support.clock import NOW, fixed_clock
from tests.support.machine_faults import process_holding
from tests.support.processes import RunNerve, assert_one_line_error
from tests.support.state_sql import state_rows

pytestmark = pytest.mark.anyio

NERVE_FORMAT = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"  # what Nerve writes in last_memorized_at


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def nerve_dir(tmp_path: Path) -> Path:
    return tmp_path / "nerve"


@pytest.fixture
def nerve(nerve_dir: Path) -> Iterator[NerveDb]:
    database = NerveDb(nerve_dir / "nerve.db")
    yield database
    database.close()


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore(tmp_path / "cfg" / "memory" / "state.sqlite3") as store:
        yield store


@pytest.fixture
def loom() -> FakeLoom:
    return FakeLoom()


@pytest.fixture
def source(nerve: NerveDb) -> Iterator[NerveTranscripts]:
    with NerveTranscripts(nerve.path) as reader:
        yield reader


async def sweep(source: NerveTranscripts, state: StateStore, loom: FakeLoom) -> SweepReport:
    return await Sweeper(loom, source, state, clock=fixed_clock).run_once()


def read_all(source: NerveTranscripts, session_id: str, page: int = 25) -> list[Message]:
    found: list[Message] = []
    after = 0
    while chunk := source.messages_after(session_id, after, page):
        assert len(chunk) <= page
        found.extend(chunk)
        after = chunk[-1].id
    return found


def sent_contents(loom: FakeLoom, calls: slice = slice(None)) -> list[str]:
    return [text for call in loom.calls[calls] if call.outcome == "taken" for text in call.contents]


def audit_kinds(state: StateStore) -> list[str]:
    return [str(row["kind"]) for row in state.audit()]


class TestWhatIsRead:
    """NERVE-2: text, times, roles and sessions as Nerve keeps them."""

    def test_null_content_takes_its_text_from_the_text_blocks_only(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        """Thinking, tool calls and images in ``blocks`` are never sent; text blocks are."""
        nerve.session("a")
        blocks = [
            {"type": "thinking", "content": "private reasoning"},
            *text_blocks("first part"),
            {"type": "tool_call", "tool": "shell", "input": {"cmd": "ls"}, "result": "a b"},
            {"type": "image", "url": "/api/files/uploads/1", "filename": "x.png"},
            *text_blocks("second part"),
        ]
        found = nerve.add("a", "assistant", None, created_at=native(1), blocks=blocks)
        assert source.messages_after("a", 0, 10) == [
            Message(found, "assistant", "first part\nsecond part", "2026-11-30T10:01:00+00:00")
        ]

    def test_blank_content_takes_the_blocks_and_real_content_wins_over_them(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        blank = nerve.add("a", "user", " \n\t", created_at=native(1), blocks=text_blocks("kept"))
        both = nerve.add("a", "user", "typed", created_at=native(2), blocks=text_blocks("shown"))
        read = source.messages_after("a", 0, 10)
        assert [(m.id, m.content) for m in read] == [(blank, "kept"), (both, "typed")]

    def test_malformed_blocks_make_a_row_without_text_not_an_error(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.add("a", "assistant", None, created_at=native(1))
        nerve.execute('UPDATE messages SET blocks = \'[{"type": "text", "content"\'')
        last = nerve.add("a", "user", "after", created_at=native(2), blocks=[{"type": 7}])
        assert [m.id for m in source.messages_after("a", 0, 10)] == [last]

    async def test_rows_without_text_are_passed_over_and_never_stall_the_watermark(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """Tool-only turns are not messages to extract: no audit row, no stuck session."""
        nerve.session("a")
        tools = [{"type": "tool_call", "tool": "search", "input": {}, "result": "…"}]
        first = nerve.add("a", "user", "look it up", created_at=native(1))
        nerve.add("a", "assistant", None, created_at=native(2), blocks=tools)
        nerve.add("a", "assistant", "", created_at=native(3))
        fourth = nerve.add("a", "assistant", "found it", created_at=native(4))
        report = await sweep(source, state, loom)
        assert loom.sent_ids() == [first, fourth] and report.errors == []
        nerve.add("a", "assistant", None, created_at=native(5), blocks=tools)  # newest: no text
        report = await sweep(source, state, loom)
        assert (report.batches_sent, report.errors, state.watermark("a")) == (0, [], fourth)
        sixth = nerve.add("a", "user", "thanks", created_at=native(6))
        await sweep(source, state, loom)
        assert loom.sent_ids()[-1] == sixth and state.watermark("a") == sixth
        assert AUDIT_SKIPPED not in audit_kinds(state)

    def test_a_zone_less_time_is_sent_as_utc_and_a_zoned_one_keeps_its_zone(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "native", created_at=native(5))
        nerve.add("a", "user", "ingested", created_at=ingested(6))
        nerve.add("a", "user", "elsewhere", created_at=ingested(7, zone="+02:00"))
        times = [m.created_at for m in source.messages_after("a", 0, 10)]
        assert times == [
            "2026-11-30T10:05:00+00:00",
            "2026-11-30T10:06:00.250000+00:00",
            "2026-11-30T10:07:00.250000+02:00",
        ]
        assert all(RFC3339.fullmatch(time) for time in times)

    def test_rows_of_the_same_second_come_in_id_order_none_lost_or_repeated(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.session("b")
        ids = [
            nerve.add(session, "user", f"same second {n}", created_at=native(9))
            for n in range(40)
            for session in ("a", "b")
        ]
        assert [m.id for m in read_all(source, "a", page=7)] == ids[0::2]

    async def test_a_row_ingested_late_with_an_older_time_is_read_after_the_watermark(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """Ids are the watermark: a higher id with an older time is new, and sent once."""
        nerve.session("a")
        taken = [nerve.add("a", "user", f"m{n}", created_at=native(10 + n)) for n in range(3)]
        await sweep(source, state, loom)
        late = nerve.add("a", "user", "backfilled", created_at=ingested(1), external_id="msg:x")
        await sweep(source, state, loom)
        assert loom.sent_ids() == [*taken, late]
        assert set(loom.taken.values()) == {1}

    async def test_a_200_kb_message_goes_cut_and_the_next_sweep_sees_the_same_source(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """SWEEP-11 on Nerve's rows; the watermark's mark is of the row, not of the cut text."""
        nerve.session("a")
        big = nerve.add("a", "user", "x" * (200 * 1024), created_at=native(1))
        await sweep(source, state, loom)
        assert len(loom.calls[0].contents[0].encode()) < WAITING_MAX_BYTES
        assert audit_kinds(state) == [AUDIT_CUT] and state.watermark("a") == big
        after = nerve.add("a", "user", "short", created_at=native(2))
        report = await sweep(source, state, loom)
        assert report.sessions_realigned == 0 and loom.sent_ids() == [big, after]

    async def test_archived_sessions_are_swept_too(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("old", archived=True)
        nerve.session("new")
        nerve.add("old", "user", "from an archived chat", created_at=native(1))
        nerve.add("new", "user", "from a live chat", created_at=native(2))
        assert source.sessions() == ["old", "new"]
        await sweep(source, state, loom)
        assert sent_contents(loom) == ["from an archived chat", "from a live chat"]

    async def test_roles_are_the_ones_loom_takes_and_another_is_refused_with_an_audit_row(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        for role in ("User", "developer", "tool", "critic", "assistant"):
            nerve.add("a", role, f"as {role}", created_at=native(1))
        assert [m.role for m in source.messages_after("a", 0, 10)] == [
            "user",
            "system",
            "critic",
            "assistant",
        ]  # NERVE-9: a tool's output is no conversation, so it is not read at all
        await sweep(source, state, loom)
        assert sent_contents(loom) == ["as User", "as developer", "as assistant"]
        (refused,) = state.audit()
        assert refused["kind"] == AUDIT_SKIPPED and refused["role"] == "critic"

    @pytest.mark.parametrize(
        ("others", "session_id_index"),
        [(0, False), (3, False), (PROBE_ROWS // PROBE_MIN_IDS + 40, False), (99, True)],
        ids=["alone", "among-a-few", "sparse-among-many", "with-nerves-missing-index"],
    )
    def test_pages_hold_every_message_in_id_order_however_the_session_lies(
        self, nerve_dir: Path, others: int, session_id_index: bool
    ) -> None:
        """Read ahead by id order, by Nerve's (session_id, created_at) index, or by an index on
        (session_id, id): the pages are bounded and the same."""
        database = NerveDb(nerve_dir / "nerve.db", session_id_index=session_id_index)
        database.session("a")
        database.session("b")
        rows = []
        for n in range(300):
            rows.append(("a", "user", f"a{n}", native(n // 60 % 60, n % 60)))
            rows.extend(("b", "user", f"b{n}", native(0)) for _ in range(others))
        database.add_rows(rows)
        by_id = "SELECT id FROM messages WHERE session_id = 'a' ORDER BY id"
        expected = [row[0] for row in database.execute(by_id)]
        with NerveTranscripts(database.path) as reader:
            found = read_all(reader, "a", page=25)
            middle = reader.messages_after("a", expected[149], 25)
        database.close()
        assert [m.id for m in found] == expected
        assert [m.id for m in middle] == expected[150:175]


class TestReadOnly:
    """NERVE-2: the reader never writes nor holds a lock Nerve would wait for."""

    def test_reading_goes_on_while_nerve_holds_its_write_lock(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        committed = nerve.add("a", "user", "committed", created_at=native(1))
        writer = sqlite3.connect(nerve.path, isolation_level=None, timeout=0)
        try:
            writer.execute("BEGIN IMMEDIATE")
            writer.execute(
                "INSERT INTO messages (session_id, role, content) VALUES ('a', 'user', 'not yet')"
            )
            assert [m.id for m in source.messages_after("a", 0, 10)] == [committed]
            writer.execute("ROLLBACK")
        finally:
            writer.close()

    def test_no_read_is_left_open_to_hold_back_nerves_checkpoint(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        """Between calls the reader holds no snapshot: Nerve's checkpoint empties its WAL."""
        nerve.session("a")
        nerve.session("b")  # sparse: its ids come from Nerve's index, a chunk at a time
        rows = []
        for n in range(600):
            rows.extend(("a", "user", f"a{n}.{k}", native(1)) for k in range(100))
            rows.append(("b", "user", f"b{n}", native(2)))
        nerve.add_rows(rows)
        assert source.sessions() == ["a", "b"]
        assert len(source.messages_after("a", 0, 25)) == 25
        assert len(source.messages_after("b", 0, 10)) == 10
        source.swept_through("b", 101)
        (busy, _log, _checkpointed) = nerve.execute("PRAGMA wal_checkpoint(TRUNCATE)")[0]
        assert busy == 0
        assert (nerve.path.parent / "nerve.db-wal").stat().st_size == 0

    def test_the_reader_cannot_write_the_file(self, nerve: NerveDb) -> None:
        """Opened with mode=ro: SQLite itself refuses a write through it."""
        nerve.session("a")
        with NerveTranscripts(nerve.path) as reader, pytest.raises(sqlite3.OperationalError):
            reader._db.execute("DELETE FROM sessions")  # the reader's own connection
        assert nerve.execute("SELECT id FROM sessions") == [("a",)]

    @pytest.mark.parametrize(
        "shape", ["missing", "folder", "not-sqlite", "empty-sqlite", "no-content-column"]
    )
    def test_a_file_that_is_not_nerves_database_is_one_line_naming_it(
        self, tmp_path: Path, shape: str
    ) -> None:
        path = tmp_path / "nerve.db"
        if shape == "folder":
            path.mkdir()
        elif shape == "not-sqlite":
            path.write_bytes(b"just some text, no database " * 100)
        elif shape == "empty-sqlite":
            sqlite3.connect(path).close()
        elif shape == "no-content-column":
            database = sqlite3.connect(path)
            database.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
            database.execute("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT)")
            database.close()
        with pytest.raises(NerveDatabaseError) as raised:
            NerveTranscripts(path)
        message = str(raised.value)
        assert message.startswith(f"{path}: ") and "\n" not in message
        assert "Nerve" in message

    def test_a_database_from_before_the_blocks_column_is_read_by_content(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "nerve.db"
        database = sqlite3.connect(path)
        database.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
        database.execute(
            "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT,"
            " role TEXT, content TEXT, created_at TIMESTAMP)"
        )
        database.execute("INSERT INTO sessions VALUES ('a')")
        database.execute(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES"
            " ('a', 'user', 'old', '2026-01-02 03:04:05'),"
            " ('a', 'user', NULL, '2026-01-02 03:04:06')"
        )
        database.commit()
        database.close()
        with NerveTranscripts(path) as reader:
            assert reader.messages_after("a", 0, 5) == [
                Message(1, "user", "old", "2026-01-02T03:04:05+00:00")
            ]


class TestLastMemorizedAt:
    """NERVE-3: Nerve's retention compaction goes on under Loom, never ahead of Loom."""

    async def test_it_becomes_the_time_of_the_last_message_loom_took_in_nerves_format(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        nerve.session("b")
        nerve.add("a", "user", "native", created_at=native(1))
        nerve.add("a", "user", "ingested", created_at=ingested(2, 30))
        nerve.add("b", "user", "elsewhere", created_at=ingested(3, zone="+02:00"))
        await sweep(source, state, loom)
        assert nerve.last_memorized_at("a") == "2026-11-30 10:02:30"
        assert nerve.last_memorized_at("b") == "2026-11-30 08:03:00"  # +02:00 made UTC
        assert all(re.fullmatch(NERVE_FORMAT, nerve.last_memorized_at(s) or "") for s in "ab")

    async def test_it_is_never_later_than_a_message_loom_has_not_taken(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """Loom takes three messages and is busy for the fourth, ingested late with an older
        time: compaction, asked as Nerve asks it, reaches only messages Loom took."""
        nerve.session("a")
        taken = [nerve.add("a", "user", f"fact {n}", created_at=native(1 + n)) for n in range(3)]
        late = nerve.add("a", "user", "late", created_at=ingested(2, 30), external_id="m:1")
        loom.accept_limit = 3
        loom.faults = deque([None, CodedFault("busy", code="GRANT_BUSY")])
        await sweep(source, state, loom)
        assert state.watermark("a") == taken[-1] and late not in loom.taken
        assert nerve.last_memorized_at("a") == "2026-11-30 10:02:30"
        assert nerve.compactable_ids() == set(taken[:2])

    async def test_it_never_moves_back(
        self, nerve: NerveDb, state: StateStore, loom: FakeLoom
    ) -> None:
        """A value later than the message, but not in the future (REL-6 repairs only that)."""
        nerve.session("a")
        nerve.add("a", "user", "fact", created_at=native(1))
        nerve.set_last_memorized_at("a", "2026-12-24T18:00:00Z")
        after_it = datetime(2027, 1, 1, tzinfo=UTC).timestamp()
        with NerveTranscripts(nerve.path, clock=lambda: after_it) as reader:
            await sweep(reader, state, loom)
        assert nerve.last_memorized_at("a") == "2026-12-24T18:00:00Z"

    async def test_a_database_without_the_column_is_swept_and_left_as_it_was(
        self, nerve_dir: Path, state: StateStore, loom: FakeLoom
    ) -> None:
        database = NerveDb(nerve_dir / "nerve.db", last_memorized_at=False)
        database.session("a")
        database.add("a", "user", "fact", created_at=native(1))
        before = database.execute("SELECT * FROM sessions")
        with NerveTranscripts(database.path) as reader:
            report = await sweep(reader, state, loom)
        assert report.messages_taken == 1 and database.execute("SELECT * FROM sessions") == before
        database.close()

    async def test_while_nerve_keeps_its_write_lock_the_sweep_goes_on_and_catches_up_later(
        self, nerve: NerveDb, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "fact", created_at=native(1))
        holder = sqlite3.connect(nerve.path, isolation_level=None, timeout=0)
        with NerveTranscripts(nerve.path, write_wait_ms=20) as reader:
            holder.execute("BEGIN IMMEDIATE")
            report = await sweep(reader, state, loom)
            holder.execute("COMMIT")
            holder.close()
            assert (report.stopped, report.messages_taken) == ("done", 1)
            assert nerve.last_memorized_at("a") is None
            await sweep(reader, state, loom)  # nothing new to send; the write goes through
        assert nerve.last_memorized_at("a") == "2026-11-30 10:01:00"


class TestRestoredCopy:
    """NERVE-3: a nerve.db restored from a backup rolls ids back below the watermarks."""

    @pytest.mark.parametrize(
        ("written_since", "reason"), [(5, GONE), (120, REPLACED)], ids=["gone", "replaced"]
    )
    async def test_every_new_message_reaches_loom_and_one_batch_at_most_goes_again(
        self,
        tmp_path: Path,
        nerve: NerveDb,
        nerve_dir: Path,
        state: StateStore,
        loom: FakeLoom,
        written_since: int,
        reason: str,
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 150)
        nerve.backup_to(tmp_path / "backup.db")
        nerve.add_many("a", 100, start=150)
        with NerveTranscripts(nerve.path) as reader:
            await sweep(reader, state, loom)
            assert state.watermark("a") == 250
            nerve.close()
            restore(nerve_dir, tmp_path / "backup.db", aside=tmp_path / "nerve.old")
            restored = NerveDb(nerve_dir / "nerve.db")
            new = [f"after the restore {n}" for n in range(written_since)]
            for n, text in enumerate(new):
                restored.add("a", "user", text, created_at=native(n % 60, hour=20))
            calls_before = len(loom.calls)
            report = await sweep(reader, state, loom)
        again = sent_contents(loom, slice(calls_before, None))
        assert report.sessions_realigned == 1
        assert [text for text in again if text.startswith("after")] == new
        resent = [text for text in again if not text.startswith("after")]
        assert resent == [f"turn {n} of a" for n in range(100, 150)]
        assert len(resent) <= WAITING_MAX_MESSAGES
        (went_back,) = [row for row in state.audit() if row["kind"] == AUDIT_WENT_BACK]
        assert went_back["detail"] == f"watermark 250 -> 100: {reason}"
        assert state.watermark("a") == 150 + written_since
        assert restored.last_memorized_at("a") == native((written_since - 1) % 60, hour=20)
        restored.close()

    async def test_a_copy_older_than_the_first_batch_sends_the_session_from_its_start(
        self,
        tmp_path: Path,
        nerve: NerveDb,
        nerve_dir: Path,
        state: StateStore,
        loom: FakeLoom,
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 30)
        nerve.backup_to(tmp_path / "backup.db")
        nerve.add_many("a", 70, start=30)
        with NerveTranscripts(nerve.path) as reader:
            await sweep(reader, state, loom)
            nerve.close()
            restore(nerve_dir, tmp_path / "backup.db", aside=tmp_path / "nerve.old")
            restored = NerveDb(nerve_dir / "nerve.db")
            restored.add("a", "user", "after the restore", created_at=native(0, hour=20))
            calls_before = len(loom.calls)
            await sweep(reader, state, loom)
        restored.close()
        again = sent_contents(loom, slice(calls_before, None))
        assert again == [*(f"turn {n} of a" for n in range(30)), "after the restore"]

    async def test_an_unchanged_source_is_never_taken_for_one_that_went_back(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        """Watermarks on a cut message, on blocks-only text and on a refused row, with rows
        without text after them: every sweep finds its watermark's message as it was."""
        nerve.session("a")
        tools = [{"type": "tool_call", "tool": "x", "input": {}}]
        watermarks = []
        for step in range(6):
            if step == 0:
                nerve.add("a", "user", "y" * (200 * 1024), created_at=native(1))
            elif step == 1:
                nerve.add("a", "assistant", None, created_at=native(2), blocks=text_blocks("b"))
            elif step in (2, 3):
                nerve.add("a", "critic", f"refused role {step}", created_at=native(3))
            elif step == 4:
                nerve.add("a", "assistant", None, created_at=native(4), blocks=tools)
            else:
                nerve.add("a", "user", "plain", created_at=native(5))
            report = await sweep(source, state, loom)
            assert report.sessions_realigned == 0
            watermarks.append(state.watermark("a"))
        assert watermarks == [1, 2, 2, 3, 3, 6]  # 3: the first refused row, passed on its own
        assert AUDIT_WENT_BACK not in audit_kinds(state)
        assert loom.sent_ids() == [1, 2, 6]

    async def test_a_watermark_kept_before_marks_existed_is_trusted_as_it_stands(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 3)
        budget = Sweeper(loom, source, state).budget()
        state.record_taken(
            "a", last_taken_id=ids[1], budget=("waiting", budget), suspect_last_id=None,
            audit=[], now=NOW,
        )  # fmt: skip
        report = await sweep(source, state, loom)
        assert report.sessions_realigned == 0 and loom.sent_ids() == [ids[2]]
        kept = state_rows(state, "SELECT message_id FROM sweep_mark WHERE session_id = 'a'")
        assert [row[0] for row in kept] == [ids[1], ids[2]]

    @pytest.mark.parametrize("count", range(0, 34))
    def test_the_newest_mark_still_held_is_found_in_few_reads(self, count: int) -> None:
        for held in range(count + 1):  # marks [0, held) are still in the copy
            asked: list[int] = []

            def matches(index: int, held: int = held, asked: list[int] = asked) -> bool:
                asked.append(index)
                return index < held

            assert newest_matching(count, matches) == held - 1
            assert len(asked) <= 2 * math.ceil(math.log2(count + 1)) + 1


class TestDoctor:
    """Doctor names a source that went back (NERVE-3) and what a nerve.db page costs (NERVE-2)."""

    @pytest.fixture
    def went_back(self, tmp_path: Path, state: StateStore) -> Path:
        entry = AuditEntry(AUDIT_WENT_BACK, "a", 250, detail=f"watermark 250 -> 100: {GONE}")
        state.record_went_back("a", watermark=100, audit=entry, now=NOW)
        return tmp_path / "cfg"

    def test_a_source_that_went_back_is_a_warning_with_advice(self, went_back: Path) -> None:
        checks = {c.id: c for c in doctor_sweep.sweep_checks(went_back, now=NOW + 60)}
        check = checks["loom.sweep.went_back"]
        assert check.status == WARN and "1 session " in check.message
        assert "watermark 250 -> 100" in check.message
        assert check.advice is not None and "restored from a backup" in check.advice

    def test_a_week_later_doctor_no_longer_names_it(self, went_back: Path) -> None:
        later = NOW + doctor_sweep.WENT_BACK_SHOWN_S + 1
        ids = [c.id for c in doctor_sweep.sweep_checks(went_back, now=later)]
        assert ids == ["loom.sweep"]

    def test_the_source_kind_doctor_reads_is_the_one_the_sweep_writes(self) -> None:
        assert NerveTranscripts.kind == doctor_sweep.NERVE_DB_KIND

    async def test_a_sweep_from_nerve_db_lets_doctor_look_at_it(
        self, tmp_path: Path, nerve: NerveDb, source: NerveTranscripts, state: StateStore
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "fact", created_at=native(1))
        await sweep(source, state, FakeLoom())
        checks = {c.id: c for c in doctor_sweep.sweep_checks(tmp_path / "cfg", now=NOW)}
        check = checks["loom.sweep.nerve_db"]
        assert check.status == OK and str(nerve.path) in check.message
        assert "largest session has 1 message," in check.message

    @pytest.mark.parametrize("index", [False, True], ids=["nerves-indexes", "with-session-id"])
    def test_a_large_session_without_the_index_is_a_warning_naming_the_index(
        self, nerve_dir: Path, index: bool
    ) -> None:
        database = NerveDb(nerve_dir / "nerve.db", session_id_index=index)
        database.session("a")
        database.execute(
            "UPDATE sessions SET message_count = ?", (doctor_sweep.NERVE_DB_LARGE_SESSION + 1,)
        )
        database.close()
        check = doctor_sweep.nerve_db_check(nerve_dir / "nerve.db")
        if index:
            assert check.status == OK and "serves each page" in check.message
        else:
            assert check.status == WARN and check.advice is not None
            assert "ON messages (session_id, id)" in check.advice

    def test_a_nerve_db_gone_since_the_sweep_is_a_warning(self, tmp_path: Path) -> None:
        check = doctor_sweep.nerve_db_check(tmp_path / "gone" / "nerve.db")
        assert check.status == WARN and check.advice is not None
        assert "run nerve-provisioner memory sweep --nerve-db" in check.advice


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5, answers="mixed") as running:
        yield running


def loom_config(config_dir: Path, url: str) -> list[str]:
    config_dir.mkdir(parents=True, exist_ok=True)
    text = f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n"
    (config_dir / "config.local.yaml").write_text(text, encoding="utf-8")
    return ["--config-dir", str(config_dir), "--workspace", str(config_dir.parent / "ws")]


class TestCommandLine:
    """``nerve memory sweep --nerve-db PATH`` as a real process (NERVE-2)."""

    def test_the_sweep_reads_nerves_database_into_loom_and_keeps_it_in_step(
        self, tmp_path: Path, nerve: NerveDb, gateway: RunningGateway, run_nerve: RunNerve
    ) -> None:
        nerve.session("live")
        nerve.session("archived", archived=True)
        nerve.add("live", "user", "I take my tea with lemon.", created_at=native(1))
        tools = [{"type": "tool_call", "tool": "x", "input": {}}]
        nerve.add("live", "assistant", None, created_at=native(2), blocks=tools)
        nerve.add("live", "assistant", None, created_at=native(3), blocks=text_blocks("Noted."))
        nerve.add("archived", "user", "My sister lives in Lyon.", created_at=ingested(4))
        options = loom_config(tmp_path / "cfg", gateway.base_url)
        done = run_nerve(
            "memory", "sweep", "--nerve-db", str(nerve.path), "--json", *options,
            env={"NO_PROXY": "*"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["stopped"], report["messages_taken"]) == ("done", 3)
        assert sorted(gateway.app.store.memory_texts()) == sorted(
            ["I take my tea with lemon.", "Noted.", "My sister lives in Lyon."]
        )
        assert nerve.last_memorized_at("live") == "2026-11-30 10:03:00"
        assert nerve.last_memorized_at("archived") == "2026-11-30 10:04:00"
        doctor = run_nerve("doctor", "--offline", "--json", *options)
        checks = {check["id"]: check for check in json.loads(doctor.stdout)["checks"]}
        assert checks["loom.sweep.nerve_db"]["status"] == OK
        assert str(nerve.path) in checks["loom.sweep.nerve_db"]["message"]

    @pytest.mark.parametrize("shape", ["missing", "not-sqlite"])
    def test_a_file_that_is_not_nerves_database_is_one_line_and_status_2(
        self, tmp_path: Path, run_nerve: RunNerve, shape: str
    ) -> None:
        path = tmp_path / "nerve.db"
        if shape == "not-sqlite":
            path.write_bytes(b"no database here " * 64)
        options = loom_config(tmp_path / "cfg", "http://127.0.0.1:9")
        done = run_nerve("memory", "sweep", "--nerve-db", str(path), *options)
        assert_one_line_error(done, str(path), "expected Nerve's nerve.db")

    def test_nerve_db_and_transcripts_together_are_refused(
        self, tmp_path: Path, nerve: NerveDb, run_nerve: RunNerve
    ) -> None:
        options = loom_config(tmp_path / "cfg", "http://127.0.0.1:9")
        done = run_nerve(
            "memory", "sweep", "--nerve-db", str(nerve.path),
            "--transcripts", str(tmp_path / "t.sqlite3"), *options,
        )  # fmt: skip
        assert_one_line_error(done, "--nerve-db and --transcripts")


class TestOnlyConversation:
    """NERVE-9: the rows Nerve writes for tools never reach Loom (shapes: docs/sweep.md)."""

    async def test_codex_tool_rows_and_tool_output_are_passed_over(
        self, nerve: NerveDb, source: NerveTranscripts, state: StateStore, loom: FakeLoom
    ) -> None:
        nerve.session("codex:t")
        call = [{"type": "tool_call", "tool": "shell", "input": {}, "tool_use_id": "c1"}]
        early = [{"type": "tool_call", "tool": "(unknown)", "input": {}, "tool_use_id": "c9"}]
        ask = nerve.add(
            "codex:t", "user", "which files?", created_at=ingested(1), external_id="msg:1"
        )
        nerve.add("codex:t", "assistant", "shell", created_at=ingested(2), blocks=call)
        nerve.add("codex:t", "assistant", "a.txt b.txt", created_at=ingested(3), blocks=early)
        nerve.add("codex:t", "tool", "raw output", created_at=ingested(4))
        answer = nerve.add(
            "codex:t",
            "assistant",
            "two files",
            created_at=ingested(5),
            blocks=text_blocks("two files"),
        )
        assert [m.id for m in source.messages_after("codex:t", 0, 10)] == [ask, answer]
        await sweep(source, state, loom)
        assert sent_contents(loom) == ["which files?", "two files"]
        assert audit_kinds(state) == []

    def test_a_turn_that_answered_beside_its_tool_calls_is_sent(
        self, nerve: NerveDb, source: NerveTranscripts
    ) -> None:
        nerve.session("a")
        blocks = [{"type": "tool_call", "tool": "reminder", "input": {}}, *text_blocks("done")]
        found = nerve.add("a", "assistant", "done", created_at=native(1), blocks=blocks)
        assert [(m.id, m.content) for m in source.messages_after("a", 0, 10)] == [(found, "done")]


HOLD_EXCLUSIVE = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA locking_mode = EXCLUSIVE")
db.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.read()
"""


class TestABusyFile:
    def test_an_exclusive_lock_past_the_wait_is_busy_not_another_file(
        self, nerve: NerveDb, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """REL-4: a second process holds nerve.db exclusively; opening it is a FileFault of
        kind busy naming the file (exit 75), never NerveDatabaseError."""
        from provisioner.runtime.errors import FileFault
        from provisioner.runtime.nerve_db import transcripts

        monkeypatch.setattr(transcripts, "READ_WAIT_MS", 50)  # the wait, shortened
        nerve.session("a")
        nerve.close()  # the test's own writer lets go, so the holder can take the file whole
        with (
            process_holding(HOLD_EXCLUSIVE, str(nerve.path)),
            pytest.raises(FileFault) as raised,
        ):
            NerveTranscripts(nerve.path)
        assert (raised.value.kind, raised.value.path, raised.value.exit_status) == (
            "busy",
            str(nerve.path),
            75,
        )
