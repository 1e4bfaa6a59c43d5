"""The runtime's durable state: one SQLite file, every change in one transaction (SWEEP-2).

What the Loom backend and the sweep must not lose across a crash or a restart lives here:
frozen startup recalls (REC-3) and, added by the sweep, the watermark per session, the batch
budget, failure counters, isolation state and the audit log.

Why SQLite: a crash at any point (kill -9 included) leaves either the old or the new state of
each transaction, never a half-written one. The database runs in WAL mode, so a reader (``nerve
memory status``, ``nerve doctor``) never blocks the sweep that writes.

One ``StateStore`` is shared by the tasks of one process. SQLite calls are short and run on
the event loop's thread; a lock serialises the transactions of concurrent tasks, so one task's
``BEGIN`` never meets another's open transaction. Another process opening the same file waits
up to ``BUSY_TIMEOUT_MS`` for a write lock and then fails with ``sqlite3.OperationalError``.

The schema carries a version (SQLite's ``user_version``); ``MIGRATIONS`` brings an older file
forward in order, each step in its own transaction. A file written by a newer version of this
package is refused with ``StateVersionError`` rather than misread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

BUSY_TIMEOUT_MS = 5_000  # our choice: how long another process's write lock is waited out

# Each entry brings the schema from version ``index`` to ``index + 1``. Append only: a step
# that shipped is never edited, since files on disk were migrated by it.
MIGRATIONS: tuple[str, ...] = (
    # 1: frozen startup recalls (REC-3).
    """
    CREATE TABLE frozen_recall (
        session_id TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        items TEXT NOT NULL,
        frozen_at REAL NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)


class StateVersionError(RuntimeError):
    """The state file was written by a newer schema than this package knows."""


@dataclass(frozen=True)
class FrozenRecall:
    """A recall kept for a session so every rebuild of its prompt is byte-identical (REC-3).

    ``items`` are the lines already made safe; ``source`` is ``"pack"`` or ``"search"``.
    Only a recall that succeeded is frozen: a failed one is tried again next time.
    """

    session_id: str
    source: str
    items: tuple[str, ...]
    frozen_at: float


class StateStore:
    """One SQLite state file, opened (and migrated) on construction.

    ``path`` may be ``":memory:"`` for a store that lives only as long as the object (tests,
    and a backend built without a state path). The parent folder of a file path is created.
    Use it as a context manager, or call ``close()``; a closed store raises
    ``sqlite3.ProgrammingError`` on use.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = str(path)
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(
            self._path,
            isolation_level=None,  # explicit BEGIN/COMMIT in transaction()
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        try:
            self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if self._path != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    @property
    def path(self) -> str:
        """Where the state lives (``":memory:"`` for an in-memory store)."""
        return self._path

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database; safe to call more than once."""
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: committed when the block ends, rolled back if it raises.

        ``BEGIN IMMEDIATE`` takes the write lock at the start, so two processes never both
        read a value and then each write their own update of it.
        """
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def read(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Rows of one read-only query (no transaction needed: WAL gives a consistent view)."""
        with self._lock:
            cursor = self._db.execute(sql, tuple(parameters))
            cursor.row_factory = sqlite3.Row
            return list(cursor.fetchall())

    # --- frozen recalls (REC-3) ---------------------------------------------------------------

    def frozen_recall(self, session_id: str) -> FrozenRecall | None:
        """The recall frozen for ``session_id``, or None when none was frozen yet."""
        rows = self.read(
            "SELECT source, items, frozen_at FROM frozen_recall WHERE session_id = ?",
            (session_id,),
        )
        if not rows:
            return None
        row = rows[0]
        items = tuple(str(item) for item in json.loads(row["items"]))
        return FrozenRecall(session_id, row["source"], items, row["frozen_at"])

    def freeze_recall(
        self, session_id: str, *, source: str, items: Sequence[str], now: float
    ) -> FrozenRecall:
        """Keep a successful recall for ``session_id``; the first one frozen wins.

        Two tasks starting the same session at once both recall; whichever commits first is
        what every later prompt of that session shows, and both callers get that one back.
        """
        with self.transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO frozen_recall (session_id, source, items, frozen_at)"
                " VALUES (?, ?, ?, ?)",
                (session_id, source, json.dumps(list(items), ensure_ascii=False), now),
            )
        frozen = self.frozen_recall(session_id)
        assert frozen is not None  # just inserted, or inserted before by another task
        return frozen

    # --- schema -------------------------------------------------------------------------------

    def _migrate(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise StateVersionError(
                f"{self._path}: state schema {version} is newer than this package's "
                f"{SCHEMA_VERSION}; upgrade nerve-provisioner"
            )
        for step in range(version, SCHEMA_VERSION):
            with self.transaction() as db:
                for statement in _statements(MIGRATIONS[step]):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {step + 1}")


def _statements(script: str) -> list[str]:
    """The statements of a migration script (``executescript`` would commit on its own)."""
    return [part.strip() for part in script.split(";") if part.strip()]
