"""`nerve memory import`: transcript messages in from a JSON-lines file.

``import FILE.jsonl`` reads one message per line (``session_id``, ``role``, ``content``,
``created_at``), checks every line first and imports nothing when any line is bad, naming each
bad line by its number; then it writes all lines in one transaction.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from provisioner.cli.common import EXIT_OK, UsageError, workspace_and_config_dir
from provisioner.cli.memory_files import add_path_options
from provisioner.config.paths import default_paths
from provisioner.runtime.gateway.json_depth import nested_deeper_than

IMPORT_FIELDS = ("session_id", "role", "content", "created_at")
IMPORT_LINE_MAX_BYTES = 16 * 1024 * 1024  # our choice: one message line; longer is refused
SESSION_ID_MAX_CHARS = 200  # the op's params schema (loom_memory_set_from_messages)
BAD_LINES_SHOWN = 5  # our choice: how many bad lines the one-line error names


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``import`` to ``nerve memory``."""
    importer = commands.add_parser("import", help="import transcript messages from JSON lines")
    importer.add_argument(
        "file",
        type=Path,
        metavar="FILE.jsonl",
        help="one message a line: session_id, role, content, created_at",
    )
    add_path_options(importer, state=False)
    importer.add_argument("--json", action="store_true", help="print the result as JSON")
    importer.set_defaults(handler=_run_import)


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
