"""The runtime Nerve's engine imports: the Loom backend, the extraction sweep, and their errors.

Imports no room. Nothing here imports Copier, Jinja2 or the ``mcp`` SDK: the runtime speaks
the gateway's wire contract (contracts/gateway.md) with httpx alone, so importing it stays
cheap and a template or SDK upgrade cannot change how Nerve talks to Loom.

These are the runtime's half of the host API (``provisioner.integrations.nerve``, described in
docs/host-api.md), and its only public names. The package's other rooms reach the runtime
through ``provisioner.runtime.face``; every other module under this package is internal and
may move:

* ``LoomMemory`` — the Loom backend: startup recall, extraction, health, diagnostics
  (LOOM-1…LOOM-4, REC-1…REC-4); built from plain values, from Nerve's own configuration
  (``LoomMemory.from_settings``) or from this package's, opened with ``async with`` or
  ``open()`` and closed with ``aclose()``;
* ``memory_backend`` — the backend Nerve's configuration names, ``memu`` or ``loom``
  (NERVE-5), read strictly without the config loader;
* ``Sweeper`` — the extraction sweep (SWEEP-1…SWEEP-15);
* ``TranscriptSource`` — what the sweep reads from;
* ``StateStore`` — the SQLite state both keep (SWEEP-2, REC-3);
* ``ProvisionerRuntimeError`` — the root of every error the runtime raises, and its groups
  named for what the caller does: ``MemoryUnavailable``, ``StoreFault``, ``OperatorMustAct``
  (``provisioner.runtime.errors`` draws the tree).

Each name is imported when it is first used, so importing this package, or one of its light
modules such as ``provisioner.runtime.memory_contract`` (GW-1), loads no HTTP client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.runtime.lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers; at run time each comes from _HOME
    from provisioner.runtime.errors import (  # noqa: F401
        MemoryUnavailable,
        OperatorMustAct,
        ProvisionerRuntimeError,
        StoreFault,
    )
    from provisioner.runtime.loom.backend import LoomMemory  # noqa: F401
    from provisioner.runtime.loom.settings import memory_backend  # noqa: F401
    from provisioner.runtime.state import StateStore  # noqa: F401
    from provisioner.runtime.sweep.sweeper import Sweeper  # noqa: F401
    from provisioner.runtime.transcripts import TranscriptSource  # noqa: F401

_HOME: dict[str, str] = {
    "LoomMemory": "provisioner.runtime.loom.backend",
    "memory_backend": "provisioner.runtime.loom.settings",
    "Sweeper": "provisioner.runtime.sweep.sweeper",
    "TranscriptSource": "provisioner.runtime.transcripts",
    "StateStore": "provisioner.runtime.state",
    "ProvisionerRuntimeError": "provisioner.runtime.errors",
    "MemoryUnavailable": "provisioner.runtime.errors",
    "StoreFault": "provisioner.runtime.errors",
    "OperatorMustAct": "provisioner.runtime.errors",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
