"""Running the real ``nerve`` process, and what every such run is held to.

A run starts from a clean environment (no variable of the package's, HOME a fresh folder), so
no user configuration or earlier run leaks in; a refusal is one line and a meaningful status.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

# Variables that would change what nerve does; each CLI test starts without them.
_NERVE_VARIABLES = ("NERVE_", "LOOM_", "COPIER_", "CI")

RunNerve = Callable[..., subprocess.CompletedProcess]


def clean_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without nerve's own variables, HOME set to ``home``,
    and temporary files under it: a child killed on purpose leaves its scratch folder in the
    test's own folder, not in the machine's."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(_NERVE_VARIABLES)}
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    scratch = home / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    env["TMPDIR"] = str(scratch)
    env.update(extra or {})
    return env


def assert_one_line_error(
    result: subprocess.CompletedProcess, *fragments: str, status: int = 2
) -> None:
    """Exit ``status`` (2, bad input, unless told), one line on stderr containing every
    fragment, and no traceback."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def read_terminal(leader: int, *, errors: str = "replace") -> str:
    """All a process wrote to the terminal whose leader end is ``leader``, until its side
    closed; the leader is closed after. Linux answers EIO once the other side is gone."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(leader, 65536):
            chunks.append(chunk)
    except OSError:  # the other end is closed
        pass
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", errors=errors)
