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

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from provisioner.runtime.face import (
    AUDIT_MIGRATION_SKIPPED,
    LEDGER_CONFLICT,
    LEDGER_FAILING,
    LEDGER_FINAL_STATUSES,
    LEDGER_REJECTED,
    LEDGER_SKIPPED,
    LEDGER_WRITTEN,
    AuditEntry,
    LedgerEntry,
    MigrationRun,
    ReadOnlyState,
    StateStore,
    WriteVerdict,
    file_lock,
    lock_path_of,
)

STATUS_OF_VERDICT = {"conflict": LEDGER_CONFLICT, "rejected": LEDGER_REJECTED}  # else written
FAILURES_TO_SKIP = 3  # MIG-1: Loom's uncoded error three runs in a row skips the item
LOCK_SUFFIX = ".migrate-lock"
IN_MEMORY = ":memory:"


class Ledger:
    """The ledger in ``state``; ``clock`` gives the wall time (seconds since the epoch)."""

    def __init__(self, state: StateStore, *, clock: Callable[[], float]) -> None:
        self._state = state
        self._clock = clock

    def entries(self, item_ids: Sequence[str]) -> dict[str, LedgerEntry]:
        """The rows of ``item_ids`` that the ledger holds, by id."""
        return self._state.ledger_entries(item_ids)

    def record_verdict(self, item_id: str, verdict: WriteVerdict) -> LedgerEntry:
        """Loom answered: the item is final, with its verdict, key and reason."""
        status = STATUS_OF_VERDICT.get(verdict.verdict, LEDGER_WRITTEN)
        entry = LedgerEntry(item_id, status, verdict.verdict, verdict.memory_key, verdict.reason)
        self._state.record_ledger_entry(entry, now=self._clock())
        return entry

    def record_failure(self, item_id: str, kind: str) -> LedgerEntry:
        """Loom failed the item with its uncoded error once more: one more run in a row."""
        return self._state.record_ledger_failure(item_id, kind, now=self._clock())

    def record_skip(self, item_id: str, reason: str, *, failures: int = 0) -> LedgerEntry:
        """The item will not be sent again: its row and its audit row, in one transaction."""
        entry = LedgerEntry(item_id, LEDGER_SKIPPED, reason=reason, failures=failures)
        detail = f"memu item {item_id}: {reason}"
        audit = [AuditEntry(AUDIT_MIGRATION_SKIPPED, None, None, detail=detail)]
        self._state.record_ledger_entry(entry, now=self._clock(), audit=audit)
        return entry

    def start_run(self, source: str, items_total: int) -> None:
        """A run starts on ``source``, which holds ``items_total`` items."""
        self._state.start_migration_run(source, items_total, now=self._clock())

    def finish_run(self, stopped: str, *, rows_without_id: int) -> None:
        """The run ended, and why (``done``, ``not_now``, …); ``rows_without_id`` counts the
        rows it met that can never go (they have no id to keep in the ledger)."""
        self._state.finish_migration_run(
            stopped, rows_without_id=rows_without_id, now=self._clock()
        )

    def totals(self) -> dict[str, int]:
        """How many items the ledger holds per status (every status, zero included)."""
        found = self._state.ledger_counts()
        return {status: found.get(status, 0) for status in (*LEDGER_FINAL_STATUSES, LEDGER_FAILING)}

    def last_run(self) -> MigrationRun | None:
        return self._state.last_migration_run()


def final_ids_read_only(state_path: Path) -> set[str]:
    """The ids a run would pass over, read without creating, migrating or locking anything.

    For a dry run, which writes nothing: no state file, or one without a ledger yet, is an
    empty ledger. ``sqlite3.Error`` when the file cannot be read at all.
    """
    if not state_path.is_file():
        return set()
    with ReadOnlyState(state_path) as state:
        return state.final_item_ids()


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
