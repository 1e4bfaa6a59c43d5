"""The one way the Loom backend reads an answer field: only fields the contract declares (CON-2).

Every answer field the backend reads is named here, per op, as a path (``results[].memory_key``,
``sections.memories.items[].text``) exactly as the contract fixture declares it
(``tests/fixtures/loom_lifecycle_ops.json``: the lifecycle ops under ``ops``, the write of
``nerve memory migrate`` under ``operator_ops``, the follow-up of queued batches under
``loom_op_ops``; the contract tests check that the two agree). A
read of any other path raises ``UndeclaredField`` — a bug in this package, caught by the
tests before it ships — so the backend cannot quietly start relying on a field Loom never
promised.

An answer whose shape is not what the contract says (a list where an object belongs, say) is
the gateway's or Loom's fault, not ours: that raises ``BrokenAnswer``, one of the gateway
client's outcomes, and the caller treats it like any other failed call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from provisioner.runtime.errors import OperatorMustAct
from provisioner.runtime.gateway.errors import BrokenAnswer

CONTEXT_PACK = "context.pack"
SEARCH_QUERY = "search.query"
SET_FROM_MESSAGES = "memory.set_from_messages"
NAMESPACE_SUMMARY = "namespace.summary"
MEMORY_SET = "memory.set"
EXTRACTION_STATUS = "memory.extraction_status_mine"  # SWEEP-15: the caller's queued batches
EXTRACTION_RETRY = "memory.extraction_retry_mine"  # SWEEP-15: queue the caller's failed again

TOOLS = {  # contracts/loom-ops.md: the MCP tool that serves each lifecycle op
    CONTEXT_PACK: "loom_context_pack",
    SEARCH_QUERY: "loom_search",
    SET_FROM_MESSAGES: "loom_memory_set_from_messages",
    NAMESPACE_SUMMARY: "loom_namespace_summary",
}

OPERATOR_TOOLS = {  # MIG-1: the tool behind each op an operator job calls (nerve memory migrate)
    MEMORY_SET: "loom_memory_set",
}

# SWEEP-15, loom-ops.md: ops no tool of their own serves, reached through ``loom_op``, which takes
# the op's name as ``op`` and the op's own arguments, as its params schema declares them, as
# ``params`` (the names Loom's op files use for the two).
LOOM_OP_TOOL = "loom_op"
LOOM_OP_NAME = "op"
LOOM_OP_PARAMS = "params"
LOOM_OP_OPS = frozenset({EXTRACTION_STATUS, EXTRACTION_RETRY})

DECLARED_READS: dict[str, frozenset[str]] = {  # CON-2: the answer fields the backend reads
    CONTEXT_PACK: frozenset(
        {"sections.memories.items[].text", "sections.memories.items[].memory_key"}
    ),
    SEARCH_QUERY: frozenset({"results[].content_excerpt", "results[].memory_key", "abstained"}),
    SET_FROM_MESSAGES: frozenset(
        {"written[].memory_key", "written[].verdict", "accepted", "queue_id"}
    ),
    NAMESPACE_SUMMARY: frozenset({"org", "namespace", "shared_namespaces[]", "memory_count"}),
    MEMORY_SET: frozenset({"memory_key", "verdict", "reason"}),
    EXTRACTION_STATUS: frozenset({"items[].queue_id", "items[].state"}),
    EXTRACTION_RETRY: frozenset({"items[].queue_id", "items[].state"}),
}


class UndeclaredField(OperatorMustAct, LookupError):
    """The backend asked for an answer field the contract does not declare (a bug here)."""


def loom_op_arguments(op: str, params: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a ``loom_op`` call of ``op`` with the op's own ``params``.

    ``UndeclaredField`` for an op the contract does not name as reached through ``loom_op``:
    a bug here, as for a field read that the contract does not declare.
    """
    if op not in LOOM_OP_OPS:
        raise UndeclaredField(f"the contract declares no op {op!r} reached through loom_op")
    return {LOOM_OP_NAME: op, LOOM_OP_PARAMS: params}


def field(answer: Any, op: str, path: str) -> Any:
    """The value at ``path`` (no ``[]`` in it) of ``op``'s answer, or None when absent."""
    _declared(op, path)
    if "[]" in path:
        raise UndeclaredField(f"{path!r} runs through a list; read it with records() or items()")
    return _walk(_object(answer, op, "the answer"), path.split("."), op)


def items(answer: Any, op: str, path: str) -> list[Any]:
    """The items of the list at ``path`` (ending in ``[]``); an absent list is empty."""
    _declared(op, path)
    if not path.endswith("[]") or "[]" in path[:-2]:
        raise UndeclaredField(f"{path!r} must name one list, ending in []")
    value = _walk(_object(answer, op, "the answer"), path[:-2].split("."), op)
    return _list(value, op, path)


def records(answer: Any, op: str, list_path: str, names: Sequence[str]) -> list[dict[str, Any]]:
    """For each object in the list at ``list_path`` (``a.b[]``), its fields ``names``.

    Each ``f"{list_path}.{name}"`` must be declared; a field an item lacks is None.
    """
    for name in names:
        _declared(op, f"{list_path}.{name}")
    if not list_path.endswith("[]") or "[]" in list_path[:-2]:
        raise UndeclaredField(f"{list_path!r} must name one list, ending in []")
    value = _walk(_object(answer, op, "the answer"), list_path[:-2].split("."), op)
    found = []
    for item in _list(value, op, list_path):
        entry = _object(item, op, f"an item of {list_path}")
        found.append({name: entry.get(name) for name in names})
    return found


def _declared(op: str, path: str) -> None:
    if path not in DECLARED_READS.get(op, frozenset()):
        raise UndeclaredField(f"the contract declares no answer field {path!r} for {op}")


def _walk(value: dict[str, Any], steps: list[str], op: str) -> Any:
    current: Any = value
    for depth, step in enumerate(steps):
        if current is None:
            return None
        current = _object(current, op, ".".join(steps[:depth]) or "the answer").get(step)
    return current


def _object(value: Any, op: str, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BrokenAnswer(f"{op}: {where} is not an object")
    return value


def _list(value: Any, op: str, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BrokenAnswer(f"{op}: {path} is not a list")
    return value
