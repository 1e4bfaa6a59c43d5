"""The root of every exception the package raises, and the groups a caller branches on.

A caller catches a group, never a list of classes, and asks the error for its one line
(``str()``) and its ``exit_status``. The tree's top lives here, on the ground floor, so every
room — the runtime included — derives its errors from it without importing a room above::

    ProvisionerError            anything the package raised on purpose; ``exit_status`` says how
    │                           a command ends for it
    ├── UserError               the input is wrong (a flag, a file, an answer, an inventory):
    │                           say it in one line, exit 2; fix the input and run again
    ├── TemplateBroken          a template cannot be rendered: one line naming the file and
    │                           line, exit 3, so CI tells a broken template from a wording
    │                           change (GOLD-2)
    └── ProvisionerRuntimeError what the runtime raises, in three groups
        ├── MemoryUnavailable   memory cannot be used now: degrade and try later (exit 75)
        ├── StoreFault          a file, the state or a transcripts source is busy or failing;
        │   │                   nothing was lost: keep every watermark, try later (exit 75)
        │   └── FileFault       a file the machine would not give; its kind sets the status
        │                       (``provisioner.ground.faults``, REL-4)
        └── OperatorMustAct     the setup or a contract is wrong: trying again changes
                                nothing until someone acts (exit 2)

The runtime's own classes under its three groups are listed in ``provisioner.runtime.errors``;
the gateway's in ``provisioner.runtime.gateway.errors``. A class that keeps a builtin base
(``ValueError``, ``RuntimeError``, ``OSError``) keeps it for callers that relied on it.

This module imports nothing, so the command line can catch every such error without importing
the modules that raise them.
"""

from __future__ import annotations

EXIT_USAGE = 2  # the input is wrong, or a file the user must look at (sysexits' EX_USAGE aside)
EXIT_TEMPLATE = 3  # GOLD-2: a template that cannot be rendered, told apart from a difference
EXIT_TRY_LATER = 75  # sysexits.h EX_TEMPFAIL: the same command works later (REL-4, SWEEP-13)


class ProvisionerError(Exception):
    """The root: an error the package raised on purpose; ``str()`` is one line for a person.

    ``exit_status`` is the status a command exits with when this error ends it.
    """

    exit_status: int = EXIT_USAGE


class UserError(ProvisionerError):
    """Input the package cannot work with; ``str()`` is one line for the user (exit 2)."""

    exit_status = EXIT_USAGE


class TemplateBroken(ProvisionerError):
    """A template that cannot be rendered; ``str()`` names the file and line (exit 3).

    Not a ``UserError``: the command line's input was fine, the package's (or a template
    author's) template is not (GOLD-2).
    """

    exit_status = EXIT_TEMPLATE


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

    exit_status = EXIT_USAGE
