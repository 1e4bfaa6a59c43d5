"""`nerve memory import`: transcript messages in from a JSON-lines file, idempotently (IMP-1).

``import FILE.jsonl`` (``-`` reads standard input) takes one message a line: ``session_id``,
``role``, ``content``, ``created_at`` with its zone, and optionally the record's own ``id``.
Every line is checked first; when any is bad nothing is imported, and the one-line error
names the bad lines by number and by their real problem. Then one transaction stores each
message not already there — its key is its ``id`` within its session, else its session, time,
role and content — and the command says how many were new and how many already there, so an
import run twice stores nothing twice. Under memU it warns that nothing sweeps them.
docs/import.md describes the format, the key and the exit statuses.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

from provisioner.base.command import command, program
from provisioner.base.counts import counted
from provisioner.cli.common import (
    EXIT_OK,
    UsageError,
    refuse_missing_folders,
    workspace_and_config_dir,
)
from provisioner.cli.memory_files import add_path_options
from provisioner.config.paths import default_paths
from provisioner.runtime.face import (
    FileFault,
    file_fault,
    instant_of,
    nested_deeper_than,
    parsed_time,
)

IMPORT_FIELDS = ("session_id", "role", "content", "created_at")
ID_FIELD = "id"  # IMP-1: the record's own key, optional
IMPORT_LINE_MAX_BYTES = 16 * 1024 * 1024  # our choice: one message line; longer is refused
SESSION_ID_MAX_CHARS = 200  # the op's params schema (loom_memory_set_from_messages)
RECORD_ID_MAX_CHARS = 200  # our choice: an id is a name, never a message
STDIN = "-"  # the file name that reads standard input
STDIN_MAX_BYTES = 1024 * 1024 * 1024  # our choice: more from a pipe is imported from a file
STDIN_CHUNK_BYTES = 1024 * 1024  # our choice: how much of standard input is read at a time
BAD_LINES_SHOWN = 5  # our choice: how many bad lines the one-line error names
IMPORT_MAX_DEPTH = 16  # our choice: a message is one flat object; deeper is never a message
KEYS_SHOWN = 3  # our choice: how many unknown keys a bad line's problem names
KEY_SHOWN_MAX_CHARS = 40  # our choice: how much of each unknown key it shows

Record = tuple[str, str, str, str, str | None]  # session_id, role, content, created_at, id
T = TypeVar("T")


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``import`` to ``nerve memory``."""
    importer = commands.add_parser("import", help="import transcript messages from JSON lines")
    importer.add_argument(
        "file",
        metavar="FILE.jsonl",
        help="one message a line: session_id, role, content, created_at, optional id; - for stdin",
    )
    add_path_options(importer, state=False)
    importer.add_argument("--json", action="store_true", help="print the result as JSON")
    importer.set_defaults(handler=_run_import)


def _run_import(args: argparse.Namespace) -> int:
    """Check every line, then store the new messages in one transaction; exit 2 for bad input.

    The configuration is read before anything is stored, as the sweep reads it: one that
    cannot be used stops the import (one line, exit 2) before anything is written.
    """
    from provisioner.config.loader import load_config

    refuse_missing_folders(args, workspace=False)  # FLEET-4
    workspace, config_dir = workspace_and_config_dir(args)
    transcripts_path = args.transcripts or default_paths(config_dir)[0]
    with _opened(args.file) as (handle, name):
        bad_count, shown = _read_or_refuse(name, lambda: _bad_lines(handle))
        if bad_count:
            more = bad_count - len(shown)
            listed = "; ".join(f"line {number}: {problem}" for number, problem in shown)
            rest = f" (and {more} more)" if more else ""
            raise UsageError(
                f"{name}: {counted(bad_count, 'bad line')}, nothing imported: {listed}{rest}"
            )
        config = load_config(config_dir, workspace)
        sessions: set[str] = set()
        new, already = _store(transcripts_path, name, _records(handle, name, sessions))
    _print_result(new, already, len(sessions), str(transcripts_path), as_json=args.json)
    if config.memory_backend != "loom":
        where = config.source_of("memory.backend") or "the default"
        print(
            f"{program()}: warning: memory.backend is {config.memory_backend} ({where}), so "
            "nothing sweeps these messages into memory; to extract them, set memory.backend: "
            f"loom and run {command('memory sweep')}",
            file=sys.stderr,
        )
    return EXIT_OK


