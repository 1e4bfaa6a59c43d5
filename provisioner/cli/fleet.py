"""``nerve-provisioner fleet check|update``: many workspaces from one inventory (FLEET-1).

``check`` writes nothing and says, per workspace, what ``init`` would create, re-word, merge,
keep or leave in conflict; ``update`` does it, with init's safety, and goes on past a workspace
that fails. Progress goes to stderr on a terminal only, so ``--json`` on stdout stays a
document a pipeline reads; the exit statuses are ``provisioner.fleet.report``'s.

SIGINT and SIGTERM stop the run alike (FLEET-1, as REL-9 for the sweep): the workspaces under
way finish, the rest are not started, the report of what was done is printed, then
``interrupted`` or ``terminated`` on stderr, and the status is 130 or 143. A second signal
while the run winds down changes nothing.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from provisioner.cli.common import Progress, path_argument


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
            type=_jobs,
            default=DEFAULT_JOBS,
            metavar="N",
            help=f"workspaces handled at once (default: {DEFAULT_JOBS}; at most what the "
            "open-file limit allows)",
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


def _jobs(text: str) -> int:
    """``--jobs``: a whole number from 1 to what this process's open-file limit allows."""
    from provisioner.fleet.run import FDS_PER_JOB, jobs_allowed

    allowed = jobs_allowed()
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if not 1 <= jobs <= allowed:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a whole number from 1 to {allowed} (the open-file limit "
            f"allows {FDS_PER_JOB} descriptors to each workspace at once)"
        )
    return jobs


def _run_fleet(args: argparse.Namespace) -> int:
    from provisioner.base.command import program
    from provisioner.cli.stopping import STOP_SIGNALS
    from provisioner.config.urls import masked
    from provisioner.fleet.inventory import read_inventory
    from provisioner.fleet.report import exit_status, report_json, report_text
    from provisioner.fleet.run import FleetRun
    from provisioner.workspace.merge import CONFLICT_LEAVE

    entries = read_inventory(args.inventory)
    run = FleetRun(
        update=args.update,
        conflict=getattr(args, "conflict", CONFLICT_LEAVE),
        jobs=args.jobs,
    )
    progress = Progress(sys.stderr, "updated" if args.update else "checked")
    with _stop_signals() as received:
        try:
            outcomes = run.all(entries, progress if progress.shown else None)
        finally:
            progress.end()
    stopped = received() if run.interrupted else None
    if stopped is None and run.interrupted:
        stopped = signal.SIGINT
    name = stopped.name if stopped is not None else None
    if args.json:
        print(json.dumps(report_json(outcomes, interrupted=name), indent=2))
    else:
        sys.stdout.write(masked(report_text(outcomes, update=args.update)))
    for outcome in outcomes:
        if outcome.error:
            print(
                f"{program()}: error: {outcome.entry.workspace}: {outcome.error}",
                file=sys.stderr,
            )
    if stopped is not None:
        print(f"{program()}: {STOP_SIGNALS[stopped]}", file=sys.stderr, flush=True)
        return 128 + int(stopped)
    return exit_status(outcomes)


STOPPING = (signal.SIGINT, signal.SIGTERM)  # FLEET-1, as REL-9: both stop a run alike


@contextmanager
def _stop_signals() -> Iterator[Callable[[], signal.Signals | None]]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` once, in the main thread, for the run to
    wind down; later ones are ignored until the block ends. Yields what was received."""
    received: list[signal.Signals] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum))
        if len(received) == 1:
            raise KeyboardInterrupt

    try:
        previous = {signum: signal.signal(signum, on_signal) for signum in STOPPING}
    except ValueError:  # not the main thread: leave the signals as they are
        yield lambda: None
        return
    try:
        yield lambda: received[0] if received else None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
