"""Reading Loom's extraction and summary answers into the backend's types (SWEEP-3, LOOM-3).

Every field is read through ``provisioner.runtime.loom.contract`` (CON-2) and checked for the shape
the contract promises; anything else is a ``BrokenAnswer``. Names Loom reports (org,
namespaces) end up in the system prompt and in diagnostics, so only names of Loom's naming
rule are taken.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.types import Extracted, Identity, WrittenMemory
from provisioner.runtime.transcripts import Message

LOOM_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")  # loom-ops.md: 1-63 of a-z 0-9 - _, a letter first
MESSAGE_ROLES = frozenset({"user", "assistant", "system", "tool"})  # SWEEP-3 (in the fixture)
SESSION_ID_MAX_CHARS = 200  # the op's params schema: session_id of 1-200 characters
MEMORY_KEY_MAX_CHARS = 256  # our choice: a key longer than this is not one Loom made
SOURCE_LOOM = "loom"  # LOOM-3: the value came from Loom's summary
SOURCE_CONFIG = "config"  # LOOM-3: memory.loom.org / memory.loom.namespace overrode it


def extraction_arguments(
    messages: Sequence[Message],
    context: Sequence[Message],
    *,
    session_id: str,
    defer: bool,
    namespace: str | None,
) -> dict[str, Any]:
    """The ``memory.set_from_messages`` arguments; ``context`` is sent as ``{role, content}``.

    Raises ``ValueError`` for no messages, a role Loom does not take, or a session id outside
    1-200 characters: each is the caller's bug, and no call is made.
    """
    if not messages:
        raise ValueError("extract() needs at least one message")
    if not 0 < len(session_id) <= SESSION_ID_MAX_CHARS:
        raise ValueError(f"session_id must be 1-{SESSION_ID_MAX_CHARS} characters")
    for message in (*messages, *context):
        if message.role not in MESSAGE_ROLES:
            expected = ", ".join(sorted(MESSAGE_ROLES))
            raise ValueError(f"message {message.id} has role {message.role!r}; expected {expected}")
    arguments: dict[str, Any] = {
        "messages": [
            {"role": m.role, "content": m.content, "created_at": m.created_at} for m in messages
        ],
        "defer": defer,
        "session_id": session_id,
    }
    if context:
        arguments["context"] = [{"role": m.role, "content": m.content} for m in context]
    if namespace:
        arguments["namespace"] = namespace
    return arguments


def extracted_from(answer: Any, *, sent: int, defer: bool) -> Extracted:
    """What Loom took of ``sent`` messages; ``BrokenAnswer`` for an answer out of contract."""
    op = contract.SET_FROM_MESSAGES
    accepted = contract.field(answer, op, "accepted")
    if not _is_count(accepted) or accepted > sent:
        raise BrokenAnswer(f"{op}: accepted must be a count of 0 to {sent} messages")
    written = []
    for entry in contract.records(answer, op, "written[]", ("memory_key", "verdict")):
        key, verdict = entry["memory_key"], entry["verdict"]
        if not _is_short_text(key, MEMORY_KEY_MAX_CHARS) or not _is_short_text(verdict, 32):
            raise BrokenAnswer(f"{op}: a written memory lacks its key or verdict")
        written.append(WrittenMemory(memory_key=key, verdict=verdict))
    queue_id = contract.field(answer, op, "queue_id")
    if queue_id is not None and not _is_short_text(queue_id, MEMORY_KEY_MAX_CHARS):
        raise BrokenAnswer(f"{op}: queue_id is not a short string")
    if defer and queue_id is None:
        raise BrokenAnswer(f"{op}: a queued extraction was answered without a queue_id")
    return Extracted(accepted=accepted, written=tuple(written), queue_id=queue_id)


def identity_from(answer: Any, *, org: str | None, namespace: str | None) -> Identity:
    """Who Loom says the agent is, with ``memory.loom`` overrides laid over it (LOOM-3)."""
    op = contract.NAMESPACE_SUMMARY
    loom_org = contract.field(answer, op, "org")
    loom_namespace = contract.field(answer, op, "namespace")
    shared = contract.items(answer, op, "shared_namespaces[]")
    count = contract.field(answer, op, "memory_count")
    if not _is_count(count):
        raise BrokenAnswer(f"{op}: memory_count is not a count")
    for name in (*shared, *([loom_org] if org is None else [])):
        _check_name(name, op)
    if namespace is None:
        _check_name(loom_namespace, op)
    return Identity(
        org=org or loom_org,
        namespace=namespace or loom_namespace,
        shared_namespaces=tuple(shared),
        memory_count=count,
        org_source=SOURCE_CONFIG if org else SOURCE_LOOM,
        namespace_source=SOURCE_CONFIG if namespace else SOURCE_LOOM,
    )


def _check_name(value: Any, op: str) -> None:
    if not isinstance(value, str) or not LOOM_NAME.fullmatch(value):
        raise BrokenAnswer(f"{op}: an org or namespace does not follow Loom's naming rule")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_short_text(value: Any, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and value.isprintable()
