"""Nerve's own ``nerve.db`` as the sweep's transcripts (NERVE-2), kept in step (NERVE-3).

Nerve keeps every conversation in ``nerve.db``: a ``sessions`` table (archived ones too) and a
``messages`` table whose ids come from SQLite's ``AUTOINCREMENT``. ``NerveTranscripts(path)``
is a ``TranscriptSource`` over it, so the sweep extracts into Loom what Nerve stored, with no
copy of it anywhere else:

* **Read only.** The file is opened with ``mode=ro``: this connection can never write, take
  Nerve's write lock, create the file or change its journal mode. Nerve runs it in WAL mode,
  so a read never blocks Nerve's writer, and every query is short and read to its end, so no
  read transaction stays open to hold back Nerve's checkpoints. A lock met anyway (Nerve
  recovering its WAL) is waited out for ``READ_WAIT_MS``.
* **Text.** ``content`` as Nerve stored it; when it is NULL or blank, the text blocks of
  ``blocks`` (``{"type": "text", "content": …}``, one line each). Thinking, tool calls,
  images and files are never sent. A row with no text at all (a turn of tool calls only) is
  passed over as if it were not there: it never stops its session, and the watermark moves
  past it with the next message that has text.
* **Time.** ``created_at`` goes as RFC 3339 with a zone: Nerve's own rows carry SQLite's
  ``YYYY-MM-DD HH:MM:SS``, which is UTC; rows it ingested carry ISO 8601 with ``+00:00``.
* **Conversation only** (NERVE-9). A row whose ``blocks`` hold a ``tool_call`` block and no
  ``text`` block is a tool row — a Codex thread's call (the tool's name in ``content``) or its
  fallback row (the tool's output in ``content``) — and a ``tool`` row is a tool's output:
  both are passed over like rows without text. docs/sweep.md lists every shape Nerve writes.
* **Roles** are Loom's: ``user``, ``assistant``, ``system``; a ``developer`` turn is a
  ``system`` one. Any other role is passed on as it is, and the sweep refuses it with an
  audit row (SWEEP-12).
* **Busy.** A file Nerve holds with an exclusive lock past ``READ_WAIT_MS`` (or one out of
  reach: I/O, permission) is a ``FileFault`` naming it (busy: exit 75), not "not Nerve's".
* **Pages** are bounded. Ids are the watermark, but Nerve indexes its messages by
  ``(session_id, created_at)``, not by ``(session_id, id)``. A session's ids after the
  watermark are first looked for in id order among the next ``PROBE_ROWS`` rows of the table,
  which finds them at once when the session is busy or the watermark is recent; otherwise
  Nerve's index gives ``ID_CHUNK`` of them at a time, read whole from the index and sorted
  (the cost grows with the session: see ``benchmarks/bench_nerve_db.py``). An index on
  ``messages (session_id, id)``, when Nerve has one, is used instead. Paging by id is right
  whatever the times say: rows of the same second, or a row ingested late with an older time,
  come in id order like any other.

``swept_through`` keeps ``sessions.last_memorized_at`` in step (NERVE-3): Nerve's retention
compaction drops ``blocks`` and ``thinking`` of messages older than it, and under Loom nothing
else moves it. It is set to the time, in Nerve's format, of the message the watermark stands
on — never later, and never later than the moment of the sweep; never back, but for a time
in the future, which is moved back to that value (REL-6) — in one short transaction of its own
connection, and only when the column exists. A file replaced under the reader (a restored
backup) is opened again at the start of the next sweep.

``memorized_through`` reads the same column the other way, after a switch from memU (MIG-2):
which of a session's messages memU already took, so the sweep starts after them
(``memorized``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from provisioner.runtime.errors import OperatorMustAct, file_fault
from provisioner.runtime.nerve_db import memorized
from provisioner.runtime.sqlite_file import OwnsConnection
from provisioner.runtime.sweep.source import Memorized
from provisioner.runtime.transcripts import Message, loom_time

READ_WAIT_MS = 5_000  # our choice: a read waits out a lock Nerve holds for this long
WRITE_WAIT_MS = 1_000  # our choice: last_memorized_at waits this long for Nerve's write lock,
# then waits for the next sweep instead
PROBE_ROWS = 2_048  # our choice: rows read in id order after the watermark before the index
PROBE_MIN_IDS = 32  # our choice: fewer of the session's ids among them, and the index is asked
ID_CHUNK = 512  # our choice: a session's ids read from Nerve's index at once (ids only)
FETCH_ROWS = 64  # our choice: rows looked at for text in one query
NERVE_ROLES = {  # NERVE-2: Nerve's roles as Loom takes them (a tool's rows are not read, NERVE-9)
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
MESSAGE_COLUMNS = ("id", "session_id", "role", "content", "created_at")  # Nerve's v1 schema
BLANK = " \t\r\n"
KIND = "nerve.db"
DAMAGED = "damaged"  # REL-4: the one file fault that says the file is not a database to read
TOOL_ROLE = "tool"  # NERVE-9: a tool's output, never conversation
NERVE_TIME = "%Y-%m-%d %H:%M:%S"  # NERVE-3: SQLite's datetime(), the form Nerve writes, UTC

log = logging.getLogger("provisioner.runtime.nerve_db.transcripts")

_CONTENT_TEXT = (
    f"CASE WHEN typeof(m.content) = 'text' AND trim(m.content, '{BLANK}') != '' THEN m.content END"
)
_BLOCK_TEXT = (
    "CASE WHEN json_valid(m.blocks) THEN (SELECT group_concat(t, char(10)) FROM ("
    "SELECT COALESCE("
    "CASE json_type(b.value, '$.content') WHEN 'text' THEN json_extract(b.value, '$.content') END,"
    " CASE json_type(b.value, '$.text') WHEN 'text' THEN json_extract(b.value, '$.text') END) AS t"
    " FROM json_each(m.blocks) AS b"
    " WHERE b.type = 'object' AND json_extract(b.value, '$.type') = 'text' ORDER BY b.key)"
    f" WHERE trim(t, '{BLANK}') != '') END"
)


# NERVE-9: a row whose blocks hold a tool call and no text block is a tool row: its content
# is the tool's name (a Codex thread's call) or the tool's output (the fallback row written
# when the output came before its call), never conversation.
_TOOL_ROW = (
    "(json_valid(m.blocks) AND json_type(m.blocks) = 'array'"
    " AND EXISTS (SELECT 1 FROM json_each(m.blocks) AS c WHERE c.type = 'object'"
    " AND json_extract(c.value, '$.type') = 'tool_call')"
    " AND NOT EXISTS (SELECT 1 FROM json_each(m.blocks) AS c WHERE c.type = 'object'"
    " AND json_extract(c.value, '$.type') = 'text'))"
)
_NOT_TOOL_ROLE = f"lower(trim(COALESCE(m.role, ''), '{BLANK}')) != '{TOOL_ROLE}'"


class NerveDatabaseError(OperatorMustAct, ValueError):
    """The file cannot be read as Nerve's ``nerve.db``: one line naming it, what is wrong and
    what is expected (a missing file, no SQLite database, no ``messages`` table, …)."""


@dataclass(frozen=True)
class _Shape:
    """What this ``nerve.db`` has of the columns and indexes the reader may use."""

    blocks: bool
    last_memorized_at: bool
    session_id_index: bool


class NerveTranscripts(OwnsConnection):
    """A read-only ``TranscriptSource`` over Nerve's ``nerve.db`` (NERVE-2); see above.

    Raises ``NerveDatabaseError`` when ``db_path`` is not Nerve's database. Safe to share
    between the threads of one process (a lock serialises its queries). Use it as a context
    manager, or call ``close()``. ``clock`` gives the wall time (seconds since the epoch) that
    a ``last_memorized_at`` in the future is judged against.
    """

    kind = KIND

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        write_wait_ms: int = WRITE_WAIT_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = Path(os.path.abspath(db_path))  # the same file whatever the cwd becomes
        self.location = str(self._path)
        self._write_wait_ms = write_wait_ms
        self._clock = clock
        self._lock = threading.RLock()
        self._ids: tuple[str, int, list[int]] | None = None  # one session's ids read ahead
        self._db, self._shape, self._identity = _open(self._path)

    def sessions(self) -> list[str]:
        """Ids of the sessions that have messages, archived ones included, oldest first.

        Called at the start of every sweep: a file replaced since (a restored backup) is
        opened again here, and ids read ahead are forgotten. ``OSError`` when the file is gone.
        """
        with self._lock:
            self._reopen_if_replaced()
            self._ids = None
            rows = self._db.execute(
                "SELECT s.id FROM sessions AS s WHERE s.id IS NOT NULL AND EXISTS"
                " (SELECT 1 FROM messages AS m WHERE m.session_id = s.id) ORDER BY s.rowid"
            ).fetchall()
        return [row[0] for row in rows]

    def messages_after(self, session_id: str, after_id: int, limit: int) -> list[Message]:
        """At most ``limit`` messages with text of ``session_id`` with ``id > after_id``, in
        id order. Rows without text are passed over; at most ``limit`` texts are held."""
        found: list[Message] = []
        with self._lock:
            after = after_id
            while len(found) < limit:
                ids = self._ids_after(session_id, after)[:FETCH_ROWS]
                if not ids:
                    break
                with_text = self._with_text(session_id, ids)[: limit - len(found)]
                found.extend(self._messages(session_id, with_text))
                after = with_text[-1] if len(found) == limit else ids[-1]
        return found

    def swept_through(self, session_id: str, message_id: int) -> None:
        """Keep ``sessions.last_memorized_at`` in step with the watermark (NERVE-3).

        The value is the time of the message at ``message_id`` as SQLite's ``datetime()``
        writes it (``YYYY-MM-DD HH:MM:SS``, UTC, the form Nerve writes and compares), or the
        time of an older message still waiting after it (a row ingested late), whichever is
        earlier: compaction must never reach a message Loom has not taken. Never later than
        the moment of the sweep (``clock``) either, whatever time a message carries (a clock
        that ran ahead, a bogus ingested time, REL-6). Written only when it is later than what
        the column holds (or that is no time), or when the column holds a time in the future,
        which is moved back to this value; in one short transaction; nothing when the column
        does not exist. ``sqlite3.Error`` when Nerve kept its write lock past
        ``write_wait_ms``: the next sweep tries again.
        """
        if not self._shape.last_memorized_at:
            return
        now = datetime.fromtimestamp(self._clock(), UTC).strftime(NERVE_TIME)
        with self._lock:
            row = self._db.execute(
                "SELECT datetime(m.created_at), datetime(s.last_memorized_at)"
                " FROM messages AS m JOIN sessions AS s ON s.id = m.session_id"
                " WHERE m.id = ? AND +m.session_id = ?",
                (message_id, session_id),
            ).fetchone()
            if row is None:
                return
            taken, kept = row
            (waiting,) = self._db.execute(
                "SELECT MIN(datetime(created_at)) FROM messages WHERE session_id = ? AND id > ?",
                (session_id, message_id),
            ).fetchone()
        value = min(when for when in (taken, waiting, now) if when is not None)
        ahead = kept is not None and kept > now  # REL-6: a future value is repaired
        if (taken is not None and (kept is None or kept < value)) or ahead:
            self._write_last_memorized(session_id, value, now)

    def memorized_through(self, session_id: str) -> Memorized | None:
        """The last message of ``session_id`` memU already took, by ``last_memorized_at``
        (MIG-2), with the count of messages with text up to it; None when the column is
        absent or its value cannot be trusted (see ``memorized``): the session is then sent
        from its start. ``sqlite3.Error`` when the file cannot be read."""
        if not self._shape.last_memorized_at:
            return None
        text_sql = f"COALESCE({_CONTENT_TEXT}, {self._block_text()})"
        with self._lock:
            return memorized.memorized_through(
                self._db, session_id, now=self._clock(), text_sql=text_sql
            )

    # --- reading ----------------------------------------------------------------------------

    def _ids_after(self, session_id: str, after: int) -> list[int]:
        """The session's next ids after ``after``, in order: all of them up to the last one
        returned (none of the session's ids in between is missing)."""
        if self._ids is not None and self._ids[0] == session_id and self._ids[1] <= after:
            ahead = self._ids[2]
            rest = ahead[bisect_right(ahead, after) :]
            if rest:
                return rest
        ids = self._read_ids(session_id, after)
        self._ids = (session_id, after, ids)
        return ids

    def _read_ids(self, session_id: str, after: int) -> list[int]:
        by_session = "SELECT id FROM messages WHERE session_id = ? AND id > ? ORDER BY id LIMIT ?"
        if not self._shape.session_id_index:
            rows = self._db.execute(
                "SELECT id, session_id = ? FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                (session_id, after, PROBE_ROWS),
            ).fetchall()
            ids = [row[0] for row in rows if row[1]]
            if len(rows) < PROBE_ROWS or len(ids) >= PROBE_MIN_IDS:
                return ids
        rows = self._db.execute(by_session, (session_id, after, ID_CHUNK)).fetchall()
        return [row[0] for row in rows]

    def _with_text(self, session_id: str, ids: list[int]) -> list[int]:
        """Those of ``ids`` whose row has text, in order; the text stays in SQLite."""
        marks = ", ".join("?" * len(ids))
        rows = self._db.execute(
            f"SELECT m.id FROM messages AS m WHERE +m.session_id = ? AND m.id IN ({marks})"
            f" AND {self._conversation()}"
            f" AND COALESCE({_CONTENT_TEXT}, {self._block_text()}) IS NOT NULL ORDER BY m.id",
            (session_id, *ids),
        ).fetchall()
        return [row[0] for row in rows]

    def _messages(self, session_id: str, ids: list[int]) -> list[Message]:
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        rows = self._db.execute(
            f"SELECT m.id, m.role, COALESCE({_CONTENT_TEXT}, {self._block_text()}), m.created_at"
            f" FROM messages AS m WHERE +m.session_id = ? AND m.id IN ({marks})"
            f" AND {self._conversation()} ORDER BY m.id",
            (session_id, *ids),
        ).fetchall()
        return [_message(*row) for row in rows if isinstance(row[2], str)]

    def _block_text(self) -> str:
        return _BLOCK_TEXT if self._shape.blocks else "NULL"

    def _conversation(self) -> str:
        """The rows that are conversation (NERVE-9): no tool's output, no tool row."""
        if not self._shape.blocks:
            return _NOT_TOOL_ROLE
        return f"{_NOT_TOOL_ROLE} AND NOT {_TOOL_ROW}"

    def _reopen_if_replaced(self) -> None:
        """Open the file again when another file now stands at its path (a restore)."""
        status = os.stat(self._path)
        if (status.st_dev, status.st_ino) == self._identity:
            return
        fresh = _open(self._path)
        self._db.close()
        self._db, self._shape, self._identity = fresh
        log.info("%s: replaced since it was opened; reading the new file", self._path)

    # --- writing ----------------------------------------------------------------------------

    def _write_last_memorized(self, session_id: str, value: str, now: str) -> None:
        """One short write transaction on a connection of its own, closed at once: ``value``
        replaces a value before it, none, or one later than ``now`` (REL-6)."""
        uri = f"{self._path.resolve().as_uri()}?mode=rw"
        database = sqlite3.connect(
            uri, uri=True, isolation_level=None, timeout=self._write_wait_ms / 1000
        )
        try:
            database.execute(f"PRAGMA busy_timeout = {int(self._write_wait_ms)}")
            database.execute("BEGIN IMMEDIATE")
            try:
                database.execute(
                    "UPDATE sessions SET last_memorized_at = ? WHERE id = ? AND"
                    " (datetime(last_memorized_at) IS NULL OR datetime(last_memorized_at) < ?"
                    " OR datetime(last_memorized_at) > ?)",
                    (value, session_id, value, now),
                )
            except BaseException:
                database.execute("ROLLBACK")
                raise
            database.execute("COMMIT")
        finally:
            database.close()


def _message(message_id: int, role: object, text: str, created_at: object) -> Message:
    """One row as the sweep takes it; a role or time Loom cannot take is left for the sweep
    to refuse with an audit row (SWEEP-12)."""
    shown_role = role.strip().lower() if isinstance(role, str) else ""
    time = loom_time(created_at)
    if time is None:
        time = created_at if isinstance(created_at, str) else ""
    return Message(message_id, NERVE_ROLES.get(shown_role, shown_role), text, time)


def _open(path: Path) -> tuple[sqlite3.Connection, _Shape, tuple[int, int]]:
    """A read-only connection to ``path``, what it has, and which file it is."""
    if not path.exists():
        raise NerveDatabaseError(f"{path}: no such file; expected Nerve's nerve.db")
    if not path.is_file():
        raise NerveDatabaseError(f"{path}: is not a regular file; expected Nerve's nerve.db")
    status = path.stat()
    try:
        database = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
            timeout=READ_WAIT_MS / 1000,
        )
    except sqlite3.Error as error:
        raise NerveDatabaseError(
            f"{path}: cannot be opened ({error}); expected Nerve's nerve.db"
        ) from None
    try:
        database.execute(f"PRAGMA busy_timeout = {READ_WAIT_MS}")
        shape = _shape_of(database, path)
    except sqlite3.Error as error:
        database.close()
        fault = file_fault(error, path)
        if fault is not None and fault.kind != DAMAGED:
            # Nerve's file, held or out of reach for now (an exclusive lock past the wait,
            # an I/O error, no permission): that, not "not Nerve's" (REL-4).
            raise fault from None
        raise NerveDatabaseError(
            f"{path}: cannot be read as a SQLite database ({error}); expected Nerve's nerve.db"
        ) from None
    except BaseException:
        database.close()
        raise
    return database, shape, (status.st_dev, status.st_ino)


