"""Nerve's side of the package: what a Nerve engineer calls to adopt it (NERVE-1…NERVE-6).

Each name is imported on first use, so importing this package costs nothing until Nerve asks
for a piece: ``extend_cli`` (mounting the package into Nerve's click group) needs click, and
``NerveTranscripts`` (reading Nerve's ``nerve.db`` for the sweep) only the standard library.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME: dict[str, str] = {
    "extend_cli": "provisioner.integrations.nerve.cli",
    "NerveTranscripts": "provisioner.integrations.nerve.transcripts",
}

__all__: list[str] = [
    "NerveTranscripts",
    "extend_cli",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562); AttributeError otherwise."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
