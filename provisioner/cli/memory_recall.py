"""``nerve memory recall SESSION`` and ``nerve memory status``: the Loom backend by hand.

``recall`` prints the session-context block the agent would get at the start of ``SESSION``
(REC-1…REC-4, TXT-4); ``status`` probes Loom and prints the backend's diagnostics (LOOM-4).
Both read the configuration as ``nerve init`` does (``--config-dir``, ``--workspace``); a
``--config-dir`` that does not exist is refused (exit 2, FLEET-4). Under memU there is nothing
of Loom to show: they say memory is kept in memU and exit 0.

A recall made here is frozen in the same state file the engine uses, so it is exactly what
that session's prompt shows (the first recall of a session wins, REC-3). Neither command
fails when Loom cannot answer: ``recall`` prints the "could not be recalled" block and
``status`` shows the error among the diagnostics; both exit 0, and ``--json`` says which.
A state file ``recall`` cannot open, read or write is one line naming it and the cause, with
the status of its kind (``provisioner.runtime.errors.FileFault``: 75 busy or full, 73 read-only
or permission, 74 I/O, 2 damaged); when only keeping the recall failed, the block is printed
first, since it is what the session is told (REL-3, REL-4).

``status`` runs apart from the sweep, so it adds what the state file keeps of it (LOOM-4): the
batch budget the last sweep left, and with the last error its age, how many batches went
through since (a Loom that failed once an hour ago and took every batch since is not a Loom
that is down), and the fault code when it was a coded fault; under queued mode, how many
batches are still in Loom's queue and how many fell back to waiting mode.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.base.command import program
from provisioner.base.counts import counted
from provisioner.cli.common import EXIT_OK, UsageError, add_workspace_options
from provisioner.cli.memory_files import open_state
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, default_paths
from provisioner.runtime.loom.report import failure_words

if TYPE_CHECKING:
    from provisioner.runtime.loom.backend import LoomMemory

SESSION_ID_MAX_CHARS = 200  # loom-ops: the session ids Loom takes
STATUS_SCHEMA = 1  # FLEET-4: the version of ``status --json``'s shape
# FLEET-4: the overall status of ``status --json`` (docs/sweep.md defines each).
STATUS_OK, STATUS_DEGRADED, STATUS_UNAVAILABLE, STATUS_NOT_LOOM = (
    "ok",
    "degraded",
    "unavailable",
    "not_loom",
)
AGE_UNITS = ((86_400, "d"), (3_600, "h"), (60, "min"), (1, "s"))  # our choice: how an age reads


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``recall`` and ``status`` to ``nerve memory``."""
    recall = commands.add_parser(
        "recall", help="print the session-context block a session starts with"
    )
    recall.add_argument("session", metavar="SESSION", help="the session id")
    _add_common(recall)
    recall.set_defaults(handler=_run_recall)
    status = commands.add_parser("status", help="probe Loom and show the backend's diagnostics")
    _add_common(status)
    status.set_defaults(handler=_run_status)


def _add_common(command: argparse.ArgumentParser) -> None:
    add_workspace_options(command)
    command.add_argument(
        "--state",
        type=Path,
        default=None,
        help=f"the runtime's state file (default: <config-dir>/{MEMORY_DIR}/{STATE_FILE})",
    )
    command.add_argument("--json", action="store_true", help="print JSON")


def state_path(config_dir: Path, given: Path | None = None) -> Path:
    """The runtime's state file: ``given``, else ``<config_dir>/memory/state.sqlite3``."""
    return (given or default_paths(config_dir)[1]).expanduser()


def _loaded_config(args: argparse.Namespace) -> tuple[Any, Path]:
    from provisioner.cli.common import refuse_missing_folders, workspace_and_config_dir
    from provisioner.config.loader import load_config

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    return load_config(config_dir, workspace), config_dir


def _kept_in_memu(args: argparse.Namespace, *, status: bool = False) -> int:
    """Say memory is kept in memU; ``status --json`` leads with its schema and status."""
    if args.json:
        report = {"schema": STATUS_SCHEMA, "status": STATUS_NOT_LOOM} if status else {}
        print(json.dumps({**report, "backend": "memu", "kept_in": "memU"}, indent=2))
    else:
        print("memory is kept in memU (memory.backend: memu); there is no Loom backend to ask")
    return EXIT_OK


def _check_session(session: str) -> str:
    if not 0 < len(session) <= SESSION_ID_MAX_CHARS or not session.isprintable():
        raise UsageError(
            f"SESSION {session[:40]!r}: expected a session id of 1 to "
            f"{SESSION_ID_MAX_CHARS} printable characters"
        )
    return session


