"""Where a session's first window starts after a switch from memU (MIG-2).

Before the switch, memU memorized the conversations, and a host source can tell how far: for
Nerve, ``sessions.last_memorized_at``. Starting every session at its first message would hand
Loom the whole history memU already distilled, a second time and at the cost of every batch.
So a source may offer an optional capability beside ``TranscriptSource``:

``memorized_through(session_id) -> Memorized | None``
    the id of the last message the host's own memory took of the session (the end of the
    longest run of them from the session's start, in id order), with how many messages that
    covers; None when it cannot say.

``start_where_host_stopped`` asks it only for a session the sweep has never seen — no row in
the state at all, so never for a session the sweep already keeps a watermark of, even one this
package's own ``last_memorized_at`` writes (NERVE-3) stand behind. When the answer is usable,
the session's watermark is stored at that id with an audit row ``left_to_memu`` (the id, and
``messages=N`` in its detail) in one transaction, and the sweep goes on from there as always.
The row is also the state's memory of what was left to memU: ``--backfill`` reaches back over
that range and no further (``backfill``, whose ledger reads these rows back).

Whatever the capability does, nothing is skipped by mistake: an answer that is not a
``Memorized`` with a positive id, a capability that raises, or a source without it leaves the
session to start at 0, where everything is sent. The built-in SQLite transcripts have no such
capability: an import starts at 0.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from provisioner.runtime.errors import classify_file_error
from provisioner.runtime.state import (
    StateStore,
)
from provisioner.runtime.transcripts import SQLITE_MAX_INT, TranscriptSource

log = logging.getLogger("provisioner.runtime.sweep.sweeper")


@dataclass(frozen=True)
class Memorized:
    """How far the host's own memory (memU) took a session: ``through_id`` is the id of the
    last message it took, ``messages`` how many messages with text that covers."""

    through_id: int
    messages: int


def host_memorized(source: TranscriptSource, session_id: str) -> Memorized | None:
    """What ``source`` says memU took of ``session_id``, checked; None for anything unusable.

    Never raises: a source without the capability, one that raises, or an answer that is no
    ``Memorized`` of a positive id the state can hold, and a count of at least 0, is None.
    """
    if not offers_memorized(source):
        return None
    try:
        answer = source.memorized_through(session_id)  # type: ignore[attr-defined]
    except Exception as error:
        log.warning(
            "session %s: where memU stopped cannot be read: %s", session_id, type(error).__name__
        )
        return None
    if type(answer) is not Memorized:
        return None
    through, messages = answer.through_id, answer.messages
    if type(through) is not int or type(messages) is not int:
        return None
    if not 0 < through <= SQLITE_MAX_INT or messages < 0:
        return None
    return answer


def offers_memorized(source: object) -> bool:
    """Whether ``source`` has the ``memorized_through`` capability; never raises."""
    try:
        return callable(getattr(source, "memorized_through", None))
    except Exception:
        return False


def start_where_host_stopped(
    source: TranscriptSource, state: StateStore, session_id: str, *, now: float
) -> Memorized | None:
    """Start a session the sweep has never seen after what memU took of it (see above).

    Returns what was left to memU when the watermark was stored, else None (the session has
    a row already, or the source cannot say: it starts where it stands, or at 0). The row is
    inserted only when none exists, in the transaction that writes the audit row, so a
    watermark another sweep stored meanwhile is never overwritten.
    """
    if state.has_session(session_id):
        return None
    memorized = host_memorized(source, session_id)
    if memorized is None:
        return None
    through, messages = memorized.through_id, memorized.messages
    if not state.start_after_memu(session_id, through_id=through, messages=messages, now=now):
        return None
    log.info(
        "session %s: starts after message %d, %d messages left to memU",
        session_id,
        memorized.through_id,
        memorized.messages,
    )
    return memorized


def start_new_sessions(
    source: TranscriptSource, state: StateStore, session_ids: Iterable[str], *, now: float
) -> int:
    """``start_where_host_stopped`` for each of ``session_ids`` without a row; how many started
    after memU's point. One read of the state for all of them; never raises for the source.
    A state file that cannot be written (busy, full, read-only, damaged) raises: the sweep
    ends there (REL-2), since a session started at 0 would send memU's share again. A session
    whose start cannot be stored for another reason is left to start at 0 (logged)."""
    if not offers_memorized(source):
        return 0
    known = set(state.watermarks())
    started = 0
    for session_id in session_ids:
        if session_id in known:
            continue
        try:
            started += start_where_host_stopped(source, state, session_id, now=now) is not None
        except sqlite3.Error as error:
            if classify_file_error(error) is not None:  # REL-2: the file, not this session
                raise
            log.warning(
                "session %s: its start after memU cannot be stored: %s",
                session_id,
                type(error).__name__,
            )
    return started
