"""The failure every memory backend shares: memory cannot be used right now (GW-1).

This belongs to the memory contract, not to one backend, so a module can name it (to catch it,
or to word a "memory is unavailable" text) without loading a backend's dependencies. It imports
nothing beyond the standard library on purpose: no HTTP client, no template engine.

The runtime raises it when the Loom backend did not start (no gateway URL), when the gateway's
catalog does not list ``loom``, and when the gateway or Loom cannot answer; the gateway
client's own exceptions (``provisioner.runtime.errors``) are kept as its ``__cause__``.
"""

from __future__ import annotations


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
