"""A second process that holds a file the way another nerve process would, until told to stop.

``held_by_another_process(code)`` starts ``python -c`` with ``code`` (which takes its hold and
must then print ``HELD`` and wait for a line on stdin), waits for ``HELD`` — so the hold is
real before the test goes on, ordered by the pipe rather than by a sleep — and, when the block
ends, writes the line and waits for the process to let go and exit.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from provisioner.runtime.state import StateStore
from tests.conftest import REPO_ROOT

HOLD_READY = "HELD"
EXIT_WAIT_S = 60  # a generous bound on the holder's exit once told to let go

SQLITE_EXCLUSIVE = """
import sqlite3, sys
database = sqlite3.connect(sys.argv[1], isolation_level=None)
database.execute("BEGIN EXCLUSIVE")
print("HELD", flush=True)
sys.stdin.readline()
database.execute("ROLLBACK")
"""

SWEEP_LOCK = """
import sys
from provisioner.runtime.sweep.lock import sweep_lock
with sweep_lock(sys.argv[1], None) as held:
    assert held, "the lock was already held"
    print("HELD", flush=True)
    sys.stdin.readline()
"""

MIGRATION_LOCK = """
import sys
from provisioner.migration.ledger import migration_lock
with migration_lock(sys.argv[1]) as held:
    assert held, "the lock was already held"
    print("HELD", flush=True)
    sys.stdin.readline()
"""


@contextmanager
def held_by_another_process(code: str, path: str | Path) -> Iterator[subprocess.Popen[str]]:
    """Run ``code`` on ``path`` in a second Python process while the block runs."""
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        ready = holder.stdout.readline().strip()
        if ready != HOLD_READY:
            holder.kill()
            _, error = holder.communicate(timeout=EXIT_WAIT_S)
            raise AssertionError(f"the second process took no hold: {ready!r} {error.strip()}")
        yield holder
    finally:
        if holder.poll() is None:
            try:
                holder.communicate("\n", timeout=EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                holder.kill()
                holder.communicate()


def spellings(tmp_path: Path) -> dict[str, Path]:
    """A real state file and three other ways to reach it (REL-5): a link to the file, a
    link to its folder, and a path through ``..``."""
    real = tmp_path / "real" / "state.sqlite3"
    real.parent.mkdir()
    StateStore(real).close()
    (tmp_path / "link.sqlite3").symlink_to(real)
    (tmp_path / "folder").symlink_to(real.parent, target_is_directory=True)
    (tmp_path / "other").mkdir()
    return {
        "real": real,
        "file symlink": tmp_path / "link.sqlite3",
        "folder symlink": tmp_path / "folder" / "state.sqlite3",
        "dot-dot": tmp_path / "other" / ".." / "real" / "state.sqlite3",
    }
