"""Make recalled memory text safe to put in front of an agent (REC-2, REC-5).

Recalled text comes from whoever writes to the namespaces an agent reads, and it lands inside
the ``<session-context>`` block. So each item becomes exactly one line that cannot close the
block or start a line of its own, and that holds nothing a person reviewing the prompt cannot
see but the model reads:

* Loom's escaping of ``&``, ``<`` and ``>`` in pack text is kept, never undone, and never
  applied twice; raw search excerpts are escaped the same way;
* every line separator becomes a space; other control characters, every invisible format
  character (Unicode category Cf: bidi controls, zero-width spaces, the soft hyphen, tag
  characters and the rest) except ZWJ and ZWNJ, the supplementary variation selectors and the
  invisible fillers are removed; a run of the invisible marks that stay (joiners, variation
  selectors) keeps only its first, since a run shows nothing yet can carry hidden data;
* brackets that look like ``<`` or ``>`` — the full-width and small forms, which NFKC turns
  into ``<`` and ``>``, and the single angle brackets and quotation marks a reader can take for
  them — are escaped as ``&lt;`` and ``&gt;``, so no look-alike of the block's tag survives;
* an item is cut to ``ITEM_MAX_CHARS`` without splitting an entity, and the block keeps whole
  items only, up to ``BLOCK_MAX_BYTES``.

The work on one item is bounded: only its first ``INPUT_MAX_CHARS`` are read, and the
per-character check is made on no more than the item can show. This module is pure Python,
so the runtime can use it without loading any template code.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

ITEM_MAX_CHARS = 500  # REC-2: per recalled item, ellipsis included
BLOCK_MAX_BYTES = 8 * 1024  # REC-2: the whole session-context block, UTF-8
ELLIPSIS = "…"
SOURCES = ("pack", "search")  # REC-2: pack text arrives escaped, search text raw
# Work on at most this much of an item: the line is cut to ITEM_MAX_CHARS anyway, and a stored
# memory of megabytes must not cost megabytes of regex work at every session start.
INPUT_MAX_CHARS = 8 * ITEM_MAX_CHARS
_ENTITY_MAX_CHARS = 10  # "&#x10FFFF;", the longest entity _ENTITY matches
_SHOWN_MAX_CHARS = ITEM_MAX_CHARS + _ENTITY_MAX_CHARS

# REC-2: every line separator Python's str.splitlines() knows, plus vertical tab and form feed.
_LINE_SEPARATORS = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# ZWNJ and ZWJ stay: scripts such as Persian and emoji sequences need them (REC-5).
_JOINERS = frozenset("\u200c\u200d")
# REC-5: every format character (category Cf) of Unicode 15 but the two joiners, as ranges,
# with the code points reserved among them that are drawn as nothing (U+2065, U+FFF0–U+FFF8).
# A newer Unicode may add some; _drop_unseen catches those one character at a time.
_FORMAT_CHARACTERS = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b\u200e\u200f"
    "\u202a-\u202e\u2060-\u206f\ufeff\ufff0-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
)
# REC-5: the whole block U+E0000–U+E0FFF: the tag characters (ASCII smuggled as tags), the
# supplementary variation selectors U+E0100–U+E01EF (a byte each, hidden behind any visible
# character) and the code points reserved around them, all drawn as nothing.
_TAGS_AND_SELECTORS = "\U000e0000-\U000e0fff"
# Letters and marks that are drawn as nothing: the combining grapheme joiner, the Hangul
# fillers and the Khmer inherent vowels Unicode says not to use.
_BLANK_LETTERS = "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"
# Every C0/C1 control that is not a separator or tab, and lone surrogates (JSON can carry
# them; they cannot be encoded, so they would break the block's size count).
_ASCII_CONTROLS = "\x00-\x08\x0e-\x1b\x1f\x7f"
_CONTROLS = f"{_ASCII_CONTROLS}\x80-\x84\x86-\x9f\ud800-\udfff"
_HIDDEN = re.compile(f"[{_CONTROLS}{_FORMAT_CHARACTERS}{_TAGS_AND_SELECTORS}{_BLANK_LETTERS}]")
# In ASCII text the controls are all there is to hide: no format character, invisible mark or
# look-alike bracket is ASCII. Most memories are ASCII, so they take this shorter way, and
# one search (for a control, a separator, a tab or two blanks) tells whether it has work.
_HIDDEN_ASCII = re.compile(f"[{_ASCII_CONTROLS}]")
_ASCII_UNTIDY = re.compile(r"[\x00-\x1f\x7f]| [ \t]")
# Invisible marks that stay, one at a time: the joiners and the variation selectors.
_MARKS = "\u200c\u200d\u180b-\u180d\u180f\ufe00-\ufe0f"
_MARK_RUN = re.compile(f"(?<=[{_MARKS}])[{_MARKS}]+")  # what follows a run's first mark
# REC-5: look-alikes of the block's own brackets, written as the bracket they stand for and
# then escaped with it. NFKC maps the full-width and small forms to < and >; the others are
# single angle brackets a reader (or a model) can take for them. Double ones (« », 《 》, ≪ ≫)
# read as quotation marks or operators and stay.
_LOOKALIKE_LESS = "\ufe64\uff1c\u2039\u2329\u27e8\u3008\ufe3f\u29fc\u276c\u276e\u02c2\u1438"
_LOOKALIKE_GREATER = "\ufe65\uff1e\u203a\u232a\u27e9\u3009\ufe40\u29fd\u276d\u276f\u02c3\u1433"
_LOOKALIKES = re.compile(f"[{_LOOKALIKE_LESS}{_LOOKALIKE_GREATER}]")
_AS_BRACKETS = str.maketrans(
    dict.fromkeys(_LOOKALIKE_LESS, "<") | dict.fromkeys(_LOOKALIKE_GREATER, ">")
)
# A run of blanks that is not already one space (a lone space is left alone, which is most).
_WHITESPACE_RUN = re.compile(r"\t[ \t]*| [ \t]+")
_ENTITY = re.compile(r"&(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});")
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6});)")


def sanitize_recalled(text: str, *, source: str) -> str:
    """One safe line for one recalled item (see the module docstring); ``""`` when none is left.

    Raises ``ValueError`` for a ``source`` other than ``pack`` or ``search``.
    """
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is unknown; expected one of: {', '.join(SOURCES)}")
    if len(text) <= _REMEMBERED_MAX_CHARS:
        return _remembered(text, source)
    return _sanitized(text, source)


# A session start recalls mostly the memories the last one did, so the lines made of short
# texts are kept (our choice: the last 512, at most 1,000 characters each, a few MB at worst).
_REMEMBERED_MAX_CHARS = 2 * ITEM_MAX_CHARS


@lru_cache(maxsize=512)
def _remembered(text: str, source: str) -> str:
    """``_sanitized``, kept for the next session start; the line depends on nothing else."""
    return _sanitized(text, source)


def _sanitized(text: str, source: str) -> str:
    """The work of ``sanitize_recalled`` on a ``source`` already checked."""
    more = len(text) > INPUT_MAX_CHARS
    line = text[:INPUT_MAX_CHARS]
    ascii_only = line.isascii()
    if not ascii_only:
        line = _tidy(_LINE_SEPARATORS.sub(" ", line))
    elif _ASCII_UNTIDY.search(line):
        line = _LINE_SEPARATORS.sub(" ", line)
        line = _WHITESPACE_RUN.sub(" ", _HIDDEN_ASCII.sub("", line))
    line = line.strip()
    # Escaping never shortens a line, so nothing past ITEM_MAX_CHARS can be shown: the rest of
    # the work, the per-character check included, is spent on what can (and on enough past it
    # that an entity Loom wrote across the cut is still seen whole).
    if len(line) > _SHOWN_MAX_CHARS:
        line, more = line[:_SHOWN_MAX_CHARS], True
    if not ascii_only:
        if not line.isprintable():
            line = _drop_unseen(line)
        if _LOOKALIKES.search(line):
            line = line.translate(_AS_BRACKETS)
    line = _escape(line, already_escaped=source == "pack")
    return _cut(line, ITEM_MAX_CHARS, more=more)


def _tidy(line: str) -> str:
    """``line`` without hidden characters, runs of invisible marks or of blanks, nor end blanks."""
    line = _HIDDEN.sub("", line)
    line = _MARK_RUN.sub("", line)
    return _WHITESPACE_RUN.sub(" ", line).strip()


def _drop_unseen(line: str) -> str:
    """``line`` without the format characters a newer Unicode added after ``_HIDDEN`` was drawn.

    Only lines that are not all printable get here (a joiner or a no-break space is enough),
    and they are at most ``ITEM_MAX_CHARS`` long.
    """
    kept = "".join(
        char
        for char in line
        if char.isprintable() or char in _JOINERS or unicodedata.category(char) != "Cf"
    )
    return kept if kept == line else _tidy(kept)


def _escape(line: str, *, already_escaped: bool) -> str:
    """Entity-escape ``&``, ``<``, ``>``; pack text keeps the entities Loom already wrote."""
    if already_escaped:
        if "&" in line:
            line = _BARE_AMPERSAND.sub("&amp;", line)
    else:
        line = line.replace("&", "&amp;")
    return line.replace("<", "&lt;").replace(">", "&gt;")


def _cut(line: str, limit: int, *, more: bool) -> str:
    """At most ``limit`` characters, never cut inside an entity.

    A line that was cut, here or earlier (``more``), ends in an ellipsis.
    """
    if len(line) <= limit and not more:
        return line
    if len(line) < limit:
        return line.rstrip() + ELLIPSIS if line else ""
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
        size = line_bytes(line)
        if size > budget:
            break
        kept.append(line)
        budget -= size
    return kept, len(lines) - len(kept)


def line_bytes(line: str) -> int:
    """What ``line`` costs the block: its UTF-8 bytes and its newline."""
    return len(line.encode()) + 1
