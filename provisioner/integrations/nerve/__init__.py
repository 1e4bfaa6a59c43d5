"""The host API: every name Nerve calls to adopt the package, and the only public ones.

These names are the package's promise to a host (docs/host-api.md, NERVE-1…NERVE-18); every
module path under them is internal and may move. What Nerve's adoption patch calls (NERVE-13…
NERVE-18):

* ``nerve_memory`` — the engine's memory in one object, a ``NerveMemory``: memU's tools hidden,
  the session's ``loom`` MCP server, the prompt's memory section and recall, the sweep Nerve's
  own loop runs, one state in ``$NERVE_HOME``; inert under memU;
* ``hidden_tools`` — the tools Nerve must not offer under the configured backend;
* ``nerve_router`` — the Memory card's routes with the configuration read from Nerve's folders;
* ``allow_config_keys``, ``cron_job_prompt``, ``doctor_lines`` — the hooks of Nerve's key check,
  cron loader and doctor; ``external_agent_first_action`` and ``external_agent_footer`` — those
  of the bundles Nerve writes for external agents;

the engine's part, for a host that wires pieces by hand (NERVE-5):

* ``memory_backend`` — the backend Nerve's configuration names, ``memu`` or ``loom``;
* ``nerve_settings`` — Nerve's merged settings, as the two below read them (NERVE-8);
* ``LoomMemory`` — the Loom backend: startup recall, extraction, health, diagnostics;
* ``session_context`` — the recall text: the session-context block of a prompt (REC-4);
* ``nerve_sweeper`` — the sweeper built for the backend's configuration (NERVE-11), a
  ``Sweeper`` (``run_once``, ``close``);
* ``TranscriptSource`` — what a transcripts source answers; ``NerveTranscripts`` reads
  Nerve's ``nerve.db`` as one (NERVE-2);
* ``StateStore`` — the SQLite state the backend and the sweep keep (SWEEP-2, REC-3);
* ``load_cron_jobs`` — the cron jobs, a shipped memU prompt worded for the backend (TXT-7);

the command line's and the web app's (NERVE-1, NERVE-4): ``extend_cli``, which mounts the
package into Nerve's click group, and ``fastapi_router``, the Memory card's routes; and the
errors (``provisioner.runtime.errors``): ``ProvisionerRuntimeError``, the root of every error
the runtime raises, and its groups named for what the caller does, ``MemoryUnavailable``
(degrade, try later), ``StoreFault`` (keep the watermarks, try again) and ``OperatorMustAct``.

Each name is imported on first use, so importing this package costs nothing until Nerve asks
for a piece: no click, no HTTP client, no Jinja2, no web framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.runtime.face import lazy_names

if TYPE_CHECKING:  # the names for type checkers; at run time each comes from _HOME
    from provisioner.integrations.nerve.cli import extend_cli  # noqa: F401
    from provisioner.integrations.nerve.engine import (  # noqa: F401
        NerveMemory,
        allow_config_keys,
        cron_job_prompt,
        doctor_lines,
        external_agent_first_action,
        external_agent_footer,
        hidden_tools,
        nerve_memory,
        nerve_router,
    )
    from provisioner.integrations.nerve.settings import nerve_settings  # noqa: F401
    from provisioner.integrations.nerve.sweeper import nerve_sweeper  # noqa: F401
    from provisioner.runtime import (  # noqa: F401
        LoomMemory,
        MemoryUnavailable,
        OperatorMustAct,
        ProvisionerRuntimeError,
        StateStore,
        StoreFault,
        Sweeper,
        TranscriptSource,
        memory_backend,
    )
    from provisioner.runtime.face import (
        NerveTranscripts,  # noqa: F401
        session_context,  # noqa: F401
    )
    from provisioner.templating.jobs import load_cron_jobs  # noqa: F401
    from provisioner.web import fastapi_router  # noqa: F401

_HOME: dict[str, str] = {
    "nerve_memory": "provisioner.integrations.nerve.engine",
    "NerveMemory": "provisioner.integrations.nerve.engine",
    "hidden_tools": "provisioner.integrations.nerve.engine",
    "nerve_router": "provisioner.integrations.nerve.engine",
    "allow_config_keys": "provisioner.integrations.nerve.engine",
    "cron_job_prompt": "provisioner.integrations.nerve.engine",
    "doctor_lines": "provisioner.integrations.nerve.engine",
    "external_agent_first_action": "provisioner.integrations.nerve.engine",
    "external_agent_footer": "provisioner.integrations.nerve.engine",
    "memory_backend": "provisioner.runtime",
    "nerve_settings": "provisioner.integrations.nerve.settings",
    "LoomMemory": "provisioner.runtime",
    "session_context": "provisioner.runtime.loom.context_block",
    "nerve_sweeper": "provisioner.integrations.nerve.sweeper",
    "Sweeper": "provisioner.runtime",
    "TranscriptSource": "provisioner.runtime",
    "NerveTranscripts": "provisioner.runtime.nerve_db.transcripts",
    "StateStore": "provisioner.runtime",
    "load_cron_jobs": "provisioner.templating.jobs",
    "extend_cli": "provisioner.integrations.nerve.cli",
    "fastapi_router": "provisioner.web",
    "ProvisionerRuntimeError": "provisioner.runtime",
    "MemoryUnavailable": "provisioner.runtime",
    "StoreFault": "provisioner.runtime",
    "OperatorMustAct": "provisioner.runtime",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
