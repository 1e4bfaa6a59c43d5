"""A click command shaped like Nerve's ``nerve.cli:main``, small enough to read in a minute.

Like Nerve's: a group ``main`` with ``--config-dir/-c`` and ``--verbose/-v`` whose callback
resolves the configuration folder (flag, else ``NERVE_CONFIG_DIR``, else the current folder),
loads the configuration (here: the ``workspace:`` line of ``config.yaml``) and keeps it in
``ctx.obj`` as ``config_dir`` and ``config`` (an object with ``workspace``), ``None`` when
there is none yet. Its ``init`` has Nerve's flags, asks a question unless non-interactive,
writes ``config.yaml`` and creates the workspace with one file of its own (``AGENTS.md``,
only when absent), then reloads the configuration, as Nerve's does; with ``--if-needed`` on a
folder that has ``config.yaml`` it does nothing.

Every command prints ``stub-nerve <command>: …`` and exits with a status of its own, so a test
can tell the stub's answer from anyone else's: ``start`` 0 (and a line on stderr), ``status``
3, ``doctor`` 1, ``init`` 0 (1 when ``STUB_NERVE_INIT_FAILS=1``).

With ``STUB_NERVE_ADOPTS_PROVISIONER=1`` the module does what the package's docs ask of Nerve
(``extend_cli(main)``), standing for a Nerve that adopted the package.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import click

STATUS_EXIT = 3
DOCTOR_EXIT = 1
ADOPTS_VARIABLE = "STUB_NERVE_ADOPTS_PROVISIONER"
INIT_FAILS_VARIABLE = "STUB_NERVE_INIT_FAILS"
OWN_AGENTS_MD = "Nerve's own AGENTS.md (stub)\n"


def _load(config_dir: Path) -> SimpleNamespace | None:
    path = config_dir / "config.yaml"
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "workspace":
            return SimpleNamespace(workspace=Path(value.strip()).expanduser())
    return SimpleNamespace(workspace=Path("~/nerve-workspace").expanduser())


def build_cli() -> click.Group:
    """A fresh group each call, so a test that extends one leaves the others as they were."""

    @click.group()
    @click.option("--config-dir", "-c", type=click.Path(), default=None, help="Config directory")
    @click.option("--verbose", "-v", is_flag=True, help="Enable debug logging")
    @click.pass_context
    def main(ctx: click.Context, config_dir: str | None, verbose: bool) -> None:
        """Stub Nerve — a stand-in for the real one."""
        resolved = Path(config_dir or os.environ.get("NERVE_CONFIG_DIR") or Path.cwd())
        ctx.ensure_object(dict)
        ctx.obj["config_dir"] = str(resolved.expanduser().resolve())
        ctx.obj["config"] = _load(Path(ctx.obj["config_dir"]))
        ctx.obj["verbose"] = verbose

    @main.command()
    @click.option("--if-needed", is_flag=True, help="Only run if fresh install detected")
    @click.option("--non-interactive", is_flag=True, help="Use env vars, no prompts")
    @click.option("--inside-docker", is_flag=True, hidden=True)
    @click.pass_context
    def init(
        ctx: click.Context, if_needed: bool, non_interactive: bool, inside_docker: bool
    ) -> None:
        """First-run setup wizard."""
        if os.environ.get(INIT_FAILS_VARIABLE) == "1":
            raise click.ClickException("stub-nerve init: setup failed")
        config_dir = Path(ctx.obj["config_dir"])
        if if_needed and (config_dir / "config.yaml").is_file():
            return  # already configured: nothing to do, as Nerve's --if-needed
        name = "Nerve" if non_interactive else click.prompt("Agent name")
        workspace = Path(os.environ.get("NERVE_WORKSPACE") or "~/nerve-workspace").expanduser()
        config_dir.mkdir(parents=True, exist_ok=True)
        (config_dir / "config.yaml").write_text(f"workspace: {workspace}\n", encoding="utf-8")
        workspace.mkdir(parents=True, exist_ok=True)
        agents = workspace / "AGENTS.md"
        if not agents.exists():
            agents.write_text(OWN_AGENTS_MD, encoding="utf-8")
        ctx.obj["config"] = _load(config_dir)
        click.echo(f"stub-nerve init: configured {name} (non_interactive={non_interactive})")

    @main.command()
    @click.option("--foreground", "-f", is_flag=True, help="Run in foreground")
    def start(foreground: bool) -> None:
        """Start the daemon."""
        click.echo("stub-nerve: starting", err=True)
        click.echo(f"stub-nerve start: started (foreground={foreground})")

    @main.command()
    @click.option("--follow", "-f", is_flag=True, help="Follow log output")
    @click.pass_context
    def status(ctx: click.Context, follow: bool) -> None:
        """Show whether the daemon runs."""
        click.echo(f"stub-nerve status: not running (follow={follow})")
        ctx.exit(STATUS_EXIT)

    @main.command()
    @click.pass_context
    def doctor(ctx: click.Context) -> None:
        """Diagnose the install."""
        click.echo(f"stub-nerve doctor: [ERR] config dir {ctx.obj['config_dir']}")
        ctx.exit(DOCTOR_EXIT)

    return main


main = build_cli()

if os.environ.get(ADOPTS_VARIABLE) == "1":
    from provisioner.integrations.nerve import extend_cli

    extend_cli(main)
