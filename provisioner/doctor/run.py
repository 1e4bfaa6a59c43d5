"""``nerve doctor``: what a person needs to know about one Nerve instance's memory (DOC-1).

Each check is one ``Check``: an id such as ``config.files`` or ``loom.catalog``, a status
(``OK``, ``WARN`` or ``ERR``), a one-line message and, for every WARN and ERR, one line of what
to do about it (``provisioner.doctor.check``). The checks come from the modules of this
package, one job each:

* ``config``: which configuration files were read, and where each memory value came
  from (a layer, or the ``${VAR}`` a layer names);
* ``workspace``: the workspace's recorded profile and wording, and its files;
* ``memory``: the backend's own checks that need no network (memU's store and key;
  Loom's gateway URL, dashboard link and the sweep's state);
* ``migration``: how far ``nerve memory migrate`` got, from its ledger;
* ``network``: under Loom, the catalog and the health probe, run concurrently, each
  within its deadline.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from provisioner.doctor.check import Check, Report


def local_checks(
    config_dir: Path, workspace: Path, env: Mapping[str, str]
) -> tuple[list[Check], Any]:
    """Every check that needs no network, and the loaded ``Config`` (None if it did not load).

    Never raises for a bad configuration or workspace: those are ERR checks.
    """
    from provisioner.doctor import config as doctor_config
    from provisioner.doctor import drift as doctor_drift
    from provisioner.doctor import memory as doctor_memory
    from provisioner.doctor import migration as doctor_migration
    from provisioner.doctor import workspace as doctor_workspace

    config, checks = doctor_config.config_checks(config_dir, workspace, env)
    checks += doctor_workspace.workspace_checks(workspace, config_dir, config)
    if config is not None:
        checks += doctor_drift.drift_checks(workspace, config_dir, env)
    if config is not None:
        checks += doctor_memory.memory_checks(config, workspace, config_dir)
        checks += doctor_migration.migration_checks(config_dir)
    return checks, config


async def network_checks(config: Any) -> list[Check]:
    """Under Loom with a gateway URL, the catalog and health checks, run concurrently."""
    from provisioner.doctor import network as doctor_network

    return await doctor_network.network_checks(config)


def run_doctor(config_dir: Path, workspace: Path, env: Mapping[str, str] | None = None) -> Report:
    """Every check, the network ones included (``run_doctor_offline`` leaves them out)."""
    checks, config = local_checks(config_dir, workspace, os.environ if env is None else env)
    if config is not None:
        checks += asyncio.run(network_checks(config))
    return Report(tuple(checks))


def run_doctor_offline(
    config_dir: Path, workspace: Path, env: Mapping[str, str] | None = None
) -> Report:
    """The checks that need no network: nothing is sent anywhere (DOC-1 ``--offline``)."""
    checks, _config = local_checks(config_dir, workspace, os.environ if env is None else env)
    return Report(tuple(checks))
