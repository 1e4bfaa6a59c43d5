"""`nerve memory import` and `nerve memory sweep`: transcripts in, extraction into Loom.

Where the databases live: both are machine state, kept in the configuration folder and never
in the workspace (the workspace is the agent's to edit, and the state decides what is sent to
Loom and what is skipped):

* transcripts: ``<config-dir>/memory/transcripts.sqlite3`` (``--transcripts PATH``);
* sweep state (watermarks, batch budget, isolation, audit log, frozen recalls):
  ``<config-dir>/memory/state.sqlite3`` (``--state PATH``).

``import FILE.jsonl`` reads one message per line (``session_id``, ``role``, ``content``,
``created_at``), checks every line first and imports nothing when any line is bad, naming each
bad line by its number; then it writes all lines in one transaction.

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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.cli.common import (
    EXIT_DIFFERENCE,
    EXIT_OK,
    UsageError,
    add_workspace_options,
    workspace_and_config_dir,
)
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, TRANSCRIPTS_FILE, default_paths
from provisioner.runtime.gateway.json_depth import nested_deeper_than

if TYPE_CHECKING:
    from provisioner.runtime.sweep.sweeper import SweepProgress, SweepReport

IMPORT_FIELDS = ("session_id", "role", "content", "created_at")
IMPORT_LINE_MAX_BYTES = 16 * 1024 * 1024  # our choice: one message line; longer is refused
SESSION_ID_MAX_CHARS = 200  # the op's params schema (loom_memory_set_from_messages)
BAD_LINES_SHOWN = 5  # our choice: how many bad lines the one-line error names
DURATION = re.compile(r"(?P<amount>\d+)(?P<unit>[smh]?)")
DURATION_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}
EVERY_MIN_S = 1  # our choice: a shorter period would only spin on an empty window


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``import`` and ``sweep`` to ``nerve memory``."""
    importer = commands.add_parser("import", help="import transcript messages from JSON lines")
    importer.add_argument(
        "file",
        type=Path,
        metavar="FILE.jsonl",
        help="one message a line: session_id, role, content, created_at",
    )
    _add_path_options(importer, state=False)
    importer.add_argument("--json", action="store_true", help="print the result as JSON")
    importer.set_defaults(handler=_run_import)

    sweep = commands.add_parser("sweep", help="extract new transcript messages into Loom")
    when = sweep.add_mutually_exclusive_group()
    when.add_argument("--once", action="store_true", help="sweep once (the default)")
    when.add_argument(
        "--every",
        type=_duration,
        metavar="DURATION",
        help="sweep again every DURATION until interrupted, e.g. 30s, 5m, 1h",
    )
    _add_path_options(sweep, state=True)
    sweep.add_argument(
        "--nerve-db",
        type=Path,
        default=None,
        metavar="PATH",
        help="sweep from Nerve's own nerve.db instead of the transcripts database (NERVE-2)",
    )
    sweep.add_argument("--json", action="store_true", help="print each report as JSON")
    sweep.set_defaults(handler=_run_sweep)


def _add_path_options(command: argparse.ArgumentParser, *, state: bool) -> None:
    add_workspace_options(command)
    command.add_argument(
        "--transcripts",
        type=Path,
        default=None,
        help=f"transcripts database (default: <config-dir>/{MEMORY_DIR}/{TRANSCRIPTS_FILE})",
    )
    if state:
        command.add_argument(
            "--state",
            type=Path,
            default=None,
            help=f"sweep state database (default: <config-dir>/{MEMORY_DIR}/{STATE_FILE})",
        )


def _duration(text: str) -> float:
    """``30``, ``30s``, ``5m`` or ``2h`` in seconds; argparse reports a ValueError as usage."""
    match = DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 30s, 5m or 1h")
    seconds = int(match["amount"]) * DURATION_UNITS[match["unit"]]
    if seconds < EVERY_MIN_S:
        raise argparse.ArgumentTypeError(f"{text!r}: the period must be at least {EVERY_MIN_S} s")
    return float(seconds)


# --- import ---------------------------------------------------------------------------------

IMPORT_MAX_DEPTH = 16  # our choice: a message is one flat object; deeper is never a message
KEYS_SHOWN = 3  # our choice: how many unknown keys a bad line's problem names
KEY_SHOWN_MAX_CHARS = 40  # our choice: how much of each unknown key it shows


@dataclass(frozen=True)
class BadLine:
    number: int
    problem: str


def _run_import(args: argparse.Namespace) -> int:
    from provisioner.cli.memory_files import open_transcripts

    _workspace, config_dir = workspace_and_config_dir(args)
    transcripts_path = args.transcripts or default_paths(config_dir)[0]
    source: Path = args.file
    if not source.is_file():
        problem = "is not a regular file" if source.exists() else "no such file"
        raise UsageError(f"{source}: {problem}; expected a JSON-lines file of messages")
    bad = _read_or_refuse(source, lambda: list(_bad_lines(source)))
    if bad:
        shown = "; ".join(f"line {b.number}: {b.problem}" for b in bad[:BAD_LINES_SHOWN])
        more = f" (and {len(bad) - BAD_LINES_SHOWN} more)" if len(bad) > BAD_LINES_SHOWN else ""
        raise UsageError(f"{source}: {len(bad)} bad lines, nothing imported: {shown}{more}")
    sessions: set[str] = set()
    with open_transcripts(transcripts_path) as transcripts:
        count = _read_or_refuse(source, lambda: transcripts.add_messages(_rows(source, sessions)))
    into = str(transcripts_path)
    if args.json:
        print(json.dumps({"imported": count, "sessions": len(sessions), "into": into}))
    else:
        print(f"imported {count} messages of {len(sessions)} sessions into {into}")
    return EXIT_OK


