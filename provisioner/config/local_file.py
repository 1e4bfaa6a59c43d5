"""Writes to the machine-local configuration file (``config.local.yaml``).

Two writes: memU's optional embeddings key, the only value init writes (INIT-3), and the switch
to Loom (``write_switch``: ``memory.backend: loom`` and, where the instance has none, the
gateway; ``fleet switch`` and ``memory switch``, FLEET-7, NERVE-12). The file is read, the
one key set, and the result written through a temporary name, so a failure leaves the old file
whole. YAML comments in the file do not survive the rewrite; the summary says which file was
written.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from provisioner.base.errors import UserError
from provisioner.base.files import write_atomically
from provisioner.config.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.runtime.face import faults_named

LOCAL_CONFIG_NAME = "config.local.yaml"  # CONF-1
EMBEDDINGS_KEY_PATH: tuple[str, ...] = ("openai_api_key",)  # INIT-3, NERVE-8: where Nerve reads it
if TYPE_CHECKING:
    from provisioner.config.model import Config

SECRET_FILE_MODE = 0o600  # it holds a key: readable by its owner only


class LocalConfigError(UserError, ValueError):
    """The machine-local file exists but is not a YAML mapping, so it is left alone."""


def _read_local(path: Path, unwritten: str) -> tuple[dict[Any, Any], str | None]:
    """The machine-local file's mapping (empty when the file is absent) and its text (None when
    absent). ``LocalConfigError`` — one line naming the file, ending with ``unwritten`` — when
    it is not bounded YAML holding a mapping; ``FileFault`` naming it for a machine fault."""
    try:
        with faults_named(path):
            text = read_small_text(path)
        loaded = load_bounded(text) if text is not None else None
    except (YamlLimitError, yaml.YAMLError, UnicodeDecodeError) as error:
        problem = " ".join(str(error).split())
        raise LocalConfigError(f"{path}: {problem}; {unwritten}") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise LocalConfigError(f"{path}: top level is not a mapping; {unwritten}")
    return loaded or {}, text


def store_embeddings_key(config_dir: Path, key: str) -> Path:
    """Set memU's embeddings key in ``<config_dir>/config.local.yaml``; returns the path.

    The key goes where Nerve reads it: its top-level ``openai_api_key`` (NERVE-8), which
    Nerve hands to memU for embeddings."""
    path = Path(config_dir) / LOCAL_CONFIG_NAME
    document, _text = _read_local(path, "the key was not stored")
    node = document
    for part in EMBEDDINGS_KEY_PATH[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[EMBEDDINGS_KEY_PATH[-1]] = key
    text = yaml.safe_dump(document, sort_keys=False)
    with faults_named(path):  # REL-4: a full config folder is named, not the workspace
        write_atomically(path, text.encode("utf-8"), SECRET_FILE_MODE)
    return path


def switch_advice(config: Config, backend: str, config_dir: Path) -> list[str]:
    """The line that switches an instance to ``backend`` when its configuration names another
    (FLEET-4): files worded for Loom on an instance whose configuration names memU are read by
    an instance that still uses memU, and the fix is a line of configuration, not another init.

    Empty when the configuration names ``backend``, or names no backend at all (the summary
    already says where the platform sets it).
    """
    key = "memory.backend"
    if config.memory_backend == backend or key not in config.sources or key in config.defaulted:
        return []
    named = f"{config.sources[key]} names {key}: {config.memory_backend}"
    return [
        f"{named}, so the instance keeps using {config.memory_backend} while its files are "
        f"worded for {backend}; to switch it, {switch_line(config, backend, config_dir)}"
    ]


def switch_line(config: Config, backend: str, config_dir: Path) -> str:
    """What to write where so that the instance uses ``backend`` (FLEET-4)."""
    if config.lockdown:  # CONF-3: a locked instance reads its backend from the service
        return f"set NERVE_MEMORY_BACKEND={backend} in the service's environment"
    local = Path(config_dir) / LOCAL_CONFIG_NAME
    if config.sources.get("memory.backend") == local:
        return f"change it in {local} to memory: {{backend: {backend}}}"
    return f"add to {local}: memory: {{backend: {backend}}}"


SWITCH_BACKEND = "loom"  # FLEET-7: the one backend a switch writes
BACKEND_KEY = "memory.backend"
GATEWAY_KEY = "mcp_gateway_url"


def write_switch(config_dir: Path, *, gateway_url: str | None) -> list[str]:
    """Set ``memory.backend: loom`` (and ``mcp_gateway_url`` when given) in
    ``<config_dir>/config.local.yaml``; the dotted keys that changed (empty: nothing written).

    ``LocalConfigError`` (one line, the file untouched) when the file is not a YAML mapping, or
    its ``memory`` is not one; ``FileFault`` naming the file for a fault of the machine.
    """
    path = Path(config_dir) / LOCAL_CONFIG_NAME
    document, text = _read_local(path, "the switch was not written")
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
