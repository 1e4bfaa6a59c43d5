"""The fleet's inventory: which workspaces, with which configuration (FLEET-1).

A YAML or JSON file holding a list of mappings, one per workspace:

    - workspace: instances/orbit/workspace      # required
      config_dir: instances/orbit/config        # required
      memory_backend: loom                      # optional, as init's --memory-backend
      profile: worker                           # optional, as init's --profile

Relative paths are relative to the inventory file's folder, so an inventory moves with the
folders it names. An inventory that is not such a list is refused as a whole, before any
workspace is read, with one line naming the entry, what is wrong and what is expected: a run
that skipped a misspelt entry would report a fleet up to date that is not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.errors import UserError

REQUIRED_KEYS = ("workspace", "config_dir")  # FLEET-1
OPTIONAL_KEYS = ("memory_backend", "profile")  # FLEET-1: override what the config names
ENTRY_EXPECTED = (
    "a mapping with workspace and config_dir (paths), optional memory_backend "
    f"({', '.join(BACKEND_NAMES)}) and profile ({', '.join(PROFILES)})"
)


class InventoryError(UserError, ValueError):
    """An inventory the fleet cannot use; one line naming the entry (exit status 2)."""


@dataclass(frozen=True)
class Entry:
    """One workspace of the inventory: the path as given, and the paths it resolves to."""

    workspace: str
    workspace_path: Path
    config_dir: Path
    memory_backend: str | None = None
    profile: str | None = None


def read_inventory(path: Path, *, extra_keys: tuple[str, ...] = ()) -> list[Entry]:
    """The inventory's entries, in order; raises ``InventoryError`` for anything else.

    ``extra_keys`` are keys a command reads of each entry itself (``fleet switch``, FLEET-7):
    they pass the check for unknown keys and are left to that command."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(f"{path}: no such inventory file; expected {_LIST}") from None
    except UnicodeDecodeError:
        raise InventoryError(f"{path}: not UTF-8 text; expected {_LIST}") from None
    document = _parse(path, text)
    if not isinstance(document, list) or not document:
        raise InventoryError(f"{path}: not a list of workspaces; expected {_LIST}")
    entries: list[Entry] = []
    seen: dict[Path, int] = {}
    for number, item in enumerate(document, start=1):
        entry = _entry(path, number, item, extra_keys)
        where = entry.workspace_path.resolve()
        if where in seen:
            raise InventoryError(
                f"{path}: entry {number} ({entry.workspace}): the same workspace as entry "
                f"{seen[where]}; expected each workspace once"
            )
        seen[where] = number
        entries.append(entry)
    return entries


_LIST = f"a YAML or JSON list of workspaces, each {ENTRY_EXPECTED}"


def _parse(path: Path, text: str) -> Any:
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except ValueError as error:
            raise InventoryError(f"{path}: not JSON ({error}); expected {_LIST}") from None
    import yaml  # deferred: only the fleet reads YAML inventories

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InventoryError(f"{path}: not YAML{where}; expected {_LIST}") from None


def _entry(path: Path, number: int, item: Any, extra_keys: tuple[str, ...] = ()) -> Entry:
    def refuse(problem: str) -> InventoryError:
        named = item.get("workspace") if isinstance(item, dict) else None
        label = f" ({named})" if isinstance(named, str) and named else ""
        return InventoryError(
            f"{path}: entry {number}{label}: {problem}; expected {ENTRY_EXPECTED}"
        )

    if not isinstance(item, dict):
        raise refuse(f"is {type(item).__name__}, not a mapping")
    unknown = sorted(
        str(key) for key in item if key not in (*REQUIRED_KEYS, *OPTIONAL_KEYS, *extra_keys)
    )
    if unknown:
        raise refuse(f"unknown key {', '.join(unknown)}")
    for key in REQUIRED_KEYS:
        if key not in item:
            raise refuse(f"{key} is missing")
        if not isinstance(item[key], str) or not item[key].strip():
            raise refuse(f"{key} is not a path")
    backend = item.get("memory_backend")
    if backend is not None and backend not in BACKEND_NAMES:
        raise refuse(f"memory_backend {backend!r} is not a memory backend")
    profile = item.get("profile")
    if profile is not None and profile not in PROFILES:
        raise refuse(f"profile {profile!r} is not a profile")
    folder = path.parent
    return Entry(
        workspace=item["workspace"],
        workspace_path=folder / item["workspace"],
        config_dir=folder / item["config_dir"],
        memory_backend=backend,
        profile=profile,
    )
