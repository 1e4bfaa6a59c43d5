"""One memory written into Loom with ``loom_memory_set``, under a key the caller chose (MIG-1).

Nerve's engine never writes memories one by one: the sweep hands Loom whole transcripts. This
write is for operator jobs that carry memories over from another store (``nerve memory
migrate``). Each memory goes as one call under its own stable key, so a call that goes twice —
its answer lost, or the job killed before it noted the answer — is still one memory in Loom,
which answers ``duplicate`` the second time.

One attempt under the ``EXTRACTION`` policy: no waiting out a ``Retry-After`` here, the caller
decides when to go on. Before its first write a connection reads what the live tool takes
(MCP ``tools/list``); an optional field (``kind``, ``tags``, a date) goes only where that
declares it, and the verdict names those left out (REL-8): an older Loom refuses a write that
carries a field it does not know. Arguments Loom's schema would refuse raise ``ValueError``
before any call; every other failure is one of the gateway client's outcome classes,
unchanged, and is noted for diagnostics with the memory's text withheld.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from provisioner.runtime.gateway.client import EXTRACTION, LoomConnection
from provisioner.runtime.gateway.errors import BrokenAnswer, GatewayError
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import WRITE_DATES, write_arguments, written_from
from provisioner.runtime.loom.types import MemoryWrite, WriteVerdict

WRITE_DEADLINE_S = 30.0  # MIG-1 (our choice): one short memory, judged against what Loom holds
WRITE_OP = "write"  # how diagnostics name a failed write
LIST_DEADLINE_S = 10.0  # REL-8 (our choice): one short tools/list
LIST_OP = "tools-list"  # how diagnostics name a failed tools/list
# REL-8: the fields an older Loom's loom_memory_set may not declare; each is sent only where
# the live tool's inputSchema declares it (the text and the key always go).
OPTIONAL_ARGUMENTS = ("kind", "tags", *WRITE_DATES)


class ErrorNoter(Protocol):
    """Where a failed write is noted: ``LoomMemory.note_error``."""

    def __call__(
        self, op: str, error: BaseException, *, sent_texts: Sequence[str] = ()
    ) -> None: ...


async def write_memory(
    connection: LoomConnection,
    write: MemoryWrite,
    *,
    namespace: str | None,
    note_error: ErrorNoter,
) -> WriteVerdict:
    """Send ``write`` as one ``loom_memory_set`` call and read Loom's verdict.

    Raises ``ValueError`` (no call made) for arguments Loom would refuse, ``BrokenAnswer``
    for an answer out of contract, and the gateway client's outcome classes for the rest.
    """
    arguments = write_arguments(write, namespace=namespace)
    tool = contract.OPERATOR_TOOLS[contract.MEMORY_SET]
    declared = await _declared_arguments(connection, tool, note_error)
    left_out = tuple(name for name in OPTIONAL_ARGUMENTS if name in arguments.keys() - declared)
    for name in left_out:
        del arguments[name]
    try:
        result = await connection.call_tool(
            tool, arguments, deadline_s=WRITE_DEADLINE_S, policy=EXTRACTION
        )
        return replace(written_from(result.data), left_out=left_out)
    except GatewayError as error:
        note_error(WRITE_OP, error, sent_texts=[write.text])
        raise


async def _declared_arguments(
    connection: LoomConnection, tool: str, note_error: ErrorNoter
) -> frozenset[str]:
    """The property names of ``tool``'s ``inputSchema``, from MCP ``tools/list`` (the
    connection reads it once); a listing without the tool is a ``BrokenAnswer``."""
    try:
        listed = await connection.list_tools(deadline_s=LIST_DEADLINE_S)
        found = next((entry for entry in listed if entry["name"] == tool), None)
        if found is None:
            raise BrokenAnswer(f"tools/list does not list {tool}")
    except GatewayError as error:
        note_error(LIST_OP, error)
        raise
    properties = found["inputSchema"].get("properties")
    return frozenset(properties) if isinstance(properties, dict) else frozenset()
