"""A test's own SQL on a state file: to check what was stored, or to set up or hold a state.

The package speaks to its state file only through ``StateStore``'s named methods; a test that
checks what a row holds, plants a row, holds the write lock or sets a limit of SQLite's own
does it here, through the store's connection (an in-memory store has no other).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from provisioner.runtime.state import StateStore


def state_rows(store: StateStore, sql: str, parameters: Sequence[object] = ()) -> list[sqlite3.Row]:
    """Rows of one query on ``store``'s file, as ``sqlite3.Row``."""
    return store._rows(sql, parameters)


@contextmanager
def state_transaction(store: StateStore) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``store``'s file, holding its lock until the block ends."""
    with store._transaction() as db:
        yield db
