"""The migration's ledger: per memU item, what became of it in Loom (MIG-1).

It lives in the runtime's state file (``migration_item`` and ``migration_run``, step 5 of
``provisioner.runtime.state``), so ``nerve doctor`` finds it where it finds the sweep's
state. One row per item id, written in its own transaction right after Loom answered:

* ``written`` (Loom took it: ``clear``, ``merge``, ``duplicate`` or ``refines``),
  ``conflict`` and ``rejected`` keep Loom's verdict and key; ``skipped`` says why (a row that
  cannot go, or Loom's uncoded error three runs in a row). These four are final: a later run
  passes the item over.
* ``failing`` counts the runs in a row in which Loom failed the item with its uncoded error;
  the item is sent again next run.

A crash between Loom's answer and the ledger's row loses only that row: the next run sends the
item again under the same key, and Loom answers ``duplicate`` instead of writing it twice. A
skipped item also gets a row in the state file's audit log (kind ``migration_skipped``), naming
its id and why, never its text.

One migration runs at a time per state file (``migration_lock``), the way one sweep does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from provisioner.runtime.loom.types import WriteVerdict
from provisioner.runtime.state import AUDIT_MIGRATION_SKIPPED, AuditEntry, StateStore, put_audit
from provisioner.runtime.sweep.lock import file_lock, lock_path_of

STATUS_WRITTEN = "written"
STATUS_CONFLICT = "conflict"
STATUS_REJECTED = "rejected"
STATUS_SKIPPED = "skipped"
STATUS_FAILING = "failing"
FINAL_STATUSES = (STATUS_WRITTEN, STATUS_CONFLICT, STATUS_REJECTED, STATUS_SKIPPED)
STATUS_OF_VERDICT = {"conflict": STATUS_CONFLICT, "rejected": STATUS_REJECTED}  # else written
FAILURES_TO_SKIP = 3  # MIG-1: Loom's uncoded error three runs in a row skips the item
LOCK_SUFFIX = ".migrate-lock"
IN_MEMORY = ":memory:"


@dataclass(frozen=True)
class Entry:
    """One item's row of the ledger."""

    item_id: str
    status: str
    verdict: str | None = None
    memory_key: str | None = None
    reason: str | None = None
    failures: int = 0

    @property
    def final(self) -> bool:
        """Whether a later run passes the item over."""
        return self.status in FINAL_STATUSES


@dataclass(frozen=True)
class RunRecord:
    """The last run: which store, how many items it held, when, why it stopped, and how many
    rows without a usable id it met."""

    source: str
    items_total: int
    started_at: float
    finished_at: float | None
    stopped: str | None
    rows_without_id: int = 0


