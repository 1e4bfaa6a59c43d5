"""The memory contract shared by provisioning and runtime: the MCP server names.

The failure every memory backend shares, ``MemoryBackendUnavailable`` (GW-1), lives with the
runtime's other errors in ``provisioner.runtime.errors``.

It imports nothing beyond the standard library on purpose: no HTTP client, no template engine.
"""

from __future__ import annotations

# The MCP server names both halves agree on (BACK-3, LOOM-1): the provisioning side words
# tools as mcp__<server>__<tool>, the runtime finds Loom in the gateway catalog by its id.
NERVE_SERVER = "nerve"  # Nerve's own MCP server; a catalog server with this id is not used
LOOM_SERVER = "loom"  # Loom's server id in the gateway catalog
