"""The transcript source and the sweep's state store (SWEEP-1, SWEEP-2)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.state import (
    AUDIT_CUT,
    SCHEMA_VERSION,
    AuditEntry,
    ReadOnlyState,
    StateStore,
)
from provisioner.runtime.transcripts import (
    TRANSCRIPTS_VERSION,
    SqliteTranscripts,
    TranscriptsVersionError,
    message_key,
    record_key,
    utc_instant,
)
from tests.support.clock import NOW
from tests.support.state_sql import state_rows

from .sessions import add_session

DEFAULT = BatchBudget.default(100, 128 * 1024)


class TestSqliteTranscripts:
    def test_messages_come_oldest_first_in_pages_after_an_id(
        self, transcripts: SqliteTranscripts
    ) -> None:
        """SWEEP-1: a page holds at most ``limit`` messages after the given id, oldest first."""
        ids = add_session(transcripts, "a", 7)
        add_session(transcripts, "b", 3)
        page = transcripts.messages_after("a", ids[1], 3)
        assert [m.id for m in page] == ids[2:5]
        assert transcripts.messages_after("a", ids[-1], 10) == []

    def test_ids_only_grow_across_sessions(self, transcripts: SqliteTranscripts) -> None:
        """SWEEP-1: the watermark relies on ids that increase and are never reused."""
        first = add_session(transcripts, "a", 2)
        second = add_session(transcripts, "b", 2)
        third = add_session(transcripts, "a", 2)
        assert first + second + third == sorted(first + second + third)
        assert transcripts.sessions() == ["a", "b"]

    def test_a_failed_import_keeps_no_row(self, transcripts: SqliteTranscripts) -> None:
        """SWEEP-1: ``add_messages`` is all or nothing."""

        def rows():
            yield ("a", "user", "one", "2026-01-01T00:00:00Z")
            raise RuntimeError("the input broke")

        with pytest.raises(RuntimeError):
            transcripts.add_messages(rows())
        assert transcripts.count() == 0

    def test_reading_a_page_never_loads_the_whole_history(
        self, transcripts: SqliteTranscripts
    ) -> None:
        """SWEEP-1: the page query is bounded by its LIMIT, whatever the session's size."""
        transcripts.add_messages(
            ("big", "user", f"m{i}", "2026-01-01T00:00:00Z") for i in range(5000)
        )
        assert len(transcripts.messages_after("big", 0, 25)) == 25