def _shape_of(database: sqlite3.Connection, path: Path) -> _Shape:
    """What the file has; ``NerveDatabaseError`` when it lacks what Nerve's first schema has."""
    tables = {row[0] for row in database.execute("SELECT name FROM sqlite_master")}
    missing = [name for name in ("sessions", "messages") if name not in tables]
    if missing:
        raise NerveDatabaseError(
            f"{path}: has no {' and no '.join(missing)} table; expected Nerve's nerve.db"
        )
    columns = {row[1] for row in database.execute("PRAGMA table_info(messages)")}
    lacking = [name for name in MESSAGE_COLUMNS if name not in columns]
    if lacking:
        raise NerveDatabaseError(
            f"{path}: its messages table has no {', '.join(lacking)} column; "
            "expected Nerve's nerve.db"
        )
    try:
        database.execute("SELECT json_valid('[]')").fetchone()
    except sqlite3.OperationalError:
        raise NerveDatabaseError(
            f"{path}: this Python's SQLite has no JSON functions (SQLite 3.38 or later has)"
        ) from None
    session_columns = {row[1] for row in database.execute("PRAGMA table_info(sessions)")}
    return _Shape("blocks" in columns, "last_memorized_at" in session_columns, _has_index(database))


def _has_index(database: sqlite3.Connection) -> bool:
    """Whether an index of ``messages`` starts with ``(session_id, id)`` and covers every row."""
    for _seq, name, _unique, _origin, partial in database.execute("PRAGMA index_list(messages)"):
        if partial:
            continue
        quoted = '"' + str(name).replace('"', '""') + '"'
        leading = [row[2] for row in database.execute(f"PRAGMA index_info({quoted})")][:2]
        if leading == ["session_id", "id"]:
            return True
    return False
