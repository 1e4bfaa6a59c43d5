"""The transcript source and the sweep's state store (SWEEP-1, SWEEP-2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.state import (
    AUDIT_CUT,
    SCHEMA_VERSION,
    AuditEntry,
    StateStore,
)
from provisioner.runtime.transcripts import SqliteTranscripts

from .conftest import NOW, add_session

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
            (version,) = store.read("PRAGMA user_version")[0]
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
