"""Where an instance keeps the runtime's databases, under its configuration folder.

The sweep, the recall command and doctor all open the same two files, so their names are
written once here (SWEEP-1: the transcripts a sweep reads; SWEEP-2: the state it keeps).
"""

from __future__ import annotations

from pathlib import Path

MEMORY_DIR = "memory"
TRANSCRIPTS_FILE = "transcripts.sqlite3"
STATE_FILE = "state.sqlite3"


def default_paths(config_dir: Path) -> tuple[Path, Path]:
    """The transcripts and state databases under ``config_dir``."""
    folder = config_dir / MEMORY_DIR
    return folder / TRANSCRIPTS_FILE, folder / STATE_FILE
