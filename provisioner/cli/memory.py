"""``nerve memory …``: the Loom runtime from the command line.

The group's subcommands live in modules of their own: ``memory_recall`` (``recall``,
``status``), ``memory_import`` (``import``), ``memory_sweep`` (``sweep``) and
``memory_migrate`` (``migrate``, memU's memories into Loom, MIG-1) and ``memory_switch``
(``switch``, one instance's configuration switched to Loom where it is read).
"""

from __future__ import annotations

import argparse

from provisioner.cli import (
    memory_import,
    memory_migrate,
    memory_recall,
    memory_sweep,
    memory_switch,
)
from provisioner.cli.common import ArgParser


def register(commands: argparse._SubParsersAction) -> None:
    """Add ``nerve memory`` and its subcommands to the top-level parser."""
    memory = commands.add_parser(
        "memory", help="recall, status, the extraction sweep and the migration from memU"
    )
    actions = memory.add_subparsers(dest="memory_command", required=True, parser_class=ArgParser)
    memory_recall.register(actions)
    memory_import.register(actions)
    memory_sweep.register(actions)
    memory_migrate.register(actions)
    memory_switch.register(actions)
