"""What the Memory page tests serve: the shape of the ``serve`` fixtures, and a memory backend
that answers fixed diagnostics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Serve = Callable[..., str]


class DiagnosticsSnapshot:
    """A memory backend that answers fixed diagnostics: what the card must show, as given."""

    def __init__(self, diagnostics: dict[str, Any]) -> None:
        self._diagnostics = diagnostics

    def diagnostics(self) -> dict[str, Any]:
        return self._diagnostics
