"""Where memU's memorization stopped, read from Nerve's ``nerve.db`` (MIG-2).

The database is built by ``testbed/nerve_db.py`` from the facts of Nerve's schema;
``last_memorized_at`` is set the way Nerve's memorization sets it (the time of the newest message
memU was handed, cut to ``YYYY-MM-DD HH:MM:SS``), or to what a damaged or edited file may hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provisioner.integrations.nerve import NerveTranscripts
from provisioner.runtime.nerve_db.memorized import nerve_cut
from provisioner.runtime.sweep.source import Memorized
from testbed.nerve_db import NerveDb, ingested, native, text_blocks

NOW = datetime(2026, 12, 1, tzinfo=UTC).timestamp()  # a day after the rows' times


@pytest.fixture
def nerve(tmp_path: Path) -> Iterator[NerveDb]:
    database = NerveDb(tmp_path / "nerve" / "nerve.db")
    yield database
    database.close()


@pytest.fixture
def reader(nerve: NerveDb) -> Iterator[NerveTranscripts]:
    with NerveTranscripts(nerve.path, clock=lambda: NOW) as source:
        yield source


class TestNervesCut:
    """The text comparison memU's memorization makes, reproduced exactly."""

    @pytest.mark.parametrize(
        ("stored", "cut"),
        [
            ("2026-11-30 10:03:00", "2026-11-30 10:03:00"),
            ("2026-11-30T10:03:00Z", "2026-11-30 10:03:00"),
            ("2026-11-30T10:03:00+00:00", "2026-11-30 10:03:00"),
            ("2026-11-30T10:03:00.250000+00:00", "2026-11-30 10:03:00"),
            ("2026-11-30T10:03:00.250000+02:00", "2026-11-30 10:03:00"),
            ("2026-11-30T10:03:00+02:00", "2026-11-30 10:03:00+02:00"),
        ],
    )
    def test_a_time_is_cut_as_nerve_cuts_it_before_comparing(self, stored: str, cut: str) -> None:
        assert nerve_cut(stored) == cut


