"""The state file read only: status, doctor, a plan and a dry run look without changing it.

``ReadOnlyState`` opens the file with SQLite's read-only mode: it is never created, migrated,
locked or changed (SQLite may leave its empty shared-memory files beside it, as any reader
does). A missing file reads as empty, and so does a file whose sweep tables are not there
yet (another process is setting it up). It asks the questions of ``reads.StateReads``; what
SQLite raises on the way (busy past ``wait_s``, not a database) is raised as it is, for the
caller to say in its own words.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from provisioner.runtime.state.reads import StateReads

SWEEP_TABLES = ("sweep_session", "sweep_budget", "sweep_audit")  # state schema step 2
SQLITE_WAIT_S = 5.0  # SQLite's own default wait for a lock, in Python's sqlite3


class ReadOnlyState(StateReads):
    """The state file at ``path``, read only; use it as a context manager, or ``close()``.

    ``wait_s`` is how long a read waits for another process's lock (0: not at all).
    ``any_thread`` lets another thread than the one that opened it read through it (one at a
    time). The file's layout (its schema version and tables) is read at the first question.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        wait_s: float = SQLITE_WAIT_S,
        any_thread: bool = False,
    ) -> None:
        self._path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._layout: tuple[int, frozenset[str]] | None = None
        if not self._path.exists():
            return
        self._db = sqlite3.connect(
            f"{self._path.resolve().as_uri()}?mode=ro",
            uri=True,
            timeout=wait_s,
            isolation_level=None,
            check_same_thread=not any_thread,
        )

    def __enter__(self) -> ReadOnlyState:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file; safe to call more than once."""
        if self._db is not None:
            self._db.close()
            self._db = None

    @property
    def version(self) -> int:
        """The file's schema version (SQLite's ``user_version``); 0 for a missing file or one
        no process has set up yet."""
        return self._read_layout()[0]

    def _read_layout(self) -> tuple[int, frozenset[str]]:
        if self._layout is None:
            if self._db is None:
                return 0, frozenset()
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            names = self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            self._layout = int(version), frozenset(str(row[0]) for row in names)
        return self._layout

    def _rows(self, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Rows of one query, its read ended before they are handed back; none while the file
        or the sweep's tables are missing."""
        if self._db is None or not set(SWEEP_TABLES) <= self._read_layout()[1]:
            return []
        cursor = self._db.execute(sql, tuple(parameters))
        cursor.row_factory = sqlite3.Row
        try:
            return list(cursor.fetchall())
        finally:
            cursor.close()
