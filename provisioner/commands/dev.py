"""`nerve dev gateway`: a local stand-in for the MCP gateway and Loom."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    """Add this module's commands to ``commands``."""
