"""The switch written where an instance's configuration is read (FLEET-7).

Nerve reads ``config.local.yaml`` last of its layers (CONF-1), so the switch goes there:
``memory.backend: loom``, and ``mcp_gateway_url`` when the instance has none of its own (an
instance's own gateway is never replaced). The file is read, the keys set, every other key
kept, and the result written through a temporary name (a failure or a kill leaves the old file
whole); a file already saying both is not written at all. A locked instance (CONF-3) reads no
machine-local file: writing one would change nothing, so the caller reports it as the
platform's to switch, with ``switch_line``'s words, and writes nothing.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from provisioner.config.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.config.loader import LOCAL_FILE
from provisioner.config.local_file import SECRET_FILE_MODE, LocalConfigError
from provisioner.files import write_atomically
from provisioner.runtime.sqlite_file import faults_named

SWITCH_BACKEND = "loom"  # FLEET-7: the one backend a fleet switches to
BACKEND_KEY = "memory.backend"
GATEWAY_KEY = "mcp_gateway_url"


def write_switch(config_dir: Path, *, gateway_url: str | None) -> list[str]:
    """Set ``memory.backend: loom`` (and ``mcp_gateway_url`` when given) in
    ``<config_dir>/config.local.yaml``; the dotted keys that changed (empty: nothing written).

    ``LocalConfigError`` (one line, the file untouched) when the file is not a YAML mapping, or
    its ``memory`` is not one; ``FileFault`` naming the file for a fault of the machine.
    """
    path = Path(config_dir) / LOCAL_FILE
    try:
        with faults_named(path):
            text = read_small_text(path)
        loaded = load_bounded(text) if text is not None else None
    except (YamlLimitError, yaml.YAMLError, UnicodeDecodeError) as error:
        problem = " ".join(str(error).split())
        raise LocalConfigError(f"{path}: {problem}; the switch was not written") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise LocalConfigError(f"{path}: top level is not a mapping; the switch was not written")
    document: dict[Any, Any] = loaded or {}
    memory = document.setdefault("memory", {})
    if memory is None:
        memory = document["memory"] = {}
    if not isinstance(memory, dict):
        raise LocalConfigError(f"{path}: memory is not a mapping; the switch was not written")
    changed = []
    if memory.get("backend") != SWITCH_BACKEND:
        memory["backend"] = SWITCH_BACKEND
        changed.append(BACKEND_KEY)
    if gateway_url is not None and document.get(GATEWAY_KEY) != gateway_url:
        document[GATEWAY_KEY] = gateway_url
        changed.append(GATEWAY_KEY)
    if not changed:
        return []
    mode = stat.S_IMODE(path.stat().st_mode) if text is not None else SECRET_FILE_MODE
    content = yaml.safe_dump(document, sort_keys=False).encode("utf-8")
    with faults_named(path):  # REL-4: a full or read-only config folder is named
        write_atomically(path, content, mode)
    return changed
