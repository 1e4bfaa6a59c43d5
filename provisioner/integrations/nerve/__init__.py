"""Nerve's side of the package: what a Nerve engineer calls to adopt it (NERVE-1…NERVE-6).

Each name is imported on first use, so importing this package costs nothing until Nerve asks
for a piece: ``extend_cli`` (mounting the package into Nerve's click group) needs click, and
``NerveTranscripts`` (reading Nerve's ``nerve.db`` for the sweep) only the standard library.
"""

from __future__ import annotations

from provisioner.runtime.lazy import lazy_names

_HOME: dict[str, str] = {
    "extend_cli": "provisioner.integrations.nerve.cli",
    "NerveTranscripts": "provisioner.integrations.nerve.transcripts",
}

__all__: list[str] = [
    "NerveTranscripts",
    "extend_cli",
]


__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
