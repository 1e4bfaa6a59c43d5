"""Every error the runtime raises, under one root, in three groups named for what the caller does.

A host catches a group, never a list of classes. The tree, with the classes each group holds
(where a class keeps a builtin base that callers rely on, it is named in brackets)::

    ProvisionerRuntimeError     anything the runtime raised; catch it to handle all of them
    │                           (under the package's root, ``ProvisionerError``)
    ├── MemoryUnavailable       memory cannot be used now: degrade (a session start says that
    │   │                       memories could not be recalled, never that there are none; a
    │   │                       sweep keeps every watermark) and try again later
    │   ├── MemoryBackendUnavailable  no gateway URL, no ``loom`` listed, or no answer (GW-1)
    │   │                             [RuntimeError]
    │   ├── GatewayError        every outcome of a gateway call, its own tree by what the caller
    │   │                       does next (``provisioner.runtime.gateway.errors``, GW-5)
    │   └── KeptConnectionClosed  the gateway closes connections before a request reaches it
    ├── StoreFault              a file, the state or a transcripts source is busy or failing:
    │   │                       nothing was lost; keep every watermark and try again (the file
    │   │                       fault's kind says whether a person must free the disk or fix
    │   │                       permissions first, REL-4)
    │   ├── FileFault           a file the machine would not give: busy, full, read only, no
    │   │                       permission, I/O error, damaged (``provisioner.ground.faults``)
    │   ├── StateBusyError      another process kept the state file locked [RuntimeError]
    │   ├── BackfillBusy        another sweep holds the state file's lock [RuntimeError]
    │   └── SourceFailed        a transcripts source raised while one session was read
    │                           (SWEEP-12): that session waits, the sweep goes on
    └── OperatorMustAct         the setup or a contract is wrong: trying again changes nothing
        │                       until someone acts; say it in one line
        ├── StateVersionError   the state file is of a newer version: upgrade [RuntimeError]
        ├── TranscriptsVersionError  so is the transcripts file [sqlite3.DatabaseError]
        ├── StateUnreadable     the state file cannot be read for a plan [ValueError]
        ├── NerveDatabaseError  the file is not Nerve's ``nerve.db`` [ValueError]
        ├── UndeclaredField     the backend asked for what the op contract does not declare: a
        │                       bug here [LookupError]
        └── ContractBroken, PolicyRefused  (gateway outcomes that are also ``MemoryUnavailable``)
                                an answer broke the wire contract; the gateway's policy refused

Two gateway outcomes sit in two groups on purpose: memory is unavailable for the call under
way, and nothing changes until a person fixes the contract or the policy. A caller that checks
``OperatorMustAct`` before ``MemoryUnavailable`` reports them; one that checks only
``MemoryUnavailable`` degrades, as for any gateway failure.

The root and the three groups are defined on the package's ground floor
(``provisioner.ground.errors``), under the package's one root ``ProvisionerError``, and named
here too; this module imports nothing else, so the provisioning side and a host may name these
classes (to catch them, or to word a "memory is unavailable" text) without loading the HTTP
client.
"""

from __future__ import annotations

from provisioner.ground.errors import (
    MemoryUnavailable,
    OperatorMustAct,
    ProvisionerRuntimeError,
    StoreFault,
)

__all__ = [
    "ERROR_GROUPS",
    "MemoryBackendUnavailable",
    "MemoryUnavailable",
    "OperatorMustAct",
    "ProvisionerRuntimeError",
    "StoreFault",
]


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
