"""``nerve memory switch [--gateway URL]``: one instance's configuration switched to Loom, in the
file its configuration is read from (NERVE-12, FLEET-7).

The configuration folder is the one Nerve reads (``--config-dir``, ``$NERVE_CONFIG_DIR``, the
current folder, Nerve's pointer file in ``$NERVE_HOME``, ``~/.nerve``), so an instance Nerve's
own init set up is switched where Nerve looks, not in a folder of the same name that nothing
reads. ``memory.backend: loom`` goes into its ``config.local.yaml``, and ``mcp_gateway_url``
from ``--gateway`` where the instance has none (its own is never replaced). A locked instance
reads its backend from the service's environment: nothing is written, the line says what the
platform sets, exit 1. The workspace is not re-worded here (``init --memory-backend loom``),
nor are memories migrated (``memory migrate``): each step stays its own command.
"""

from __future__ import annotations

import argparse
import json

from provisioner.cli.common import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    UsageError,
    add_workspace_options,
    gateway_url_argument,
    refuse_missing_folders,
    workspace_and_config_dir,
)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``switch`` to ``nerve memory``."""
    switch = commands.add_parser(
        "switch", help="switch this instance's configuration to Loom, where it is read"
    )
    add_workspace_options(switch)
    switch.add_argument(
        "--gateway",
        type=gateway_url_argument,
        default=None,
        metavar="URL",
        help="the MCP gateway's base URL, written as mcp_gateway_url where the instance has none",
    )
    switch.add_argument("--json", action="store_true", help="print the outcome as JSON")
    switch.set_defaults(handler=_run_switch)


def _run_switch(args: argparse.Namespace) -> int:
    from provisioner.config.loader import load_config
    from provisioner.config.local_file import (
        LOCAL_CONFIG_NAME,
        SWITCH_BACKEND,
        switch_line,
        write_switch,
    )
    from provisioner.config.urls import masked

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    config = load_config(config_dir, workspace)
    target = config_dir / LOCAL_CONFIG_NAME
    if config.lockdown:  # CONF-3: the service's environment decides the backend
        line = switch_line(config, SWITCH_BACKEND, config_dir)
        return _report(
            args.json,
            EXIT_DIFFERENCE,
            f"locked: the platform switches it; {line}",
            file=str(target),
            written=[],
            locked=True,
        )
    gateway = None
    if not config.mcp_gateway_url:
        if args.gateway is None:
            raise UsageError(
                f"{config_dir}: no mcp_gateway_url, and no --gateway given; expected the "
                "gateway the instance reaches Loom through"
            )
        gateway = args.gateway
    written = write_switch(config_dir, gateway_url=gateway)
    config = load_config(config_dir, workspace)
    if config.memory_backend != SWITCH_BACKEND:
        where = config.source_of("memory.backend") or "the configuration"
        raise UsageError(
            f"{where}: memory.backend is still {config.memory_backend!r} after the switch was "
            f"written to {target}; expected {LOCAL_CONFIG_NAME} to decide it"
        )
    if written:
        said = f"switched to loom: {', '.join(written)} written in {target}"
    else:
        said = f"already switched: {target} names loom"
    gateway_said = masked(config.mcp_gateway_url or "")
    return _report(
        args.json,
        EXIT_OK,
        f"{said}; gateway {gateway_said}",
        file=str(target),
        written=written,
        locked=False,
    )


def _report(as_json: bool, status: int, line: str, **fields: object) -> int:
    if as_json:
        print(json.dumps({"schema": 1, **fields, "line": line, "exit_status": status}))
    else:
        print(line, flush=True)
    return status
