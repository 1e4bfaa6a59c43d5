"""`nerve memory sweep`: new transcript messages extracted into Loom.

Where the databases live: both are machine state, kept in the configuration folder and never
in the workspace (the workspace is the agent's to edit, and the state decides what is sent to
Loom and what is skipped):

* transcripts: ``<config-dir>/memory/transcripts.sqlite3`` (``--transcripts PATH``);
* sweep state (watermarks, batch budget, isolation, audit log, frozen recalls):
  ``<config-dir>/memory/state.sqlite3`` (``--state PATH``).

``sweep`` runs one sweep (``--once``, the default) or one every DURATION (``--every 5m``) until
interrupted; ``--nerve-db PATH`` reads Nerve's own ``nerve.db`` (read only, NERVE-2) instead of
the transcripts database. On a terminal it shows a progress line per session; it prints the
report at the end (``--json`` for a machine). Exit status: 0 when the sweep offered every
window, 1 when it ended early (another sweep running, the breaker open, the gateway not
answering, memory unavailable), 2 for bad input. Interrupting it loses nothing: every batch is
recorded in its own transaction.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.cli.common import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    UsageError,
    workspace_and_config_dir,
)
from provisioner.cli.memory_files import add_path_options
from provisioner.config.paths import default_paths

if TYPE_CHECKING:
    from provisioner.runtime.sweep.sweeper import SweepProgress, SweepReport

DURATION = re.compile(r"(?P<amount>\d+)(?P<unit>[smh]?)")
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
EVERY_MIN_S = 1  # our choice: a shorter period would only spin on an empty window


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
        default=None,
        metavar="PATH",
        help="sweep from Nerve's own nerve.db instead of the transcripts database (NERVE-2)",
    )
    sweep.add_argument("--json", action="store_true", help="print each report as JSON")
    sweep.set_defaults(handler=_run_sweep)


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
    import asyncio

    from provisioner.config.loader import load_config

    workspace, config_dir = workspace_and_config_dir(args)
    config = load_config(config_dir, workspace)
    if config.memory_backend != "loom":
        where = config.source_of("memory.backend")
        raise UsageError(
            f"{where or 'configuration'}: memory.backend is {config.memory_backend!r}; "
            "the sweep extracts into Loom only (memory.backend: loom)"
        )
    transcripts_path, state_path = default_paths(config_dir)
    paths = (args.transcripts or transcripts_path, args.state or state_path)
    if args.nerve_db is not None:
        if args.transcripts is not None:
            raise UsageError("--nerve-db and --transcripts name two sources to sweep; give one")
        paths = (args.nerve_db, paths[1])
    from_nerve = args.nerve_db is not None
    sweep = _sweep(config, paths, every_s=args.every, as_json=args.json, from_nerve=from_nerve)
    return asyncio.run(sweep)


async def _sweep(
    config: Any,
    paths: tuple[Path, Path],
    *,
    every_s: float | None,
    as_json: bool,
    from_nerve: bool = False,
) -> int:
    import asyncio

    from provisioner.cli.memory_files import open_state, open_transcripts
    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.sweep.sweeper import Sweeper, extraction_mode

    transcripts_path, state_path = paths
    source = _nerve_db(transcripts_path) if from_nerve else open_transcripts(transcripts_path)
    with source, open_state(state_path) as state:
        async with LoomMemory.from_config(config, state=state) as memory:
            mode = extraction_mode(config.loom.defer_extraction)
            sweeper = Sweeper(memory, source, state, mode=mode)
            while True:
                report = await sweeper.run_once(progress=_progress_printer())
                _print_report(report, as_json)
                if every_s is None:
                    return EXIT_OK if report.stopped == "done" else EXIT_DIFFERENCE
                await asyncio.sleep(every_s)


def _nerve_db(path: Path) -> Any:
    """Nerve's ``nerve.db``, read only (NERVE-2); a file that is not it is one line, exit 2."""
    from provisioner.integrations.nerve.transcripts import NerveDatabaseError, NerveTranscripts

    try:
        return NerveTranscripts(path)
    except NerveDatabaseError as error:
        raise UsageError(str(error)) from None


def _progress_printer() -> Any:
    """A progress callback drawing one line per session on a terminal, or None."""
    if not sys.stderr.isatty():
        return None

    def show(progress: SweepProgress) -> None:
        line = (
            f"\rsessions {progress.sessions_done}/{progress.sessions_total}, "
            f"{progress.messages_taken} messages taken, budget {progress.budget.describe()}"
        )
        end = "\n" if progress.sessions_done == progress.sessions_total else ""
        print(line.ljust(79), end=end, file=sys.stderr, flush=True)

    return show


def _print_report(report: SweepReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_dict()), flush=True)
        return
    from provisioner.runtime.sweep.outcomes import STOPPED_BUSY

    if report.stopped == STOPPED_BUSY:  # SWEEP-11: another sweep holds the lock
        print(
            "sweep already_running: another sweep of this state file is running; "
            "this one sent nothing and leaves the windows to it",
            flush=True,
        )
        return
    budget = f"{report.budget_messages} messages / {report.budget_bytes // 1024} KiB"
    if report.budget_cut_reason:
        budget += f" (cut: {report.budget_cut_reason})"
    print(
        f"sweep {report.stopped}: {report.sessions_swept} of {report.sessions_seen} sessions, "
        f"{report.batches_sent} batches, {report.messages_taken} messages taken, "
        f"{report.messages_skipped} skipped, {report.messages_cut} cut; budget {budget}",
        flush=True,
    )
    for error in report.errors:
        print(f"  {error['session_id']}: {error['kind']}", flush=True)
