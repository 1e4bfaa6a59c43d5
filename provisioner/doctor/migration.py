"""Doctor's look at ``nerve memory migrate``: how far the copy of memU into Loom got (MIG-1).

The migration keeps its ledger in the runtime's state file (``<config-dir>/memory/
state.sqlite3``): one row per memU item with what became of it in Loom, and one row of the last
run (how many items memU held, when it ran, why it stopped). Doctor reads both read-only, the
way it reads the sweep's state: it never creates, migrates or locks the file, and waits at most
a moment for a process that is writing it.

Nothing is said until a migration has run: a state file without a run row gives no check. After
one, ``memory.migration`` says how many of memU's items are done (written, conflicting,
rejected, skipped) and how many are left, and when the last run ended and why. It is OK once
every item is done; a WARN while items are left, with the command that goes on.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from provisioner.base.command import command
from provisioner.base.counts import counted
from provisioner.config.paths import default_paths
from provisioner.doctor.check import OK, WARN, Check
from provisioner.doctor.sweep import READ_TIMEOUT_S, _is_busy
from provisioner.runtime.face import (
    LEDGER_FAILING,
    LEDGER_FINAL_STATUSES,
    MigrationRun,
    ReadOnlyState,
)

CHECK_ID = "memory.migration"
DONE = "done"
RESUME = "run {} again: it goes on where the last run stopped"  # with the migrate command


def migration_checks(config_dir: Path) -> list[Check]:
    """The migration's progress, if one has run (else nothing); never raises for the file."""
    _transcripts, path = default_paths(config_dir)
    if not path.is_file():
        return []
    try:
        found = _read(path)
    except sqlite3.Error as error:
        if isinstance(error, sqlite3.OperationalError) and _is_busy(error):
            return [
                Check(
                    CHECK_ID,
                    WARN,
                    f"the migration's ledger in {path} is busy: another nerve process writes it",
                    advice=f"run {command('doctor')} again in a moment; the file is fine",
                    source=str(path),
                )
            ]
        return [
            Check(
                CHECK_ID,
                WARN,
                f"the migration's ledger in {path} cannot be read: {error}",
                advice=f"run {command('memory migrate --dry-run')} to see what it meets",
                source=str(path),
            )
        ]
    if found is None:
        return []
    return [_progress_check(path, *found)]


def _progress_check(path: Path, counts: dict[str, int], run: MigrationRun) -> Check:
    source, total, started_at = run.source, run.items_total, run.started_at
    finished_at, stopped, without_id = run.finished_at, run.stopped, run.rows_without_id
    done = sum(counts.get(status, 0) for status in LEDGER_FINAL_STATUSES)
    left = max(0, int(total) - done - int(without_id or 0))
    parts = ", ".join(f"{counts.get(status, 0)} {status}" for status in LEDGER_FINAL_STATUSES)
    message = (
        f"memU ({source}) into Loom: {done} of {counted(total, 'item')} done ({parts}), {left} left"
    )
    if counts.get(LEDGER_FAILING):
        message += f", {counts[LEDGER_FAILING]} failing with Loom's internal error"
    if without_id:
        message += f", {counted(without_id, 'row')} without an id that can be a key (never written)"
    if finished_at is None:
        message += f"; a run started {_when(started_at)} has not ended (running, or killed)"
    else:
        message += f"; the last run ended {_when(finished_at)}: {stopped}"
    if left == 0 and stopped == DONE:
        return Check(CHECK_ID, OK, message, source=str(path))
    return Check(
        CHECK_ID, WARN, message, advice=RESUME.format(command("memory migrate")), source=str(path)
    )


def _read(path: Path) -> tuple[dict[str, int], MigrationRun] | None:
    """The ledger's counts by status and the last run, or None before any run."""
    with ReadOnlyState(path, wait_s=READ_TIMEOUT_S) as state:
        run = state.last_migration_run()
        if run is None:
            return None
        return state.ledger_counts(), run


def _when(at: float) -> str:
    try:
        return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return "at an unknown time"
