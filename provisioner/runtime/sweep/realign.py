"""A source that went back, and a host told how far the sweep got (NERVE-3).

A watermark is an id of the source, and ids only grow while the source is the same file. A
copy restored from a backup (Nerve's backup keeps ``nerve.db``, not this package's state) starts
again from the ids of the day it was taken: the messages written after the restore get ids at
or below the watermarks kept here, and a sweep asking for the messages *after* its watermark
would never send them.

So every watermark the sweep stores comes with a **mark**: the time of the message it stopped
on and a digest of that message's role and text (never the text). Before a session's window,
the message at the watermark is read again. Unchanged, the window goes on as always. Gone, or
another message in its place: the source went back. The watermark is re-aligned to the newest
mark whose message the source still holds unchanged — found by stepping back over the marks in
growing steps, then halving — and the window goes on from there. There is one mark per batch
Loom took, so what is sent again is at most the one batch around the moment the copy was
taken, and every message written since reaches Loom. An audit row (``went_back``) records the
move; ``nerve doctor`` names it.

When no mark matches (the copy is older than the session's first batch), the watermark goes
back to 0 and the session is sent from its start: a copy that old holds at most one batch of
it. A watermark stored before marks existed has none; the message at it is taken as it is then
(trust on first use), and its mark kept. A message deleted at the watermark looks like a source
that went back, and costs one batch sent again.

``tell_host`` passes each session's watermark to a source that asks for it
(``HostTranscripts.swept_through``), and ``note_source`` keeps in the state which source the
sweep read, for doctor. Neither raises for what the source does (SWEEP-12).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from provisioner.runtime.clock import Clock
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import AUDIT_WENT_BACK, AuditEntry, Mark, StateStore
from provisioner.runtime.sweep.backfill import BackfillView
from provisioner.runtime.transcripts import (
    HostTranscripts,
    Message,
    Refused,
    check_message,
)

Page = Callable[[str, int, int], list[object]]  # (session_id, after, limit): one page of items

DIGEST_HEX_CHARS = 32  # our choice: 128 bits of SHA-256 tell two messages apart
GONE = "its message is gone"  # NERVE-3: why a watermark was re-aligned, as the audit says
REPLACED = "another message stands at it"

log = logging.getLogger("provisioner.runtime.sweep.sweeper")


def mark_of(item: Message | Refused) -> Mark:
    """The fingerprint of ``item`` as a watermark keeps it: id, time, digest of role and text.

    A refused message has no text that counts; its role and the reason it was refused stand
    in, which the same row yields again every time it is read.
    """
    if isinstance(item, Message):
        parts = ("message", item.role, item.content)
    else:
        parts = ("refused", item.role, item.reason)
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()
    assert item.id is not None  # a watermark stands only on a usable id
    return Mark(item.id, item.created_at, digest[:DIGEST_HEX_CHARS])


def realign_if_went_back(state: StateStore, session_id: str, *, page: Page, clock: Clock) -> bool:
    """Re-align the session's watermark when the source went back below it (see above);
    whether it did. ``page`` reads the source (``window.source_page``), ``clock`` dates the
    audit row.

    One read of the source when nothing changed. Raises ``SourceFailed`` when the source
    raises; the window then stops as for any other read.
    """
    watermark = state.watermark(session_id)
    if watermark <= 0:
        return False
    kept = state.marks(session_id, only=watermark)
    current = _found_at(page, session_id, watermark)
    unchanged = current is not None and (not kept or kept[0] == current)
    target = None if unchanged else _newest_still_held(state, session_id, watermark, page)
    if target is None:
        if not kept and current is not None:  # a watermark from before marks: trust on first use
            state.keep_mark(session_id, current)
        return False
    reason = GONE if current is None else REPLACED
    detail = f"watermark {watermark} -> {target}: {reason}"
    entry = AuditEntry(AUDIT_WENT_BACK, session_id, watermark, detail=detail)
    state.record_went_back(session_id, watermark=target, audit=entry, now=clock())
    log.warning(
        "session %s: the transcripts went back below watermark %d (%s); re-aligned to %d",
        session_id,
        watermark,
        reason,
        target,
    )
    return True


def _newest_still_held(state: StateStore, session_id: str, watermark: int, page: Page) -> int:
    """The id of the newest mark below ``watermark`` whose message the source still holds
    unchanged (``newest_matching``), or 0 when none is."""
    marks = [mark for mark in state.marks(session_id) if mark.message_id < watermark]

    def still_held(index: int) -> bool:
        return _found_at(page, session_id, marks[index].message_id) == marks[index]

    index = newest_matching(len(marks), still_held)
    return marks[index].message_id if index >= 0 else 0


def newest_matching(count: int, matches: Callable[[int], bool]) -> int:
    """The highest index below ``count`` for which ``matches`` holds, or -1 for none.

    ``matches`` holds up to some index and not after it (a restored copy holds the marks up to
    the moment it was taken). Steps back 1, 2, 4, … from the newest, then halves the gap:
    about twice the logarithm of the marks passed, never each of them.
    """
    bad, step = count, 1
    while True:
        probe = max(bad - step, 0)
        if probe >= bad:
            return -1
        if matches(probe):
            good = probe
            break
        if probe == 0:
            return -1
        bad, step = probe, step * 2
    while bad - good > 1:
        middle = (good + bad) // 2
        if matches(middle):
            good = middle
        else:
            bad = middle
    return good


def tell_host(host: HostTranscripts | None, state: StateStore, session_id: str) -> None:
    """Tell a host source where the session's watermark stands; log what it raises.

    ``host`` is the host's own store (``host_of``), None when the sweep reads none.
    """
    if host is None:
        return
    watermark = state.watermark(session_id)
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


def note_source(host: HostTranscripts | None, state: StateStore, now: float) -> None:
    """Keep which host source the sweep reads (kind and location), for doctor.

    Written only when it changed, so a sweep that reads the same source writes nothing here.
    A source whose ``kind`` or ``location`` is no text is not kept; None is no host source.
    """
    if host is None:
        return
    kind, location = getattr(host, "kind", None), getattr(host, "location", None)
    if not isinstance(kind, str) or not isinstance(location, str):
        return
    state.note_source(kind, location, now=now)


def _found_at(page: Page, session_id: str, message_id: int) -> Mark | None:
    """The mark of the message the source holds at ``message_id``, or None when there is none."""
    items = page(session_id, message_id - 1, 1)
    if not items:
        return None
    item = check_message(items[0], after_id=message_id - 1, roles=MESSAGE_ROLES)
    if item.id != message_id:
        return None
    return mark_of(item)


def host_of(source: object) -> HostTranscripts | None:
    """The host store behind ``source`` (itself, or what a ``BackfillView`` wraps), or None.

    Asked of the object that defines the hooks, never of a wrapper, so the answer is the same
    on every Python the package runs on (REL-1).
    """
    if isinstance(source, BackfillView):
        return source.host
    return source if isinstance(source, HostTranscripts) else None


def source_location(source: object) -> str:
    """Where ``source`` reads from, as a fault names it: a host's ``location``, a file's
    ``path``, else ``transcripts``. Asked of the source behind a ``BackfillView``."""
    inner = source.source if isinstance(source, BackfillView) else source
    for name in ("location", "path"):
        value = getattr(inner, name, None)
        if isinstance(value, str) and value:
            return value
    return "transcripts"