def _read_or_refuse(source: Path, read: Any) -> Any:
    """``read()``, with a file that cannot be read turned into one line instead of a traceback.

    The file was a regular file a moment ago, but it may be unreadable, or be taken away while
    it is read; that is bad input like any other, and nothing is imported (the rows go in in
    one transaction, which a failure rolls back).
    """
    try:
        return read()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"{source}: cannot be read ({reason}); nothing imported") from None


def _lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """Numbered non-blank lines; None for a line over ``IMPORT_LINE_MAX_BYTES`` (not kept)."""
    with path.open("rb") as handle:
        number = 0
        while True:
            line = handle.readline(IMPORT_LINE_MAX_BYTES + 1)
            if not line:
                return
            number += 1
            if len(line) > IMPORT_LINE_MAX_BYTES:
                _skip_rest_of_line(handle, line)
                yield number, None
            elif line.strip():
                yield number, line


def _skip_rest_of_line(handle: Any, start: bytes) -> None:
    chunk = start
    while chunk and not chunk.endswith(b"\n"):
        chunk = handle.readline(IMPORT_LINE_MAX_BYTES)


def _rows(path: Path, sessions: set[str]) -> Iterator[tuple[str, str, str, str]]:
    """The checked lines as rows; ``sessions`` collects their session ids.

    Every line is checked again as it is read: a file changed since the first pass raises
    ``UsageError``, which rolls the whole import back, instead of storing a line nobody
    checked.
    """
    for number, line in _lines(path):
        problem = _line_problem(line)
        if problem is not None or line is None:
            raise UsageError(
                f"{path}: line {number} changed while it was imported ({problem}); nothing imported"
            )
        record = json.loads(line)
        sessions.add(record["session_id"])
        yield (record["session_id"], record["role"], record["content"], record["created_at"])


def _bad_lines(path: Path) -> Iterator[BadLine]:
    for number, line in _lines(path):
        problem = _line_problem(line)
        if problem is not None:
            yield BadLine(number, problem)


def _line_problem(line: bytes | None) -> str | None:
    """What is wrong with one line, or None when it is a message the sweep can send.

    The problem named is the real one (IMP-1): a NUL byte, the byte where the UTF-8 breaks,
    nesting too deep, the column where the JSON breaks, then what is wrong with the object.
    Nesting is measured before the JSON is parsed, since Python's decoder recurses once per
    level and a line of many thousand brackets would exhaust its stack.
    """
    from provisioner.runtime.loom.answers import MESSAGE_ROLES

    if line is None:
        return f"longer than {IMPORT_LINE_MAX_BYTES} bytes"
    nul = line.find(b"\0")
    if nul >= 0:
        return f"a NUL byte at byte {nul + 1} (NUL is not allowed in a message)"
    try:
        text = line.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        return f"not UTF-8 text: byte {error.start + 1} cannot be decoded"
    if nested_deeper_than(line, IMPORT_MAX_DEPTH):
        return f"JSON nested too deep (more than {IMPORT_MAX_DEPTH} levels)"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        return f"not JSON at column {error.colno}: {error.msg}"
    except ValueError:  # an integer of more digits than Python converts
        return "not JSON that can be read: a number with too many digits"
    except RecursionError:  # the scan above should have caught it; never a traceback
        return f"JSON nested too deep (more than {IMPORT_MAX_DEPTH} levels)"
    if not isinstance(record, dict):
        return "not a JSON object"
    missing = [name for name in IMPORT_FIELDS if not isinstance(record.get(name), str)]
    if missing:
        return f"{', '.join(missing)} missing or not a string"
    extra = sorted(set(record) - set(IMPORT_FIELDS))
    if extra:
        names = ", ".join(repr(name[:KEY_SHOWN_MAX_CHARS]) for name in extra[:KEYS_SHOWN])
        more = f" and {len(extra) - KEYS_SHOWN} more" if len(extra) > KEYS_SHOWN else ""
        return f"unknown keys {names}{more}; expected {', '.join(IMPORT_FIELDS)}"
    return _field_problem(record, MESSAGE_ROLES)


def _field_problem(record: dict[str, Any], roles: frozenset[str]) -> str | None:
    if not 0 < len(record["session_id"]) <= SESSION_ID_MAX_CHARS:
        return f"session_id must be 1 to {SESSION_ID_MAX_CHARS} characters"
    if record["role"] not in roles:
        return f"role {record['role'][:20]!r} is not one of {', '.join(sorted(roles))}"
    try:
        datetime.fromisoformat(record["created_at"])
    except ValueError:
        return "created_at is not an ISO 8601 time"
    for name in IMPORT_FIELDS:
        if "\0" in record[name]:
            return f"{name} holds a NUL character (\\u0000; NUL is not allowed in a message)"
        try:
            record[name].encode("utf-8")
        except UnicodeEncodeError:
            return f"{name} holds a lone surrogate (not valid Unicode text)"
    return None


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
