"""A ``nerve.db`` built from the facts of Nerve's schema, for the tests of ``NerveTranscripts``.

The tables are the ones Nerve's migrations leave behind, column for column where the reader
cares: ``sessions`` as the first schema made it, with the columns later migrations added
(``status``, ``archived_at``, ``message_count``, ``last_memorized_at`` and the others of the
third migration; ``starred``; ``model``; ``backend``; ``cwd``); ``messages`` with
``id INTEGER PRIMARY KEY AUTOINCREMENT``, ``content`` that may be NULL, ``thinking``, ``blocks``
JSON (``tool_calls`` dropped again), ``channel``, ``external_id`` and ``native_turn_id``; and
Nerve's indexes on messages — ``(session_id, created_at)``, ``(session_id, created_at DESC,
id DESC)`` and the two partial ones — never one on ``(session_id, id)``. The file runs in WAL
mode, as Nerve runs it.

Rows are written the way Nerve writes them: a native row's ``created_at`` in SQLite's
``YYYY-MM-DD HH:MM:SS`` (``native``), an ingested one in ISO 8601 with its zone
(``ingested``); each message bumps its session's ``message_count`` in the same transaction.
``compactable_ids`` asks the question Nerve's retention compaction asks of ``last_memorized_at``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

SESSIONS = """
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    title TEXT,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    source TEXT,
    metadata JSON DEFAULT '{}'
)
"""
# Added to sessions by later migrations, in their order (the third one brought most of them).
SESSION_COLUMNS = (
    ("status", "TEXT NOT NULL DEFAULT 'idle'"),
    ("sdk_session_id", "TEXT"),
    ("parent_session_id", "TEXT"),
    ("forked_from_message", "TEXT"),
    ("connected_at", "TEXT"),
    ("last_activity_at", "TEXT"),
    ("archived_at", "TEXT"),
    ("message_count", "INTEGER DEFAULT 0"),
    ("total_cost_usd", "REAL DEFAULT 0.0"),
    ("last_memorized_at", "TEXT"),
    ("starred", "BOOLEAN NOT NULL DEFAULT 0"),
    ("model", "TEXT"),
    ("backend", "TEXT"),
    ("cwd", "TEXT"),
)
MESSAGES = """
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    thinking TEXT,
    tool_calls JSON,
    blocks JSON,
    created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
    channel TEXT
)
"""
MESSAGE_CHANGES = (
    "ALTER TABLE messages DROP COLUMN tool_calls",
    "ALTER TABLE messages ADD COLUMN external_id TEXT",
    "ALTER TABLE messages ADD COLUMN native_turn_id TEXT",
)
INDEXES = (
    "CREATE INDEX idx_messages_session ON messages(session_id, created_at)",
    "CREATE INDEX idx_messages_session_created ON messages(session_id, created_at DESC, id DESC)",
    "CREATE UNIQUE INDEX idx_messages_external_id ON messages(session_id, external_id)"
    " WHERE external_id IS NOT NULL",
    "CREATE INDEX idx_messages_native_turn ON messages(session_id, native_turn_id)"
    " WHERE native_turn_id IS NOT NULL",
    "CREATE INDEX idx_sessions_status ON sessions(status)",
)
SESSION_ID_INDEX = "CREATE INDEX idx_messages_session_id ON messages(session_id, id)"


def native(minute: int, second: int = 0, *, hour: int = 10) -> str:
    """A native row's time, as SQLite's CURRENT_TIMESTAMP writes it (UTC, no zone)."""
    return f"2026-11-30 {hour:02d}:{minute:02d}:{second:02d}"


def ingested(minute: int, second: int = 0, *, hour: int = 10, zone: str = "+00:00") -> str:
    """An ingested row's time, as ``datetime.isoformat()`` of an aware time writes it."""
    return f"2026-11-30T{hour:02d}:{minute:02d}:{second:02d}.250000{zone}"


def text_blocks(*texts: str) -> list[dict[str, object]]:
    return [{"type": "text", "content": text} for text in texts]


