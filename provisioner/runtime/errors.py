"""Every error the package raises, under one root, in groups named for what the caller does.

The runtime stands alone on the ground floor, so the package's root lives here and every room
above derives its errors from it. A caller catches a group, never a list of classes, and asks
the error for its one line (``str()``) and its ``exit_status``. The tree, with the classes each
runtime group holds (where a class keeps a builtin base that callers rely on, it is named in
brackets)::

    ProvisionerError            anything the package raised on purpose; ``exit_status`` says how
    │                           a command ends for it
    ├── UserError               the input is wrong (a flag, a file, an answer, an inventory):
    │                           one line, exit 2 (``provisioner.base.errors``)
    ├── TemplateBroken          a template cannot be rendered: one line, exit 3 (GOLD-2,
    │                           ``provisioner.base.errors``)
    └── ProvisionerRuntimeError anything the runtime raised; a host catches it to handle all
        ├── MemoryUnavailable   memory cannot be used now: degrade (a session start says that
        │   │                   memories could not be recalled, never that there are none; a
        │   │                   sweep keeps every watermark) and try again later (exit 75)
        │   ├── MemoryBackendUnavailable  no gateway URL, no ``loom`` listed, or no answer (GW-1)
        │   │                             [RuntimeError]
        │   ├── GatewayError    every outcome of a gateway call, its own tree by what the caller
        │   │                   does next (``provisioner.runtime.gateway.errors``, GW-5)
        │   └── KeptConnectionClosed  the gateway closes connections before a request reaches it
        ├── StoreFault          a file, the state or a transcripts source is busy or failing:
        │   │                   nothing was lost; keep every watermark and try again (exit 75;
        │   │                   the file fault's kind says whether a person must free the disk
        │   │                   or fix permissions first, REL-4)
        │   ├── FileFault       a file the machine would not give: busy, full, read only, no
        │   │                   permission, I/O error, damaged (below)
        │   ├── StateBusyError  another process kept the state file locked [RuntimeError]
        │   ├── BackfillBusy    another sweep holds the state file's lock [RuntimeError]
        │   └── SourceFailed    a transcripts source raised while one session was read
        │                       (SWEEP-12): that session waits, the sweep goes on
        └── OperatorMustAct     the setup or a contract is wrong: trying again changes nothing
            │                   until someone acts; say it in one line (exit 2)
            ├── StateVersionError   the state file is of a newer version: upgrade [RuntimeError]
            ├── TranscriptsVersionError  so is the transcripts file [sqlite3.DatabaseError]
            ├── StateUnreadable     the state file cannot be read for a plan [ValueError]
            ├── NerveDatabaseError  the file is not Nerve's ``nerve.db`` [ValueError]
            ├── UndeclaredField     the backend asked for what the op contract does not
            │                       declare: a bug here [LookupError]
            └── ContractBroken, PolicyRefused  (gateway outcomes that are also
                                    ``MemoryUnavailable``) an answer broke the wire contract;
                                    the gateway's policy refused

Two gateway outcomes sit in two groups on purpose: memory is unavailable for the call under
way, and nothing changes until a person fixes the contract or the policy. A caller that checks
``OperatorMustAct`` before ``MemoryUnavailable`` reports them; one that checks only
``MemoryUnavailable`` degrades, as for any gateway failure.

The second half of this module names the faults of a file the machine would not give, the
same way for every command and every room (REL-4). The standard library only, so the
provisioning side and a host may name these classes (to catch them, or to word a "memory is
unavailable" text) without loading the HTTP client.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

EXIT_USAGE = 2  # the input is wrong, or a file the user must look at
EXIT_TRY_LATER = 75  # sysexits.h EX_TEMPFAIL: the same command works later (REL-4, SWEEP-13)


class ProvisionerError(Exception):
    """The package's one root: an error raised on purpose; ``str()`` is one line for a person.

    ``exit_status`` is the status a command exits with when this error ends it.
    """

    exit_status: int = EXIT_USAGE


class ProvisionerRuntimeError(ProvisionerError):
    """The root of every error the runtime raises; ``str()`` is one line safe to log."""


class MemoryUnavailable(ProvisionerRuntimeError):
    """Group: memory cannot be used now; the caller degrades and tries again later."""

    exit_status = EXIT_TRY_LATER


class StoreFault(ProvisionerRuntimeError):
    """Group: a file, the state or a transcripts source is busy or failing; nothing was lost,
    so the caller keeps every watermark and tries again."""

    exit_status = EXIT_TRY_LATER


class OperatorMustAct(ProvisionerRuntimeError):
    """Group: the setup or a contract is wrong; trying again changes nothing until someone
    acts, so the caller says what is wrong in one line."""


ERROR_GROUPS: tuple[type[ProvisionerRuntimeError], ...] = (
    MemoryUnavailable,
    StoreFault,
    OperatorMustAct,
)
"""The groups a caller branches on, under ``ProvisionerRuntimeError``."""


class MemoryBackendUnavailable(MemoryUnavailable, RuntimeError):
    """Memory cannot be used now; the caller degrades instead of failing (GW-1).

    The failure every memory backend shares, so a module can name it without loading a
    backend. The runtime raises it when the Loom backend did not start (no gateway URL), when
    the gateway's catalog does not list ``loom``, and when the gateway or Loom cannot answer;
    the gateway client's own exception is kept as its ``__cause__``.

    A session start says memories could not be recalled (never that there are none), a sweep
    keeps its watermark, a health probe reports the backend as unavailable. ``backend`` names
    the backend (``"loom"``, ``"memu"``) when the raiser knows it.
    """

    def __init__(self, message: str, *, backend: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.backend = backend


# --- file faults (REL-4) -------------------------------------------------------------------
#
# When a file cannot be used, the message says what its reader should do (REL-4). Every
# command meets the same few faults on every file it touches (the state, transcripts, Nerve's
# nerve.db, the memU store, a golden, a workspace file): another process holds the file, the
# disk is full, the file system is read-only, permission is denied, the disk failed a read or
# a write, or the file is not what it should be. Each asks something different of an
# operator, and a monitor reads it from the exit status:
#
#     FileFault                   a file could not be used; ``str()`` is one line naming it
#     ├── kind "busy"     → 75    another process holds it past our wait: try again later
#     ├── kind "full"     → 75    the disk or quota is full: free space, then try again
#     ├── kind "read_only"→ 73    the file system is mounted read-only: nothing can be written
#     ├── kind "permission"→ 73   this user may not create or write it: fix the owner or mode
#     ├── kind "io"       → 74    the disk failed a read or a write: look at the device
#     └── kind "damaged"  → 2     the file is not readable as what it should be: look at it
#
# ``classify_file_error`` is the one place that turns ``OSError`` and ``sqlite3`` errors into a
# kind; everything else asks it. A busy, full, read-only or permission fault never advises
# moving the file aside: the file is fine, and for a state file moving it aside would throw away
# the record of what went to Loom. Only a file that is not the package's at all is worth moving.

FaultKind = Literal["busy", "full", "read_only", "permission", "io", "damaged"]

# REL-4: one exit status per kind, for every command (sysexits.h where it has one).
EXIT_CANNOT_CREATE = 73  # EX_CANTCREAT: read-only file system or permission denied
EXIT_IO = 74  # EX_IOERR: the device failed a read or a write
EXIT_LOOK_AT_FILE = EXIT_USAGE  # a file the user must look at (damaged, not the package's)

EXIT_STATUS_OF_KIND: dict[str, int] = {
    "busy": EXIT_TRY_LATER,
    "full": EXIT_TRY_LATER,
    "read_only": EXIT_CANNOT_CREATE,
    "permission": EXIT_CANNOT_CREATE,
    "io": EXIT_IO,
    "damaged": EXIT_LOOK_AT_FILE,
}

CAUSE_OF_KIND: dict[str, str] = {
    "busy": "busy: another process holds it; try again later",
    "full": "the disk is full; free some space, then try again",
    "read_only": "the file system is read-only",
    "permission": "permission denied; check the file's owner and mode",
    "io": "the disk failed a read or a write",
    "damaged": "damaged: it cannot be read as what it should be",
}

_ERRNO_KIND: dict[int, FaultKind] = {
    errno.ENOSPC: "full",
    errno.EDQUOT: "full",
    errno.EROFS: "read_only",
    errno.EACCES: "permission",
    errno.EPERM: "permission",
    errno.EIO: "io",
    errno.EAGAIN: "busy",
    errno.EBUSY: "busy",
}

# SQLite's primary result codes (the low byte of an extended code), as SQLite's C API numbers
# them, so naming a fault never imports sqlite3: a command that touched no database (``--version``)
# stays light, and an error can only be sqlite3's once sqlite3 was imported.
_SQLITE_KIND: dict[int, FaultKind] = {
    5: "busy",  # SQLITE_BUSY
    6: "busy",  # SQLITE_LOCKED
    13: "full",  # SQLITE_FULL
    8: "read_only",  # SQLITE_READONLY
    3: "permission",  # SQLITE_PERM
    14: "permission",  # SQLITE_CANTOPEN
    10: "io",  # SQLITE_IOERR
    11: "damaged",  # SQLITE_CORRUPT
    26: "damaged",  # SQLITE_NOTADB
}

# Older SQLite builds give no error code; their messages are stable.
_SQLITE_TEXT_KIND: tuple[tuple[str, FaultKind], ...] = (
    ("database is locked", "busy"),
    ("database is busy", "busy"),
    ("database table is locked", "busy"),
    ("database or disk is full", "full"),
    ("attempt to write a readonly database", "read_only"),
    ("disk i/o error", "io"),
    ("database disk image is malformed", "damaged"),
    ("file is not a database", "damaged"),
    ("unable to open database file", "permission"),
)


class FileFault(StoreFault):
    """A file could not be used; ``kind`` says how, ``path`` which file.

    ``str()`` is one line: ``<path>: <cause>``. ``exit_status`` is the status every command
    exits with for it (REL-4).
    """

    def __init__(self, path: str | os.PathLike[str], kind: FaultKind, detail: str = "") -> None:
        self.path = os.fspath(path)
        self.kind: FaultKind = kind
        self.detail = detail
        self.exit_status = EXIT_STATUS_OF_KIND[kind]
        super().__init__(f"{self.path}: {CAUSE_OF_KIND[kind]}")


def classify_file_error(error: BaseException) -> FaultKind | None:
    """The kind of file fault ``error`` is, or None when it is not one (a bug, a bad value).

    Reads ``OSError.errno`` and SQLite's error code, falling back on SQLite's message where a
    build gives no code. A ``FileFault`` answers its own kind.
    """
    if isinstance(error, FileFault):
        return error.kind
    if isinstance(error, OSError):
        return _ERRNO_KIND.get(error.errno or -1)
    sqlite3 = sys.modules.get("sqlite3")  # not imported: the error is none of its
    if sqlite3 is not None and isinstance(error, sqlite3.Error):
        code = getattr(error, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF in _SQLITE_KIND:
            return _SQLITE_KIND[code & 0xFF]
        text = str(error).lower()
        for fragment, kind in _SQLITE_TEXT_KIND:
            if fragment in text:
                return kind
        if isinstance(error, sqlite3.DatabaseError) and not isinstance(
            error, sqlite3.OperationalError | sqlite3.IntegrityError | sqlite3.ProgrammingError
        ):
            return "damaged"
    return None


def file_fault(error: BaseException, path: str | os.PathLike[str]) -> FileFault | None:
    """``error`` as a ``FileFault`` on ``path``, or None when it is not a file fault."""
    if isinstance(error, FileFault):
        return error
    kind = classify_file_error(error)
    if kind is None:
        return None
    return FileFault(path, kind, detail=" ".join(str(error).split()))


@contextmanager
def faults_named(path: str | os.PathLike[str]) -> Iterator[None]:
    """Raise every file fault met inside as a ``FileFault`` naming ``path``, chained.

    Anything that is not a file fault passes through unchanged.
    """
    try:
        yield
    except Exception as error:  # an OSError, or sqlite3's error once sqlite3 is loaded
        fault = None if isinstance(error, FileFault) else file_fault(error, path)
        if fault is None:
            raise
        raise fault from error
