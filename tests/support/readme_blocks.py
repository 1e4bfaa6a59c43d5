"""The README's command blocks, read and run as written, for the tests that hold it to the CLI.

A section's commands are the lines of its one ``bash`` block. They run in bash with
``set -euo pipefail`` from a chosen folder, with HOME pointing at a fresh temporary folder,
so a command that fails stops the script and fails the test, and nothing of the user's own
configuration leaks in.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

README = REPO_ROOT / "README.md"
SCRIPT_TIMEOUT_S = 180  # far above what the blocks take; a hung command fails the test
# On exit, whatever the script left running in the background is stopped and waited for;
# the script's own exit status is kept.
STOP_BACKGROUND_JOBS = (
    'trap "status=\\$?; kill \\$(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; '
    'exit \\$status" EXIT'
)


def readme_section(heading: str) -> str:
    """The text of the README section under ``heading`` (``## …``), up to the next one."""
    text = README.read_text(encoding="utf-8")
    if heading not in text:
        raise AssertionError(f"README.md has no section {heading!r}")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def section_commands(heading: str) -> list[str]:
    """The non-blank lines of the one ``bash`` block of a README section."""
    (block,) = re.findall(r"```bash\n(.*?)```", readme_section(heading), flags=re.DOTALL)
    return [line for line in block.splitlines() if line.strip()]


def port_is_free(port: int) -> bool:
    """Whether 127.0.0.1:``port`` can be bound now (a README names fixed ports)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_commands(
    commands: Sequence[str], *, cwd: Path, home: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``commands`` as one bash script; background jobs are stopped when it ends.

    The script stops at the first failing command; an EXIT trap then kills whatever it left
    running in the background, so a failed run leaves no server behind either.
    """
    script = "\n".join(
        [
            "set -euo pipefail",
            STOP_BACKGROUND_JOBS,
            *commands,
        ]
    )
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=clean_environment(home),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
