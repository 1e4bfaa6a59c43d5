"""Every exception class the package defines, found by importing each of its modules."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from tests.support.repo import REPO_ROOT

PACKAGE = REPO_ROOT / "provisioner"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def defined_exceptions(*under: str) -> list[type[BaseException]]:
    """Each exception class defined in a module of the package (or of the packages ``under``
    names, when given), judged where it is defined: imported names are not counted twice."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = _module_name(path)
        if name == "provisioner.__main__":  # runs the command line when imported
            continue
        if under and not any(name == top or name.startswith(f"{top}.") for top in under):
            continue
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                found.append(value)
    return found