class NerveDb:
    """A Nerve-shaped database at ``path``, written through one connection in autocommit.

    ``last_memorized_at=False`` leaves that column out (a database from before the migration
    that added it); ``session_id_index=True`` adds the index Nerve does not have.
    """

    def __init__(
        self, path: Path, *, last_memorized_at: bool = True, session_id_index: bool = False
    ) -> None:
        self.path = path
        create = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode = WAL")
        if create:
            self._create(last_memorized_at, session_id_index)

    def _create(self, last_memorized_at: bool, session_id_index: bool) -> None:
        self._db.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY)")
        self._db.execute(SESSIONS)
        for name, definition in SESSION_COLUMNS:
            if name != "last_memorized_at" or last_memorized_at:
                self._db.execute(f"ALTER TABLE sessions ADD COLUMN {name} {definition}")
        self._db.execute(MESSAGES)
        for statement in (*MESSAGE_CHANGES, *INDEXES):
            self._db.execute(statement)
        if session_id_index:
            self._db.execute(SESSION_ID_INDEX)
        self._db.execute("INSERT INTO schema_version (version) VALUES (44)")

    def close(self) -> None:
        self._db.close()

    def session(self, session_id: str, *, archived: bool = False) -> str:
        """Add a session; an archived one has Nerve's ``archived`` status and time."""
        status, archived_at = ("archived", native(59)) if archived else ("idle", None)
        self._db.execute(
            "INSERT INTO sessions (id, title, status, archived_at) VALUES (?, ?, ?, ?)",
            (session_id, f"chat {session_id}", status, archived_at),
        )
        return session_id

    def add(
        self,
        session_id: str,
        role: str,
        content: str | None,
        *,
        created_at: str,
        blocks: list[dict[str, object]] | None = None,
        thinking: str | None = None,
        external_id: str | None = None,
    ) -> int:
        """One message, as Nerve stores it (its session's count bumped in the same
        transaction); returns its id."""
        self._db.execute("BEGIN IMMEDIATE")
        cursor = self._db.execute(
            "INSERT INTO messages (session_id, role, content, thinking, blocks, channel,"
            " external_id, created_at) VALUES (?, ?, ?, ?, ?, 'web', ?, ?)",
            (
                session_id,
                role,
                content,
                thinking,
                json.dumps(blocks) if blocks else None,
                external_id,
                created_at,
            ),
        )
        self._db.execute(
            "UPDATE sessions SET message_count = COALESCE(message_count, 0) + 1 WHERE id = ?",
            (session_id,),
        )
        self._db.execute("COMMIT")
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def add_rows(self, rows: list[tuple[str, str, str | None, str]]) -> None:
        """Many ``(session_id, role, content, created_at)`` rows in one transaction, in order."""
        self._db.execute("BEGIN IMMEDIATE")
        self._db.executemany(
            "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)",
            rows,
        )
        self._db.execute(
            "UPDATE sessions SET message_count ="
            " (SELECT COUNT(*) FROM messages WHERE messages.session_id = sessions.id)"
        )
        self._db.execute("COMMIT")

    def execute(self, sql: str, parameters: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        """Any statement, as Nerve or an operator would run it; its rows."""
        return self._db.execute(sql, parameters).fetchall()

    def add_many(self, session_id: str, count: int, *, start: int = 0) -> list[int]:
        """``count`` plain turns (``turn N of SESSION``), user and assistant in turn, a second
        apart, in one transaction; their ids."""
        rows = []
        for n in range(start, start + count):
            role = "user" if n % 2 == 0 else "assistant"
            when = native(n // 60 % 60, n % 60, hour=10 + n // 3600)
            rows.append((session_id, role, f"turn {n} of {session_id}", when))
        self.add_rows(rows)
        found = self._db.execute(
            "SELECT id FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?",
            (session_id, count),
        ).fetchall()
        return sorted(row[0] for row in found)

    def last_memorized_at(self, session_id: str) -> str | None:
        row = self._db.execute(
            "SELECT last_memorized_at FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return None if row is None else row[0]

    def set_last_memorized_at(self, session_id: str, value: str | None) -> None:
        self._db.execute(
            "UPDATE sessions SET last_memorized_at = ? WHERE id = ?", (value, session_id)
        )

    def compactable_ids(self) -> set[int]:
        """Messages Nerve's retention compaction would strip: older than their session's
        ``last_memorized_at``, both read through SQLite's ``datetime()`` (its comparison)."""
        rows = self._db.execute(
            "SELECT m.id FROM messages AS m JOIN sessions AS s ON m.session_id = s.id"
            " WHERE s.last_memorized_at IS NOT NULL"
            " AND datetime(m.created_at) < datetime(s.last_memorized_at)"
        ).fetchall()
        return {row[0] for row in rows}

    def backup_to(self, target: Path) -> None:
        """A copy made with SQLite's online backup, as Nerve's own backup makes it."""
        copy = sqlite3.connect(target)
        try:
            self._db.backup(copy)
        finally:
            copy.close()


def restore(nerve_dir: Path, backup: Path, *, aside: Path) -> None:
    """Put ``backup`` in place as ``nerve_dir/nerve.db`` the way a restore does: the old folder
    is moved aside whole and a new one takes its place (so nothing of the old WAL is left)."""
    nerve_dir.rename(aside)
    nerve_dir.mkdir()
    shutil.copyfile(backup, nerve_dir / "nerve.db")