class TestTranscriptsSchema:
    """The transcripts file's version and import keys (IMP-1), on real SQLite files."""

    OLD_TABLE = (
        "CREATE TABLE message (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL,"
        " role TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT NOT NULL)"
    )

    def test_the_message_key_is_the_documented_sha256(self) -> None:
        """IMP-1: SHA-256 of ``message`` and each field's UTF-8 bytes after their 8-byte
        big-endian length, the time as its UTC instant; recomputed here from that text."""
        fields = ("s1", "2026-11-30T10:00:00Z", "user", "tea, é")
        expected = hashlib.sha256(b"message")
        for field in fields:
            data = field.encode("utf-8")
            expected.update(len(data).to_bytes(8, "big") + data)
        written_otherwise = ("s1", "2026-11-30T11:00:00+01:00", "user", "tea, é")
        assert message_key(*written_otherwise) == expected.hexdigest()

    def test_the_record_key_is_the_documented_sha256_of_session_and_id(self) -> None:
        expected = hashlib.sha256(b"id")
        for data in (b"s1", b"m-7"):
            expected.update(len(data).to_bytes(8, "big") + data)
        assert record_key("s1", "m-7") == expected.hexdigest()
        assert record_key("s1", "m-7") != record_key("s2", "m-7")

    def test_keys_are_the_same_in_another_process_with_another_hash_seed(self) -> None:
        """IMP-1: never Python's ``hash()``, which changes with every process."""
        code = (
            "from provisioner.runtime.transcripts import message_key, record_key;"
            "print(message_key('s', '2026-11-30T10:00:00Z', 'user', 'x'), record_key('s', '1'))"
        )
        keys = []
        for seed in ("1", "2"):
            done = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": seed},
                timeout=60,
            )
            keys.append(done.stdout)
        here = f"{message_key('s', '2026-11-30T10:00:00Z', 'user', 'x')} {record_key('s', '1')}\n"
        assert keys == [here, here]

    def test_an_import_stores_what_is_new_and_counts_what_is_there(
        self, transcripts: SqliteTranscripts
    ) -> None:
        """IMP-1: ``import_messages`` answers (new, already there); a repeat is not stored."""
        tea = ("a", "user", "tea", "2026-11-30T10:00:00Z", None)
        keyed = ("a", "user", "tea", "2026-11-30T10:00:00Z", "m1")
        assert transcripts.import_messages([tea, keyed, tea]) == (2, 1)
        assert transcripts.import_messages([tea, keyed]) == (0, 2)
        assert transcripts.count() == 2

    def test_a_failed_import_keeps_no_row_and_no_key(self, transcripts: SqliteTranscripts) -> None:
        """IMP-1: all or nothing, so the next import of the same file stores all of it."""
        row = ("a", "user", "one", "2026-01-01T00:00:00Z", None)

        def records():
            yield row
            raise RuntimeError("the input broke")

        with pytest.raises(RuntimeError):
            transcripts.import_messages(records())
        assert transcripts.import_messages([row]) == (1, 0)

    def test_a_host_adding_a_repeat_stores_it_and_an_import_finds_the_first(
        self, transcripts: SqliteTranscripts
    ) -> None:
        """``add_message`` always stores (the host knows it is new); only the first of two
        equal messages holds the key, so an import of it finds it there."""
        first = transcripts.add_message("a", "user", "ok", "2026-11-30T10:00:00+00:00")
        second = transcripts.add_message("a", "user", "ok", "2026-11-30T10:00:00Z")
        assert second > first
        ok = ("a", "user", "ok", "2026-11-30T10:00:00Z", None)
        assert transcripts.import_messages([ok]) == (0, 1)
        assert transcripts.count() == 2

    def test_an_old_file_is_keyed_oldest_first_and_keeps_its_repeats(self, tmp_path: Path) -> None:
        """IMP-1: a version-0 file gets the key column; the first of two equal rows holds the
        key, the repeat holds none and stays (the sweep may not have taken it)."""
        path = tmp_path / "old.sqlite3"
        with sqlite3.connect(path) as database:
            database.execute(self.OLD_TABLE)
            database.executemany(
                "INSERT INTO message (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
                [("a", "user", "tea", "2026-11-30T10:00:00Z")] * 2,
            )
        database.close()
        with SqliteTranscripts(path) as transcripts:
            assert transcripts.count() == 2
            tea = ("a", "user", "tea", "2026-11-30T10:00:00Z", None)
            assert transcripts.import_messages([tea]) == (0, 1)
        with sqlite3.connect(path) as database:
            keys = database.execute("SELECT id, import_key FROM message ORDER BY id").fetchall()
            version = database.execute("PRAGMA user_version").fetchone()[0]
        database.close()
        assert version == TRANSCRIPTS_VERSION
        assert keys[0][1] == message_key("a", "2026-11-30T10:00:00Z", "user", "tea")
        assert keys[1][1] is None

    def test_a_file_of_a_newer_schema_is_refused(self, tmp_path: Path) -> None:
        path = tmp_path / "newer.sqlite3"
        with SqliteTranscripts(path):
            pass
        with sqlite3.connect(path) as database:
            database.execute(f"PRAGMA user_version = {TRANSCRIPTS_VERSION + 1}")
        database.close()
        with pytest.raises(TranscriptsVersionError, match="newer than this package's"):
            SqliteTranscripts(path)

    @pytest.mark.parametrize(
        ("written", "instant"),
        [
            ("2026-11-30T10:00:00+00:00", "2026-11-30T10:00:00Z"),
            ("2026-11-30t12:00:00.5+02:00", "2026-11-30T10:00:00.500000Z"),
            ("2026-11-30T10:00Z", "2026-11-30T10:00:00Z"),
            ("2026-11-30T10:00:00", "2026-11-30T10:00:00Z"),
            ("0001-01-01T00:30:00+01:00", None),
            ("yesterday", None),
        ],
    )
    def test_a_time_is_keyed_as_the_utc_instant_it_names(
        self, written: str, instant: str | None
    ) -> None:
        """IMP-1: one instant, one text; a time without a zone is UTC, as the sweep takes it."""
        assert utc_instant(written) == instant


