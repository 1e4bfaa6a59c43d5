"""What Loom can keep of a memU item's columns: its id, text, type, categories and dates (MIG-1).

memU's store is read as SQLite holds it, which need not be what memU meant to write: a column
may be NULL, a number, a blob, text that is not UTF-8, or far longer than anything Loom takes
(``memu_store`` reads text through ``text_factory``, so text that is not UTF-8 arrives as
``BadText`` instead of failing the whole page). Each function here takes one raw value and
answers what can go to Loom, never raising:

* the **id** becomes the key ``memu-<id>``; an id that is no short printable word cannot be a
  stable key, and its row is counted, never written; nor can an id that more than one row
  holds (memU's table lost its primary key): ``memu-<id>`` would name two memories, so each
  of those rows is counted and the id named, and none is written (REL-8);
* the **text** (memU's ``summary``) goes whole or not at all: an item without text, with text
  that is not UTF-8, or longer than Loom's limit is refused with a reason, never cut;
* the **type** (``memory_type``) becomes Loom's ``kind``, the **categories** its ``tags``,
  and the **dates** RFC 3339 in UTC; a value of these that cannot be kept is left out, and the
  item still goes (``Dropped`` names what was left out, for the report's count).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime

from provisioner.runtime.face import MEMORY_TEXT_MAX_CHARS, TAG_MAX_CHARS, TAGS_MAX

KEY_PREFIX = "memu-"  # MIG-1: an item's key in Loom is memu-<its memU id>
MEMU_TYPES = ("profile", "event", "knowledge", "behavior", "skill", "tool")  # memu-py 1.4.0
ITEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # our choice; memU's are uuid4 text
KIND = re.compile(r"[a-z][a-z0-9_]{0,39}")  # our choice: a type word of another memU release
UTF8_MAX_BYTES_PER_CHAR = 4
TEXT_MAX_BYTES = MEMORY_TEXT_MAX_CHARS * UTF8_MAX_BYTES_PER_CHAR  # past this, never loaded
SHORT_MAX_BYTES = 512  # our choice: an id, a type, a date or a category name is never longer

# Why an item's row cannot go (the report counts them by reason).
NO_TEXT = "no_text"  # NULL, empty or only white space
NOT_TEXT = "not_text"  # a number or a blob where memU keeps text
NOT_UTF8 = "not_utf8"  # bytes that are not UTF-8
TOO_LONG = "too_long"  # more characters than Loom's memory.set takes
BAD_ID = "bad_id"  # no id that can be a stable key
REPEATED_ID = "repeated_id"  # REL-8: an id more than one row holds (a store without its key)
REASONS = (NO_TEXT, NOT_TEXT, NOT_UTF8, TOO_LONG, BAD_ID, REPEATED_ID)


class BadText(bytes):
    """A value SQLite holds as text whose bytes are not UTF-8."""


def text_factory(data: bytes) -> str | BadText:
    """How ``memu_store``'s connection turns stored text into Python: strict UTF-8, or
    ``BadText`` (a blob stays ``bytes``, so the two are told apart)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return BadText(data)


class Refused(str):
    """A reason an item cannot go (one of ``REASONS``), told apart from a text by its type."""


def memory_key(item_id: str) -> str:
    """The item's key in Loom: stable, so a write sent again is the same memory (MIG-1)."""
    return KEY_PREFIX + item_id


def item_id_of(raw: object) -> str | None:
    """The id as text when it can be a key, else None (its row is counted, never written)."""
    text = _decoded(raw)
    return text if text is not None and ITEM_ID.fullmatch(text) else None


def text_of(raw: object, sql_type: str, byte_length: object) -> str | Refused:
    """The item's text, whole, or why it cannot go.

    ``raw`` is None when the stored text was longer than ``TEXT_MAX_BYTES`` (it was not read);
    ``sql_type`` is SQLite's ``typeof`` and ``byte_length`` the stored length in bytes.
    """
    if sql_type == "null":
        return Refused(NO_TEXT)
    if sql_type != "text":
        return Refused(NOT_TEXT)
    if isinstance(byte_length, int) and byte_length > TEXT_MAX_BYTES:
        return Refused(TOO_LONG)
    if isinstance(raw, BadText):
        return Refused(NOT_UTF8)
    if not isinstance(raw, str):
        return Refused(NOT_TEXT)
    text = raw
    if len(text) > MEMORY_TEXT_MAX_CHARS:
        return Refused(TOO_LONG)
    if not text.strip():
        return Refused(NO_TEXT)
    return text


class Dropped:
    """What was left out of one item because memU's value could not be kept."""

    def __init__(self) -> None:
        self.fields: list[str] = []

    def note(self, name: str) -> None:
        if name not in self.fields:
            self.fields.append(name)


def kind_of(raw: object, dropped: Dropped) -> str | None:
    """memU's ``memory_type`` as Loom's ``kind``: one of memU's types, or another short word."""
    if raw is None:
        return None
    text = _decoded(raw)
    if text is not None and KIND.fullmatch(text.strip()):
        return text.strip()
    dropped.note("kind")
    return None


def tags_of(names: Iterable[object], dropped: Dropped) -> tuple[str, ...]:
    """The item's category names as tags: each stripped, printable, 1-100 characters, at most
    32, sorted and without repeats."""
    kept: set[str] = set()
    for raw in names:
        text = _decoded(raw)
        name = text.strip() if text is not None else ""
        if 0 < len(name) <= TAG_MAX_CHARS and name.isprintable():
            kept.add(name)
        else:
            dropped.note("tags")
    if len(kept) > TAGS_MAX:
        dropped.note("tags")
    return tuple(sorted(kept)[:TAGS_MAX])


def date_of(raw: object, name: str, dropped: Dropped) -> str | None:
    """A stored date as RFC 3339 in UTC (``2026-11-30T09:00:00Z``), or None.

    memU writes ``YYYY-MM-DD HH:MM:SS[.ffffff]`` without a zone (meant as UTC); Nerve also
    writes a bare ``YYYY-MM-DD`` for an event's day. A time with an offset is moved to UTC.
    A number, a blob or text no ISO 8601 reader takes is left out.
    """
    if raw is None:
        return None
    text = _decoded(raw)
    try:
        moment = datetime.fromisoformat(text.strip()) if text is not None else None
    except ValueError:
        moment = None
    if moment is None:
        dropped.note(name)
        return None
    try:
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
    except (OverflowError, ValueError):
        dropped.note(name)
        return None
    return moment.replace(tzinfo=None).isoformat() + "Z"


def _decoded(raw: object) -> str | None:
    """A short text value, or None for anything else (a number, a blob, ``BadText``)."""
    if isinstance(raw, str) and len(raw.encode("utf-8", "surrogatepass")) <= SHORT_MAX_BYTES:
        return raw
    return None
