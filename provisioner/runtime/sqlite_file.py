"""How the runtime opens its SQLite files (SWEEP-1, SWEEP-2): durable, shared, never half-written.

Both the state store and the built-in transcripts open their file the same way: the parent
folder is created, transactions are explicit (``BEGIN``/``COMMIT`` by the caller), WAL lets a
reader in another process (``nerve memory status``, ``nerve doctor``) see a consistent state
while a sweep writes, and ``synchronous = FULL`` makes each commit survive a power cut.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

BUSY_TIMEOUT_MS = 5_000  # our choice: how long another process's write lock is waited out
IN_MEMORY = ":memory:"


def open_database(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A connection to ``path`` (or ``":memory:"``), usable from any thread of this process.

    Raises ``sqlite3.Error`` (and ``OSError`` for a folder that cannot be made) when the file
    cannot be opened as a database; nothing is left open then.
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
            database.execute("PRAGMA journal_mode = WAL")
        database.execute("PRAGMA synchronous = FULL")
    except BaseException:
        database.close()
        raise
    return database