def _print_result(new: int, already: int, sessions: int, into: str, *, as_json: bool) -> None:
    """The one result line, or its JSON; ``imported`` keeps its old meaning: rows stored."""
    if as_json:
        fields = {"imported": new, "new": new, "already_there": already}
        print(json.dumps({**fields, "sessions": sessions, "into": into}))
        return
    print(
        f"imported {counted(new, 'new message')} ({already} already there) "
        f"of {counted(sessions, 'session')} into {into}"
    )


@contextmanager
def _opened(argument: str) -> Iterator[tuple[IO[bytes], str]]:
    """The file ``argument`` names, open for reading twice (``seek(0)``), and its name for
    errors.

    ``-`` as written is standard input (``./-`` is a file of that name), copied first into an
    unnamed temporary file (gone when closed) up to ``STDIN_MAX_BYTES``, since a pipe can be
    read only once. Anything but a regular file (a folder, ``/dev/zero``, a pipe by name) is
    refused: it may never end.
    """
    if argument == STDIN:
        name = "standard input"
        with tempfile.TemporaryFile() as spool:
            _read_or_refuse(name, lambda: _spool_stdin(spool))
            yield spool, name
        return
    source = Path(argument)
    if not argument or not source.is_file():
        problem = "is not a regular file" if source.exists() else "no such file"
        raise UsageError(
            f"{argument or repr(argument)}: {problem}; expected a JSON-lines file of messages, "
            f"or {STDIN} for standard input"
        )
    with _read_or_refuse(argument, lambda: source.open("rb")) as handle:
        yield handle, argument


def _spool_stdin(spool: IO[bytes]) -> None:
    """Standard input into ``spool``; ``UsageError`` past ``STDIN_MAX_BYTES``. No standard
    input at all reads as an empty one."""
    stdin = sys.stdin.buffer if sys.stdin is not None else None
    total = 0
    while stdin is not None:
        chunk = stdin.read(STDIN_CHUNK_BYTES)
        if not chunk:
            return
        total += len(chunk)
        if total > STDIN_MAX_BYTES:
            raise UsageError(
                f"standard input: more than {STDIN_MAX_BYTES / 2**20:g} MiB; nothing imported; "
                "save it to a file and import that"
            )
        spool.write(chunk)


def _store(path: Path, name: str, records: Iterator[Record]) -> tuple[int, int]:
    """``records`` into the transcripts at ``path`` in one transaction: ``(new, already)``.

    A file that cannot be written as transcripts (busy past the wait, full, read-only,
    damaged) is one line with its status (REL-4), and the transaction's rollback leaves
    nothing of this import behind.
    """
    from provisioner.cli.memory_files import open_transcripts, unusable

    try:
        transcripts = open_transcripts(path)
    except (UsageError, FileFault) as refusal:
        refusal.args = (f"{refusal}; nothing imported",)
        raise
    with transcripts:
        try:
            return _read_or_refuse(name, lambda: transcripts.import_messages(records))
        except sqlite3.Error as error:
            stopped = unusable(path, "the transcripts", error)
            if not isinstance(stopped, FileFault):  # a file that is not quite a transcripts one
                reason = str(error) or type(error).__name__
                stopped = UsageError(f"{path}: cannot store the messages ({reason})")
            stopped.args = (f"{stopped}; nothing imported",)
            raise stopped from None


def _read_or_refuse(name: str, read: Callable[[], T]) -> T:
    """``read()``, with a file that cannot be read turned into one line instead of a traceback.

    The file was a regular file a moment ago, but it may be unreadable, or be taken away while
    it is read; that is bad input like any other, and nothing is imported (the rows go in in
    one transaction, which a failure rolls back).
    """
    try:
        return read()
    except OSError as error:
        fault = file_fault(error, name)
        if fault is not None:  # REL-4: permission, I/O, a full disk under the spool
            fault.args = (f"{fault}; nothing imported",)
            raise fault from None
        reason = error.strerror or type(error).__name__
        raise UsageError(f"{name}: cannot be read ({reason}); nothing imported") from None


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """Numbered non-blank lines from the start; None for a line over ``IMPORT_LINE_MAX_BYTES``
    (not kept)."""
    handle.seek(0)
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


def _skip_rest_of_line(handle: IO[bytes], start: bytes) -> None:
    chunk = start
    while chunk and not chunk.endswith(b"\n"):
        chunk = handle.readline(IMPORT_LINE_MAX_BYTES)


