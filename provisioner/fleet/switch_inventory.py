"""The inventory of ``fleet switch``: ``fleet update``'s entries and where each keeps its
memory (FLEET-7).

An entry is FLEET-1's (``workspace``, ``config_dir``, optional ``memory_backend`` and
``profile``, read by ``provisioner.fleet.inventory``) plus, optionally:

    nerve_home: orbit/nerve        # Nerve's state folder: nerve.db, memu.sqlite, memory/state
    nerve_db: orbit/nerve/nerve.db # each of these three overrides what nerve_home gives
    memu_db: orbit/memu.sqlite
    state: orbit/memory/state.sqlite3

Relative paths are relative to the inventory's folder, as FLEET-1's are. Without
``nerve_home``, the state file is ``<config_dir>/memory/state.sqlite3`` and memU's store what
``memory migrate`` would read (``memory.sqlite_dsn``, else ``<config_dir>/memu.sqlite``);
without ``nerve_home`` or ``nerve_db`` there is no conversation to sweep. A value that is not a
path refuses the whole inventory with one line (exit status 2), as FLEET-1's checks do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.config.paths import MEMORY_DIR, NERVE_DB_FILE, STATE_FILE
from provisioner.fleet.inventory import Entry, InventoryError, read_inventory

SWITCH_KEYS = ("nerve_home", "nerve_db", "memu_db", "state")  # FLEET-7
MEMU_DB_FILE = "memu.sqlite"  # NERVE-7: memU's store under Nerve's state folder


@dataclass(frozen=True)
class SwitchEntry:
    """One instance to switch: its FLEET-1 entry and the files of its memory.

    ``memu_db`` and ``nerve_db`` are None when the inventory names neither them nor a
    ``nerve_home`` (memU's store is then found from the configuration, and nothing is swept).
    """

    entry: Entry
    state: Path
    memu_db: Path | None
    nerve_db: Path | None

    @property
    def name(self) -> str:
        """The workspace as the inventory gives it: how reports name the instance."""
        return self.entry.workspace


def read_switch_inventory(path: Path) -> list[SwitchEntry]:
    """The instances of ``path``, in order; ``InventoryError`` (one line) for a bad one."""
    entries = read_inventory(path, extra_keys=SWITCH_KEYS)
    items = _items(path)
    folder = path.parent
    found: list[SwitchEntry] = []
    for number, (entry, item) in enumerate(zip(entries, items, strict=True), start=1):
        given = {key: _path_of(path, number, entry, item, key) for key in SWITCH_KEYS}
        home = folder / given["nerve_home"] if given["nerve_home"] else None
        state = _either(folder, given["state"], home / MEMORY_DIR / STATE_FILE if home else None)
        found.append(
            SwitchEntry(
                entry=entry,
                state=state or entry.config_dir / MEMORY_DIR / STATE_FILE,
                memu_db=_either(folder, given["memu_db"], home / MEMU_DB_FILE if home else None),
                nerve_db=_either(folder, given["nerve_db"], home / NERVE_DB_FILE if home else None),
            )
        )
    return found


def _items(path: Path) -> list[dict[str, Any]]:
    """The inventory's mappings, read again for the keys FLEET-1's reader leaves to us; the
    file was just read and checked whole, so it parses."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return list(json.loads(text))
    import yaml  # deferred: only the fleet reads YAML inventories

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return list(yaml.load(text, Loader=loader))


def _path_of(path: Path, number: int, entry: Entry, item: dict[str, Any], key: str) -> str | None:
    value = item.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InventoryError(
            f"{path}: entry {number} ({entry.workspace}): {key} is not a path; expected "
            f"optional {', '.join(SWITCH_KEYS)} as paths relative to the inventory's folder"
        )
    return value


def _either(folder: Path, given: str | None, otherwise: Path | None) -> Path | None:
    return folder / given if given else otherwise
