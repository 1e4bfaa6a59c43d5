"""What one extraction call carries: a window's messages cut into a batch that fits the batch
budget (SWEEP-3, SWEEP-4, SWEEP-6, SWEEP-11).

The budget (``runtime.budget``) says how many messages and request bytes one call may carry;
its mode's limits are where it starts.

Sizes are counted the way the request carries them: each message as compact UTF-8 JSON
(``{"role","content","created_at"}``, as ``loom_memory_set_from_messages`` takes it), plus a
fixed allowance for the JSON-RPC envelope and the call's other arguments. A batch holds as many
messages as fit both the message count and the bytes left after its context turns.

A message too big to fit the byte budget on its own would stall its session forever, so it is
sent alone with its content cut to fit (SWEEP-11); ``Batch.cut_ids`` names it, and the sweep
writes an audit row saying so when Loom takes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from provisioner.runtime.budget import BatchBudget
from provisioner.runtime.transcripts import Message

ENVELOPE_BYTES = 1024  # our choice: JSON-RPC frame, tool name, defer and namespace, with room
CUT_MARK = " […]"  # our choice: what ends the content of a message cut to fit (SWEEP-11)


@dataclass(frozen=True)
class Batch:
    """What one extraction call sends: ``messages`` (oldest first) and ``context`` turns.

    ``cut_ids`` holds the id of a message whose content was cut to fit (SWEEP-11).
    ``body_bytes`` is the estimated size of the request body.
    """

    messages: tuple[Message, ...]
    context: tuple[Message, ...]
    cut_ids: frozenset[int]
    body_bytes: int

    @property
    def last_id(self) -> int:
        return self.messages[-1].id

    @property
    def first_id(self) -> int:
        return self.messages[0].id


def wire_size(message: Message) -> int:
    """Bytes ``message`` takes in the request's ``messages[]`` (with its separating comma)."""
    item = {"role": message.role, "content": message.content, "created_at": message.created_at}
    return len(_compact(item).encode("utf-8", "surrogatepass")) + 1


def context_size(message: Message) -> int:
    """Bytes a context turn takes in the request's ``context[]`` (role and content only)."""
    item = {"role": message.role, "content": message.content}
    return len(_compact(item).encode("utf-8", "surrogatepass")) + 1


def pick_context(recent: Sequence[Message], budget: BatchBudget) -> tuple[Message, ...]:
    """The most recent turns of ``recent`` that fit the budget's context share (SWEEP-6).

    ``recent`` is oldest first; turns are taken newest first and returned oldest first.
    """
    chosen: list[Message] = []
    used = 0
    for message in reversed(recent):
        if len(chosen) >= budget.context_messages:
            break
        size = context_size(message)
        if used + size > budget.context_bytes:
            break
        chosen.append(message)
        used += size
    return tuple(reversed(chosen))


def build_batch(
    window: Sequence[Message],
    context: Sequence[Message],
    budget: BatchBudget,
    *,
    session_id: str,
    limit: int | None = None,
) -> Batch:
    """The first messages of ``window`` that fit ``budget`` beside ``context``.

    ``limit`` caps the count further (an isolation sends halves). ``window`` must not be
    empty. When not even the first message fits, it is sent alone, cut to fit (SWEEP-11),
    without context.
    """
    count_cap = min(budget.messages, limit) if limit is not None else budget.messages
    fixed = ENVELOPE_BYTES + len(session_id.encode("utf-8", "replace"))
    context_bytes = sum(context_size(turn) for turn in context)
    room = budget.bytes - fixed - context_bytes
    chosen: list[Message] = []
    used = 0
    for message in window[:count_cap]:
        size = wire_size(message)
        if used + size > room:
            break
        chosen.append(message)
        used += size
    if chosen:
        return Batch(tuple(chosen), tuple(context), frozenset(), fixed + context_bytes + used)
    cut = cut_to_fit(window[0], budget.bytes - fixed)
    return Batch((cut,), (), frozenset({cut.id}), fixed + wire_size(cut))


def cut_to_fit(message: Message, max_bytes: int) -> Message:
    """``message`` with its content shortened so that ``wire_size`` is at most ``max_bytes``.

    The cut keeps whole characters (never half a UTF-8 sequence or an escape) and ends with
    ``CUT_MARK``. Binary search over the character count: each probe is one JSON encoding.
    """
    empty = replace(message, content=CUT_MARK)
    if wire_size(empty) > max_bytes:
        return empty  # nothing of the text fits; the mark alone still says what happened
    low, high = 0, len(message.content)
    while low < high:
        middle = (low + high + 1) // 2
        probe = replace(message, content=message.content[:middle] + CUT_MARK)
        if wire_size(probe) <= max_bytes:
            low = middle
        else:
            high = middle - 1
    return replace(message, content=message.content[:low] + CUT_MARK)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
