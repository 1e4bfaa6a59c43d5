"""Where the sweep reads conversations from (SWEEP-1), and what it accepts of them (SWEEP-12).

``TranscriptSource`` is what Nerve plugs in: the ids of sessions that have messages, and a
session's messages after a given id, oldest first, a bounded page at a time — so no sweep ever
holds a whole history in memory. ``SqliteTranscripts`` is the built-in source, which
``nerve memory import`` fills and ``nerve memory sweep`` reads; its file's schema, migration
and import keys (IMP-1) are in ``transcripts_sqlite``.

A source is trusted for nothing (SWEEP-12): Nerve keeps NULL content, a plugged-in store may
yield any object. ``check_message`` turns whatever one page item is into either a ``Message``
of plain values Loom takes, or a ``Refused`` that says where it sat and why it cannot go —
its role and time at most, never its text — so that one bad row costs one audit row, not the
session. ``check_session_id`` does the same for the ids ``sessions()`` yields.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, cast, runtime_checkable

from provisioner.runtime.sqlite_file import open_database
from provisioner.runtime.transcripts_sqlite import (
    ADD_MESSAGE,
    IMPORT_MESSAGE,
    TIME_MAX_CHARS,
    TRANSCRIPTS_VERSION,
    add_row,
    message_key,
    migrate,
    parsed_time,
    record_key,
    schema_version,
)

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


class SourceFailed(Exception):
    """A ``TranscriptSource`` method raised, or answered with something that is no list.

    Only the session being read is affected: its window stops and the report names it with
    ``kind``; the sweep goes on with the next session (SWEEP-12). The cause is chained.
    """

    def __init__(self, cause: BaseException) -> None:
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


class SqliteTranscripts:
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
