"""Doctor's look at the extraction sweep's state file, under Loom, without changing it.

The sweep keeps its state in a SQLite file (``nerve memory sweep``'s ``<config-dir>/memory/
state.sqlite3``): per session the watermark and the failures of the batch at it, the batch
budget and why it was cut, and an audit of skipped messages. Doctor reads it read-only — it
never creates, migrates or locks it, and waits at most a moment for a sweep that is writing —
and says whether the sweep is healthy: a budget cut short, a batch being isolated, messages
skipped — and the last error the backend or the sweep kept there (when, which op, what
happened in words, its one-line message). The breaker lives in the running process, not in
this file; the Diagnostics card and ``nerve memory status`` show it.

Doctor may run while another process is creating the file or holds its lock (SWEEP-12): a file
not set up yet is a sweep that has not run yet, and a file still locked after the wait is busy
— one WARN saying so, never a file that "cannot be read".

``sweep_checks`` adds what the state records of the sweep's source (NERVE-3): a WARN naming the
sessions whose watermark had to be re-aligned because the source went back below it (a
restored ``nerve.db``), for a week after it happened; and, when the sweep reads Nerve's
``nerve.db``, whether its pages stay cheap: Nerve has no index on ``messages (session_id, id)``,
and past ``NERVE_DB_LARGE_SESSION`` messages in one session doctor says which index Nerve could
add (see ``benchmarks/bench_nerve_db.py`` for what a page costs without it).
"""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime
from pathlib import Path

from provisioner.base.command import command
from provisioner.base.counts import counted
from provisioner.config.paths import default_paths
from provisioner.doctor.check import OK, WARN, Check
from provisioner.runtime.face import (
    AUDIT_WENT_BACK,
    CODE_MAX_CHARS,
    SWEEP_OPS,
    AuditNote,
    ReadOnlyState,
    failure_words,
)

READ_TIMEOUT_S = 1.0  # our choice: a sweep or a new file's setup holds its lock for one short
# transaction; a loaded machine may stretch that past a few tenths of a second
NERVE_DB_KIND = "nerve.db"  # NERVE-2: NerveTranscripts.kind, as the state keeps the source
WENT_BACK_SHOWN_S = 7 * 24 * 3600  # our choice: how long doctor names a source that went back
WENT_BACK_ROWS_READ = 1_000  # our choice: the newest re-alignments doctor reads
NERVE_DB_LARGE_SESSION = 20_000  # our choice: past this many messages in one session a page
# costs milliseconds without an index on (session_id, id) (benchmarks/bench_nerve_db.py)
SESSION_ID_INDEX = "CREATE INDEX idx_messages_session_id ON messages (session_id, id)"


def sweep_checks(config_dir: Path, *, now: float | None = None) -> list[Check]:
    """The sweep's state, then what it records of its source (NERVE-3, NERVE-2); see above.

    ``now`` (seconds since the epoch) decides which re-alignments are recent; the clock when
    None. Nothing beyond the state check when the state cannot be read: that check says so.
    """
    checks = [sweep_state_check(config_dir)]
    _transcripts, path = default_paths(config_dir)
    if not path.is_file():
        return checks
    try:
        went_back, source = _source_notes(path)
    except sqlite3.Error:
        return checks
    clock = time.time() if now is None else now
    recent = [row for row in went_back if clock - row.recorded_at <= WENT_BACK_SHOWN_S]
    if recent:
        checks.append(_went_back_check(recent, path))
    if source is not None and source[0] == NERVE_DB_KIND:
        checks.append(nerve_db_check(Path(source[1])))
    return checks


def nerve_db_check(path: Path) -> Check:
    """Whether a sweep page from Nerve's ``nerve.db`` stays cheap (NERVE-2), read only.

    With an index on ``messages (session_id, id)`` a page is one index lookup. Without it (as
    Nerve ships), the largest session decides: past ``NERVE_DB_LARGE_SESSION`` messages a WARN
    names the index Nerve could add. A file that cannot be read is a WARN too.
    """
    try:
        indexed, largest = _nerve_db_facts(path)
    except (sqlite3.Error, OSError) as error:
        return Check(
            "loom.sweep.nerve_db",
            WARN,
            f"the sweep reads {path}, which cannot be read: {error}",
            advice=f"run {command('memory sweep')} --nerve-db {path} to see what the sweep meets",
            source=str(path),
        )
    if indexed:
        message = f"the sweep reads {path}; its index on messages (session_id, id) serves each page"
        return Check("loom.sweep.nerve_db", OK, message, source=str(path))
    if largest <= NERVE_DB_LARGE_SESSION:
        message = (
            f"the sweep reads {path}; its largest session has {counted(largest, 'message')}, "
            "few enough "
            "to page by id without an index on messages (session_id, id)"
        )
        return Check("loom.sweep.nerve_db", OK, message, source=str(path))
    return Check(
        "loom.sweep.nerve_db",
        WARN,
        f"the sweep reads {path}, whose largest session has {counted(largest, 'message')} "
        "and no index on "
        "messages (session_id, id): a page of it may read the session's whole index",
        advice=f"if sweeps of it take long, an index Nerve could add makes each page one lookup "
        f"(with Nerve stopped): {SESSION_ID_INDEX}; the sweep uses it at once",
        source=str(path),
    )


