"""Where the sweep reads conversations from (SWEEP-1).

``TranscriptSource`` is what Nerve plugs in: the ids of sessions that have messages, and a
session's messages after a given id, oldest first, a bounded page at a time — so no sweep ever
holds a whole history in memory. ``SqliteTranscripts`` is the built-in source, which
``nerve memory import`` fills and ``nerve memory sweep`` reads.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from provisioner.runtime.sqlite_file import open_database


@dataclass(frozen=True)
class Message:
    """One transcript message.

    ``id`` increases with each message a source stores (across its sessions, or at least
    within one session); the watermark is the ``id`` of the last message Loom took.
    ``created_at`` is an ISO 8601 timestamp, as Loom's ``messages[].created_at`` takes it.
    """

    id: int
    role: str
    content: str
    created_at: str


class TranscriptSource(Protocol):
    """The transcripts the sweep extracts from."""

    def sessions(self) -> Sequence[str]:
        """Ids of the sessions that have messages."""
        ...

    def messages_after(self, session_id: str, after_id: int, limit: int) -> Sequence[Message]:
        """At most ``limit`` messages of ``session_id`` with ``id > after_id``, oldest first."""
        ...


TRANSCRIPTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS message (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS message_by_session ON message (session_id, id);
"""


class SqliteTranscripts:
    """The built-in ``TranscriptSource``: one SQLite file of messages (SWEEP-1).

    Ids come from SQLite's ``AUTOINCREMENT``, so they only ever grow, across sessions, and an
    id is never reused even after rows are deleted — the watermark relies on that. Reads are
    one indexed range query per page (``session_id, id``), never a whole history.
    ``add_messages`` writes many messages in one transaction: all of them, or none.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)
        self._lock = threading.RLock()
        self._db = open_database(self._path)
        try:
            self._db.executescript(TRANSCRIPTS_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> SqliteTranscripts:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database; safe to call more than once."""
        with self._lock:
            self._db.close()

    def add_message(self, session_id: str, role: str, content: str, created_at: str) -> int:
        """Store one message and return its id."""
        with self._lock:
            cursor = self._db.execute(_INSERT, (session_id, role, content, created_at))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def add_messages(self, rows: Iterable[tuple[str, str, str, str]]) -> int:
        """Store ``(session_id, role, content, created_at)`` rows in one transaction.

        Returns how many were stored. If anything fails (the iterable raises, the disk is
        full), the transaction rolls back and no row of this call is kept.
        """
        count = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for row in rows:
                    self._db.execute(_INSERT, row)
                    count += 1
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        return count

    def sessions(self) -> list[str]:
        """Ids of the sessions that have messages, in order of their first message."""
        with self._lock:
            rows = self._db.execute(
                "SELECT session_id FROM message GROUP BY session_id ORDER BY MIN(id)"
            ).fetchall()
        return [row[0] for row in rows]

    def messages_after(self, session_id: str, after_id: int, limit: int) -> list[Message]:
        """At most ``limit`` messages of ``session_id`` with ``id > after_id``, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, role, content, created_at FROM message"
                " WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?",
                (session_id, after_id, max(limit, 0)),
            ).fetchall()
        return [Message(*row) for row in rows]

    def count(self) -> int:
        """How many messages are stored (for reports; one indexed count)."""
        with self._lock:
            (total,) = self._db.execute("SELECT COUNT(*) FROM message").fetchone()
        return int(total)


_INSERT = "INSERT INTO message (session_id, role, content, created_at) VALUES (?, ?, ?, ?)"
