"""The runtime's SQLite files, opened durable and shared by several processes (SWEEP-1, SWEEP-2).

Both the state store and the built-in transcripts open their file the same way: the parent
folder is created, transactions are explicit (``BEGIN``/``COMMIT`` by the caller), WAL lets a
reader in another process (``nerve memory status``, ``nerve doctor``) see a consistent state
while a sweep writes, and ``synchronous = FULL`` makes each commit survive a power cut.

Several processes may open one file at the same moment (two sweeps, a sweep and a recall, a
sweep and doctor). Every lock another connection holds is waited out for up to
``BUSY_TIMEOUT_MS``; only then does SQLite's "database is locked" reach the caller, and
``is_busy`` tells that apart from a file that is not a database: a busy file is fine, and
trying again later works.

A fault of the file itself (busy past the wait, full, read-only, damaged) is named by
``provisioner.runtime.errors``, which every room shares.

Standard library only.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Self

BUSY_TIMEOUT_MS = 5_000  # our choice: how long another process's write lock is waited out
BUSY_RETRY_FIRST_S = 0.005  # our choice: first pause before asking again for a busy journal mode
BUSY_RETRY_MAX_S = 0.1  # our choice: the pauses double up to this
IN_MEMORY = ":memory:"
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def open_database(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to ``path`` (or ``":memory:"``), usable from any thread of this process.

    Raises ``sqlite3.Error`` (and ``OSError`` for a folder that cannot be made) when the file
    cannot be opened as a database, or stayed locked by another process for longer than
    ``BUSY_TIMEOUT_MS`` (``is_busy`` is true of that error); nothing is left open then.
    """
    name = str(path)
    if name != IN_MEMORY:
        Path(name).parent.mkdir(parents=True, exist_ok=True)
    database = sqlite3.connect(
        name,
        isolation_level=None,  # the caller's explicit BEGIN/COMMIT
        check_same_thread=False,  # one lock per owner serialises its tasks and threads
        timeout=BUSY_TIMEOUT_MS / 1000,
    )
    try:
        database.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if name != IN_MEMORY:
            _use_wal(database)
        database.execute("PRAGMA synchronous = FULL")
    except BaseException:
        database.close()
        raise
    return database


def is_busy(error: BaseException) -> bool:
    """Whether ``error`` is SQLite's "database is locked" or "busy": another connection held
    a lock for longer than we waited. The file itself is fine; it must never be reported as
    damaged."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in _BUSY_CODES  # the primary code, without the extended bits
    text = str(error)
    return "database is locked" in text or "database is busy" in text


def _use_wal(database: sqlite3.Connection) -> None:
    """Put the file in WAL mode, waiting out another process that holds a lock on it.

    Turning WAL on takes an exclusive lock. While another connection is writing the file
    (as another process creating the schema of a new file is), SQLite answers "database is
    locked" at once instead of waiting the busy timeout, since waiting could deadlock; that is
    what several processes opening a new file together meet. So this asks again, with growing
    pauses, for up to ``BUSY_TIMEOUT_MS``, then lets the busy error through. A file already in
    WAL mode answers at once.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = BUSY_RETRY_FIRST_S
    while True:
        try:
            database.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except sqlite3.OperationalError as error:
            if not is_busy(error) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, BUSY_RETRY_MAX_S)


class OwnsConnection:
    """What every owner of one SQLite connection shares: ``close()``, safe to call more than
    once, and a ``with`` block that closes the connection on the way out.

    The owner opens ``_db`` and guards it with ``_lock``, which ``close()`` takes, so a close
    never cuts through a query another thread of the process is running on it.
    """

    _db: sqlite3.Connection
    _lock: threading.RLock

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; safe to call more than once."""
        with self._lock:
            self._db.close()