def _went_back_check(rows: list[AuditNote], path: Path) -> Check:
    sessions = len({row.session_id for row in rows})
    session_id, detail, at = rows[0].session_id, rows[0].detail, rows[0].recorded_at
    when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
    return Check(
        "loom.sweep.went_back",
        WARN,
        f"the transcripts went back below the sweep's watermark in {counted(sessions, 'session')} "
        f"(last {when}, session {session_id}: {detail}); the sweep re-aligned them",
        advice="if nerve.db was restored from a backup, nothing is lost: every message written "
        "since is sent, and at most one batch per session again; if it was not, find what "
        "replaced the file or removed messages from it",
        source=str(path),
    )


def _source_notes(path: Path) -> tuple[list[AuditNote], tuple[str, str] | None]:
    """The newest re-alignments (newest first) and the source kept, read only; none of either
    in a state file written before they were kept."""
    with ReadOnlyState(path, wait_s=READ_TIMEOUT_S) as state:
        source = state.kept_source()
        kinds = (AUDIT_WENT_BACK,)
        return state.audit_notes(kinds, newest_first=True, limit=WENT_BACK_ROWS_READ), source


def _nerve_db_facts(path: Path) -> tuple[bool, int]:
    """Whether ``messages`` has an index leading with (session_id, id), and the size of the
    largest session (Nerve's own ``message_count``, else counted)."""
    if not path.is_file():
        raise OSError(f"no such file {path}")
    database = sqlite3.connect(
        f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=READ_TIMEOUT_S
    )
    try:
        indexed = False
        for _seq, name, _unique, _origin, partial in database.execute(
            "PRAGMA index_list(messages)"
        ).fetchall():
            quoted = '"' + str(name).replace('"', '""') + '"'
            leading = [row[2] for row in database.execute(f"PRAGMA index_info({quoted})")][:2]
            indexed = indexed or (not partial and leading == ["session_id", "id"])
        try:
            (largest,) = database.execute("SELECT MAX(message_count) FROM sessions").fetchone()
        except sqlite3.OperationalError:  # a nerve.db from before message_count
            row = database.execute(
                "SELECT COUNT(*) FROM messages GROUP BY session_id ORDER BY 1 DESC LIMIT 1"
            ).fetchone()
            largest = row[0] if row else 0
    finally:
        database.close()
    return indexed, int(largest or 0)


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
            advice=f"run {command('doctor')} again in a moment; the file is fine",
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
        advice=f"run {command('memory sweep --once')} to see the error it meets",
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
    with ReadOnlyState(path, wait_s=READ_TIMEOUT_S) as state:
        if state.version == 0:
            return None
        summary = state.sweep_summary()
        last_error = _last_error(state)
    sessions, isolating, skipped = summary.sessions, summary.isolating, summary.skipped
    parts = [f"{counted(sessions, 'session')} swept", f"{counted(skipped, 'message')} skipped"]
    if isolating:
        parts.append(f"{isolating} isolating a batch Loom keeps failing")
    for mode, messages, size, cut in summary.budgets:
        budget = f"{mode} budget {messages} messages / {size // 1024} KiB"
        parts.append(f"{budget} (cut: {cut})" if cut else budget)
    if last_error:
        parts.append(last_error)
    return ", ".join(parts)


def _last_error(state: ReadOnlyState) -> str | None:
    """The sweep's last error as one phrase, or None (none kept, or a file from before it was).

    Only the sweep's own ops (``SWEEP_OPS``): a status probe's error is not a sweep failure
    (REL-7). The one recorded last, by arrival, never by its time. With it, how many batches
    went through since, and a coded fault's code: kept with the error, or (a file from before
    that, state schema step 8) the sweep's failed batch's (SWEEP-13). Values a hostile file
    planted are shown as text, never as control characters, and a time that is no time is
    shown as ``?``.
    """
    kept = state.error_as_kept(SWEEP_OPS)
    if kept is None:
        return None
    at = kept.at
    op, kind, message = (_printable(value) for value in (kept.op, kept.kind, kept.message))
    kept_code = _printable(kept.code)[:CODE_MAX_CHARS] if kept.code else ""
    try:
        when = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")
        if at > time.time():  # REL-7: never passed off as just now
            when += " (in the future: the clock was set back since)"
    except (TypeError, ValueError, OverflowError, OSError):
        when = "?"

    after_seq = kept.audit_seq if type(kept.audit_seq) is int else None
    through, failed = state.batches_since(at, after_seq=after_seq)
    detail = _printable(failed) if failed is not None and op == "extract" else ""
    coded = detail.startswith(f"{kind}(") and detail.endswith(")")
    kept_code = kept_code or (detail[len(kind) + 1 : -1] if coded else "")
    code = f"code {kept_code}; " if kept_code else ""
    since = counted(through, "batch")
    said = failure_words(kind, kept_code, message)  # FLEET-4: what happened, not a class
    return f"last error {when} in {op}: {said}: {message} ({code}{since} went through since)"


def _printable(value: object) -> str:
    """``value`` as text with every control character made a ``?``."""
    return "".join(char if char.isprintable() else "?" for char in str(value))
