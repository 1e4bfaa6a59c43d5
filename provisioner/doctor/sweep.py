"""Doctor's look at the extraction sweep's state file, under Loom, without changing it.

The sweep keeps its state in a SQLite file (``nerve memory sweep``'s ``<config-dir>/memory/
state.sqlite3``): per session the watermark and the failures of the batch at it, the batch
budget and why it was cut, and an audit of skipped messages. Doctor reads it read-only — it
never creates, migrates or locks it, and waits at most a moment for a sweep that is writing —
and says whether the sweep is healthy: a budget cut short, a batch being isolated, messages
skipped — and the last error the backend or the sweep kept there (when, which op, which outcome
class, its one-line message). The breaker lives in the running process, not in this file; the
Diagnostics card and ``nerve memory status`` show it.

Doctor may run while another process is creating the file or holds its lock (SWEEP-12): a file
not set up yet is a sweep that has not run yet, and a file still locked after the wait is busy
— one WARN saying so, never a file that "cannot be read".
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from provisioner.config.paths import default_paths
from provisioner.doctor.check import OK, WARN, Check

READ_TIMEOUT_S = 1.0  # our choice: a sweep or a new file's setup holds its lock for one short
# transaction; a loaded machine may stretch that past a few tenths of a second
# SWEEP-8: runtime.state's AUDIT_SKIPPED (a test holds them equal); importing the runtime here
# would load httpx into every offline run.
AUDIT_SKIPPED = "skipped"


def sweep_state_check(config_dir: Path) -> Check:
    """The sweep's state, if a sweep has run; a file that cannot be read is a WARN."""
    _transcripts, path = default_paths(config_dir)
    if not path.is_file():
        return Check("loom.sweep", OK, f"no sweep has run yet (no {path})")
    try:
        summary = _read(path)
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            return _unreadable(path, error)
        return Check(
            "loom.sweep",
            WARN,
            f"the sweep's state {path} is busy: another nerve process is writing it",
            advice="run nerve doctor again in a moment; the file is fine",
            source=str(path),
        )
    except sqlite3.Error as error:
        return _unreadable(path, error)
    if summary is None:
        return Check("loom.sweep", OK, f"no sweep has run yet ({path} is not set up yet)")
    return Check("loom.sweep", OK, summary, source=str(path))


def _unreadable(path: Path, error: sqlite3.Error) -> Check:
    return Check(
        "loom.sweep",
        WARN,
        f"the sweep's state {path} cannot be read: {error}",
        advice="run nerve memory sweep --once to see the error it meets",
        source=str(path),
    )


def _is_busy(error: sqlite3.OperationalError) -> bool:
    """SQLite's "database is locked" or "busy" (``sqlite_file.is_busy``, without importing the
    runtime, which would load httpx into every offline run)."""
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "database is locked" in str(error) or "database is busy" in str(error)


def _read(path: Path) -> str | None:
    """The summary of the sweep's state, or None for a file no process has set up yet.

    A new file (``user_version`` 0: empty, or being created by a process that has not taken
    its write lock yet) holds no table; that is a sweep that has not run, not a damage.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro"
    database = sqlite3.connect(uri, uri=True, timeout=READ_TIMEOUT_S)
    try:
        if database.execute("PRAGMA user_version").fetchone()[0] == 0:
            return None
        sessions, isolating = database.execute(
            "SELECT COUNT(*), COUNT(suspect_last_id) FROM sweep_session"
        ).fetchone()
        skipped = database.execute(
            "SELECT COUNT(*) FROM sweep_audit WHERE kind = ?", (AUDIT_SKIPPED,)
        ).fetchone()[0]
        budgets = database.execute(
            "SELECT mode, messages, bytes, cut_reason FROM sweep_budget ORDER BY mode"
        ).fetchall()
        last_error = _last_error(database)
    finally:
        database.close()
    parts = [f"{sessions} sessions swept", f"{skipped} messages skipped"]
    if isolating:
        parts.append(f"{isolating} isolating a batch Loom keeps failing")
    for mode, messages, size, cut in budgets:
        budget = f"{mode} budget {messages} messages / {size // 1024} KiB"
        parts.append(f"{budget} (cut: {cut})" if cut else budget)
    if last_error:
        parts.append(last_error)
    return ", ".join(parts)


def _last_error(database: sqlite3.Connection) -> str | None:
    """The kept last error as one phrase, or None (none kept, or a file from before it was)."""
    try:
        row = database.execute("SELECT at, op, kind, message FROM last_error").fetchone()
    except sqlite3.OperationalError:  # a state file written before the table existed
        return None
    if row is None:
        return None
    at, op, kind, message = row
    when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    return f"last error {when} in {op}: {kind}: {message}"
