"""Opening the memory commands' SQLite files: every fault one line, with its status (REL-4).

``nerve memory recall|status|import|sweep`` keep their state and transcripts in SQLite files
under the configuration folder. What went wrong decides the line and the exit status, from the
one table every command shares (docs/exit-status.md):

- another process kept the file locked past the busy timeout, or the disk is full: 75, try
  again later; the file is fine;
- the file system is read-only, or this user may not write the file or its folder: 73;
- the disk failed a read or a write: 74;
- the file is damaged, or was written by a newer version: 2, a file to look at;
- something that is not a SQLite database at all (or a folder) in its place: 2, and only then
  the advice to move it aside: it is not the package's file.

Nothing is changed; the file is left as it is. Moving a busy, full, read-only or unreadable
state file aside would throw away the record of what went to Loom, and the next sweep would
send everything again (SWEEP-12), so that advice is never given for those.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.cli.common import UsageError, add_workspace_options
from provisioner.config.paths import MEMORY_DIR, STATE_FILE, TRANSCRIPTS_FILE
from provisioner.runtime.face import FileFault, file_fault

if TYPE_CHECKING:
    from provisioner.runtime.face import SqliteTranscripts, StateStore

# SQLite's answer for a file that is not a database at all (SQLITE_NOTADB's message).
NOT_A_DATABASE = "file is not a database"


def open_state(path: Path) -> StateStore:
    """The runtime's state file; a ``FileFault`` or ``UsageError`` when it cannot be opened."""
    from provisioner.runtime.face import StateBusyError, StateStore, StateVersionError

    try:
        return StateStore(path)
    except StateVersionError as error:  # a newer version wrote it: not damaged
        raise UsageError(f"{path}: {error}") from None
    except StateBusyError:
        raise busy(path, "the memory state") from None
    except (sqlite3.Error, OSError) as error:
        raise unusable(path, "the memory state", error) from None


def open_transcripts(path: Path) -> SqliteTranscripts:
    """The built-in transcripts file; a ``FileFault`` or ``UsageError`` when it cannot be opened."""
    from provisioner.runtime.face import SqliteTranscripts, TranscriptsVersionError

    try:
        return SqliteTranscripts(path)
    except TranscriptsVersionError as error:  # a newer version wrote it: not damaged
        raise UsageError(f"{path}: {error}") from None
    except (sqlite3.Error, OSError) as error:
        raise unusable(path, "the transcripts", error) from None


def busy(path: Path, what: str) -> FileFault:
    """The ``FileFault`` for ``path`` kept locked by another process past our wait (75)."""
    from provisioner.runtime.face import BUSY_TIMEOUT_MS

    fault = FileFault(path, "busy")
    fault.args = (
        f"{path}: busy — another nerve process kept {what} locked for more than "
        f"{BUSY_TIMEOUT_MS / 1000:g} s; the file is fine, try again once that process is done",
    )
    return fault


def unusable(path: Path, what: str, error: BaseException) -> Exception:
    """Why ``path`` cannot be used as ``what``: a ``FileFault`` of its kind, or a
    ``UsageError`` naming the file.

    Only a file that is not a database at all (or a folder) where ``what`` belongs is to be
    moved aside: it is not the package's file.
    """
    folder = _is_folder(path)
    if folder or NOT_A_DATABASE in str(error).lower():
        found = "a folder" if folder else "not a database"
        return UsageError(
            f"{path}: cannot be opened as {what} ({found}); expected a file nerve memory wrote, "
            "or none: this one is not its file, move it aside"
        )
    fault = file_fault(error, path)
    if fault is None:
        reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
        return UsageError(f"{path}: cannot be opened as {what} ({reason})")
    if fault.kind == "busy":
        return busy(path, what)
    fault = as_its_file_system_says(fault)
    if fault.kind == "damaged":
        fault.args = (f"{fault}; keep it, it holds {what}: look at it with sqlite3",)
    return fault


def _is_folder(path: Path) -> bool:
    """Whether a folder stands where the file belongs; False when that cannot be seen."""
    try:
        return path.is_dir()
    except OSError:  # a folder on the way this user may not enter
        return False


def as_its_file_system_says(fault: FileFault) -> FileFault:
    """``fault`` with the kind its file system shows, where SQLite's answer hides it.

    SQLite cannot create the ``-wal`` and ``-shm`` files beside a database on a read-only or
    full file system, and says "unable to open database file" or "disk I/O error" for both;
    an operator told "permission denied" or "the disk failed" would look in the wrong place.
    The folder's file system says which: mounted read-only, or no block left.
    """
    if fault.kind not in ("permission", "io"):
        return fault
    folder = Path(fault.path).parent
    try:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        stats = os.statvfs(folder)
    except OSError:
        return fault
    if stats.f_flag & os.ST_RDONLY:
        return FileFault(fault.path, "read_only", fault.detail)
    no_inode = stats.f_files > 0 and stats.f_favail == 0  # btrfs counts no inodes: 0 of 0
    if stats.f_bavail == 0 or no_inode:
        return FileFault(fault.path, "full", fault.detail)
    return fault


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
