"""``extend_cli(group)``: the package mounted into Nerve's click command (NERVE-1).

Nerve's command is a click group (``main``, with ``--config-dir``) whose callback loads Nerve's
configuration into ``ctx.obj`` (``config_dir``, and ``config`` with its ``workspace``) before
any subcommand runs. Two lines in Nerve adopt the package::

    from provisioner.integrations.nerve import extend_cli
    extend_cli(main)

and then:

* ``nerve init`` takes ``--memory-backend memu|loom``. Nerve's own init runs first, exactly as
  before; when it finishes without error and the option was given, the package's init words
  the workspace for that backend in non-interactive mode (``nerve-provisioner init
  --non-interactive``) on Nerve's configuration folder (``ctx.obj["config_dir"]``) and on the
  workspace Nerve's loaded configuration names (``ctx.obj["config"].workspace``; when Nerve
  could not load one, the package's own default: ``$NERVE_WORKSPACE``, else
  ``~/nerve-workspace``, which is also Nerve's). Without the option Nerve's init is unchanged.
  A file Nerve's step wrote in that run, or one byte for byte as Nerve's installed package
  ships it, is Nerve's shipped text and is re-worded for the backend (NERVE-10,
  ``provisioner.integrations.nerve.shipped``); a file the agent edited is kept and listed.
* the package's command groups (``PACKAGE_GROUPS``: golden, render, diff, memory, dev, web, fleet)
  become subcommands that hand their arguments, unparsed and unchanged, to the package's
  argparse command line and exit with its status. The configuration folder Nerve resolved
  (its ``-c``, ``NERVE_CONFIG_DIR``, the current folder, its pointer file) is the package's
  for that run (NERVE-7); usage lines, errors and hints name the command ``nerve``, the name
  Nerve's command was invoked with (NERVE-1).

A name the group already has is never replaced: that piece is skipped, one line on stderr says
so and where the package's command is still reached (``nerve-provisioner``), and the rest is
mounted. Mounting twice changes nothing the second time. click is Nerve's dependency; only
this module of the package imports it.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from provisioner.backends import BACKEND_NAMES
from provisioner.base.command import MOUNTED_COMMAND, PACKAGE_GROUPS, PACKAGE_SCRIPT
from provisioner.config.paths import CONFIG_DIR_ENV

INIT_COMMAND = "init"  # NERVE-1: Nerve's setup command, which gains the backend option
BACKEND_OPTION = "--memory-backend"  # NERVE-1: the option init gains
_BACKEND_PARAM = "memory_backend"
_PACKAGE_SCRIPT = PACKAGE_SCRIPT
_NERVE_FALLBACK = "default"  # NERVE-7: Nerve's source name for its last-resort folder
_MOUNTED = "_nerve_provisioner_mounted"  # marks what extend_cli added, so a re-run sees it


@dataclass(frozen=True)
class Mounted:
    """What one ``extend_cli`` call did to the group.

    ``commands``: the package groups added by this call. ``init_option``: whether ``init``
    carries ``--memory-backend`` (added now or by an earlier call). ``skipped``: one sentence
    per piece left out because the group already had that name (also printed on stderr).
    """

    commands: tuple[str, ...]
    init_option: bool
    skipped: tuple[str, ...]


def extend_cli(group: click.Group) -> Mounted:
    """Mount the package into ``group``, a click group shaped like Nerve's ``main``.

    Never replaces a command or option ``group`` already has; see the module docstring for
    what is added and how a name taken is reported.
    """
    skipped: list[str] = []
    added: list[str] = []
    for name in PACKAGE_GROUPS:
        existing = group.commands.get(name)
        if existing is None:
            group.add_command(_package_group(name))
            added.append(name)
        elif not getattr(existing, _MOUNTED, False):
            skipped.append(
                f"`{name}` is already a command of this CLI; the package's `{name}` is "
                f"`{_PACKAGE_SCRIPT} {name}`"
            )
    init_option = _extend_init(group.commands.get(INIT_COMMAND), skipped)
    for sentence in skipped:
        click.echo(f"{_PACKAGE_SCRIPT}: not mounted: {sentence}", err=True)
    return Mounted(commands=tuple(added), init_option=init_option, skipped=tuple(skipped))


class _PassThrough(click.Command):
    """A subcommand whose whole argument list goes to the package's CLI, unparsed.

    click parses nothing — not ``--help``, not ``--`` — so ``nerve golden --help`` is the
    package's help and every argument arrives as typed.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.params["arguments"] = tuple(args)
        ctx.args = []
        return []


def _package_group(name: str) -> click.Command:
    def run(arguments: Sequence[str]) -> None:
        from provisioner.cli.main import main as package_main

        ctx = click.get_current_context()
        with _nerves_config_dir(ctx):
            status = package_main([name, *arguments], prog=_host_command(ctx))
        ctx.exit(status)

    command = _PassThrough(
        name,
        callback=run,
        add_help_option=False,
        help=f"The package's `{name}` commands ({_PACKAGE_SCRIPT} {name}; "
        f"`{name} --help` lists them).",
        short_help=f"nerve-provisioner's {name} commands",
    )
    setattr(command, _MOUNTED, True)
    return command


