"""``nerve-provisioner fleet check|update``: many workspaces from one inventory (FLEET-1).

``check`` writes nothing and says, per workspace, what ``init`` would create, re-word, merge,
keep or leave in conflict; ``update`` does it, with init's safety, and goes on past a workspace
that fails. Progress goes to stderr on a terminal only, so ``--json`` on stdout stays a
document a pipeline reads; the exit statuses are ``provisioner.fleet.report``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from provisioner.cli.common import path_argument


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``fleet check`` and ``fleet update`` to the top-level parser."""
    from provisioner.fleet.run import DEFAULT_JOBS
    from provisioner.workspace.merge import CONFLICT_CHOICES, CONFLICT_LEAVE

    fleet = commands.add_parser("fleet", help="check or update many workspaces at once")
    actions = fleet.add_subparsers(dest="fleet_command", required=True)
    for name, helped in (
        ("check", "say which workspaces drift from what this version writes (writes nothing)"),
        ("update", "bring every workspace up to date, merging agents' edits"),
    ):
        command = actions.add_parser(name, help=helped)
        command.add_argument(
            "--inventory",
            type=path_argument,
            required=True,
            metavar="FILE",
            help="YAML or JSON list of {workspace, config_dir, memory_backend?, profile?}",
        )
        command.add_argument("--json", action="store_true", help="print the report as JSON")
        command.add_argument(
            "--jobs",
            type=int,
            default=DEFAULT_JOBS,
            metavar="N",
            help=f"workspaces handled at once (default: {DEFAULT_JOBS})",
        )
        if name == "update":
            command.add_argument(
                "--conflict",
                choices=CONFLICT_CHOICES,
                default=CONFLICT_LEAVE,
                help="leave a conflicting file as it is (default), or write diff3 markers "
                "into it for a person to resolve (inline)",
            )
        command.set_defaults(handler=_run_fleet, update=name == "update")
    from provisioner.cli.fleet_switch import register_switch

    register_switch(actions)  # FLEET-7


def _run_fleet(args: argparse.Namespace) -> int:
    from provisioner.fleet.inventory import read_inventory
    from provisioner.fleet.report import exit_status, report_json, report_text
    from provisioner.fleet.run import FleetRun
    from provisioner.workspace.merge import CONFLICT_LEAVE

    entries = read_inventory(args.inventory)
    run = FleetRun(
        update=args.update,
        conflict=getattr(args, "conflict", CONFLICT_LEAVE),
        jobs=max(1, args.jobs),
    )
    progress = _Progress(sys.stderr, "updated" if args.update else "checked")
    try:
        outcomes = run.all(entries, progress if progress.shown else None)
    finally:
        progress.end()
    if args.json:
        print(json.dumps(report_json(outcomes), indent=2))
    else:
        sys.stdout.write(report_text(outcomes, update=args.update))
    for outcome in outcomes:
        if outcome.error:
            print(
                f"nerve-provisioner: error: {outcome.entry.workspace}: {outcome.error}",
                file=sys.stderr,
            )
    return exit_status(outcomes)


class _Progress:
    """``checked 120/1000 workspaces`` rewritten in place, on a terminal only."""

    def __init__(self, stream: TextIO, verb: str) -> None:
        self.stream = stream
        self.verb = verb
        isatty = getattr(stream, "isatty", None)
        self.shown = bool(isatty and isatty())
        self._written = False

    def __call__(self, done: int, total: int) -> None:
        self.stream.write(f"\r{self.verb} {done}/{total} workspaces")
        self.stream.flush()
        self._written = True

    def end(self) -> None:
        if self._written:
            self.stream.write("\n")
            self.stream.flush()
