"""Opening the memory commands' SQLite files, with a damaged file as one line, not a traceback.

``nerve memory recall|status|import|sweep`` keep their state and transcripts in SQLite files
under the configuration folder. A file that is not a database (truncated, overwritten, a
folder in its place), one written by a newer version, or one that cannot be created is bad
input for the command: it names the file, what is wrong and what to do, and exits 2. Nothing
is changed; the file is left as it is for whoever wants to look at it. A file another process
kept locked past the busy timeout is said to be busy and fine, never damaged: moving it aside
would throw its watermarks away (SWEEP-12).
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.cli.common import UsageError, add_workspace_options
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, TRANSCRIPTS_FILE

if TYPE_CHECKING:
    from provisioner.runtime.state import StateStore
    from provisioner.runtime.transcripts import SqliteTranscripts


def open_state(path: Path) -> StateStore:
    """The runtime's state file; ``UsageError`` when it cannot be opened as one."""
    from provisioner.runtime.state import StateBusyError, StateStore, StateVersionError

    try:
        return StateStore(path)
    except (StateVersionError, StateBusyError) as error:
        raise UsageError(str(error)) from None
    except (sqlite3.Error, OSError) as error:
        raise _unusable(path, "the memory state", error) from None


def open_transcripts(path: Path) -> SqliteTranscripts:
    """The built-in transcripts file; ``UsageError`` when it cannot be opened as one."""
    from provisioner.runtime.transcripts import SqliteTranscripts
    from provisioner.runtime.transcripts_sqlite import TranscriptsVersionError

    try:
        return SqliteTranscripts(path)
    except TranscriptsVersionError as error:  # a newer version wrote it: not damaged
        raise UsageError(f"{path}: {error}") from None
    except (sqlite3.Error, OSError) as error:
        raise _unusable(path, "the transcripts", error) from None


def _unusable(path: Path, what: str, error: Exception) -> UsageError:
    from provisioner.runtime.sqlite_file import BUSY_TIMEOUT_MS, is_busy

    if isinstance(error, sqlite3.OperationalError) and is_busy(error):
        return UsageError(
            f"{path}: busy — another nerve process kept {what} locked for more than "
            f"{BUSY_TIMEOUT_MS / 1000:g} s; the file is fine, try again once that process is done"
        )
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return UsageError(
        f"{path}: cannot be opened as {what} ({reason}); expected a file nerve memory wrote, "
        "or none: move this one aside"
    )


def add_path_options(command: argparse.ArgumentParser, *, state: bool) -> None:
    """The workspace options, ``--transcripts`` and (with ``state``) ``--state``."""
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
