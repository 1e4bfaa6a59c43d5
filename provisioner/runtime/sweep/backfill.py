"""Backfill: memU's share of the history extracted on purpose, and nothing sent twice (MIG-2).

After a switch, a session the sweep had never seen starts after the messages memU already took
(``source``), and an audit row ``left_to_memu`` records that point. ``--backfill`` hands Loom
that older history when the operator asks for it:

* ``all``: every message left to memU;
* ``since:DATE``: those of them at or after DATE — an ISO date (the start of that day, UTC)
  or an RFC 3339 time with its zone. The session's watermark goes back to the last message
  before DATE; a message whose time cannot be read counts as at or after DATE (it is sent).

**The rule.** A backfill reaches back over what was left to memU and nothing else. Each
session's watermark moves back, in one transaction for all of them with an audit row
``backfill`` each (``through=W resume=P``: memU's point and where the watermark stood), and
the sweep runs as usual. What this package already sent after memU's point, the messages
after ``W`` up to ``P``, is passed over: the sweep reads the source through a view that jumps
from ``W`` to ``P``, so once the watermark passes ``W`` it lands after ``P``. What was left to
memU shrinks to what lies before the new watermark, so the same backfill run again
finds nothing to do; an earlier DATE reaches only further back. Sessions that were never left
to memU — swept from their first message, or imported — have nothing to backfill.

The ledger of these rows (``source.read_ledger``: ``left_to_memu``, ``backfill`` and
``went_back``) says what is still memU's alone in each session, and which ranges a backfill
under way passes over; the view the sweep reads (``source.BackfillView``) leaves those out.

**Safety.** When the source went back (a restored ``nerve.db``, NERVE-3), the ids past the
watermark name other messages: a ``went_back`` row drops the jumps of its session, so new
messages with those ids are sent, never hidden, and what is left to memU shrinks to the
re-aligned watermark. A backfill moves watermarks only while it holds the sweep lock
(SWEEP-11): ``BackfillBusy`` when another sweep runs.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

from provisioner.runtime.errors import StoreFault
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import BackfillMove, StateReads, StateStore
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.source import read_ledger, settle_backfills, start_new_sessions
from provisioner.runtime.transcripts import (
    RFC3339,
    SourceFailed,
    TranscriptSource,
    check_message,
    check_session_id,
)

BACKFILL_ALL = "all"  # MIG-2: --backfill all
IN_LOOM_QUEUE_KIND = "BatchInLoomQueue"  # a session left as it is: a batch of it is queued
SINCE = "since:"  # MIG-2: --backfill since:DATE
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
READ_PAGE = 64  # our choice: messages read at once while looking for DATE

log = logging.getLogger("provisioner.runtime.sweep.sweeper")


class BackfillBusy(StoreFault, RuntimeError):
    """Another sweep holds the lock of this state file; nothing was moved. Try again later."""


@dataclass(frozen=True)
class BackfillScope:
    """What ``--backfill`` asked for: ``since`` None for ``all``, else an aware UTC time."""

    text: str
    since: datetime | None = None


def parse_backfill(text: str) -> BackfillScope:
    """``all`` or ``since:DATE`` as a scope; ``ValueError`` of one line for anything else."""
    if text == BACKFILL_ALL:
        return BackfillScope(text)
    when: datetime | None = None
    if text.startswith(SINCE):
        value = text[len(SINCE) :]
        try:
            if ISO_DATE.fullmatch(value):
                when = datetime.combine(date.fromisoformat(value), datetime.min.time(), UTC)
            elif RFC3339.fullmatch(value):
                when = datetime.fromisoformat(value).astimezone(UTC)
        except (ValueError, OverflowError):
            when = None
    if when is None:
        raise ValueError(
            f"--backfill {text!r}: expected all, since:YYYY-MM-DD or since:TIME, "
            "an RFC 3339 time with its zone such as 2026-11-30T10:00:00Z"
        )
    return BackfillScope(text, when)


def backfill_moves(
    source: TranscriptSource,
    reader: StateReads,
    scope: BackfillScope,
    *,
    starting: Mapping[str, int] | None = None,
) -> tuple[list[BackfillMove], list[dict[str, str]]]:
    """The moves ``scope`` asks for, computed and not made; and sessions that could not be
    read (``{"session_id", "kind"}``), which are left out. Reads the source only for
    ``since:DATE``, and then only up to memU's point of each session.

    ``starting`` adds sessions a plan expects to start after memU's point (id: that point),
    as if the sweep had started them already.

    A session with a batch still in Loom's queue (SWEEP-15) is left as it is: moving its
    watermark back would leave that batch behind it, and once Loom wrote it the follow-up
    could only read it again from the source and send it twice. A later run moves it once
    the batch is passed.
    """
    ledger = read_ledger(reader)
    watermarks = reader.watermarks()
    left = dict(ledger.left)
    for session_id, through in (starting or {}).items():
        left.setdefault(session_id, through)
        watermarks.setdefault(session_id, through)
    in_queue = reader.sessions_in_loom_queue()
    moves: list[BackfillMove] = []
    errors: list[dict[str, str]] = []
    for session_id, through in sorted(left.items()):
        if session_id in in_queue:
            errors.append({"session_id": session_id, "kind": IN_LOOM_QUEUE_KIND})
            continue
        floor = 0
        if scope.since is not None and through > 0:
            try:
                floor = floor_before(source, session_id, scope.since, through)
            except SourceFailed as failure:
                errors.append({"session_id": session_id, "kind": failure.kind})
                continue
        if floor < through:
            resume = watermarks.get(session_id, 0)
            moves.append(BackfillMove(session_id, floor, through, resume))
    return moves, errors


def floor_before(source: TranscriptSource, session_id: str, since: datetime, through: int) -> int:
    """The id of the last message of ``session_id`` before ``since``, at most ``through``.

    Reads the session from its start in pages, stopping at the first message at or after
    ``since``, at one whose id or time cannot be read, or past ``through``. ``SourceFailed``
    when the source raises.
    """
    after = 0
    while after < through:
        try:
            page = list(
                itertools.islice(source.messages_after(session_id, after, READ_PAGE), READ_PAGE)
            )
        except Exception as error:
            raise SourceFailed(error) from error
        if not page:
            return through
        last = after
        for raw in page:
            item = check_message(raw, after_id=last, roles=MESSAGE_ROLES)
            if item.id is None or item.id <= last:
                return last
            if item.id > through:
                return through
            when = _utc(item.created_at)
            if when is None or when >= since:
                return last
            last = item.id
        after = last
    return through


def run_backfill(
    source: TranscriptSource, state: StateStore, scope: BackfillScope, *, now: float
) -> tuple[list[BackfillMove], list[dict[str, str]]]:
    """Compute and make the moves of ``scope`` while holding the sweep lock (SWEEP-11).

    Sessions the sweep has never seen are first started after memU's point (``source``), so a
    backfill right after the switch reaches them too. Returns the moves made and the sessions
    that could not be read (a source that cannot list its sessions moves nothing).
    ``BackfillBusy`` when another sweep of this state runs; nothing is moved then.
    """
    with sweep_lock(state.path, state) as held:
        if not held:
            raise BackfillBusy("another sweep of this state file is running; nothing was moved")
        try:
            listed = [check_session_id(raw) for raw in source.sessions()]
        except Exception as error:
            return [], [{"session_id": "", "kind": SourceFailed(error).kind}]
        start_new_sessions(source, state, [s for s in listed if s], now=now)
        settle_backfills(state, now=now)
        moves, errors = backfill_moves(source, state, scope)
        state.move_back(moves, now=now)
    for move in moves:
        log.info(
            "session %s: backfill from message %d up to %d; %d to %d passed over",
            move.session_id,
            move.floor,
            move.through,
            move.through,
            move.resume,
        )
    return moves, errors


def backfill_line(
    scope: BackfillScope, moves: Sequence[BackfillMove], errors: Sequence[dict[str, str]]
) -> str:
    """What a backfill did, in one line: sessions moved back, and those that could not be read
    or were left for a later run (ids and kinds only)."""
    sessions = "1 session" if len(moves) == 1 else f"{len(moves)} sessions"
    line = f"backfill {scope.text}: {sessions} moved back over what memU kept"
    return line + "".join(f"; {e['session_id'] or '(transcripts)'}: {e['kind']}" for e in errors)


def _utc(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
