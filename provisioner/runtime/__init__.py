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
* the outcome exceptions of ``provisioner.runtime.errors`` (GW-5), drawn there as a tree.

Built on it:

* ``LoomMemory`` — the Loom backend: startup recall, extraction, health, diagnostics
  (LOOM-1…LOOM-4, REC-1…REC-4), answering ``Recall``, ``Extracted`` and ``Identity``;
* ``Sweeper``, ``SweepReport`` — the extraction sweep (SWEEP-1…SWEEP-11);
* ``TranscriptSource``, ``Message``, ``SqliteTranscripts`` — where the sweep reads from;
* ``StateStore`` — the SQLite state both keep (SWEEP-2, REC-3).
"""

from provisioner.runtime.breaker import Breaker
from provisioner.runtime.catalog import Catalog, CatalogServer, GatewayCatalog, parse_catalog
from provisioner.runtime.connection import CatalogSource, LoomConnection
from provisioner.runtime.errors import (
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
from provisioner.runtime.gateway import EXTRACTION, READ, CallPolicy, McpGatewayServer
from provisioner.runtime.lifecycle import ClientState
from provisioner.runtime.loom import LoomMemory
from provisioner.runtime.loom_types import Extracted, Identity, Recall, WrittenMemory
from provisioner.runtime.outcomes import ToolResult
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep import Sweeper, SweepReport
from provisioner.runtime.transcripts import Message, SqliteTranscripts, TranscriptSource

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
    "parse_catalog",
]
