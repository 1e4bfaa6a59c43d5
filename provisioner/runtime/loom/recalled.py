"""Make recalled memory text safe to put in front of an agent (REC-2).

Recalled text comes from whoever writes to the namespaces an agent reads, and it lands inside
the ``<session-context>`` block. So each item becomes exactly one line that cannot close the
block or start a line of its own:

* Loom's escaping of ``&``, ``<`` and ``>`` in pack text is kept, never undone, and never
  applied twice; raw search excerpts are escaped the same way;
* every line separator becomes a space, other control characters (and bidirectional
  overrides, which could make a line read differently than it is) are removed;
* an item is cut to ``ITEM_MAX_CHARS`` without splitting an entity, and the block keeps whole
  items only, up to ``BLOCK_MAX_BYTES``.

This module is pure Python, so the runtime can use it without loading any template code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ITEM_MAX_CHARS = 500  # REC-2: per recalled item, ellipsis included
BLOCK_MAX_BYTES = 8 * 1024  # REC-2: the whole session-context block, UTF-8
ELLIPSIS = "…"
SOURCES = ("pack", "search")  # REC-2: pack text arrives escaped, search text raw

# REC-2: every line separator Python's str.splitlines() knows, plus vertical tab and form feed.
_LINE_SEPARATORS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
_BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# Invisible characters that can carry hidden text: zero-width space, word joiner and the
# invisible operators, the byte-order mark, and the tag characters (ASCII smuggled as tags).
# ZWNJ/ZWJ (U+200C, U+200D) stay: scripts such as Persian and emoji sequences need them.
_INVISIBLE = "\u200b\u2060-\u2064\ufeff\U000e0000-\U000e007f"
# Every C0/C1 control that is not a separator or tab, the bidi controls, and lone surrogates
# (JSON can carry them; they cannot be encoded, so they would break the block's size count).
_CONTROLS = re.compile(
    f"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f{_BIDI_CONTROLS}{_INVISIBLE}\ud800-\udfff]"
)
# Work on at most this much of an item: the line is cut to ITEM_MAX_CHARS anyway, and a stored
# memory of megabytes must not cost megabytes of regex work at every session start.
INPUT_MAX_CHARS = 8 * ITEM_MAX_CHARS
_WHITESPACE_RUN = re.compile(r"[ \t]+")
_ENTITY = re.compile(r"&(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});)")


def sanitize_recalled(text: str, *, source: str) -> str:
    """One safe line for one recalled item (see the module docstring)."""
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is unknown; expected one of: {', '.join(SOURCES)}")
    line = _LINE_SEPARATORS.sub(" ", text[:INPUT_MAX_CHARS])
    line = _CONTROLS.sub("", line)
    line = _WHITESPACE_RUN.sub(" ", line).strip()
    line = _escape(line, already_escaped=source == "pack")
    return _cut(line, ITEM_MAX_CHARS)


def _escape(line: str, *, already_escaped: bool) -> str:
    """Entity-escape ``&``, ``<``, ``>``; pack text keeps the entities Loom already wrote."""
    if already_escaped:
        line = _BARE_AMPERSAND.sub("&amp;", line)
    else:
        line = line.replace("&", "&amp;")
    return line.replace("<", "&lt;").replace(">", "&gt;")


def _cut(line: str, limit: int) -> str:
    """At most ``limit`` characters, ending in an ellipsis when cut, never inside an entity."""
    if len(line) <= limit:
        return line
    cut = limit - len(ELLIPSIS)
    for entity in _ENTITY.finditer(line, max(0, cut - 12), cut + 12):
        if entity.start() < cut < entity.end():
            cut = entity.start()
            break
    return line[:cut].rstrip() + ELLIPSIS


def fit_block(lines: Sequence[str], fixed_bytes: int) -> tuple[list[str], int]:
    """The leading whole ``lines`` that fit the block cap, and how many were dropped.

    ``fixed_bytes`` is what the block needs besides the item lines (tags, heading, and room
    for the line that counts dropped items).
    """
    budget = BLOCK_MAX_BYTES - fixed_bytes
    kept: list[str] = []
    for line in lines:
        size = len(line.encode()) + 1
        if size > budget:
            break
        kept.append(line)
        budget -= size
    return kept, len(lines) - len(kept)
