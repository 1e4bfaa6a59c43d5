"""The ``nerve`` console script: Nerve's command when Nerve is installed, else the package's.

Nerve and this package both declare a console script named ``nerve`` (NERVE-1). Whichever is
installed last writes the script, so this entry decides at run time instead of at install
time:

* no distribution named ``nerve`` is installed: the command line is the package's, exactly as
  ``nerve-provisioner`` (``provisioner.cli.main:main``) runs it;
* Nerve is installed: a command line whose first word is one of ``PACKAGE_GROUPS`` (names
  Nerve does not use) runs the package's CLI; every other command line — ``init``,
  ``doctor``, ``--help``, nothing at all — is handed to Nerve's own console script, found in
  that distribution's entry points (never by importing a module named by guess). Nerve gets
  the same arguments, the same standard streams and the process's exit, so its output and
  exit status are what its own script would give.

When Nerve is installed after this package, Nerve's script replaces this one and is used
untouched; ``nerve-provisioner`` still reaches the package, and ``extend_cli`` in
``provisioner.integrations.nerve`` mounts the package's groups into Nerve's own command.

Deciding costs one look at the installed distributions' metadata: nothing of the package's
provisioning side (Copier, Jinja, YAML) and nothing of Nerve is imported before it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import NoReturn

NERVE_DISTRIBUTION = "nerve"  # NERVE-1: the distribution whose ``nerve`` script is Nerve's
NERVE_SCRIPT = "nerve"  # NERVE-1: the console script both distributions declare
# NERVE-1: the package's command groups that Nerve does not have; with Nerve installed these
# (and only these) still run the package's CLI under ``nerve``.
PACKAGE_GROUPS = ("golden", "render", "diff", "memory", "dev", "web")
_OWN_MODULE_PREFIX = "provisioner."


def nerve_console_script() -> metadata.EntryPoint | None:
    """Nerve's own ``nerve`` console-script entry point, or None when Nerve is not installed.

    Read from the ``nerve`` distribution's metadata. A distribution of that name whose script
    points back into this package (an odd install) counts as no Nerve, so the entry can never
    hand a command line to itself.
    """
    try:
        distribution = metadata.distribution(NERVE_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    scripts = distribution.entry_points.select(group="console_scripts", name=NERVE_SCRIPT)
    for entry_point in scripts:
        if not entry_point.value.startswith(_OWN_MODULE_PREFIX):
            return entry_point
    return None


def runs_package_cli(argv: Sequence[str], nerve_present: bool) -> bool:
    """Whether ``argv`` belongs to the package's CLI rather than Nerve's.

    Without Nerve, always. With Nerve, only when the first word names one of
    ``PACKAGE_GROUPS``: an option before the command (``nerve -c DIR memory …``) is Nerve's
    syntax, so such a line goes to Nerve.
    """
    if not nerve_present:
        return True
    return bool(argv) and argv[0] in PACKAGE_GROUPS


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``argv`` (default: this process's arguments) as the ``nerve`` command; the status.

    Handing over to Nerve does not return: Nerve's script ends the process with its own exit
    status, as it does when its script is called directly. A Nerve whose command cannot be
    imported fails as Nerve's own script would, with Nerve's traceback.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    script = nerve_console_script()
    if runs_package_cli(words, nerve_present=script is not None):
        from provisioner.cli.main import main as package_main

        return package_main(words)
    assert script is not None  # runs_package_cli is True whenever Nerve is absent
    _hand_to_nerve(script.load(), words)


def _hand_to_nerve(nerve_main: Callable[[], object], words: list[str]) -> NoReturn:
    """Call Nerve's script function as its own console script does: ``sys.exit(main())``.

    Nerve's click command reads ``sys.argv``; the program name (``sys.argv[0]``) stays this
    script's, which is also called ``nerve``, so Nerve's usage lines read as they always do.
    """
    saved = sys.argv
    sys.argv = [saved[0] if saved else NERVE_SCRIPT, *words]
    try:
        sys.exit(nerve_main())  # type: ignore[arg-type]  # whatever Nerve returns, as-is
    finally:
        sys.argv = saved
