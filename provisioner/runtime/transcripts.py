"""Where the sweep reads conversations from (SWEEP-1), and what it accepts of them (SWEEP-12).

``TranscriptSource`` is what Nerve plugs in: the ids of sessions that have messages, and a
session's messages after a given id, oldest first, a bounded page at a time — so no sweep ever
holds a whole history in memory. ``SqliteTranscripts`` is the built-in source, which
``nerve memory import`` fills and ``nerve memory sweep`` reads; its file's schema, migration
and import keys (IMP-1) close this module.

A source is trusted for nothing (SWEEP-12): Nerve keeps NULL content, a plugged-in store may
yield any object. ``check_message`` turns whatever one page item is into either a ``Message``
of plain values Loom takes, or a ``Refused`` that says where it sat and why it cannot go —
its role and time at most, never its text — so that one bad row costs one audit row, not the
session. ``check_session_id`` does the same for the ids ``sessions()`` yields.

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
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, cast, runtime_checkable

from provisioner.runtime.errors import OperatorMustAct, StoreFault
from provisioner.runtime.sqlite_file import OwnsConnection, open_database

TIME_MAX_CHARS = 64  # our choice: no timestamp is longer; a longer value is not parsed at all
SQLITE_MAX_INT = 2**63 - 1  # the largest id the state file's INTEGER columns hold
SHOWN_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # our choice: a refused role kept in the audit
UNKNOWN_ROLE = "(unknown)"  # what the audit shows for a role that is no plain name
SHOWN_CHARS = 64  # our choice: a class name or a refused session id, as a report shows it
# RFC 3339 date-time, as the contract's ``created_at`` (JSON Schema ``date-time``) takes it.
RFC3339 = re.compile(
    r"\d{4}-(?:0[1-9]|1[0-2])-\d{2}T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?"
    r"(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)


@dataclass(frozen=True)
class Message:
    """One transcript message.

    ``id`` increases with each message a source stores (across its sessions, or at least
    within one session); the watermark is the ``id`` of the last message Loom took.
    ``created_at`` is an RFC 3339 time, as Loom's ``messages[].created_at`` takes it; the
    sweep builds its messages with ``check_message``, which makes sure of all of this.
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


@runtime_checkable
class HostTranscripts(Protocol):
    """A host application's own store of conversations, such as Nerve's ``nerve.db``.

    Optional beside ``TranscriptSource``. ``kind`` and ``location`` say what the sweep reads
    (the state keeps them, so doctor can look at it); ``swept_through`` is called after each
    session's window with the id its watermark stands on, so the host can keep its own
    bookkeeping in step (Nerve's ``sessions.last_memorized_at``, NERVE-3). It may be called
    again with the same id; what it raises is logged and costs nothing else.
    """

    kind: str
    location: str

    def swept_through(self, session_id: str, message_id: int) -> None: ...


class SourceFailed(StoreFault):
    """A ``TranscriptSource`` method raised, or answered with something that is no list.

    Only the session being read is affected: its window stops and the report names it with
    ``kind``; the sweep goes on with the next session (SWEEP-12). The cause is chained.
    """

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        self.kind = f"SourceFailed({_class_name(cause)})"
        super().__init__(self.kind)


@dataclass(frozen=True)
class Refused:
    """A message the sweep cannot send (SWEEP-12): where it sat, and why; never its text.

    ``sits_after`` is the last usable id before it in the window (the watermark when none),
    so the watermark passes it exactly when it moves beyond that id. ``id`` is its id as the
    audit row shows it (None when it is no integer the state file can hold); ``usable`` says
    whether that id is also in order, so the watermark may stop on it. ``role`` is one of
    Loom's roles, a short plain name, or ``UNKNOWN_ROLE``; ``created_at`` is its time when it
    has one. ``reason`` is a fixed phrase.
    """

    sits_after: int
    id: int | None
    usable: bool
    role: str
    created_at: str | None
    reason: str


