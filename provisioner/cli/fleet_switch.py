"""``nerve-provisioner fleet switch --to loom``: every instance of an inventory moved from memU
to Loom in one process (FLEET-7, FLEET-8, FLEET-9).

The work is ``provisioner.fleet.switch``'s; this module reads the flags, runs it on one event
loop (SIGINT or SIGTERM stop it with every record standing, REL-9), shows a progress line on
stderr when stderr is a terminal, and prints the report (``--json``: one document on stdout)
with ``provisioner.fleet.switch_report``'s exit status.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from provisioner.cli.common import Progress, gateway_url_argument, path_argument

SWITCH_TARGETS = ("loom",)  # FLEET-7: the backend a fleet switches to


def register_switch(actions: argparse._SubParsersAction) -> None:
    """Add ``switch`` to ``nerve-provisioner fleet``."""
    from provisioner.fleet.switch import DEFAULT_SWITCH_JOBS

    switch = actions.add_parser(
        "switch",
        help="switch every instance to Loom: config, wording, memories and conversations",
    )
    switch.add_argument(
        "--inventory",
        type=path_argument,
        required=True,
        metavar="FILE",
        help="YAML or JSON list of {workspace, config_dir, memory_backend?, profile?, "
        "nerve_home?, nerve_db?, memu_db?, state?}",
    )
    switch.add_argument("--to", choices=SWITCH_TARGETS, required=True, help="the new backend")
    switch.add_argument(
        "--gateway",
        type=gateway_url_argument,
        default=None,
        metavar="URL",
        help="mcp_gateway_url for instances whose configuration names none",
    )
    switch.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_SWITCH_JOBS,
        metavar="N",
        help=f"instances switched at once (default: {DEFAULT_SWITCH_JOBS})",
    )
    switch.add_argument("--json", action="store_true", help="print the report as JSON")
    switch.set_defaults(handler=_run_switch)


def _run_switch(args: argparse.Namespace) -> int:
    import os

    from provisioner.cli.stopping import run_stoppable
    from provisioner.fleet.switch import FleetSwitch, Steps
    from provisioner.fleet.switch_inventory import read_switch_inventory
    from provisioner.fleet.switch_report import exit_status, report_json, report_text

    instances = read_switch_inventory(args.inventory)
    switch = FleetSwitch(
        gateway=args.gateway,
        jobs=max(1, args.jobs),
        env=dict(os.environ),
        steps=Steps.from_env(os.environ),
    )
    progress = Progress(sys.stderr, "switched", "instances")

    async def work(stop: Any) -> int:
        try:
            outcomes = await switch.all(instances, progress if progress.shown else None)
        finally:
            progress.end()
        if args.json:
            print(json.dumps(report_json(outcomes), indent=2))
        else:
            sys.stdout.write(report_text(outcomes))
        for outcome in outcomes:
            if outcome.status == "error":
                print(
                    f"nerve-provisioner: error: {outcome.instance.name}: {outcome.error}",
                    file=sys.stderr,
                )
        return exit_status(outcomes)

    return run_stoppable(work)
