"""Nerve's side of the package: what a Nerve engineer calls to adopt it (NERVE-1…NERVE-11).

Each name is imported on first use, so importing this package costs nothing until Nerve asks
for a piece: ``extend_cli`` (mounting the package into Nerve's click group) needs click, and
``NerveTranscripts`` (reading Nerve's ``nerve.db`` for the sweep) only the standard library,
``nerve_settings`` (Nerve's merged settings, NERVE-8) the package's config loader, and
``nerve_sweeper`` (the sweeper built for the backend's configuration, NERVE-11) the runtime.
"""

from __future__ import annotations

from provisioner.runtime.lazy import lazy_names

_HOME: dict[str, str] = {
    "extend_cli": "provisioner.integrations.nerve.cli",
    "NerveTranscripts": "provisioner.integrations.nerve.transcripts",
    "nerve_settings": "provisioner.integrations.nerve.settings",
    "nerve_sweeper": "provisioner.integrations.nerve.sweeper",
    "NerveSweeper": "provisioner.integrations.nerve.sweeper",
}

__all__: list[str] = [
    "NerveSweeper",
    "NerveTranscripts",
    "extend_cli",
    "nerve_settings",
    "nerve_sweeper",
]


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
