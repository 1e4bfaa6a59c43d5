"""Startup recall: what to ask Loom, and how its answers become safe lines (REC-1, REC-2).

The backend asks ``context.pack`` in startup mode for the memories section; when that brings
no memories, or the gateway's policy refuses it, it asks ``search.query`` instead (REC-1).
This module holds the arguments of both calls and turns their answers into the recall's
items: each memory exactly one line made safe by ``provisioner.runtime.loom.recalled`` — pack text keeps
Loom's entities, search text is escaped the same way (REC-2) — without duplicates, and no
more of them than fit the session-context block.
"""

from __future__ import annotations

from typing import Any

from provisioner.runtime.loom import contract
from provisioner.runtime.loom.recalled import fit_block, sanitize_recalled

RECALL_DEADLINE_S = 5.0  # REC-1: the whole read, pack and fallback together
RECALL_SEARCH_TOP_K = 10  # REC-1: results the fallback search asks for (in the fixture)
RECALL_SEARCH_QUERY = "facts, preferences and decisions worth knowing at the start of a session"
PACK_MODE = "startup"  # REC-1
PACK_SECTIONS = ("memories",)  # REC-1: the memories section only


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


def pack_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a pack's memories (already escaped by Loom); empty when none."""
    found = contract.records(
        answer, contract.CONTEXT_PACK, "sections.memories.items[]", ("text", "memory_key")
    )
    return _safe_lines(found, "text", source="pack")


def search_lines(answer: Any) -> tuple[str, ...]:
    """The safe lines of a search's results (raw text, escaped here); empty when it abstained."""
    if contract.field(answer, contract.SEARCH_QUERY, "abstained") is True:
        return ()
    found = contract.records(
        answer, contract.SEARCH_QUERY, "results[]", ("content_excerpt", "memory_key")
    )
    return _safe_lines(found, "content_excerpt", source="search")


def _safe_lines(found: list[dict[str, Any]], text_field: str, *, source: str) -> tuple[str, ...]:
    """One sanitized line per memory, skipping non-text, empty lines and repeated keys/lines.

    Whole lines are kept up to the block's byte cap (REC-2), so a frozen recall never holds
    more than the session-context block can show.
    """
    lines: list[str] = []
    seen_keys: set[str] = set()
    for entry in found:
        text, key = entry[text_field], entry["memory_key"]
        if not isinstance(text, str):
            continue
        if isinstance(key, str):
            if key in seen_keys:
                continue
            seen_keys.add(key)
        line = sanitize_recalled(text, source=source)
        if line and line not in lines:
            lines.append(line)
    kept, _dropped = fit_block([f"- {line}" for line in lines], 0)
    return tuple(line[2:] for line in kept)
