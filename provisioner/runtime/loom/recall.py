"""Startup recall: what to ask Loom, and how its answers become safe lines (REC-1, REC-2, REC-5).

The backend asks ``context.pack`` in startup mode for the memories section; when that brings
no memories, or the gateway's policy refuses it, it asks ``search.query`` instead (REC-1).
This module holds the arguments of both calls and turns their answers into the recall's
items: each memory exactly one line made safe by ``provisioner.runtime.loom.recalled`` —
pack text keeps Loom's entities, search text is escaped the same way (REC-2) — without
duplicates, and no more of them than fit the session-context block.

An answer may list any number of memories, and the recall runs on the event loop that serves
Nerve's sessions and times the recall's own 5 s read. So the work is linear (repeats are found
in sets), stops at the first line the block has no room for, and gives the loop back every
``YIELD_AFTER_S`` however many memories clean to nothing (REC-5).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.recalled import BLOCK_MAX_BYTES, line_bytes, sanitize_recalled

RECALL_DEADLINE_S = 5.0  # REC-1: the whole read, pack and fallback together
RECALL_SEARCH_TOP_K = 10  # REC-1: results the fallback search asks for (in the fixture)
RECALL_SEARCH_QUERY = "facts, preferences and decisions worth knowing at the start of a session"
PACK_MODE = "startup"  # REC-1
PACK_SECTIONS = ("memories",)  # REC-1: the memories section only
# REC-5 (our choice): the longest the line-making holds the loop before it yields, and how many
# memories are read through the contract at a time.
YIELD_AFTER_S = 0.01
RECORDS_PER_SLICE = 256

_PACK_ITEMS = "sections.memories.items[]"
_SEARCH_RESULTS = "results[]"
_LINE_ITEM_PREFIX = (
    "- "  # how the block shows an item (provisioner.templating.texts.session_context)
)


def pack_arguments(namespace: str | None) -> dict[str, Any]:
    """The ``context.pack`` arguments of a startup recall."""
    arguments: dict[str, Any] = {"mode": PACK_MODE, "sections": list(PACK_SECTIONS)}
    if namespace:
        arguments["namespace"] = namespace
    return arguments


def search_arguments(namespace: str | None) -> dict[str, Any]:
    """The ``search.query`` arguments of the recall's fallback."""
    arguments: dict[str, Any] = {"query": RECALL_SEARCH_QUERY, "top_k": RECALL_SEARCH_TOP_K}
    if namespace:
        arguments["namespace"] = namespace
    return arguments


async def pack_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a pack's memories (already escaped by Loom); empty when none.

    Raises ``BrokenAnswer`` when the answer is not of the contract's shape.
    """
    return await _safe_lines(answer, contract.CONTEXT_PACK, _PACK_ITEMS, "text", source="pack")


async def search_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a search's results (raw text, escaped here); empty when it abstained.

    Raises ``BrokenAnswer`` when the answer is not of the contract's shape.
    """
    if contract.field(answer, contract.SEARCH_QUERY, "abstained") is True:
        return ()
    return await _safe_lines(
        answer, contract.SEARCH_QUERY, _SEARCH_RESULTS, "content_excerpt", source="search"
    )


async def _safe_lines(
    answer: Any, op: str, list_path: str, text_field: str, *, source: str
) -> tuple[str, ...]:
    """One sanitized line per memory, skipping non-text, empty lines and repeated keys/lines.

    Whole lines are kept up to the block's byte cap (REC-2), the way ``fit_block`` keeps them,
    so a frozen recall never holds more than the session-context block can show; the memories
    after the first line that does not fit are never cleaned, nor read (REC-5).
    """
    names = (text_field, "memory_key")
    listed = _listed(answer, op, list_path)
    lines: list[str] = []
    seen_keys: set[str] = set()
    seen_lines: set[str] = set()
    budget = BLOCK_MAX_BYTES
    held_since = time.perf_counter()
    # One slice even for an empty list, so the contract checks the fields named here.
    for start in range(0, max(len(listed), 1), RECORDS_PER_SLICE):
        piece = _nested(list_path, listed[start : start + RECORDS_PER_SLICE])
        for entry in contract.records(piece, op, list_path, names):
            if time.perf_counter() - held_since > YIELD_AFTER_S:
                await asyncio.sleep(0)
                held_since = time.perf_counter()
            text, key = entry[text_field], entry["memory_key"]
            if not isinstance(text, str):
                continue
            if isinstance(key, str):
                if key in seen_keys:
                    continue
                seen_keys.add(key)
            line = sanitize_recalled(text, source=source)
            if not line or line in seen_lines:
                continue
            size = line_bytes(_LINE_ITEM_PREFIX + line)
            if size > budget:
                return tuple(lines)
            seen_lines.add(line)
            lines.append(line)
            budget -= size
    return tuple(lines)


def _listed(answer: Any, op: str, list_path: str) -> list[Any]:
    """The list at ``list_path`` (``a.b[]``) of ``op``'s answer; an absent list is empty.

    ``contract.records`` reads a list whole, which for a long one would hold the loop, so the
    list is found here with the same rules — an object at every step, else ``BrokenAnswer``;
    a missing step or a null is no list — and read through ``contract.records`` a slice at a
    time (see ``_nested``), which checks each memory and the fields named.
    """
    value: Any = answer
    steps = list_path.removesuffix("[]").split(".")
    for depth, step in enumerate(steps):
        if not isinstance(value, dict):
            where = ".".join(steps[:depth]) or "the answer"
            raise BrokenAnswer(f"{op}: {where} is not an object")
        value = value.get(step)
        if value is None:
            return []
    if not isinstance(value, list):
        raise BrokenAnswer(f"{op}: {list_path} is not a list")
    return value


def _nested(list_path: str, items: list[Any]) -> dict[str, Any]:
    """An answer holding just ``items`` at ``list_path``, for ``contract.records`` to read."""
    value: Any = items
    for step in reversed(list_path.removesuffix("[]").split(".")):
        value = {step: value}
    return value