class TestStateStore:
    def test_a_session_never_swept_has_watermark_zero(self, state: StateStore) -> None:
        """SWEEP-2: no state means nothing was taken yet."""
        assert state.watermark("new") == 0

    def test_the_watermark_never_moves_back(self, state: StateStore) -> None:
        """SWEEP-2: a smaller id is refused and nothing of that transaction is kept."""
        entry = AuditEntry(AUDIT_CUT, "a", 9, "user", "t")
        state.record_taken(
            "a",
            last_taken_id=10,
            budget=("waiting", DEFAULT),
            suspect_last_id=None,
            audit=[],
            now=NOW,
        )
        with pytest.raises(ValueError):
            state.record_taken(
                "a",
                last_taken_id=9,
                budget=("waiting", DEFAULT.halved("timeout")),
                suspect_last_id=None,
                audit=[entry],
                now=NOW,
            )
        assert state.watermark("a") == 10
        assert state.audit() == []
        assert state.batch_budget("waiting", DEFAULT) == DEFAULT

    @pytest.mark.parametrize(
        ("messages", "size"),
        [("x", 1024), (0, 1024), (-5, 1024), (50, "big"), (50, 0), (2.5, 1024), (50, b"\x01")],
    )
    def test_a_kept_budget_that_is_not_one_gives_the_default_to_the_sweep_and_the_plan(
        self, tmp_path: Path, messages: object, size: object
    ) -> None:
        """SWEEP-12: the state file may hold anything; both readers of the budget agree."""
        path = tmp_path / "s.sqlite3"
        StateStore(path).close()
        plant_budget(path, messages, size, "too_large", 1)
        with StateStore(path) as store:
            assert store.batch_budget("waiting", DEFAULT) == DEFAULT
        with ReadOnlyState(path) as reader:
            assert reader.batch_budget("waiting", DEFAULT) == DEFAULT

    def test_a_kept_budget_s_odd_reason_and_streak_are_dropped(self, tmp_path: Path) -> None:
        path = tmp_path / "s.sqlite3"
        StateStore(path).close()
        plant_budget(path, 50, 4096, b"\x00", "many")
        with StateStore(path) as store:
            kept = store.batch_budget("waiting", DEFAULT)
        assert (kept.messages, kept.bytes, kept.cut_reason, kept.good_streak) == (50, 4096, None, 0)

    def test_state_survives_reopening_the_file(self, tmp_path: Path) -> None:
        """SWEEP-2: watermark, failures, isolation, budget and audit live in the file."""
        path = tmp_path / "s.sqlite3"
        cut = DEFAULT.halved("too_large")
        with StateStore(path) as store:
            store.record_taken(
                "a",
                last_taken_id=5,
                budget=("waiting", cut),
                suspect_last_id=None,
                audit=[AuditEntry(AUDIT_CUT, "a", 5, "user", "t")],
                now=NOW,
            )
            store.record_failure("a", failures=2, suspect_last_id=8)
        with StateStore(path) as store:
            session = store.sweep_session("a")
            assert (session.watermark, session.failures, session.suspect_last_id) == (5, 2, 8)
            assert store.batch_budget("waiting", DEFAULT) == cut
            assert [row["kind"] for row in store.audit()] == ["cut"]

    def test_a_version_one_file_is_migrated_and_keeps_its_frozen_recalls(
        self, tmp_path: Path
    ) -> None:
        """SWEEP-2: migration 2 adds the sweep's tables; migration 1's table is untouched."""
        path = tmp_path / "old.sqlite3"
        db = sqlite3.connect(path)
        db.executescript(
            "CREATE TABLE frozen_recall (session_id TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " items TEXT NOT NULL, frozen_at REAL NOT NULL);"
            "INSERT INTO frozen_recall VALUES ('s', 'pack', '[\"one\"]', 1.0);"
            "PRAGMA user_version = 1;"
        )
        db.close()
        with StateStore(path) as store:
            recall = store.frozen_recall("s")
            assert recall is not None and recall.items == ("one",)
            assert store.watermark("s") == 0
            (version,) = state_rows(store, "PRAGMA user_version")[0]
            assert version == SCHEMA_VERSION

    def test_audit_rows_carry_no_text_column(self, state: StateStore) -> None:
        """SWEEP-8: a row names kind, session, message id, role and times only."""
        state.record_budget(
            "waiting",
            DEFAULT.halved("timeout"),
            audit=[AuditEntry("budget", "a", 1, detail="timeout")],
            now=NOW,
        )
        (row,) = state.audit()
        assert set(row) == {
            "kind",
            "session_id",
            "message_id",
            "role",
            "created_at",
            "recorded_at",
            "detail",
        }
        assert row["recorded_at"].startswith("2026-")


def plant_budget(
    path: Path, messages: object, size: object, reason: object, streak: object
) -> None:
    """A ``waiting`` budget row as a hostile hand would leave it (SQLite keeps any type)."""
    database = sqlite3.connect(path)
    try:
        database.execute(
            "INSERT INTO sweep_budget (mode, messages, bytes, cut_reason, good_streak)"
            " VALUES ('waiting', ?, ?, ?, ?)",
            (messages, size, reason, streak),
        )
        database.commit()
    finally:
        database.close()
