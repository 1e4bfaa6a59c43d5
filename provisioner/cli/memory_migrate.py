"""`nerve memory migrate`: memU's memories copied into Loom, once each, resumably (MIG-1).

Reads memU's database read-only — ``--memu-db PATH``, else the file Nerve's
``memory.sqlite_dsn`` names, else ``memu.sqlite`` in Nerve's state folder (``$NERVE_HOME``) once
a Nerve configuration is found there, else ``<config-dir>/memu.sqlite`` (NERVE-7) — and writes
every item into Loom with ``loom_memory_set`` under the key ``memu-<item id>``. The ledger
lives in the runtime's state file (``--state``, default ``<config-dir>/memory/state.sqlite3``),
so running it again writes nothing twice and goes on where the last run stopped.

``--dry-run`` counts the items, their bytes and what would be written, sending and writing
nothing (under any backend). A real run needs ``memory.backend: loom``: what it writes lands
where the agent's Loom memory is. On a terminal it shows a progress line; it prints the report
at the end (``--json`` for a machine, with ``exit_status``). Exit status: 0 when every item of
the store is done (written, or final in the ledger: a conflict, a rejection, a skip), 1 when
some items did not go (stopped by a Loom failing broadly: failing or "not now" item after item,
or "not now" for longer than a run waits, REL-16; by a broken answer or another migration
running; or items left for the next run), 75 when memory could not be reached (no gateway URL,
not reached, no ``loom`` in the catalog, refused, breaker open), 2 for bad input (no memU
database, not a memU database, a bad flag or configuration). memU's store or the state file
failing, at the start or half-way, is one line naming the file and the cause, with that fault's
status (REL-4): 75 busy or full, 73 read-only or permission denied, 74 an I/O error, 2 damaged.
SIGINT ends a run with 130, SIGTERM with 143, each after the report of the run so far (REL-9).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.cli.common import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    UsageError,
    add_workspace_options,
    refuse_missing_folders,
    workspace_and_config_dir,
)
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, default_paths, found_memu_db

if TYPE_CHECKING:
    from provisioner.cli.stopping import StopSignals
    from provisioner.migration.memu_store import MemuStore
    from provisioner.migration.migrate import MigrationProgress
    from provisioner.migration.report import MigrationReport

EXIT_UNREACHABLE = 75  # SWEEP-13, MIG-1: memory could not be reached (sysexits' EX_TEMPFAIL)
MEMU_DB_FILE = "memu.sqlite"  # Nerve's default memU store under its state folder (~/.nerve)
SQLITE_DSN_KEY = "memory.sqlite_dsn"  # NERVE-5: Nerve's key for memU's store
SQLITE_DSN_PREFIX = "sqlite:///"  # how Nerve writes that key; it strips the prefix to a path
UNREACHABLE_STOPS = frozenset({"breaker_open", "no_answer", "unreachable", "unavailable"})


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``migrate`` to ``nerve memory``."""
    migrate = commands.add_parser("migrate", help="copy memU's memories into Loom, once each")
    add_workspace_options(migrate)
    migrate.add_argument(
        "--memu-db",
        type=_file_argument,
        default=None,
        metavar="PATH",
        help=f"memU's database (default: {SQLITE_DSN_KEY}, else $NERVE_HOME/{MEMU_DB_FILE} once "
        f"a Nerve configuration is found, else <config-dir>/{MEMU_DB_FILE})",
    )
    migrate.add_argument(
        "--state",
        type=_file_argument,
        default=None,
        metavar="PATH",
        help=f"the state file keeping the ledger (default: <config-dir>/{MEMORY_DIR}/{STATE_FILE})",
    )
    migrate.add_argument(
        "--dry-run", action="store_true", help="count what would be written; send nothing"
    )
    migrate.add_argument("--json", action="store_true", help="print the report as JSON")
    migrate.set_defaults(handler=_run_migrate)


