"""Backfill: memU's share of the history extracted on purpose, and nothing sent twice (MIG-2).

After a switch, a session the sweep had never seen starts after the messages memU already took
(``start``), and an audit row ``left_to_memu`` records that point. ``--backfill`` hands Loom
that older history when the operator asks for it:

* ``all``: every message left to memU;
* ``since:DATE``: those of them at or after DATE — an ISO date (the start of that day, UTC)
  or an RFC 3339 time with its zone. The session's watermark goes back to the last message
  before DATE; a message whose time cannot be read counts as at or after DATE (it is sent).

**The rule.** A backfill reaches back over what was left to memU and nothing else. Each
session's watermark moves back, in one transaction for all of them with an audit row
``backfill`` each (``through=W resume=P``: memU's point and where the watermark stood), and
the sweep runs as usual. What this package already sent after memU's point, the messages
after ``W`` up to ``P``, is passed over: the sweep reads the source through ``BackfillView``,
which jumps from ``W`` to ``P``, so once the watermark passes ``W`` it lands after ``P``. What
was left to memU shrinks to what lies before the new watermark, so the same backfill run again
finds nothing to do; an earlier DATE reaches only further back. Sessions that were never left
to memU — swept from their first message, or imported — have nothing to backfill.

``read_ledger`` puts this together from the audit rows ``left_to_memu`` (``start``),
``backfill`` and ``went_back``: what is still memU's alone in each session, and which ranges a
backfill under way passes over.

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
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from provisioner.runtime.errors import StoreFault, faults_named
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import (
    AUDIT_BACKFILL,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_WENT_BACK,
    BackfillMove,
    StateReads,
    StateStore,
)
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.sweep.start import start_new_sessions
from provisioner.runtime.transcripts import (
    RFC3339,
    HostTranscripts,
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
THROUGH_RESUME = re.compile(r"through=(\d+) resume=(\d+)")  # a backfill row's detail
WENT_BACK_TO = re.compile(r"-> (\d+)")  # where a went_back row's watermark went (NERVE-3)

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


@dataclass
class Ledger:
    """What the audit rows say about memU's share of each session (MIG-2).

    ``left`` is, per session, the id up to which its history is still memU's alone; ``passed``
    the ranges ``(through, resume]`` a backfill under way passes over; ``seq`` the newest
    audit row read, so a ``went_back`` written after it is noticed.
    """

    left: dict[str, int] = field(default_factory=dict)
    passed: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    seq: int = 0


def read_ledger(reader: StateReads) -> Ledger:
    """The ledger, from one read of the audit rows of its three kinds, oldest first."""
    notes = reader.audit_notes((AUDIT_LEFT_TO_MEMU, AUDIT_BACKFILL, AUDIT_WENT_BACK))
    ledger = Ledger()
    for note in notes:
        seq, kind, session_id, message_id, detail = (
            note.seq,
            note.kind,
            note.session_id,
            note.message_id,
            note.detail,
        )
        ledger.seq = max(ledger.seq, int(seq))
        if not isinstance(session_id, str) or not isinstance(message_id, int):
            continue
        if kind == AUDIT_WENT_BACK:
            ledger.passed.pop(session_id, None)
            target = WENT_BACK_TO.search(str(detail))
            if target and session_id in ledger.left:
                ledger.left[session_id] = min(ledger.left[session_id], int(target[1]))
            continue
        ledger.left[session_id] = min(ledger.left.get(session_id, message_id), message_id)
        numbers = THROUGH_RESUME.fullmatch(str(detail)) if kind == AUDIT_BACKFILL else None
        if numbers and int(numbers[2]) > int(numbers[1]):
            ledger.passed.setdefault(session_id, []).append((int(numbers[1]), int(numbers[2])))
    return ledger


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


def settle_backfills(state: StateStore, *, now: float) -> int:
    """Move each watermark that has passed memU's share of a backfill on to where it stood
    before (``resume``), with an audit row, in one transaction; how many moved.

    The messages between were sent before the backfill, so this is where the sweep would land
    with the next message anyway; until one comes, the watermark would wait at ``through``.
    Only under the sweep lock (a sweep's start, a backfill).
    """
    ledger = read_ledger(state)
    if not ledger.passed:
        return 0
    return state.settle_backfills(ledger.passed, now=now)


def run_backfill(
    source: TranscriptSource, state: StateStore, scope: BackfillScope, *, now: float
) -> tuple[list[BackfillMove], list[dict[str, str]]]:
    """Compute and make the moves of ``scope`` while holding the sweep lock (SWEEP-11).

    Sessions the sweep has never seen are first started after memU's point (``start``), so a
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


class BackfillView:
    """``source`` as the sweep reads it: messages a backfill under way passes over are left
    out (see the module's docstring). Reads the state; never writes it.

    It forwards nothing else: a host's hooks (``HostTranscripts``) are asked of the wrapped
    source itself, through ``host``. Forwarding attributes dynamically would hide them from
    ``isinstance`` against a runtime-checkable protocol, which looks attributes up statically
    since Python 3.12, and the host would never hear how far the sweep got (REL-1, NERVE-3).
    """

    def __init__(self, source: TranscriptSource, reader: StateReads) -> None:
        self._source = source
        self._reader = reader
        self._ledger: Ledger | None = None

    @property
    def source(self) -> TranscriptSource:
        return self._source

    @property
    def host(self) -> HostTranscripts | None:
        """The wrapped source when it is a host's own store (NERVE-3), else None."""
        source = self._source
        if isinstance(source, BackfillView):
            return source.host
        return source if isinstance(source, HostTranscripts) else None

    def sessions(self) -> Sequence[str]:
        """The source's sessions; what the ledger says is read again from here on."""
        self._ledger = None
        return self._source.sessions()

    def messages_after(self, session_id: str, after_id: int, limit: int) -> Sequence[Any]:
        """The source's messages after ``after_id``, without those passed over."""
        ranges = self._passed(session_id)
        if not ranges:
            return self._source.messages_after(session_id, after_id, limit)
        found: list[Any] = []
        at = after_id
        for _ in range(len(ranges) + 1):
            at = next((high for low, high in ranges if low <= at < high), at)
            wanted = limit - len(found)
            if wanted <= 0:
                break
            page = itertools.islice(self._source.messages_after(session_id, at, wanted), wanted)
            end = None
            for item in page:
                end = _end_of_range(_id_of(item), ranges)
                if end is not None:
                    break
                found.append(item)
            if end is None or end <= at:
                break
            at = end
        return found

    def _passed(self, session_id: str) -> list[tuple[int, int]]:
        """The ranges passed over in ``session_id`` now: those whose share of memU the
        watermark has not passed yet; none once its source went back."""
        if self._ledger is None:
            self._ledger = read_ledger(self._reader)
        ranges = self._ledger.passed.get(session_id)
        if not ranges:
            return []
        if self._reader.kept_since(self._ledger.seq, AUDIT_WENT_BACK, session_id):
            self._ledger.passed.pop(session_id, None)
            return []
        watermark = self._reader.watermark(session_id)
        return [(through, resume) for through, resume in ranges if watermark <= through]


class SweepSource(BackfillView):
    """The source a sweep reads: a ``BackfillView`` that, as each sweep lists the sessions,
    starts those it has never seen after memU's point (``start.start_new_sessions``) and
    settles the backfills whose share of memU was sent (``settle_backfills``)."""

    def __init__(
        self, source: TranscriptSource, state: StateStore, clock: Callable[[], float]
    ) -> None:
        super().__init__(source, state)
        self._state = state
        self._clock = clock

    def sessions(self) -> Sequence[str]:
        """The source's sessions, after new ones were given their start; raises what the
        source raises (the sweep then ends, SWEEP-12), and a ``FileFault`` naming the state
        when a start cannot be stored for a fault of its file (REL-2): a session started at 0
        instead would send memU's share again."""
        listed = list(super().sessions())
        ids = [session_id for session_id in map(check_session_id, listed) if session_id]
        now = self._clock()
        with faults_named(self._state.path):  # REL-2: the state's fault ends the sweep
            start_new_sessions(self.source, self._state, ids, now=now)
        try:
            settle_backfills(self._state, now=now)
        except sqlite3.Error as error:  # the next sweep settles them; nothing is lost
            log.warning("backfills cannot be settled: %s", type(error).__name__)
        return listed


def sweep_source(
    source: TranscriptSource, state: StateStore, clock: Callable[[], float]
) -> TranscriptSource:
    """``source`` as a ``SweepSource`` over ``state`` (itself when it already is one)."""
    if isinstance(source, SweepSource):
        return source
    return SweepSource(source, state, clock)


def _id_of(item: object) -> int | None:
    """A page item's id when it is a plain int; None (left for the sweep to judge) otherwise."""
    try:
        value = item.id  # type: ignore[attr-defined]
    except Exception:
        return None
    return value if type(value) is int else None


def _end_of_range(message_id: int | None, ranges: list[tuple[int, int]]) -> int | None:
    if message_id is None:
        return None
    return next((high for low, high in ranges if low < message_id <= high), None)


def _utc(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        return None