@dataclass(frozen=True)
class ReadWindow:
    """A window as read and checked: what can go, and what was refused, each oldest first."""

    messages: tuple[Message, ...]
    refused: tuple[Refused, ...]

    def refused_before(self, watermark: int) -> tuple[Refused, ...]:
        """The refused messages a watermark moved to ``watermark`` passes."""
        return tuple(item for item in self.refused if item.sits_after < watermark)

    def refused_alone_through(self) -> int | None:
        """With nothing left to send: how far the refused messages alone move the watermark.

        The last usable id among the refused, the newest one read excepted: that one is held
        until a message follows it, since what a source shows last may still be being
        written. None when the watermark cannot move.
        """
        through = None
        for item in self.refused[:-1]:
            if item.usable:
                through = item.id
        return through


def check_message(raw: object, *, after_id: int, roles: frozenset[str]) -> Message | Refused:
    """``raw`` as a ``Message`` of plain ``str``/``int`` values Loom takes, else ``Refused``.

    ``after_id`` is the last usable id before it: an id must be an integer (not a bool)
    above it. ``roles`` are the roles Loom takes. Content must be text that UTF-8 can carry;
    ``created_at`` must be a time (see ``loom_time``). Never raises: an attribute that cannot
    be read is a reason like any other.
    """
    fields = {name: _read(raw, name) for name in ("id", "role", "content", "created_at")}
    message_id = _integer(fields["id"])
    usable = message_id is not None and message_id > after_id
    role = _plain_str(fields["role"])
    content = _plain_str(fields["content"])
    created_at = loom_time(fields["created_at"])
    problems = (
        (any(value is _UNREADABLE for value in fields.values()), "message cannot be read"),
        (message_id is None, "id is not an integer the state can hold"),
        (not usable, "id is not after the one before"),
        (role not in roles, "role is not one Loom takes"),
        (content is None, "content is not text"),
        (not _utf8(content or ""), "content is not valid Unicode"),
        (created_at is None, "created_at is not a time"),
    )
    reason = next((why for bad, why in problems if bad), None)
    if reason is None and message_id is not None and role and content is not None and created_at:
        return Message(message_id, role, content, created_at)
    shown = role if role and SHOWN_ROLE.fullmatch(role) else UNKNOWN_ROLE
    return Refused(after_id, message_id, usable, shown, created_at, reason or "message refused")


def check_session_id(raw: object) -> str | None:
    """``raw`` as a plain ``str`` session id, or None when it is no text the state can key on."""
    session_id = _plain_str(raw)
    if not session_id or not _utf8(session_id):
        return None
    return session_id


def shown_session_id(raw: object) -> str:
    """A refused session id as a report may show it: a bounded printable form, never raises."""
    text = _plain_str(raw)
    if text is None:
        return f"<{_class_name(raw)}>"
    shown = text[:SHOWN_CHARS].encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(char if char.isprintable() else "?" for char in shown)


def loom_time(value: object) -> str | None:
    """``value`` as the RFC 3339 time Loom's ``created_at`` takes, or None when it is no time.

    An RFC 3339 string goes as it is. Another ISO 8601 form ``datetime.fromisoformat`` reads
    (no seconds, no zone, a week date), or a ``datetime``, goes as RFC 3339 in UTC; a time
    without a zone is taken as UTC, as Nerve's are (NERVE-2). Anything else (no string, no
    time, a day that does not exist) is None, and the message is refused rather than sent
    for Loom to refuse.
    """
    if issubclass(type(value), datetime):
        parsed: datetime | None = cast(datetime, value)
    else:
        text = _plain_str(value)
        if text is None or len(text) > TIME_MAX_CHARS:
            return None
        if RFC3339.fullmatch(text) and _real_date(text):
            return text
        parsed = parsed_time(text)
    if parsed is None:
        return None
    try:
        naive = parsed.utcoffset() is None
        aware = parsed.replace(tzinfo=UTC) if naive else parsed.astimezone(UTC)
        return datetime.isoformat(aware)
    except Exception:  # a date past year 9999 in UTC, or a time zone object that raises
        return None


_UNREADABLE = object()


def _read(raw: object, name: str) -> object:
    """Attribute ``name`` of ``raw``; ``_UNREADABLE`` when it is missing or its getter raises."""
    try:
        return getattr(raw, name)
    except Exception:
        return _UNREADABLE


def _plain_str(value: object) -> str | None:
    """A plain ``str`` copy of a ``str`` (subclasses included), else None.

    ``type()`` is asked, not ``isinstance``, which an object can fool through ``__class__``.
    """
    if not issubclass(type(value), str):
        return None
    return str.__str__(cast(str, value))


