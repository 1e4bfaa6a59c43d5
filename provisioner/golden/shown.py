"""How some differences are shown shorter or fuller than a plain diff (GOLD-2).

A workspace's manifest (``.nerve/provisioned.json``) records a digest of every file, so any
wording change also changes it; diffing two SHA-256 digests tells an author nothing and used
to be half the report. ``manifest_summary`` says in one line what changed in it instead. A
file rendered with no golden yet (MISSING) is shown whole, as a diff from nothing, so the
author reviews what would be frozen before accepting it.
"""

from __future__ import annotations

import json
from typing import Any

from provisioner.backends import PROFILES
from provisioner.workspace.diff import unified_diff
from provisioner.workspace.render import MANIFEST_PATH

NAMES_SHOWN = 4  # a manifest summary names this many files, then says how many more


def is_manifest(path: str) -> bool:
    """Whether ``path`` (below the golden folder) is a workspace's manifest."""
    backend, _, rest = path.partition("/")
    profile, _, inside = rest.partition("/")
    return bool(backend) and profile in PROFILES and inside == MANIFEST_PATH


def manifest_summary(golden: bytes, rendered: bytes) -> str:
    """One line saying what changed between two manifests; "" when they cannot be read.

    Digests are not shown: a changed digest only follows its file, whose own difference is
    reported beside it. An unreadable manifest gets "" so the caller falls back to the diff.
    """
    before, after = _manifest(golden), _manifest(rendered)
    if before is None or after is None:
        return ""
    files_before, files_after = before.pop("files"), after.pop("files")
    parts: list[str] = []
    changed = [p for p in files_after if p in files_before and files_after[p] != files_before[p]]
    added = [p for p in files_after if p not in files_before]
    removed = [p for p in files_before if p not in files_after]
    for label, paths in (
        ("new digest for", changed),
        ("now records", added),
        ("no longer records", removed),
    ):
        if paths:
            parts.append(f"{label} {_names(sorted(paths))}")
    other = _changed_keys(before, after)
    if other:
        parts.append(f"{_names(other)} changed")
    if not parts:
        return "manifest: same content, different bytes"
    return "manifest: " + "; ".join(parts)


def new_file_detail(path: str, content: bytes) -> str:
    """A rendered file that has no golden, shown whole as a diff from an empty golden."""
    return unified_diff(b"", content, path)


def _manifest(content: bytes) -> dict[str, Any] | None:
    try:
        loaded = json.loads(content)
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("files"), dict):
        return None
    return loaded


def _changed_keys(before: dict[str, Any], after: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ, one level into nested mappings (``answers.timezone``)."""
    keys: list[str] = []
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if not prefix and isinstance(old, dict) and isinstance(new, dict):
            keys += _changed_keys(old, new, f"{key}.")
        else:
            keys.append(prefix + key)
    return keys


def _names(paths: list[str]) -> str:
    if len(paths) <= NAMES_SHOWN:
        return ", ".join(paths)
    return f"{', '.join(paths[:NAMES_SHOWN])} and {len(paths) - NAMES_SHOWN} more"
