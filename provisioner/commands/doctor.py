"""`nerve doctor`: checks of configuration, workspace and, under Loom, the gateway."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to ``commands``."""
