"""What every ``nerve`` command shares: exit statuses, the one-line usage error, the parser
class, and where the workspace and configuration folder are.

Command modules (``provisioner.cli.*``) import from here, not from ``provisioner.cli.main``,
so the top-level parser can import them without a cycle.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import NoReturn

from provisioner.errors import UserError

EXIT_OK = 0
EXIT_DIFFERENCE = 1
EXIT_USAGE = 2
EXIT_TEMPLATE = 3  # GOLD-2: a template that cannot be rendered, told apart from a difference
PROGRAM = "nerve"
DEFAULT_WORKSPACE = "~/nerve-workspace"
DEFAULT_CONFIG_DIR = "~/.nerve"


class UsageError(UserError):
    """Bad input on the command line or in a file it names; printed as one line."""


class ArgParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and goes through ``UsageError``.

    The line names the subcommand (``init: argument --profile: …``); the ``nerve: error:``
    prefix is the CLI's, printed once.
    """

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix(PROGRAM).strip()
        raise UsageError(f"{command}: {message}" if command else message)


def path_argument(text: str) -> Path:
    """A path flag's value; an empty one is refused (it would silently mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; expected a folder path")
    return Path(text)


def add_workspace_options(command: argparse.ArgumentParser) -> None:
    """``--workspace`` and ``--config-dir``, with the defaults every command shares."""
    command.add_argument(
        "--workspace",
        type=path_argument,
        default=None,
        help=f"workspace folder (default: $NERVE_WORKSPACE or {DEFAULT_WORKSPACE})",
    )
    command.add_argument(
        "--config-dir",
        type=path_argument,
        default=None,
        help=f"configuration folder (default: $NERVE_CONFIG_DIR or {DEFAULT_CONFIG_DIR})",
    )


def workspace_and_config_dir(args: argparse.Namespace) -> tuple[Path, Path]:
    """The workspace and configuration folders: flag, else environment, else default."""
    workspace = args.workspace or Path(os.environ.get("NERVE_WORKSPACE") or DEFAULT_WORKSPACE)
    config_dir = args.config_dir or Path(os.environ.get("NERVE_CONFIG_DIR") or DEFAULT_CONFIG_DIR)
    return workspace.expanduser(), config_dir.expanduser()
