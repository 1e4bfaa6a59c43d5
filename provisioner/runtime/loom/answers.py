"""Loom's extraction, write, summary and queue calls: their arguments, and their answers read
into the backend's types (SWEEP-3, MIG-1, LOOM-3, SWEEP-15).

Every field is read through ``provisioner.runtime.loom.contract`` (CON-2) and checked for the shape
the contract promises; anything else is a ``BrokenAnswer``. Names Loom reports (org,
namespaces) end up in the system prompt and in diagnostics, so only names of Loom's naming
rule are taken. Arguments Loom's schema would refuse raise ``ValueError`` before any call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.types import (
    QUEUE_STATES,
    WRITE_VERDICTS,
    Extracted,
    Identity,
    MemoryWrite,
    QueueStates,
    WriteVerdict,
    WrittenMemory,
)
from provisioner.runtime.transcripts import Message

LOOM_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")  # loom-ops.md: 1-63 of a-z 0-9 - _, a letter first
MESSAGE_ROLES = frozenset({"user", "assistant", "system", "tool"})  # SWEEP-3 (in the fixture)
SESSION_ID_MAX_CHARS = 200  # the op's params schema: session_id of 1-200 characters
MEMORY_KEY_MAX_CHARS = 256  # our choice: a key longer than this is not one Loom made
QUEUE_ID_MAX_CHARS = MEMORY_KEY_MAX_CHARS  # our choice: the same bound for a queue id
QUEUE_IDS_PER_CALL = 100  # SWEEP-15: the status and retry ops take 1-100 queue ids a call
# MIG-1: memory.set's params in the contract fixture (text, kind, tags).
MEMORY_TEXT_MAX_CHARS = 20_000
KIND_MAX_CHARS = 40
TAGS_MAX = 32
TAG_MAX_CHARS = 100
WRITE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")  # our choice: the keys we make
RFC3339_UTC = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")  # our choice
REASON_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")  # our choice: a code such as PINNED_CONFLICT
WRITE_DATES = ("created_at", "updated_at", "happened_at")
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
    if queue_id is not None and not _is_short_text(queue_id, QUEUE_ID_MAX_CHARS):
        raise BrokenAnswer(f"{op}: queue_id is not a short string")
    if defer and queue_id is None:
        raise BrokenAnswer(f"{op}: a queued extraction was answered without a queue_id")
    return Extracted(accepted=accepted, written=tuple(written), queue_id=queue_id)


def queue_arguments(queue_ids: Sequence[str], *, namespace: str | None) -> dict[str, Any]:
    """The params of a status or retry call (SWEEP-15): ``queue_ids`` and the namespace.

    Raises ``ValueError`` for no ids, more than ``QUEUE_IDS_PER_CALL``, or an id that is not
    a short printable text (no call is made): the caller asks in slices of ids it stored.
    """
    if not 0 < len(queue_ids) <= QUEUE_IDS_PER_CALL:
        raise ValueError(f"a queue call takes 1-{QUEUE_IDS_PER_CALL} queue ids")
    if not all(_is_short_text(queue_id, QUEUE_ID_MAX_CHARS) for queue_id in queue_ids):
        raise ValueError(f"a queue id must be 1-{QUEUE_ID_MAX_CHARS} printable characters")
    params: dict[str, Any] = {"queue_ids": list(queue_ids)}
    if namespace:
        params["namespace"] = namespace
    return params


def queue_states_from(answer: Any, op: str, asked: Sequence[str]) -> QueueStates:
    """Loom's word on the ``asked`` queue ids (SWEEP-15); ``BrokenAnswer`` for a wrong shape.

    An item is taken only for an id that was asked, answered once, with a state of
    ``QUEUE_STATES``; every other item is counted in ``odd``. An id answered twice is
    dropped whatever the two items say: two answers for one batch are no answer.
    """
    wanted = set(asked)
    states: dict[str, str] = {}
    doubled: set[str] = set()
    odd = 0
    for entry in contract.records(answer, op, "items[]", ("queue_id", "state")):
        queue_id, state = entry["queue_id"], entry["state"]
        if not isinstance(queue_id, str) or queue_id not in wanted or queue_id in doubled:
            odd += 1
        elif queue_id in states:
            del states[queue_id]
            doubled.add(queue_id)
            odd += 2
        elif state not in QUEUE_STATES:
            doubled.add(queue_id)
            odd += 1
        else:
            states[queue_id] = state
    return QueueStates(states=states, odd=odd)


def write_arguments(write: MemoryWrite, *, namespace: str | None) -> dict[str, Any]:
    """The ``memory.set`` arguments of ``write`` (MIG-1).

    Raises ``ValueError`` for a key outside ``WRITE_KEY``, a text outside 1-20000 characters,
    a kind, tag or date Loom's schema would refuse: each is the caller's to fix, and no call is
    made. The message names the key, never the text.
    """
    key = write.memory_key
    if not WRITE_KEY.fullmatch(key):
        raise ValueError(
            "memory_key must be 1-200 of A-Z a-z 0-9 . _ : - (a letter or digit first)"
        )
    if not 0 < len(write.text) <= MEMORY_TEXT_MAX_CHARS:
        raise ValueError(f"{key}: the text must be 1-{MEMORY_TEXT_MAX_CHARS} characters")
    arguments: dict[str, Any] = {"text": write.text, "memory_key": key}
    if write.kind is not None:
        if not 0 < len(write.kind) <= KIND_MAX_CHARS:
            raise ValueError(f"{key}: the kind must be 1-{KIND_MAX_CHARS} characters")
        arguments["kind"] = write.kind
    if write.tags:
        if len(write.tags) > TAGS_MAX or not all(0 < len(t) <= TAG_MAX_CHARS for t in write.tags):
            raise ValueError(f"{key}: at most {TAGS_MAX} tags of 1-{TAG_MAX_CHARS} characters")
        arguments["tags"] = list(write.tags)
    for name in WRITE_DATES:
        value = getattr(write, name)
        if value is not None:
            if not RFC3339_UTC.fullmatch(value):
                raise ValueError(f"{key}: {name} must be RFC 3339 in UTC (…T…Z)")
            arguments[name] = value
    if namespace:
        arguments["namespace"] = namespace
    return arguments


def written_from(answer: Any) -> WriteVerdict:
    """Loom's verdict on one ``memory.set``; ``BrokenAnswer`` for an answer out of contract.

    A ``reason`` that is not a code (``PINNED_CONFLICT``) is dropped, not kept: it could quote
    the memory, and reports never carry memory text.
    """
    op = contract.MEMORY_SET
    key = contract.field(answer, op, "memory_key")
    verdict = contract.field(answer, op, "verdict")
    reason = contract.field(answer, op, "reason")
    if not _is_short_text(key, MEMORY_KEY_MAX_CHARS):
        raise BrokenAnswer(f"{op}: memory_key is not a short string")
    if verdict not in WRITE_VERDICTS:
        raise BrokenAnswer(f"{op}: verdict is not one of {', '.join(WRITE_VERDICTS)}")
    if reason is not None and not isinstance(reason, str):
        raise BrokenAnswer(f"{op}: reason is not a string")
    code = reason if reason is not None and REASON_CODE.fullmatch(reason) else None
    return WriteVerdict(memory_key=key, verdict=verdict, reason=code)


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
