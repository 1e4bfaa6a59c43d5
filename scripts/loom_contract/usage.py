"""Nerve's side of the Loom contract: the ops Nerve calls, what it sends and what it reads.

``NERVE_USAGE`` lists the lifecycle calls Nerve's runtime makes itself; ``OPERATOR_USAGE`` the
calls an operator's job makes (``nerve memory migrate``); ``LOOM_OP_USAGE`` the ops Nerve
reaches through ``loom_op``, which no tool of their own serves; ``AGENT_USAGE`` what the Loom
wording tells the agent to send. These declarations are the one place a change in how Nerve
talks to Loom is written down; the generator (``scripts/loom_contract_fixture.py``) holds them
up against a Loom checkout and writes the contract fixture from them (CON-1, BACK-4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ANY = None  # an argument whose value Nerve computes: any value its schema allows
RECALL_SEARCH_TOP_K = 10  # REC-1: how many results the recall's fallback search asks for
MESSAGE_ROLES = ("assistant", "system", "tool", "user")  # SWEEP-3: the roles a transcript holds


@dataclass(frozen=True)
class OpUsage:
    """How Nerve uses one op: each argument path it sends, and the answer paths it reads.

    An argument maps to ``ANY`` or to the tuple of the only values Nerve ever sends for it.
    """

    arguments: Mapping[str, tuple[Any, ...] | None]
    reads: tuple[str, ...]


# The lifecycle calls Nerve's runtime makes itself (LOOM-1; contracts/loom-ops.md).
NERVE_USAGE: dict[str, OpUsage] = {
    # REC-1: startup recall, memories only.
    "context.pack": OpUsage(
        arguments={"mode": ("startup",), "sections": (["memories"],), "namespace": ANY},
        reads=("sections.memories.items[].text", "sections.memories.items[].memory_key"),
    ),
    # REC-1: the recall fallback.
    "search.query": OpUsage(
        arguments={"query": ANY, "top_k": (RECALL_SEARCH_TOP_K,), "namespace": ANY},
        reads=("results[].content_excerpt", "results[].memory_key", "abstained"),
    ),
    # SWEEP-3 (waiting, defer false) and SWEEP-4 (queued, defer true): transcript extraction.
    "memory.set_from_messages": OpUsage(
        arguments={
            "messages[].role": MESSAGE_ROLES,
            "messages[].content": ANY,
            "messages[].created_at": ANY,
            "context[].role": MESSAGE_ROLES,
            "context[].content": ANY,
            "defer": (False, True),
            "namespace": ANY,
            "session_id": ANY,
        },
        reads=("written[].memory_key", "written[].verdict", "accepted", "queue_id"),
    ),
    # LOOM-3: the health probe, which also names the org and namespace Loom resolved.
    "namespace.summary": OpUsage(
        arguments={"namespace": ANY},
        reads=("org", "namespace", "shared_namespaces[]", "memory_count"),
    ),
}

# The calls of operator jobs, not of Nerve's engine (MIG-1): ``nerve memory migrate`` writes
# each memU item with one ``memory.set`` under a key of its own, carrying the item's type,
# categories and dates over.
OPERATOR_USAGE: dict[str, OpUsage] = {
    "memory.set": OpUsage(
        arguments={
            "text": ANY,
            "memory_key": ANY,
            "namespace": ANY,
            "kind": ANY,
            "tags": ANY,
            "created_at": ANY,
            "updated_at": ANY,
            "happened_at": ANY,
        },
        reads=("memory_key", "verdict", "reason"),
    ),
}

# Caller-bound ops reached through ``loom_op`` (SWEEP-15; contracts/loom-ops.md): following a
# queued extraction up, and queueing a failed one again.
LOOM_OP_USAGE: dict[str, OpUsage] = {
    "memory.extraction_status_mine": OpUsage(
        arguments={"queue_ids": ANY, "namespace": ANY},
        reads=("items[].queue_id", "items[].state"),
    ),
    "memory.extraction_retry_mine": OpUsage(
        arguments={"queue_ids": ANY, "namespace": ANY},
        reads=("items[].queue_id", "items[].state"),
    ),
}

# What the Loom wording tells the agent to send and what it explains of the answer (TXT-3):
# a write with ``proposed: true`` where the agent is not the writer, and the write verdicts.
AGENT_USAGE: dict[str, OpUsage] = {
    "memory.set": OpUsage(
        arguments={"text": ANY, "memory_key": ANY, "namespace": ANY, "proposed": (True,)},
        reads=("verdict", "reason"),
    ),
}
