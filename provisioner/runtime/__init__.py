"""The runtime Nerve's engine imports: the MCP gateway client and what is built on it.

Nothing here imports Copier, Jinja2 or the ``mcp`` SDK: the runtime speaks the gateway's wire
contract (contracts/gateway.md) with httpx alone, so importing it stays cheap and a template
or SDK upgrade cannot change how Nerve talks to Loom.

Public names of the gateway client (GW-1…GW-8):

* ``GatewayCatalog``, ``parse_catalog``, ``Catalog``, ``CatalogServer`` — the catalog (GW-2);
* ``McpGatewayServer``, ``ToolResult`` — one ``tools/call`` per POST (GW-3…GW-6);
* ``Breaker`` — the client's own circuit breaker (GW-7);
* ``LoomConnection`` — one kept client per Loom URL (GW-8);
* ``ClientState`` — unopened, opened or closed: the three client objects are async context
  managers;
* the outcome exceptions of ``provisioner.runtime.gateway.errors`` (GW-5), drawn there as a tree.

Built on it:

* ``LoomMemory`` — the Loom backend: startup recall, extraction, health, diagnostics
  (LOOM-1…LOOM-4, REC-1…REC-4), answering ``Recall``, ``Extracted`` and ``Identity``; built
  from plain values, from Nerve's own configuration (``LoomMemory.from_settings``) or from
  this package's, opened with ``async with`` or ``open()`` and closed with ``aclose()``;
* ``memory_backend`` — the backend Nerve's configuration names, ``memu`` or ``loom``
  (NERVE-5), read strictly without the config loader;
* ``Sweeper``, ``SweepReport`` — the extraction sweep (SWEEP-1…SWEEP-11);
* ``TranscriptSource``, ``Message``, ``SqliteTranscripts`` — where the sweep reads from;
* ``StateStore`` — the SQLite state both keep (SWEEP-2, REC-3).

Each name is imported when it is first used, so importing this package, or one of its light
modules such as ``provisioner.runtime.memory_contract`` (GW-1), loads no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.runtime.lazy import lazy_names

if TYPE_CHECKING:
    from provisioner.runtime.gateway.breaker import Breaker
    from provisioner.runtime.gateway.catalog import (
        Catalog,
        CatalogServer,
        GatewayCatalog,
        parse_catalog,
    )
    from provisioner.runtime.gateway.connection import CatalogSource, LoomConnection
    from provisioner.runtime.gateway.errors import (
        BodyTooLarge,
        BrokenAnswer,
        CatalogError,
        CircuitOpen,
        ClientClosed,
        CodedFault,
        ContractBroken,
        CountsForBreaker,
        GatewayCallTimeout,
        GatewayError,
        GatewayUnreachable,
        InternalFault,
        MayPass,
        NoAnswer,
        NotNow,
        PolicyRefused,
        RequestTooBig,
        ServerFault,
        ServerNotListed,
        ToolRefused,
    )
    from provisioner.runtime.gateway.lifecycle import ClientState
    from provisioner.runtime.gateway.outcomes import ToolResult
    from provisioner.runtime.gateway.server import EXTRACTION, READ, CallPolicy, McpGatewayServer
    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.loom.settings import memory_backend
    from provisioner.runtime.loom.types import Extracted, Identity, Recall, WrittenMemory
    from provisioner.runtime.state import StateStore
    from provisioner.runtime.sweep.sweeper import Sweeper, SweepReport
    from provisioner.runtime.transcripts import Message, SqliteTranscripts, TranscriptSource

_HOME = {
    "BodyTooLarge": "provisioner.runtime.gateway.errors",
    "Breaker": "provisioner.runtime.gateway.breaker",
    "BrokenAnswer": "provisioner.runtime.gateway.errors",
    "CallPolicy": "provisioner.runtime.gateway.server",
    "Catalog": "provisioner.runtime.gateway.catalog",
    "CatalogError": "provisioner.runtime.gateway.errors",
    "CatalogServer": "provisioner.runtime.gateway.catalog",
    "CatalogSource": "provisioner.runtime.gateway.connection",
    "CircuitOpen": "provisioner.runtime.gateway.errors",
    "ClientClosed": "provisioner.runtime.gateway.errors",
    "ClientState": "provisioner.runtime.gateway.lifecycle",
    "CodedFault": "provisioner.runtime.gateway.errors",
    "ContractBroken": "provisioner.runtime.gateway.errors",
    "CountsForBreaker": "provisioner.runtime.gateway.errors",
    "EXTRACTION": "provisioner.runtime.gateway.server",
    "Extracted": "provisioner.runtime.loom.types",
    "GatewayCallTimeout": "provisioner.runtime.gateway.errors",
    "GatewayCatalog": "provisioner.runtime.gateway.catalog",
    "GatewayError": "provisioner.runtime.gateway.errors",
    "GatewayUnreachable": "provisioner.runtime.gateway.errors",
    "Identity": "provisioner.runtime.loom.types",
    "InternalFault": "provisioner.runtime.gateway.errors",
    "LoomConnection": "provisioner.runtime.gateway.connection",
    "LoomMemory": "provisioner.runtime.loom.backend",
    "MayPass": "provisioner.runtime.gateway.errors",
    "McpGatewayServer": "provisioner.runtime.gateway.server",
    "Message": "provisioner.runtime.transcripts",
    "NoAnswer": "provisioner.runtime.gateway.errors",
    "NotNow": "provisioner.runtime.gateway.errors",
    "PolicyRefused": "provisioner.runtime.gateway.errors",
    "READ": "provisioner.runtime.gateway.server",
    "Recall": "provisioner.runtime.loom.types",
    "RequestTooBig": "provisioner.runtime.gateway.errors",
    "ServerFault": "provisioner.runtime.gateway.errors",
    "ServerNotListed": "provisioner.runtime.gateway.errors",
    "SqliteTranscripts": "provisioner.runtime.transcripts",
    "StateStore": "provisioner.runtime.state",
    "SweepReport": "provisioner.runtime.sweep.sweeper",
    "Sweeper": "provisioner.runtime.sweep.sweeper",
    "ToolRefused": "provisioner.runtime.gateway.errors",
    "ToolResult": "provisioner.runtime.gateway.outcomes",
    "TranscriptSource": "provisioner.runtime.transcripts",
    "WrittenMemory": "provisioner.runtime.loom.types",
    "memory_backend": "provisioner.runtime.loom.settings",
    "parse_catalog": "provisioner.runtime.gateway.catalog",
}

__all__ = [
    "EXTRACTION",
    "READ",
    "BodyTooLarge",
    "Breaker",
    "BrokenAnswer",
    "CallPolicy",
    "Catalog",
    "CatalogError",
    "CatalogServer",
    "CatalogSource",
    "CircuitOpen",
    "ClientClosed",
    "ClientState",
    "CodedFault",
    "ContractBroken",
    "CountsForBreaker",
    "Extracted",
    "GatewayCallTimeout",
    "GatewayCatalog",
    "GatewayError",
    "GatewayUnreachable",
    "Identity",
    "InternalFault",
    "LoomConnection",
    "LoomMemory",
    "MayPass",
    "McpGatewayServer",
    "Message",
    "NoAnswer",
    "NotNow",
    "PolicyRefused",
    "Recall",
    "RequestTooBig",
    "ServerFault",
    "ServerNotListed",
    "SqliteTranscripts",
    "StateStore",
    "SweepReport",
    "Sweeper",
    "ToolRefused",
    "ToolResult",
    "TranscriptSource",
    "WrittenMemory",
    "memory_backend",
    "parse_catalog",
]


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