def _extend_init(init: click.Command | None, skipped: list[str]) -> bool:
    """Give ``init`` the backend option and wrap its callback; False when it cannot."""
    if init is None or init.callback is None:
        skipped.append(f"there is no `{INIT_COMMAND}` command to add {BACKEND_OPTION} to")
        return False
    taken = next((p for p in init.params if _takes(p, BACKEND_OPTION, _BACKEND_PARAM)), None)
    if taken is not None:
        if getattr(taken, _MOUNTED, False):
            return True
        skipped.append(
            f"`{INIT_COMMAND}` already has {BACKEND_OPTION}; the package's init is "
            f"`{_PACKAGE_SCRIPT} init {BACKEND_OPTION} memu|loom`"
        )
        return False
    option = click.Option(
        [BACKEND_OPTION, _BACKEND_PARAM],
        type=click.Choice(BACKEND_NAMES),
        default=None,
        help="after this setup, word the workspace for this memory backend (nerve-provisioner)",
    )
    setattr(option, _MOUNTED, True)
    init.params.append(option)
    init.callback = _after_nerve_init(init.callback)
    return True


def _takes(param: click.Parameter, option: str, name: str) -> bool:
    return param.name == name or option in getattr(param, "opts", ())


def _after_nerve_init(nerve_init: Callable[..., Any]) -> Callable[..., Any]:
    """``nerve_init`` first, as Nerve wrote it; then, with a backend asked for, the package's.

    When Nerve's step raises (an abort, a ClickException, an exit), the package's step does
    not run. When the package's init fails, the command exits with the package's status (2
    for bad input, 3 for a template that cannot be rendered) after its one-line message.
    """

    @functools.wraps(nerve_init)
    def init(*args: Any, memory_backend: str | None = None, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        before = _snapshot(_workspace(ctx)) if memory_backend is not None else {}
        result = nerve_init(*args, **kwargs)
        if memory_backend is not None:
            status = _word_workspace(ctx, memory_backend, before)
            if status:
                ctx.exit(status)
        return result

    return init


def _word_workspace(ctx: click.Context, backend: str, before: dict[str, str]) -> int:
    """Run the package's init for ``backend`` on the folders Nerve uses; its exit status.

    The files Nerve's init wrote in this run (changed since ``before``), or that are byte for
    byte Nerve's shipped text, are re-worded like the package's own (NERVE-10).
    """
    from provisioner.cli.main import main as package_main
    from provisioner.integrations.nerve.shipped import host_shipped
    from provisioner.workspace.state import host_shipped_text

    arguments = ["init", BACKEND_OPTION, backend, "--non-interactive"]
    obj = ctx.find_object(dict) or {}
    workspace = getattr(obj.get("config"), "workspace", None)
    if workspace:
        arguments += ["--workspace", str(workspace)]
    if obj.get("config_dir"):
        arguments += ["--config-dir", str(obj["config_dir"])]
    with host_shipped_text(host_shipped(_workspace(ctx), before)):
        return package_main(arguments, prog=_host_command(ctx))


def _workspace(ctx: click.Context) -> Path:
    """The workspace Nerve's loaded configuration names, else the package's default (which
    is Nerve's too)."""
    from provisioner.cli.common import DEFAULT_WORKSPACE

    obj = ctx.find_object(dict) or {}
    named = getattr(obj.get("config"), "workspace", None)
    default = os.environ.get("NERVE_WORKSPACE") or DEFAULT_WORKSPACE
    return Path(str(named) if named else default).expanduser()


def _snapshot(workspace: Path) -> dict[str, str]:
    from provisioner.integrations.nerve.shipped import snapshot

    return snapshot(workspace)


@contextlib.contextmanager
def _nerves_config_dir(ctx: click.Context) -> Iterator[None]:
    """While a mounted group runs, the configuration folder Nerve resolved (its ``-c``, its
    variable, the current folder, its pointer file) is the package's too (NERVE-7): it is
    handed over as ``NERVE_CONFIG_DIR``, which the package reads next after its own flag.
    Nerve's last resort (the current folder, holding no configuration) is not handed over:
    the package keeps its own default then."""
    obj = ctx.find_object(dict) or {}
    folder = obj.get("config_dir")
    if not folder or obj.get("config_source") == _NERVE_FALLBACK:
        yield
        return
    saved = os.environ.get(CONFIG_DIR_ENV)
    os.environ[CONFIG_DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(CONFIG_DIR_ENV, None)
        else:
            os.environ[CONFIG_DIR_ENV] = saved


def _host_command(ctx: click.Context) -> str:
    """The name the host's command was invoked with (``nerve``), for the package's usage
    lines, errors and hints (NERVE-1)."""
    return ctx.find_root().info_name or MOUNTED_COMMAND
