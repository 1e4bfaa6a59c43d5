"""Where memU's memorization of a session stopped, read from Nerve's ``nerve.db`` (MIG-2).

Under memU, Nerve keeps ``sessions.last_memorized_at``: after each memorization it is set to
the time of the newest message memU was handed — that message's ``created_at`` cut to
``YYYY-MM-DD HH:MM:SS`` (the ``T`` made a space, a ``Z`` or ``+00:00`` dropped, any fraction and
whatever follows it dropped) — never to the moment the memorization ran. The next run hands memU
the messages whose time, cut the same way, compares later as text. So a message counts as
memorized here when its own time, cut that way, is at or before the column's, **and** its UTC
time, to the second, is at or before the column's UTC time: where the two readings disagree
(a zone other than UTC), the message counts as not memorized and is sent, never skipped.

``memorized_through`` answers with the last message of the longest run of memorized messages
from the session's start, in id order: a message ingested late with an old time, after memU's
last run, ends the run before it, so it is never taken for memorized. The count that comes
with it is of the messages with text up to there, the ones the sweep would have sent.

A value that cannot be trusted answers None, and the sweep then starts the session at its first
message (everything is sent; nothing is skipped by mistake): NULL, no text, text that is not a
date and a time to the second in the forms Nerve writes (SQLite's ``datetime()`` would take
``now`` or a bare number; this does not), a day or hour that does not exist, a time later than
``now``, or no memorized message at all. Nothing is written.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime

from provisioner.runtime.sweep.source import Memorized
from provisioner.runtime.transcripts import loom_time

TIME_MAX_CHARS = 64  # our choice: a longer last_memorized_at is no time Nerve wrote
# The forms of last_memorized_at Nerve and this package write, and no other: a date and a time
# to the second, a fraction, a zone (our choice: stricter than the readers of message times).
WRITTEN_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})?", re.ASCII
)
_FUNCTION = "provisioner_memorized"  # the SQL function name registered on the connection


def nerve_cut(value: str) -> str:
    """A time as Nerve cuts it before comparing (see above): ``T`` to a space, a trailing
    ``+00:00`` or ``Z`` dropped, everything from the first ``.`` dropped, blanks trimmed."""
    text = value.replace("T", " ")
    for suffix in ("+00:00", "Z"):
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    dot = text.find(".")
    if dot != -1:
        text = text[:dot]
    return text.strip()


def utc_second(value: object) -> datetime | None:
    """``value`` as an aware UTC time to the second, or None when it is no time.

    Read the way the sweep reads message times (``loom_time``: RFC 3339, other ISO 8601 forms,
    no zone meaning UTC), so ``now``, numbers and other forms SQLite would accept are not times.
    """
    if isinstance(value, str) and len(value) > TIME_MAX_CHARS:
        return None
    shown = loom_time(value)
    if shown is None:
        return None
    try:
        parsed = datetime.fromisoformat(shown).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
    return parsed.replace(microsecond=0)


def memorized_through(
    db: sqlite3.Connection, session_id: str, *, now: float, text_sql: str
) -> Memorized | None:
    """The last message memU took of ``session_id``, and how many with text up to it; or None.

    ``db`` is the reader's connection to ``nerve.db`` (with ``last_memorized_at``); ``now`` is
    the wall time in seconds since the epoch, against which a future value is refused;
    ``text_sql`` is the reader's SQL expression for a row's text (over ``m``), NULL without
    one. ``sqlite3.Error`` when the file cannot be read; every value is otherwise judged as
    described above, never raised for.
    """
    row = db.execute(
        "SELECT last_memorized_at FROM sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None or not isinstance(row[0], str) or not WRITTEN_TIME.fullmatch(row[0]):
        return None
    until = utc_second(row[0])
    if until is None or until > datetime.fromtimestamp(now, UTC):
        return None
    until_cut = nerve_cut(row[0])

    def memorized(created_at: object) -> int:
        when = utc_second(created_at)
        if when is None or when > until or not isinstance(created_at, str):
            return 0
        return int(nerve_cut(created_at) <= until_cut)

    db.create_function(_FUNCTION, 1, memorized, deterministic=True)
    (first_not,) = db.execute(
        f"SELECT MIN(id) FROM messages WHERE session_id = ? AND NOT {_FUNCTION}(created_at)",
        (session_id,),
    ).fetchone()
    bound, parameters = (
        ("", (session_id,)) if first_not is None else (" AND id < ?", (session_id, first_not))
    )
    (through,) = db.execute(
        f"SELECT MAX(id) FROM messages WHERE session_id = ?{bound}", parameters
    ).fetchone()
    if not isinstance(through, int) or through <= 0:
        return None
    (count,) = db.execute(
        f"SELECT COUNT(*) FROM messages AS m WHERE m.session_id = ? AND m.id <= ?"
        f" AND {text_sql} IS NOT NULL",
        (session_id, through),
    ).fetchone()
    return Memorized(through, int(count))