def _integer(value: object) -> int | None:
    """A plain ``int`` in the state file's range (bools are no ids), else None."""
    kind = type(value)
    if not issubclass(kind, int) or issubclass(kind, bool):
        return None
    number = int.__int__(cast(int, value))
    return number if -SQLITE_MAX_INT <= number <= SQLITE_MAX_INT else None


def _utf8(text: str) -> bool:
    """Whether UTF-8 can carry ``text`` (no lone surrogates), as the request body must."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _real_date(text: str) -> bool:
    """Whether an RFC 3339-shaped ``text`` names a real day (year 1 on, day within its month)."""
    try:
        datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return False
    return True


def _class_name(value: object) -> str:
    name = type(value).__name__
    shown = "".join(char for char in name if char.isalnum() or char == "_")
    return shown[:SHOWN_CHARS] or "?"


# One record of an import: session_id, role, content, created_at, and its own id or None.
ImportRecord = tuple[str, str, str, str, str | None]


class SqliteTranscripts(OwnsConnection):
    """The built-in ``TranscriptSource``: one SQLite file of messages (SWEEP-1).

    Ids come from SQLite's ``AUTOINCREMENT``, so they only ever grow, across sessions, and an
    id is never reused even after rows are deleted — the watermark relies on that. Reads are
    one indexed range query per page (``session_id, id``), never a whole history. Writes go in
    one transaction per call: all of the call's messages, or none.

    Each row may hold an import key (IMP-1), unique over the file: ``import_messages`` skips a
    message whose key is held, so an import run again stores nothing twice, even when two run
    at once. ``add_message`` and ``add_messages`` always store (the caller knows the message
    is new), taking the key only when it is free. Opening migrates an older file in one write
    transaction, read again under the lock, so processes opening one file together migrate it
    once; a file of a newer schema raises ``TranscriptsVersionError``, a busy one SQLite's
    busy error, and one that is no database ``sqlite3.Error``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)
        self._lock = threading.RLock()
        self._db = open_database(self._path)
        try:
            if schema_version(self._db) != TRANSCRIPTS_VERSION:
                with self._transaction() as db:
                    migrate(db, schema_version(db))
        except BaseException:
            self._db.close()
            raise

    @property
    def path(self) -> str:
        """The file the transcripts live in, as a fault names it (REL-2)."""
        return self._path

    def add_message(self, session_id: str, role: str, content: str, created_at: str) -> int:
        """Store one message and return its id."""
        with self._transaction() as db:
            cursor = db.execute(ADD_MESSAGE, add_row((session_id, role, content, created_at)))
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def add_messages(self, rows: Iterable[tuple[str, str, str, str]]) -> int:
        """Store ``(session_id, role, content, created_at)`` rows in one transaction.

        Returns how many were stored. If anything fails (the iterable raises, the disk is
        full), the transaction rolls back and no row of this call is kept.
        """
        count = 0
        with self._transaction() as db:
            for row in rows:
                db.execute(ADD_MESSAGE, add_row(row))
                count += 1
        return count

    def import_messages(self, records: Iterable[ImportRecord]) -> tuple[int, int]:
        """Store each ``(session_id, role, content, created_at, id)`` record not already there.

        The key is ``record_key`` of the session and ``id``, else ``message_key`` (IMP-1); a
        record whose key a row holds, from an earlier import or earlier in ``records``, is
        left out, and the stored row is never changed. Returns ``(new, already_there)``. One
        transaction: when anything fails, no record of this call is kept.
        """
        new = already = 0
        with self._transaction() as db:
            for session_id, role, content, created_at, record_id in records:
                key = (
                    message_key(session_id, created_at, role, content)
                    if record_id is None
                    else record_key(session_id, record_id)
                )
                stored = db.execute(IMPORT_MESSAGE, (session_id, role, content, created_at, key))
                new, already = (new + 1, already) if stored.rowcount else (new, already + 1)
        return new, already

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

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``); rolled back on failure,
        at ``COMMIT`` too (a full disk), and the failure itself raised, never the rollback's."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    with suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                raise


# The built-in transcripts file underneath ``SqliteTranscripts``: its schema, its migration
# and the import keys (IMP-1).
#
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


class TranscriptsVersionError(OperatorMustAct, sqlite3.DatabaseError):
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
