"""The memory contract shared by provisioning and runtime: server names, and the failure.

``MemoryBackendUnavailable`` is the failure every memory backend shares: memory cannot be used
right now (GW-1).

This belongs to the memory contract, not to one backend, so a module can name it (to catch it,
or to word a "memory is unavailable" text) without loading a backend's dependencies. It imports
nothing beyond the standard library on purpose: no HTTP client, no template engine.

The runtime raises it when the Loom backend did not start (no gateway URL), when the gateway's
catalog does not list ``loom``, and when the gateway or Loom cannot answer; the gateway
client's own exceptions (``provisioner.runtime.gateway.errors``) are kept as its ``__cause__``.
"""

from __future__ import annotations

# The MCP server names both halves agree on (BACK-3, LOOM-1): the provisioning side words
# tools as mcp__<server>__<tool>, the runtime finds Loom in the gateway catalog by its id.
NERVE_SERVER = "nerve"  # Nerve's own MCP server; a catalog server with this id is not used
LOOM_SERVER = "loom"  # Loom's server id in the gateway catalog


class MemoryBackendUnavailable(RuntimeError):
    """Memory cannot be used now; the caller degrades instead of failing.

    A session start says memories could not be recalled (never that there are none), a sweep
    keeps its watermark, a health probe reports the backend as unavailable. ``backend`` names
    the backend (``"loom"``, ``"memu"``) when the raiser knows it.
    """

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.backend = backend