def _bad_lines(handle: IO[bytes]) -> tuple[int, list[tuple[int, str]]]:
    """How many lines are bad, and the first ``BAD_LINES_SHOWN`` of them with their problem."""
    count = 0
    shown: list[tuple[int, str]] = []
    for number, line in _lines(handle):
        checked = _checked(line)
        if isinstance(checked, str):
            count += 1
            if len(shown) < BAD_LINES_SHOWN:
                shown.append((number, checked))
    return count, shown


def _records(handle: IO[bytes], name: str, sessions: set[str]) -> Iterator[Record]:
    """The checked lines as records; ``sessions`` collects their session ids.

    Every line is checked again as it is read: a file changed since the first pass raises
    ``UsageError``, which rolls the whole import back, instead of storing a line nobody
    checked.
    """
    for number, line in _lines(handle):
        checked = _checked(line)
        if isinstance(checked, str):
            raise UsageError(
                f"{name}: line {number} changed while it was imported ({checked}); nothing imported"
            )
        sessions.add(checked[0])
        yield checked


def _checked(line: bytes | None) -> Record | str:
    """One line as the record it stores, or what is wrong with it.

    The problem named is the real one (IMP-1): a NUL byte, the byte where the UTF-8 breaks,
    nesting too deep, the column where the JSON breaks, then what is wrong with the object.
    Nesting is measured before the JSON is parsed, since Python's decoder recurses once per
    level and a line of many thousand brackets would exhaust its stack.
    """
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
        return f"not a JSON object (a {_json_kind(record)}); expected one message a line"
    return _keys_problem(record) or _fields_problem(record) or _record(record)


def _json_kind(value: object) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def _keys_problem(record: dict[str, Any]) -> str | None:
    missing = [name for name in IMPORT_FIELDS if not isinstance(record.get(name), str)]
    if missing:
        return f"{', '.join(missing)} missing or not a string"
    extra = sorted(set(record) - {*IMPORT_FIELDS, ID_FIELD})
    if extra:
        names = ", ".join(repr(name[:KEY_SHOWN_MAX_CHARS]) for name in extra[:KEYS_SHOWN])
        more = f" and {len(extra) - KEYS_SHOWN} more" if len(extra) > KEYS_SHOWN else ""
        expected = ", ".join(IMPORT_FIELDS)
        return f"unknown keys {names}{more}; expected {expected} and optionally {ID_FIELD}"
    return None


def _fields_problem(record: dict[str, Any]) -> str | None:
    from provisioner.runtime.face import MESSAGE_ROLES

    if not 0 < len(record["session_id"]) <= SESSION_ID_MAX_CHARS:
        return f"session_id must be 1 to {SESSION_ID_MAX_CHARS} characters"
    if record["role"] not in MESSAGE_ROLES:
        return f"role {record['role'][:20]!r} is not one of {', '.join(sorted(MESSAGE_ROLES))}"
    problem = _id_problem(record.get(ID_FIELD))
    if problem:
        return problem
    for name in (*IMPORT_FIELDS, ID_FIELD):
        value = record.get(name)
        if not isinstance(value, str):
            continue
        if "\0" in value:
            return f"{name} holds a NUL character (\\u0000; NUL is not allowed in a message)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{name} holds a lone surrogate (not valid Unicode text)"
    return None


def _id_problem(value: object) -> str | None:
    """An ``id`` is a string of 1 to ``RECORD_ID_MAX_CHARS`` characters or an integer (taken
    as its decimal digits, so ``42`` and ``"42"`` are one record); absent is fine."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        return "id must be a string or an integer"
    if not 0 < len(str(value)) <= RECORD_ID_MAX_CHARS:
        return f"id must be 1 to {RECORD_ID_MAX_CHARS} characters"
    return None


def _record(record: dict[str, Any]) -> Record | str:
    """The checked object as a record, or what is wrong with its time.

    A ``created_at`` must name one instant: an ISO 8601 time with its zone offset. It is
    stored as that instant in UTC, so ``Z`` and ``+00:00`` are one message (IMP-1).
    """
    parsed = parsed_time(record["created_at"])
    if parsed is None:
        return "created_at is not an ISO 8601 time"
    if parsed.utcoffset() is None:
        return (
            "created_at has no zone offset; add Z if it is UTC, or the offset it was "
            "written in (such as +00:00 or +02:00)"
        )
    instant = instant_of(parsed)
    if instant is None:
        return "created_at falls outside the years 1 to 9999 in UTC"
    record_id = record.get(ID_FIELD)
    return (
        record["session_id"],
        record["role"],
        record["content"],
        instant,
        None if record_id is None else str(record_id),
    )
