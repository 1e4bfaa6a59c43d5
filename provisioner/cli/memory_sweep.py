"""`nerve memory sweep`: new transcript messages extracted into Loom.

Where the databases live: both are machine state, kept in the configuration folder and never
in the workspace (the workspace is the agent's to edit, and the state decides what is sent to
Loom and what is skipped):

* transcripts: ``<config-dir>/memory/transcripts.sqlite3`` (``--transcripts PATH``);
* sweep state (watermarks, batch budget, isolation, audit log, frozen recalls):
  ``<config-dir>/memory/state.sqlite3`` (``--state PATH``).

``sweep`` runs one sweep (``--once``, the default) or one every DURATION (``--every 5m``) until
interrupted; ``--nerve-db PATH`` reads Nerve's own ``nerve.db`` (read only, NERVE-2) instead of
the transcripts database. It prints one report line a sweep (``--json``: one object), whose
words say why it stopped, and tells a monitor the truth by its exit status (SWEEP-13):

* 0 (``EXIT_OK``): every window due went through, or none was due; also when another sweep of
  the same state file holds the lock, since that one is sweeping these windows and reports on
  them itself;
* 1 (``EXIT_INCOMPLETE``): the gateway answered but batches did not go through (not now, a 5xx
  or 429, a fault, a broken answer), or a window could not be read from the transcripts;
* 75 (``EXIT_TRY_LATER``): memory could not be reached at all (no gateway URL, the gateway not
  reached or not answering, no catalog or none listing ``loom``, a policy refusal, the breaker
  open): nothing to fix in the sweep, try again later;
* the state or the transcripts could not be used (REL-2, REL-4): the line names the file and
  the cause, and the status is the fault's — 75 busy or full (try again later), 73 read-only
  or permission denied, 74 an I/O error, 2 a damaged file; every watermark stays where the
  last batch Loom took left it;
* 2: bad input, one line. With ``--every`` each report carries its own ``exit_status``, and an
  interrupt ends the process with 130 as for every command, SIGTERM with 143, each after a
  line saying so (REL-9); nothing is lost, since every batch is recorded in its own
  transaction.

``--backfill all|since:DATE`` first moves watermarks back over the history left to memU after a
switch, and the sweep sends it; ``--plan`` prints what a sweep would send now, sending and
writing nothing (MIG-2, docs/backfill.md).

While a batch is out, progress goes to stderr (``provisioner.cli.sweep_progress``), so a hung
Loom never looks like a frozen sweep.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.base.counts import counted
from provisioner.cli.common import (
    EXIT_INCOMPLETE,
    EXIT_OK,
    UsageError,
    refuse_missing_folders,
    workspace_and_config_dir,
)
from provisioner.cli.memory_files import add_path_options
from provisioner.cli.sweep_progress import ProgressPrinter, sweep_with_progress
from provisioner.config.paths import default_paths, found_nerve_db
from provisioner.runtime.errors import EXIT_TRY_LATER

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from provisioner.cli.stopping import StopSignals
    from provisioner.runtime.sweep.outcomes import SweepReport

DURATION = re.compile(r"(?P<amount>\d+)(?P<unit>[smh]?)")
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
EVERY_MIN_S = 1  # our choice: a shorter period would only spin on an empty window
KINDS_SHOWN = 3  # our choice: error kinds named in the report's line before "…"


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``sweep`` to ``nerve memory``."""
    sweep = commands.add_parser("sweep", help="extract new transcript messages into Loom")
    when = sweep.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="sweep once (the default)")
    when.add_argument(
        "--every",
        type=_duration,
        metavar="DURATION",
        help="sweep again every DURATION until interrupted, e.g. 30s, 5m, 1h",
    )
    add_path_options(sweep, state=True)
    sweep.add_argument(
        "--nerve-db",
        type=Path,
        metavar="PATH",
        help="sweep from Nerve's own nerve.db instead of the transcripts database (NERVE-2; "
        "default: $NERVE_HOME/nerve.db once a Nerve configuration is found, NERVE-7)",
    )
    sweep.add_argument("--json", action="store_true", help="print each report as JSON")
    sweep.add_argument(
        "--backfill",
        type=_backfill_scope,
        metavar="all|since:DATE",
        help="first send the history left to memU after the switch: all of it, or from DATE on",
    )
    sweep.add_argument(
        "--plan", action="store_true", help="print what a sweep would send now; send nothing"
    )
    sweep.set_defaults(handler=_run_sweep)