def _file_argument(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; expected a file path")
    return Path(text).expanduser()


def _run_migrate(args: argparse.Namespace) -> int:
    from provisioner.cli.stopping import run_stoppable
    from provisioner.config.loader import load_config
    from provisioner.migration.memu_store import MemuStore

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    config = load_config(config_dir, workspace)
    memu_path = args.memu_db or memu_db_path(config, config_dir)
    state_path = args.state or default_paths(config_dir)[1]
    if not args.memu_db and not memu_path.exists() and not memu_path.is_symlink():
        return _no_memu_store(memu_path, as_json=args.json)
    with MemuStore(memu_path) as store:  # bad input is one line before anything is sent
        if args.dry_run:
            return _dry_run(store, state_path, as_json=args.json)
    if config.memory_backend != "loom":
        where = config.source_of("memory.backend")
        raise UsageError(
            f"{where or 'configuration'}: memory.backend is {config.memory_backend!r}; the "
            "migration writes into Loom: set memory.backend: loom, or look first with --dry-run"
        )
    return run_stoppable(lambda stop: _migrate(config, memu_path, state_path, stop, args.json))


def _no_memu_store(memu_path: Path, *, as_json: bool) -> int:
    """An instance whose memU kept nothing where Nerve looks (no ``--memu-db`` given): nothing
    to migrate, said in one line, exit 0 (MIG-1). A store named with ``--memu-db`` that is
    missing stays an error: that name is a typo, not an instance without memU."""
    if as_json:
        found = {"memu_db": str(memu_path), "found": False, "items": 0}
        print(json.dumps({**found, "exit_status": EXIT_OK}), flush=True)
    else:
        print(f"migrate: no memU store at {memu_path}: nothing to migrate", flush=True)
    return EXIT_OK


def memu_db_path(config: Any, config_dir: Path) -> Path:
    """memU's database as Nerve finds it: ``memory.sqlite_dsn`` without its ``sqlite:///``,
    else ``<config-dir>/memu.sqlite``; ``UsageError`` naming the file for a value that is no
    SQLite path."""
    memory = config.data.get("memory")
    dsn = memory.get("sqlite_dsn") if isinstance(memory, dict) else None
    if dsn is None:
        return found_memu_db(config_dir) or config_dir / MEMU_DB_FILE  # NERVE-7
    path = dsn.strip().removeprefix(SQLITE_DSN_PREFIX) if isinstance(dsn, str) else ""
    if not path or "://" in path:
        where = config.source_of(SQLITE_DSN_KEY) or "configuration"
        raise UsageError(
            f"{where}: {SQLITE_DSN_KEY}: {json.dumps(dsn)[:80]} names no SQLite file; "
            f"expected {SQLITE_DSN_PREFIX}PATH to memU's database, or give --memu-db PATH"
        )
    return Path(path).expanduser()


def _dry_run(store: MemuStore, state_path: Path, *, as_json: bool) -> int:
    import sqlite3

    from provisioner.migration.ledger import final_ids_read_only
    from provisioner.migration.memu_store import MemuReadError
    from provisioner.migration.migrate import dry_run
    from provisioner.runtime.face import FileFault, file_fault

    try:
        done = final_ids_read_only(state_path)
    except sqlite3.Error as error:
        fault = file_fault(error, state_path)
        if fault is not None and fault.kind != "damaged":
            raise fault from None  # REL-4: busy, permission, I/O: one line, its status
        raise UsageError(
            f"{state_path}: cannot be read as the memory state ({error}); expected a file "
            "nerve memory wrote, or none"
        ) from None
    try:
        report = dry_run(store, done)
    except MemuReadError as error:
        if error.fault_kind not in (None, "damaged"):
            raise FileFault(store.path, error.fault_kind) from None
        raise UsageError(f"{store.path}: {error}; expected memU's database") from None
    if as_json:
        print(json.dumps({**report.as_dict(), "exit_status": EXIT_OK}), flush=True)
    else:
        print("\n".join(report.lines()), flush=True)
    return EXIT_OK


async def _migrate(
    config: Any, memu_path: Path, state_path: Path, stop: StopSignals, as_json: bool
) -> int:
    """The run and its report; on SIGINT or SIGTERM (REL-9) the report of the run so far is
    printed, with the signal's status, before the cancellation goes on."""
    from provisioner.cli.memory_files import open_state
    from provisioner.migration.migrate import migrate_instance
    from provisioner.runtime.face import LoomMemory

    progress = _progress_printer()

    def interrupted(report: MigrationReport) -> None:
        _print_report(report, stop.exit_status, progress, as_json=as_json)

    with open_state(state_path) as state:
        async with LoomMemory.from_config(config, state=state) as memory:
            report = await migrate_instance(
                memu_path, state, memory, progress=progress, interrupted=interrupted
            )
    status = exit_status(report)
    _print_report(report, status, progress, as_json=as_json)
    return status


def _print_report(report: MigrationReport, status: int, progress: Any, *, as_json: bool) -> None:
    if progress is not None:
        print(file=sys.stderr, flush=True)
    if as_json:
        print(json.dumps({**report.as_dict(), "exit_status": status}), flush=True)
    else:
        print("\n".join(report.lines()), flush=True)


def exit_status(report: MigrationReport) -> int:
    """0: every item done; 75: memory could not be reached; a file fault's own status when
    the state file or memU's store failed (REL-4: 75 busy or full, 73, 74, 2); 1: anything
    else left undone."""
    from provisioner.migration.report import STOPPED_SOURCE, STOPPED_STATE
    from provisioner.runtime.face import EXIT_STATUS_OF_KIND

    if report.stopped in UNREACHABLE_STOPS:
        return EXIT_UNREACHABLE
    if report.stopped in (STOPPED_SOURCE, STOPPED_STATE):
        return EXIT_STATUS_OF_KIND.get(report.error_kind or "", EXIT_DIFFERENCE)
    if report.stopped == "done" and report.left == 0:
        return EXIT_OK
    return EXIT_DIFFERENCE


def _progress_printer() -> Any:
    """A progress callback drawing one line on a terminal after each page, or None."""
    if not sys.stderr.isatty():
        return None

    def show(progress: MigrationProgress) -> None:
        line = (
            f"\rmemU items {progress.items_seen}/{progress.items_total}, "
            f"{progress.sent} sent to Loom"
        )
        print(line.ljust(79), end="", file=sys.stderr, flush=True)

    return show
