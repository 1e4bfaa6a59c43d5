"""The built-in transcripts file underneath ``SqliteTranscripts``: schema, migration, import keys.

The file carries its schema version in SQLite's ``user_version``; ``TRANSCRIPTS_MIGRATIONS``
brings an older file forward in order, inside the caller's write transaction, so a reader sees
the file before or after a migration, never half-way. Files written before the schema had a
version are version 0 and hold the ``message`` table already.

The import key (IMP-1) makes ``nerve memory import`` idempotent: a record's own ``id`` within
its session (``record_key``), else its session, time, role and content (``message_key``), as a
SHA-256 digest that is the same on every machine, in every process and every version. A key is
held by one row at most (a UNIQUE index), so two imports running at once cannot both store one
message: SQLite's write lock puts one after the other, and the second finds the key held.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime

TIME_MAX_CHARS = 64  # our choice: no timestamp is longer; a longer value is not parsed at all

# Each step brings a file from version ``index`` to ``index + 1``. Append only: a step that
# shipped is never edited, since files on disk were migrated by it.
TRANSCRIPTS_MIGRATIONS: tuple[str, ...] = (
    # 1: the messages (SWEEP-1). A file of before the version holds this table already, at
    # version 0; IF NOT EXISTS lets it through unchanged.
    """
    CREATE TABLE IF NOT EXISTS message (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS message_by_session ON message (session_id, id)
    """,
    # 2: the import key (IMP-1). The rows already there get theirs computed (``_key_old_rows``);
    # a repeat among them keeps none, and stays.
    """
    ALTER TABLE message ADD COLUMN import_key TEXT;
    CREATE UNIQUE INDEX message_by_key ON message (import_key)
    """,
)
TRANSCRIPTS_VERSION = len(TRANSCRIPTS_MIGRATIONS)
KEY_STEP = 1  # the index of the step that adds the key, after which old rows are keyed

Text = str | bytes | None


class TranscriptsVersionError(sqlite3.DatabaseError):
    """The transcripts file was written by a newer schema than this package knows.

    It is refused rather than misread, and left as it is; upgrading the package reads it. A
    ``sqlite3.DatabaseError``, so every caller that reports a file it cannot open reports
    this one too, as one line.
    """


def schema_version(db: sqlite3.Connection) -> int:
    """The file's schema version; ``TranscriptsVersionError`` when it is newer than ours."""
    (version,) = db.execute("PRAGMA user_version").fetchone()
    if not isinstance(version, int) or version > TRANSCRIPTS_VERSION:
        raise TranscriptsVersionError(
            f"transcripts schema {version} is newer than this package's "
            f"{TRANSCRIPTS_VERSION}; upgrade nerve-provisioner"
        )
    return version


def migrate(db: sqlite3.Connection, version: int) -> None:
    """Run every step after ``version`` in the caller's write transaction, then record the
    latest version. The caller read ``version`` under that transaction's lock, so a step never
    runs twice; a failure rolls all of it back with the transaction."""
    for step in range(version, TRANSCRIPTS_VERSION):
        for statement in TRANSCRIPTS_MIGRATIONS[step].split(";"):
            if statement.strip():
                db.execute(statement)
        if step == KEY_STEP:
            _key_old_rows(db)
    db.execute(f"PRAGMA user_version = {TRANSCRIPTS_VERSION}")


def message_key(session_id: Text, created_at: Text, role: Text, content: Text) -> str:
    """The import key of a message without an ``id`` of its own (IMP-1), as 64 hex digits.

    SHA-256 of the word ``message``, then of each field's UTF-8 bytes preceded by their length
    as 8 bytes, big-endian, in the order session, time, role, content. The time goes as the
    instant it names (``utc_instant``), so ``Z`` and ``+00:00`` are one message; a value that
    is no time goes as it is. Bytes (a row of an old file, read as stored) go as they are.
    Never raises.
    """
    when = _text_bytes(created_at)
    try:
        instant = utc_instant(when.decode("utf-8"))
    except UnicodeDecodeError:
        instant = None
    fields = (session_id, instant or when, role, content)
    return _digest(b"message", *(_text_bytes(field) for field in fields))


def record_key(session_id: str, record_id: str) -> str:
    """The import key of a record with an ``id`` of its own: that id within its session,
    encoded as ``message_key`` encodes its fields, after the word ``id``."""
    return _digest(b"id", _text_bytes(session_id), _text_bytes(record_id))


def parsed_time(text: str) -> datetime | None:
    """``text`` as ``datetime.fromisoformat`` reads it (``z`` and ``t`` in either case), else
    None; a text longer than ``TIME_MAX_CHARS`` is not parsed at all."""
    if len(text) > TIME_MAX_CHARS:
        return None
    try:
        return datetime.fromisoformat(text.upper())
    except ValueError:
        return None


def utc_instant(text: str) -> str | None:
    """``text`` as the RFC 3339 UTC time it names (``2026-12-01T08:00:00Z``), else None.

    Any ISO 8601 form ``parsed_time`` reads; an offset is applied, and a time without one is
    taken as UTC (as the sweep takes it, NERVE-2). Fractions of a second are kept to the
    microsecond. None for no time, and for a time outside years 1 to 9999 once in UTC.
    """
    return instant_of(parsed_time(text))


def instant_of(parsed: datetime | None) -> str | None:
    """A parsed time as ``utc_instant`` writes it; None for None or a year out of range."""
    if parsed is None:
        return None
    try:
        naive = parsed.utcoffset() is None
        aware = parsed.replace(tzinfo=UTC) if naive else parsed.astimezone(UTC)
    except (OverflowError, ValueError):
        return None
    return aware.replace(tzinfo=None).isoformat() + "Z"


def add_row(row: tuple[str, str, str, str]) -> tuple[str, str, str, str, str, str]:
    """``(session_id, role, content, created_at)`` as the parameters of ``ADD_MESSAGE``."""
    session_id, role, content, created_at = row
    key = message_key(session_id, created_at, role, content)
    return session_id, role, content, created_at, key, key


# A message stored whatever: it takes its key only when no row holds it yet.
ADD_MESSAGE = (
    "INSERT INTO message (session_id, role, content, created_at, import_key) VALUES"
    " (?, ?, ?, ?, (SELECT ? WHERE NOT EXISTS (SELECT 1 FROM message WHERE import_key = ?)))"
)
# A message stored only when its key is free; the cursor's rowcount says which (1 or 0).
IMPORT_MESSAGE = (
    "INSERT INTO message (session_id, role, content, created_at, import_key)"
    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (import_key) DO NOTHING"
)
_OLD_ROW = (
    "SELECT id, CAST(session_id AS BLOB), CAST(created_at AS BLOB), CAST(role AS BLOB),"
    " CAST(content AS BLOB) FROM message WHERE id > ? ORDER BY id LIMIT 1"
)
_SET_KEY = "UPDATE OR IGNORE message SET import_key = ? WHERE id = ?"


def _key_old_rows(db: sqlite3.Connection) -> None:
    """Give each row its ``message_key``, oldest first; a repeat of an older row keeps none.

    Rows are read one at a time as their bytes (``CAST AS BLOB``), so a huge message costs one
    row's memory and text that is no valid UTF-8 never fails the migration. No row is deleted:
    the sweep may not have taken a repeat yet, and sends it like any other message.
    """
    row_id = 0
    while True:
        row = db.execute(_OLD_ROW, (row_id,)).fetchone()
        if row is None:
            return
        row_id, *fields = row
        db.execute(_SET_KEY, (message_key(*fields), row_id))


def _text_bytes(value: Text) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogatepass")


def _digest(kind: bytes, *fields: bytes) -> str:
    digest = hashlib.sha256(kind)
    for field in fields:
        digest.update(len(field).to_bytes(8, "big"))
        digest.update(field)
    return digest.hexdigest()
