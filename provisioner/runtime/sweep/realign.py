"""A source that went back below a watermark, noticed and re-aligned (NERVE-3).

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
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from provisioner.runtime.clock import Clock
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.state import AUDIT_WENT_BACK, AuditEntry, Mark, StateStore
from provisioner.runtime.transcripts import Message, Refused, check_message

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


def _found_at(page: Page, session_id: str, message_id: int) -> Mark | None:
    """The mark of the message the source holds at ``message_id``, or None when there is none."""
    items = page(session_id, message_id - 1, 1)
    if not items:
        return None
    item = check_message(items[0], after_id=message_id - 1, roles=MESSAGE_ROLES)
    if item.id != message_id:
        return None
    return mark_of(item)
