"""Public names imported on first use (PEP 562), for a package's ``__init__``.

The runtime and the Nerve integration each promise that importing the package costs nothing
until a name is asked for (no HTTP client, no click): ``lazy_names`` gives such a package its
``__getattr__`` and ``__dir__`` from one mapping of each name to the module that defines it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str, homes: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name of ``homes`` is imported from its
    module when first asked for and kept in ``namespace`` (the package's globals), so the
    next use is a plain lookup; any other name is an ``AttributeError``."""

    def getattr_(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *homes})

    return getattr_, dir_
