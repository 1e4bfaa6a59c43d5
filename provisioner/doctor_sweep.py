"""Doctor's look at the extraction sweep's state file, under Loom, without changing it.

The sweep keeps its state in a SQLite file (``nerve memory sweep``'s ``<config-dir>/memory/
state.sqlite3``): per session the watermark and the failures of the batch at it, the batch
budget and why it was cut, and an audit of skipped messages. Doctor reads it read-only — it
never creates, migrates or locks it, and waits at most a moment for a sweep that is writing —
and says whether the sweep is healthy: a budget cut short, a batch being isolated, messages
skipped — and the last error the backend or the sweep kept there (when, which op, which outcome
class, its one-line message). The breaker lives in the running process, not in this file; the
Diagnostics card and ``nerve memory status`` show it.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from provisioner.commands.memory_sweep import default_paths
from provisioner.doctor import OK, WARN, Check

READ_TIMEOUT_S = 0.2  # our choice: a sweep holds its write lock for one short transaction
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
    except sqlite3.Error as error:
        return Check(
            "loom.sweep",
            WARN,
            f"the sweep's state {path} cannot be read: {error}",
            advice="run nerve memory sweep --once to see the error it meets",
            source=str(path),
        )
    return Check("loom.sweep", OK, summary, source=str(path))


def _read(path: Path) -> str:
    uri = f"{path.resolve().as_uri()}?mode=ro"
    database = sqlite3.connect(uri, uri=True, timeout=READ_TIMEOUT_S)
    try:
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
