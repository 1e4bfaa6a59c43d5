"""`nerve memory recall` and `nerve memory status`."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to ``commands``."""
