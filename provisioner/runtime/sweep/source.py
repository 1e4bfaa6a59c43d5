"""The transcripts as the sweep sees them: where each session starts, what a backfill passes
over, and the host told how far the sweep got (MIG-2, NERVE-3).

A sweep never reads its ``TranscriptSource`` bare. It reads a ``SweepSource`` over it, which
brings in what this package keeps beside the transcripts:

* **where a session starts** after a switch from memU. Before the switch, memU memorized the
  conversations, and a host source can tell how far: for Nerve,
  ``sessions.last_memorized_at``. Starting every session at its first message would hand Loom
  the whole history memU already distilled, a second time and at the cost of every batch. So a
  source may offer an optional capability beside ``TranscriptSource``:

  ``memorized_through(session_id) -> Memorized | None``
      the id of the last message the host's own memory took of the session (the end of the
      longest run of them from the session's start, in id order), with how many messages that
      covers; None when it cannot say.

  ``start_where_host_stopped`` asks it only for a session the sweep has never seen — no row in
  the state at all, so never for a session the sweep already keeps a watermark of, even one
  this package's own ``last_memorized_at`` writes (NERVE-3) stand behind. When the answer is
  usable, the session's watermark is stored at that id with an audit row ``left_to_memu`` (the
  id, and ``messages=N`` in its detail) in one transaction, and the sweep goes on from there as
  always. Whatever the capability does, nothing is skipped by mistake: an answer that is not a
  ``Memorized`` with a positive id, a capability that raises, or a source without it leaves the
  session to start at 0, where everything is sent. The built-in SQLite transcripts have no such
  capability: an import starts at 0.

* **what a backfill passes over** (``backfill``). The audit rows ``left_to_memu``,
  ``backfill`` and ``went_back`` make the ledger (``read_ledger``): what is still memU's alone in
  each session, and which ranges a backfill under way passes over — the messages this package
  sent after memU's point before the backfill moved the watermark back. ``BackfillView`` leaves
  those out, so once the watermark passes memU's point it lands after them; when the source
  went back (a ``went_back`` row) the jumps of its session are dropped, so new messages with
  those ids are sent, never hidden.

* **the host** (``HostTranscripts``): its own store, asked of the source itself and never of
  the view (REL-1). ``SweepSource.note_read`` keeps in the state which host source the sweep
  read, for doctor; ``SweepSource.tell_host`` passes a session's watermark to a host that asks
  for it. Neither raises for what the host does (SWEEP-12).

As each sweep lists the sessions (``SweepSource.sessions``) the new ones are given their start,
the backfills whose share of memU was sent are settled, and the host source is noted. The view
reads the state; only ``SweepSource`` writes it, and only under the sweep lock.
"""

from __future__ import annotations

import itertools
import logging
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from provisioner.runtime.errors import FileFault, classify_file_error
from provisioner.runtime.state import (
    AUDIT_BACKFILL,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_WENT_BACK,
    StateReads,
    StateStore,
)
from provisioner.runtime.transcripts import (
    SQLITE_MAX_INT,
    HostTranscripts,
    SourceFailed,
    TranscriptSource,
    check_session_id,
)

THROUGH_RESUME = re.compile(r"through=(\d+) resume=(\d+)")  # a backfill row's detail
WENT_BACK_TO = re.compile(r"-> (\d+)")  # where a went_back row's watermark went (NERVE-3)
NO_LOCATION = "transcripts"  # how a fault names a source that says nowhere it reads from

log = logging.getLogger("provisioner.runtime.sweep.sweeper")

# --- where a session starts after memU ------------------------------------------------------------


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


# --- what a backfill passes over ---------------------------------------------------------------


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


# --- the source as the sweep reads it ---------------------------------------------------------


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
        return host_of(self._source)

    @property
    def location(self) -> str:
        """Where the source reads from, as a fault names it: a host's ``location``, a file's
        ``path``, else ``NO_LOCATION``. Asked of the source behind the view."""
        source = self._source
        if isinstance(source, BackfillView):
            return source.location
        for name in ("location", "path"):
            value = getattr(source, name, None)
            if isinstance(value, str) and value:
                return value
        return NO_LOCATION

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
    starts those it has never seen after memU's point (``start_new_sessions``), settles the
    backfills whose share of memU was sent (``settle_backfills``) and keeps which host source
    was read (``note_read``); as each window ends, the host hears how far it got
    (``tell_host``)."""

    def __init__(
        self, source: TranscriptSource, state: StateStore, clock: Callable[[], float]
    ) -> None:
        super().__init__(source, state)
        self._state = state
        self._clock = clock

    def sessions(self) -> Sequence[str]:
        """The source's sessions, after new ones were given their start.

        ``SourceFailed`` when the source cannot list them (the sweep then ends, SWEEP-12;
        a ``FileFault`` the source raises itself passes as it is). What the state raises
        passes as it is too: a start that cannot be stored for a fault of its file ends the
        sweep on the state (REL-2), since a session started at 0 instead would send memU's
        share again; backfills that cannot be settled wait for the next sweep.
        """
        try:
            listed = list(super().sessions())
        except FileFault:
            raise
        except Exception as error:
            raise SourceFailed(error) from error
        ids = [session_id for session_id in map(check_session_id, listed) if session_id]
        now = self._clock()
        start_new_sessions(self.source, self._state, ids, now=now)
        try:
            settle_backfills(self._state, now=now)
        except sqlite3.Error as error:  # the next sweep settles them; nothing is lost
            log.warning("backfills cannot be settled: %s", type(error).__name__)
        self.note_read(now)
        return listed

    def note_read(self, now: float) -> None:
        """Keep which host source the sweep reads (kind and location), for doctor.

        Written only when it changed, so a sweep that reads the same source writes nothing
        here. A host whose ``kind`` or ``location`` is no text is not kept; nor is a source
        that is no host's.
        """
        host = self.host
        if host is None:
            return
        kind, location = getattr(host, "kind", None), getattr(host, "location", None)
        if not isinstance(kind, str) or not isinstance(location, str):
            return
        self._state.note_source(kind, location, now=now)

    def tell_host(self, session_id: str) -> None:
        """Tell a host source where the session's watermark stands (NERVE-3); log what it
        raises (SWEEP-12). Nothing for a source that is no host's, or a watermark at 0."""
        host = self.host
        if host is None:
            return
        watermark = self._state.watermark(session_id)
        if watermark <= 0:
            return
        try:
            host.swept_through(session_id, watermark)
        except Exception as error:
            log.warning(
                "session %s: the transcripts could not follow the watermark: %s",
                session_id,
                type(error).__name__,
            )


def sweep_source(
    source: TranscriptSource, state: StateStore, clock: Callable[[], float]
) -> SweepSource:
    """``source`` as a ``SweepSource`` over ``state`` (itself when it already is one)."""
    if isinstance(source, SweepSource):
        return source
    return SweepSource(source, state, clock)


def host_of(source: object) -> HostTranscripts | None:
    """The host store behind ``source`` (itself, or what a ``BackfillView`` wraps), or None.

    Asked of the object that defines the hooks, never of a wrapper, so the answer is the same
    on every Python the package runs on (REL-1).
    """
    if isinstance(source, BackfillView):
        return source.host
    return source if isinstance(source, HostTranscripts) else None


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
