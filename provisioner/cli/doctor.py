"""`nerve doctor`: checks of configuration, workspace and, under Loom, the gateway (DOC-1).

Exit status 0 when no check is ERR, 1 when one is, 2 for bad command-line input. ``--offline``
runs only the checks that need no network; ``--json`` prints the same checks as JSON.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys

from provisioner.cli.common import (
    add_workspace_options,
    refuse_missing_folders,
    workspace_and_config_dir,
)


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``nerve doctor`` to the top-level parser."""
    doctor = commands.add_parser(
        "doctor", help="check configuration, workspace and the memory backend"
    )
    add_workspace_options(doctor)
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.add_argument(
        "--offline", action="store_true", help="make no network call (no catalog, no Loom)"
    )
    doctor.set_defaults(handler=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> int:
    from provisioner.doctor.run import run_doctor, run_doctor_offline

    refuse_missing_folders(args, workspace=False)  # FLEET-4; a missing workspace is a check
    workspace, config_dir = workspace_and_config_dir(args)
    if isinstance(sys.stdout, io.TextIOWrapper):  # a terminal that cannot show "→" gets "\u2192"
        sys.stdout.reconfigure(errors="backslashreplace")
    run = run_doctor_offline if args.offline else run_doctor
    report = run(config_dir, workspace, dict(os.environ))
    if args.json:
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(report.as_text())
    return report.exit_status