class Ledger:
    """The ledger in ``state``; ``clock`` gives the wall time (seconds since the epoch)."""

    def __init__(self, state: StateStore, *, clock: Callable[[], float]) -> None:
        self._state = state
        self._clock = clock

    def entries(self, item_ids: Sequence[str]) -> dict[str, Entry]:
        """The rows of ``item_ids`` that the ledger holds, by id."""
        if not item_ids:
            return {}
        marks = ", ".join("?" for _ in item_ids)
        rows = self._state.read(
            "SELECT item_id, status, verdict, memory_key, reason, failures FROM migration_item"
            f" WHERE item_id IN ({marks})",
            item_ids,
        )
        return {row[0]: Entry(*tuple(row)) for row in rows}

    def record_verdict(self, item_id: str, verdict: WriteVerdict) -> Entry:
        """Loom answered: the item is final, with its verdict, key and reason."""
        status = STATUS_OF_VERDICT.get(verdict.verdict, STATUS_WRITTEN)
        entry = Entry(item_id, status, verdict.verdict, verdict.memory_key, verdict.reason)
        with self._state.transaction() as db:
            self._put(db, entry)
        return entry

    def record_failure(self, item_id: str, kind: str) -> Entry:
        """Loom failed the item with its uncoded error once more: one more run in a row."""
        with self._state.transaction() as db:
            row = db.execute(
                "SELECT failures FROM migration_item WHERE item_id = ?", (item_id,)
            ).fetchone()
            entry = Entry(item_id, STATUS_FAILING, reason=kind, failures=(row[0] if row else 0) + 1)
            self._put(db, entry)
        return entry

    def record_skip(self, item_id: str, reason: str, *, failures: int = 0) -> Entry:
        """The item will not be sent again: its row and its audit row, in one transaction."""
        entry = Entry(item_id, STATUS_SKIPPED, reason=reason, failures=failures)
        with self._state.transaction() as db:
            self._put(db, entry)
            detail = f"memu item {item_id}: {reason}"
            put_audit(
                db, [AuditEntry(AUDIT_MIGRATION_SKIPPED, None, None, detail=detail)], self._clock()
            )
        return entry

    def start_run(self, source: str, items_total: int) -> None:
        """A run starts on ``source``, which holds ``items_total`` items."""
        with self._state.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO migration_run"
                " (id, source, items_total, started_at, finished_at, stopped)"
                " VALUES (1, ?, ?, ?, NULL, NULL)",
                (source, items_total, self._clock()),
            )

    def finish_run(self, stopped: str, *, rows_without_id: int) -> None:
        """The run ended, and why (``done``, ``not_now``, …); ``rows_without_id`` counts the
        rows it met that can never go (they have no id to keep in the ledger)."""
        with self._state.transaction() as db:
            db.execute(
                "UPDATE migration_run SET finished_at = ?, stopped = ?, rows_without_id = ?"
                " WHERE id = 1",
                (self._clock(), stopped, rows_without_id),
            )

    def totals(self) -> dict[str, int]:
        """How many items the ledger holds per status (every status, zero included)."""
        rows = self._state.read("SELECT status, COUNT(*) FROM migration_item GROUP BY status")
        found = {str(row[0]): int(row[1]) for row in rows}
        return {status: found.get(status, 0) for status in (*FINAL_STATUSES, STATUS_FAILING)}

    def last_run(self) -> RunRecord | None:
        rows = self._state.read(
            "SELECT source, items_total, started_at, finished_at, stopped, rows_without_id"
            " FROM migration_run"
        )
        return RunRecord(*tuple(rows[0])) if rows else None

    def _put(self, db: sqlite3.Connection, entry: Entry) -> None:
        db.execute(
            "INSERT OR REPLACE INTO migration_item"
            " (item_id, status, verdict, memory_key, reason, failures, recorded_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                entry.item_id,
                entry.status,
                entry.verdict,
                entry.memory_key,
                entry.reason,
                entry.failures,
                self._clock(),
            ),
        )


def final_ids_read_only(state_path: Path) -> set[str]:
    """The ids a run would pass over, read without creating, migrating or locking anything.

    For a dry run, which writes nothing: no state file, or one without a ledger yet, is an
    empty ledger. ``sqlite3.Error`` when the file cannot be read at all.
    """
    if not state_path.is_file():
        return set()
    database = sqlite3.connect(f"{state_path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        marks = ", ".join("?" for _ in FINAL_STATUSES)
        rows = database.execute(
            f"SELECT item_id FROM migration_item WHERE status IN ({marks})", FINAL_STATUSES
        ).fetchall()
    except sqlite3.OperationalError as error:
        if "no such table" in str(error):
            return set()
        raise
    finally:
        database.close()
    return {str(row[0]) for row in rows}


@contextmanager
def migration_lock(state_path: str) -> Iterator[bool]:
    """Yield True while this caller holds the migration lock of ``state_path``, else False.

    An advisory ``flock`` on a file beside the state, taken without waiting; the operating
    system drops it when its holder dies, so a crash never leaves it behind. A state in memory
    has no file and no other process: the lock is always had.
    """
    if state_path == IN_MEMORY:
        yield True
        return
    with file_lock(lock_path_of(state_path, LOCK_SUFFIX)) as held:  # REL-5: its real file
        yield held