def _progress(config: Any) -> None:
    if sys.stderr.isatty() and config.mcp_gateway_url:
        print(f"asking Loom through {config.mcp_gateway_url} …", file=sys.stderr, flush=True)


def _run_recall(args: argparse.Namespace) -> int:
    session = _check_session(args.session)
    config, config_dir = _loaded_config(args)
    if config.memory_backend != "loom":
        return _kept_in_memu(args)
    import asyncio

    from provisioner.runtime.loom.backend import LoomMemory
    from provisioner.runtime.loom.context_block import session_context

    _progress(config)
    path = state_path(config_dir, args.state)

    async def recall() -> Any:
        with open_state(path) as state:
            async with LoomMemory.from_config(config, state=state) as memory:
                told = await memory.startup_recall(session)
            return told, memory.state_fault  # once closed: the freeze has ended either way

    result, fault = asyncio.run(recall())
    block = session_context(result.items, recalled=result.recalled)
    if args.json:
        report = {
            "session": session,
            "recalled": result.recalled,
            "source": result.source,
            "items": list(result.items),
            "block": block,
        }
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(block if block.endswith("\n") else block + "\n")
    if fault is not None:  # REL-3: told, but perhaps not kept for the session
        print(f"{program()}: error: {fault}; the recall shown may not be kept", file=sys.stderr)
        return int(fault.exit_status)
    return EXIT_OK


def _run_status(args: argparse.Namespace) -> int:
    from provisioner.cli.common import refuse_missing_folders

    refuse_missing_folders(args)  # FLEET-4: a named workspace that is not there, as doctor does
    config, config_dir = _loaded_config(args)
    _refuse_a_guessed_backend(config)
    if config.memory_backend != "loom":
        return _kept_in_memu(args, status=True)
    import asyncio

    from provisioner.runtime.errors import MemoryBackendUnavailable
    from provisioner.runtime.gateway.errors import GatewayError
    from provisioner.runtime.loom.backend import LoomMemory

    _progress(config)

    async def probe() -> dict[str, Any]:
        failed: BaseException | None = None
        with open_state(state_path(config_dir, args.state)) as state:
            async with LoomMemory.from_config(config, state=state) as memory:
                try:
                    await memory.health()
                except MemoryBackendUnavailable as error:
                    memory.note_error("health", error)
                    failed = error
                except GatewayError as error:  # health() noted it, with its code
                    failed = error
                report = _with_sweep_facts(memory, memory.diagnostics(), config)
        return _with_overall(report, failed)

    report = asyncio.run(probe())
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write("".join(_lines(_shown_status(report), 0)))
    return EXIT_OK


def _refuse_a_guessed_backend(config: Any) -> None:
    """A misspelt key of this package's (``memroy:``) leaves the backend at memU without the
    configuration naming it: saying "kept in memU" with exit 0 would be a guess a monitor takes
    for the truth, so status refuses it in one line, with the warning doctor gives (FLEET-4)."""
    from provisioner.config.checks import misspelt_own_keys

    for key, meant in misspelt_own_keys(config.data):
        said = next((w for w in config.warnings if f": {key}: unknown key" in w), "")
        where = said.split(f": {key}: ")[0] + ": " if said else ""
        raise UsageError(
            f"{where}{key}: unknown key, likely a misspelt {meant}; expected {meant}, since "
            "memory status cannot say which backend is used until it is spelt right"
        )


def _with_sweep_facts(memory: LoomMemory, report: dict[str, Any], config: Any) -> dict[str, Any]:
    """``report`` with what the state file keeps of the sweep (LOOM-4, SWEEP-13).

    The batch budget the last sweep left when this process has none of its own; and, with
    the last error, ``code`` (a coded fault's), ``age_s`` and ``batches_through_since``. A
    state file that cannot be read that way leaves the report as the backend gave it.
    """

    from provisioner.runtime.budget import extraction_mode
    from provisioner.runtime.loom.diagnostics import since_last_error

    mode = extraction_mode(config.loom.defer_extraction)
    if report.get("batch_budget") is None:
        try:
            kept = memory.state.batch_budget(mode.name, mode.default_budget())
            report["batch_budget"] = kept.as_dict()
        except (sqlite3.Error, TypeError, ValueError):
            pass
    last = report.get("last_error")
    since = since_last_error(memory.state)
    if isinstance(last, dict) and since is not None and since["kind"] == last.get("kind"):
        last["code"] = since["code"]
        last["age_s"] = math.floor(time.time() - since["at"])  # REL-7: below 0 when ahead
        last["batches_through_since"] = since["batches_through_since"]
    queue = _queued_batches(memory)
    if queue is not None and (mode.name == "queued" or any(queue.values())):
        report["queued_batches"] = queue
    return report