class TestWhereMemuStopped:
    """MIG-2: the last message memU took, by ``sessions.last_memorized_at``."""

    def test_it_is_the_last_message_at_or_before_the_time_memu_wrote(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 6)  # 10:00:00 … 10:00:05
        nerve.set_last_memorized_at("a", native(0, 3))
        assert reader.memorized_through("a") == Memorized(ids[3], 4)

    @pytest.mark.parametrize(
        "written", ["2026-11-30T10:00:03Z", "2026-11-30T10:00:03+00:00", "2026-11-30T10:00:03.9"]
    )
    def test_the_iso_forms_nerve_also_stores_mean_the_same_second(
        self, nerve: NerveDb, reader: NerveTranscripts, written: str
    ) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 6)
        nerve.set_last_memorized_at("a", written)
        assert reader.memorized_through("a") == Memorized(ids[3], 4)

    def test_a_message_of_the_same_second_with_a_fraction_counts_as_memorized(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        """memU cut the fraction off before comparing, so it never sent that message again."""
        nerve.session("a")
        first = nerve.add("a", "user", "one", created_at=native(1))
        second = nerve.add("a", "user", "two", created_at=ingested(2))  # 10:02:00.25
        nerve.add("a", "user", "three", created_at=native(3))
        nerve.set_last_memorized_at("a", native(2))
        assert reader.memorized_through("a") == Memorized(second, 2)
        assert first < second

    def test_a_message_ingested_late_with_an_older_time_is_not_taken_for_memorized(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        """memU's last run ended at 10:02; a row stored after a newer one, with an older
        time, ends the run of memorized messages before the newer one."""
        nerve.session("a")
        kept = [nerve.add("a", "user", f"fact {n}", created_at=native(1 + n)) for n in range(2)]
        nerve.add("a", "user", "newer", created_at=native(5))
        nerve.add("a", "user", "late", created_at=ingested(1, 30), external_id="x:1")
        nerve.set_last_memorized_at("a", native(2))
        assert reader.memorized_through("a") == Memorized(kept[-1], 2)

    def test_where_memus_text_comparison_and_utc_disagree_the_message_is_not_memorized(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        """11:30+02:00 is 09:30 UTC, before 10:00, but memU compared the text: later."""
        nerve.session("a")
        first = nerve.add("a", "user", "before", created_at=native(0, hour=9))
        nerve.add("a", "user", "zoned", created_at="2026-11-30T11:30:00+02:00")
        nerve.set_last_memorized_at("a", native(0, hour=10))
        assert reader.memorized_through("a") == Memorized(first, 1)

    def test_rows_without_text_count_in_the_run_but_not_in_the_messages(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.add("a", "user", "question", created_at=native(1))
        tools = [{"type": "tool_call", "tool": "x", "input": {}}]
        nerve.add("a", "assistant", None, created_at=native(2), blocks=tools)
        answer = nerve.add("a", "assistant", None, created_at=native(3), blocks=text_blocks("ok"))
        nerve.add("a", "user", "after", created_at=native(9))
        nerve.set_last_memorized_at("a", native(3))
        assert reader.memorized_through("a") == Memorized(answer, 2)

    def test_a_message_whose_time_cannot_be_read_ends_the_run_before_it(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        nerve.session("a")
        first = nerve.add("a", "user", "one", created_at=native(1))
        nerve.add("a", "user", "two", created_at="1")  # SQLite would read a Julian day
        nerve.add("a", "user", "three", created_at=native(3))
        nerve.set_last_memorized_at("a", native(3))
        assert reader.memorized_through("a") == Memorized(first, 1)

    def test_a_session_memu_never_reached_has_no_answer(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 3)
        nerve.set_last_memorized_at("a", native(0, hour=9))  # before every message
        assert reader.memorized_through("a") is None
        assert reader.memorized_through("no such session") is None

    def test_a_database_without_the_column_has_no_answer(self, tmp_path: Path) -> None:
        database = NerveDb(tmp_path / "old" / "nerve.db", last_memorized_at=False)
        database.session("a")
        database.add_many("a", 3)
        with NerveTranscripts(database.path, clock=lambda: NOW) as source:
            assert source.memorized_through("a") is None
        database.close()

    def test_reading_it_changes_nothing_in_nerves_file(
        self, nerve: NerveDb, reader: NerveTranscripts
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 4)
        nerve.set_last_memorized_at("a", native(0, 2))
        before = (nerve.execute("SELECT * FROM sessions"), nerve.execute("SELECT * FROM messages"))
        assert reader.memorized_through("a") is not None
        after = (nerve.execute("SELECT * FROM sessions"), nerve.execute("SELECT * FROM messages"))
        assert after == before


class TestHostileValues:
    """A value that cannot be trusted means the session is sent from its start."""

    @pytest.mark.parametrize(
        "value",
        [
            None,
            "",
            "garbage",
            "now",  # SQLite's datetime() reads it as the current time
            "2461000.5",  # and this as a Julian day
            2461000,  # not even text
            "2026-13-45 10:00:00",
            "2026-11-30 25:00:00",
            "2026-12-01 00:00:01",  # a second after the clock
            "2099-01-01 00:00:00",
            "2026-11-30 10:00:03" + " " * 80,  # longer than any time Nerve writes
            "2026-11-30 10:00:03\x00",
        ],
    )
    def test_a_value_that_cannot_be_trusted_gives_no_answer(
        self, nerve: NerveDb, reader: NerveTranscripts, value: object
    ) -> None:
        nerve.session("a")
        nerve.add_many("a", 6)
        nerve.execute("UPDATE sessions SET last_memorized_at = ? WHERE id = 'a'", (value,))
        assert reader.memorized_through("a") is None

    def test_the_clock_decides_what_is_in_the_future(self, nerve: NerveDb) -> None:
        nerve.session("a")
        ids = nerve.add_many("a", 3)
        nerve.set_last_memorized_at("a", native(0, 2))
        before = datetime(2026, 11, 30, 10, 0, 1, tzinfo=UTC).timestamp()
        with NerveTranscripts(nerve.path, clock=lambda: before) as early:
            assert early.memorized_through("a") is None
        with NerveTranscripts(nerve.path, clock=lambda: NOW) as later:
            assert later.memorized_through("a") == Memorized(ids[2], 3)
