"""``nerve_settings(config_dir=None)``: Nerve's merged settings as one mapping (NERVE-8).

Nerve's typed configuration object keeps only the keys Nerve knows, and its merged mapping is
private to it, so the engine wiring needs a mapping of its own to hand to
``LoomMemory.from_settings``. This reads Nerve's files the way Nerve lays them over each other
— the workspace's tracked ``config/settings.yaml``, then ``config.yaml``, then
``config.local.yaml`` of the configuration folder, each with ``${VAR}`` expanded, the last one
left out under lockdown — through the package's own loader (``provisioner.config.loader``).

The workspace is the one Nerve takes: the ``workspace`` key of the machine's own files, else
``~/nerve-workspace``; the mapping holds it as ``workspace``, as Nerve's does. The
configuration folder is found as Nerve finds it when none is given
(``provisioner.config.paths.find_folders``, NERVE-7). ``ConfigError`` (one line naming the
file and key) for files that cannot be used.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provisioner.config.loader import load_config
from provisioner.config.paths import find_folders

WORKSPACE_KEY = "workspace"  # NERVE-8: where Nerve's machine files name the workspace
DEFAULT_WORKSPACE = "~/nerve-workspace"  # NERVE-8: Nerve's default workspace


def nerve_settings(
    config_dir: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The merged settings of Nerve's files for ``config_dir`` (found as Nerve finds it when
    None), every key kept, for ``LoomMemory.from_settings`` and any other reader of Nerve's
    own keys. A fresh copy each call; ``ConfigError`` for a file that cannot be used."""
    given = Path(config_dir) if config_dir is not None else None
    folder = find_folders(given, env).config_dir
    machine = load_config(folder, None, env)
    named = machine.data.get(WORKSPACE_KEY)
    workspace = Path(named if isinstance(named, str) and named.strip() else DEFAULT_WORKSPACE)
    workspace = workspace.expanduser()
    merged = copy.deepcopy(dict(load_config(folder, workspace, env).data))
    merged[WORKSPACE_KEY] = str(workspace)
    return merged