def _with_overall(report: dict[str, Any], failed: BaseException | None) -> dict[str, Any]:
    """``report`` led by ``schema`` and the overall ``status``, its last error in words.

    ``unavailable``: the probe failed or memory cannot be used now (no catalog listing
    ``loom``, the breaker open). ``degraded``: the probe went through, but the breaker is
    trying again after failures, the catalog in use is an older one the gateway could not
    replace, or the sweep's last extraction failed and no batch went through since. ``ok``:
    none of these (FLEET-4). The last error gains ``what`` (what happened, in words: the
    HTTP status, ``Retry-After`` when this probe met it, Loom's fault code as words); its
    ``kind`` keeps the outcome's class for whoever reads it already.
    """
    last = report.get("last_error")
    if isinstance(last, dict):
        retry_after = getattr(_cause(failed), "retry_after_s", None)
        mine = failed is not None and last.get("op") == "health"
        last["what"] = failure_words(
            last.get("kind"),
            last.get("code"),
            last.get("message", ""),
            retry_after if mine else None,
        )
    return {"schema": STATUS_SCHEMA, "status": _overall(report, failed), **report}


def _cause(error: BaseException | None) -> BaseException | None:
    """The gateway's outcome behind a ``MemoryBackendUnavailable``, else ``error`` itself."""
    cause = getattr(error, "__cause__", None)
    return cause if cause is not None else error


def _overall(report: dict[str, Any], failed: BaseException | None) -> str:
    if failed is not None or not report.get("available"):
        return STATUS_UNAVAILABLE
    breaker = report.get("breaker") or {}
    catalog = report.get("catalog") or {}
    last = report.get("last_error") or {}
    sweep_failing = last.get("op") == "extract" and last.get("batches_through_since") == 0
    if breaker.get("state", "closed") != "closed" or catalog.get("read_error") or sweep_failing:
        return STATUS_DEGRADED
    return STATUS_OK


def _queued_batches(memory: LoomMemory) -> dict[str, int] | None:
    """Batches of queued mode still open (SWEEP-15): ``in_loom_queue``, which hold their
    sessions' windows and keep them out of a backfill, and ``fell_back``, sent again in
    waiting mode. None for a state file that cannot be read that way."""
    try:
        in_loom_queue, fell_back = memory.state.open_batch_counts()
    except sqlite3.Error:
        return None
    return {"in_loom_queue": in_loom_queue, "fell_back": fell_back}


def _shown_status(report: dict[str, Any]) -> dict[str, Any]:
    """The status as text shows it: what happened in words (FLEET-4), the last error's age
    and what went through since; the schema version is for JSON readers only."""
    shown_report = {key: value for key, value in report.items() if key != "schema"}
    last = report.get("last_error")
    if not isinstance(last, dict):
        return shown_report
    shown = {key: value for key, value in last.items() if key not in ("age_s", "code", "what")}
    shown["kind"] = last.get("what", last.get("kind"))
    if last.get("code"):
        shown["kind"] = f"{shown['kind']} ({last['code']})"
    if "age_s" in last:
        batches = counted(shown.pop("batches_through_since"), "batch")
        age = last["age_s"]
        if age >= 0:
            when = f"{age_words(age)} ago"
        else:  # REL-7: a time ahead of this clock is never passed off as just now
            when = f"{age_words(-age)} in the future (the clock was set back since)"
        shown["age"] = f"{when}, {batches} went through since"
    return {**shown_report, "last_error": shown}


def age_words(seconds: float) -> str:
    """``seconds`` as a short age: ``42 s``, ``5 min``, ``3 h``, ``2 d`` (whole units, cut down)."""
    for size, unit in AGE_UNITS:
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return "0 s"


def _lines(report: dict[str, Any], depth: int) -> list[str]:
    """The diagnostics as indented ``key: value`` lines, nested mappings under their key."""
    lines = []
    for key, value in report.items():
        indent = "  " * depth
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:\n")
            lines += _lines(value, depth + 1)
        elif isinstance(value, list):
            lines.append(f"{indent}{key}: {', '.join(map(str, value)) or '(none)'}\n")
        else:
            lines.append(f"{indent}{key}: {'(none)' if value is None else value}\n")
    return lines
