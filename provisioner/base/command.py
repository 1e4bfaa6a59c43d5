"""The package's command, by the name it was invoked with (NERVE-1).

The package installs one console script, ``nerve-provisioner``; ``python -m provisioner`` is
the same command line. It installs no ``nerve``: that name is Nerve's, and two distributions
declaring one script means uninstalling either deletes the other's command. Inside Nerve the
package's groups are reached through Nerve's own ``nerve`` once ``extend_cli``
(``provisioner.integrations.nerve``) has mounted them.

So the name a usage line, an error or a printed hint gives the command is the name it was
invoked with: ``nerve-provisioner`` from the script, ``python -m provisioner`` from the
module, ``nerve`` through a group mounted into Nerve. ``running_as`` holds that name while a
command runs; ``program()`` and ``command()`` read it, so every hint names a command that
exists in the install it runs in. Nothing here imports the rest of the package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

PACKAGE_SCRIPT = "nerve-provisioner"  # NERVE-1: the package's only console script
MODULE_COMMAND = "python -m provisioner"  # NERVE-1: the same command line, as a module
MOUNTED_COMMAND = "nerve"  # NERVE-1: Nerve's command, once extend_cli mounted the package
# NERVE-1: the package's command groups that Nerve does not have; extend_cli mounts these
# (and only these) into Nerve's command.
PACKAGE_GROUPS = ("golden", "render", "diff", "memory", "dev", "web", "fleet")
_MODULE_MAIN = "__main__.py"
_PACKAGE_DIR = "provisioner"

_program: ContextVar[str] = ContextVar("provisioner_program", default=PACKAGE_SCRIPT)


def invoked_as(argv0: str | None) -> str:
    """The command's name for the process's ``sys.argv[0]``.

    The package's ``__main__.py`` (``python -m provisioner``) is ``MODULE_COMMAND``; anything
    else — the script, or a program that calls ``main`` itself — is ``PACKAGE_SCRIPT``, the
    name that reaches the same command line in every install.
    """
    path = Path(argv0 or "")
    if path.name == _MODULE_MAIN and path.parent.name == _PACKAGE_DIR:
        return MODULE_COMMAND
    return PACKAGE_SCRIPT


def program() -> str:
    """The name the running command was invoked with (``PACKAGE_SCRIPT`` outside a command)."""
    return _program.get()


def command(words: str) -> str:
    """``words`` as a command line of the running command: ``command("memory sweep")`` is
    ``nerve-provisioner memory sweep`` standalone, ``nerve memory sweep`` inside Nerve."""
    return f"{program()} {words}"


@contextmanager
def running_as(name: str) -> Iterator[str]:
    """Name the running command ``name`` until the block ends (nested calls restore)."""
    token = _program.set(name)
    try:
        yield name
    finally:
        _program.reset(token)


def program_words() -> list[str]:
    """``program()`` as the words of a command line, for ``shlex.join``."""
    return program().split()