def _backfill_scope(text: str) -> Any:
    """``all`` or ``since:DATE`` (MIG-2); argparse reports the one-line error as usage."""
    from provisioner.runtime.sweep.backfill import parse_backfill

    try:
        return parse_backfill(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--backfill ")) from None


def _duration(text: str) -> float:
    """``30``, ``30s``, ``5m`` or ``2h`` in seconds; argparse reports a ValueError as usage."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30s, 5m or 1h")
    seconds = int(match["amount"]) * DURATION_UNITS[match["unit"]]
    if seconds < EVERY_MIN_S:
        raise argparse.ArgumentTypeError(f"{text!r}: the period must be at least {EVERY_MIN_S} s")
    return float(seconds)


# --- sweep ----------------------------------------------------------------------------------


def _run_sweep(args: argparse.Namespace) -> int:
    from provisioner.config.loader import load_config

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    config = load_config(config_dir, workspace)
    transcripts_path, state_path = default_paths(config_dir)
    paths = (args.transcripts or transcripts_path, args.state or state_path)
    if args.nerve_db is None and args.transcripts is None:
        args.nerve_db = found_nerve_db(config_dir)  # NERVE-7: Nerve's own, once it is found
    if args.nerve_db is not None:
        if args.transcripts is not None:
            raise UsageError("--nerve-db and --transcripts name two sources to sweep; give one")
        paths = (args.nerve_db, paths[1])
    from_nerve = args.nerve_db is not None
    if args.plan:  # under memU too: what a switch would send
        if args.every is not None:
            raise UsageError("--plan prints what one sweep would send; it cannot go with --every")
        return _plan(config, paths, from_nerve=from_nerve, scope=args.backfill, as_json=args.json)
    if config.memory_backend != "loom":
        where = config.source_of("memory.backend")
        raise UsageError(
            f"{where or 'configuration'}: memory.backend is {config.memory_backend!r}; "
            "the sweep extracts into Loom only (memory.backend: loom)"
        )
    options = {"every_s": args.every, "as_json": args.json, "scope": args.backfill}
    from provisioner.cli.stopping import run_stoppable

    return run_stoppable(
        lambda stop: _stopped_with_a_line(
            _sweep(config, paths, from_nerve=from_nerve, **options), stop, as_json=args.json
        )
    )


async def _stopped_with_a_line(
    sweeping: Awaitable[int], stop: StopSignals, *, as_json: bool
) -> int:
    """``sweeping``'s status; on SIGINT or SIGTERM (REL-9) one line saying so first: on stderr
    (stdout keeps the reports of sweeps that ran to their end), or with ``--json`` one object
    on stdout, carrying the signal's exit status.

    The sweep under way is cancelled: every batch Loom answered is already recorded, each in
    its own transaction, and the next sweep goes on from there.
    """
    try:
        return await sweeping
    except asyncio.CancelledError:
        reason = (
            f"stopped by {stop.name}; what Loom took is kept, the next sweep goes on from there"
        )
        if as_json:
            line = {"stopped": "interrupted", "reason": reason, "exit_status": stop.exit_status}
            print(json.dumps(line), flush=True)
        else:
            print(f"sweep interrupted: {reason}", file=sys.stderr, flush=True)
        raise


async def _sweep(
    config: Any,
    paths: tuple[Path, Path],
    *,
    every_s: float | None,
    as_json: bool,
    from_nerve: bool = False,
    scope: Any = None,
) -> int:
    """Sweep once, or every ``every_s`` until interrupted; the exit status of the last sweep.
    A backfill ``scope`` moves the watermarks first, once (75 when another sweep runs)."""
    from provisioner.cli.memory_files import open_state, open_transcripts
    from provisioner.runtime.budget import extraction_mode
    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.sweep.source import sweep_source
    from provisioner.runtime.sweep.sweeper import Sweeper

    transcripts_path, state_path = paths
    source = _nerve_db(transcripts_path) if from_nerve else open_transcripts(transcripts_path)
    gateway_url = config.mcp_gateway_url or None
    with source, open_state(state_path) as state:
        if scope is not None and not _backfill(source, state, scope, as_json=as_json):
            return EXIT_TRY_LATER
        async with LoomMemory.from_config(config, state=state) as memory:
            mode = extraction_mode(config.loom.defer_extraction)
            view = sweep_source(source, state, time.time)  # MIG-2: after memU, backfills
            sweeper = Sweeper(memory, view, state, mode=mode, concurrency=memory.sweep_concurrency)
            while True:
                report = await sweep_with_progress(sweeper, ProgressPrinter(sys.stderr))
                status = print_report(report, gateway_url, as_json=as_json)
                if every_s is None:
                    return status
                await asyncio.sleep(every_s)


def _backfill(source: Any, state: Any, scope: Any, *, as_json: bool) -> bool:
    """Move the watermarks back for ``scope`` (MIG-2) and say how many; False when another
    sweep holds the lock and nothing moved. Sessions the source cannot give are named."""
    from provisioner.runtime.sweep.backfill import BackfillBusy, backfill_line, run_backfill

    try:
        moves, errors = run_backfill(source, state, scope, now=time.time())
    except BackfillBusy as busy:
        print(f"backfill {scope.text}: {busy}; try again later", file=sys.stderr, flush=True)
        return False
    line = backfill_line(scope, moves, errors)
    print(line, file=sys.stderr if as_json else sys.stdout, flush=True)
    return True


def _plan(
    config: Any, paths: tuple[Path, Path], *, from_nerve: bool, scope: Any, as_json: bool
) -> int:
    """Print what a sweep would send now (MIG-2); 1 when a session could not be read. Nothing
    is sent or written: the state is opened read only; no transcripts database is bad input."""
    from provisioner.cli.memory_files import open_transcripts
    from provisioner.runtime.budget import extraction_mode
    from provisioner.runtime.sweep.plan import StateUnreadable, plan_from_file

    transcripts_path, state_path = paths
    if not (from_nerve or transcripts_path.exists()):
        raise UsageError(f"{transcripts_path}: no transcripts to plan from; give --nerve-db PATH")
    source = _nerve_db(transcripts_path) if from_nerve else open_transcripts(transcripts_path)
    mode = extraction_mode(config.loom.defer_extraction)
    with source:
        try:
            plan = plan_from_file(source, state_path, mode=mode, scope=scope)
        except StateUnreadable as error:
            raise UsageError(str(error)) from None
    print(json.dumps(plan.as_dict()) if as_json else "\n".join(plan.lines()), flush=True)
    return EXIT_INCOMPLETE if plan.errors else EXIT_OK


def _nerve_db(path: Path) -> Any:
    """Nerve's ``nerve.db``, read only (NERVE-2); a file that is not it is one line, exit 2."""
    from provisioner.runtime.nerve_db.transcripts import NerveDatabaseError, NerveTranscripts

    try:
        return NerveTranscripts(path)
    except NerveDatabaseError as error:
        raise UsageError(str(error)) from None


# --- the report -----------------------------------------------------------------------------


def exit_status(report: SweepReport) -> int:
    """The exit status ``report`` tells a monitor (SWEEP-13); see the module's docstring. A
    file that could not be used ends with its fault's status (REL-2, REL-4): 75 busy or full,
    73 read-only or permission, 74 I/O, 2 damaged."""
    from provisioner.runtime.errors import EXIT_STATUS_OF_KIND
    from provisioner.runtime.sweep.outcomes import STOPPED_BUSY, UNREACHED_STOPS

    if report.fault_kind in EXIT_STATUS_OF_KIND:
        return EXIT_STATUS_OF_KIND[report.fault_kind]
    if report.stopped == STOPPED_BUSY:
        return EXIT_OK
    if report.stopped in UNREACHED_STOPS:
        return EXIT_TRY_LATER
    return EXIT_OK if report.went_through else EXIT_INCOMPLETE


def why_it_stopped(report: SweepReport, gateway_url: str | None) -> str:
    """Why the sweep ended as it did, in a few words: the one line's reason (SWEEP-13). Batches
    never sent are not counted; error kinds are named, never an error's or a message's text."""
    from provisioner.runtime.sweep.outcomes import STOPPED_BUSY, STOPPED_DONE, UNREACHED_STOPS

    if report.stopped == STOPPED_BUSY:
        return "another sweep of this state file is running and sweeps these windows"
    if report.stopped in UNREACHED_STOPS:
        return f"gateway {gateway_url}: {report.reason}" if gateway_url else report.reason
    if report.stopped != STOPPED_DONE:
        return report.reason or report.stopped
    if report.went_through:
        return "every window due went through" if report.batches_sent else "no window was due"
    kinds = list(dict.fromkeys(error["kind"] for error in report.errors))
    named = ", ".join(kinds[:KINDS_SHOWN]) + (", …" if len(kinds) > KINDS_SHOWN else "")
    if report.batches_failed:
        sent = counted(report.batches_sent, "batch")
        what = f"{report.batches_failed} of {sent} did not go through"
    else:
        what = f"{counted(report.windows_stopped, 'window')} could not go"
    return f"{what} ({named})" if named else what


def print_report(report: SweepReport, gateway_url: str | None, *, as_json: bool) -> int:
    """Print ``report`` as one line (and its errors) or one JSON object; its exit status."""
    status = exit_status(report)
    why = why_it_stopped(report, gateway_url)
    if as_json:
        print(json.dumps({**report.as_dict(), "reason": why, "exit_status": status}), flush=True)
        return status
    from provisioner.runtime.sweep.outcomes import STOPPED_BUSY, STOPPED_DONE
    from provisioner.runtime.transcripts import shown_session_id

    if report.stopped == STOPPED_BUSY:  # SWEEP-11: another sweep holds the lock
        print(f"sweep already_running: {why}; this one sent nothing", flush=True)
        return status
    budget = f"{report.budget_messages} messages / {report.budget_bytes // 1024} KiB"
    if report.budget_cut_reason:
        budget += f" (cut: {report.budget_cut_reason})"
    counts = (
        f"{report.sessions_swept} of {counted(report.sessions_seen, 'session')}, "
        f"{counted(report.batches_sent, 'batch')} sent, "
        f"{counted(report.messages_taken, 'message')} taken, "
        f"{report.messages_skipped} skipped, {report.messages_cut} cut"
    )
    if report.budget_messages:  # none read from a state that could not be used (REL-2)
        counts += f"; budget {budget}"
    follow_up = report.follow_up
    if follow_up and (follow_up["asked"] or follow_up["held"]):  # SWEEP-15
        counts += (
            f"; queued: {counted(follow_up['written'], 'batch')} written, "
            f"{follow_up['held']} still in Loom's queue"
        )
        if follow_up["replayed"] or follow_up["fell_back"]:
            counts += f", {follow_up['replayed']} replayed, {follow_up['fell_back']} fell back"
    if status == EXIT_OK:
        print(f"sweep done: {counts}", flush=True)
    else:
        head = "incomplete" if report.stopped == STOPPED_DONE else report.stopped
        print(f"sweep {head}: {why}; {counts}", flush=True)
    for error in report.errors:
        shown = shown_session_id(error["session_id"]) or "(transcripts)"
        print(f"  {shown}: {error['kind']}", flush=True)
    return status
