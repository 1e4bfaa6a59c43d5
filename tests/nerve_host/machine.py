"""A fresh machine for Nerve, and where Nerve's source and its command are.

Without Nerve each module of the integration suite skips at once, with the one reason
``NO_NERVE``.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

NO_NERVE = (
    "Nerve is not importable here: the integration suite runs in a venv with Nerve installed "
    "(scripts/nerve_host_tests.sh)"
)
# The command Nerve installs, with the package mounted as Nerve's two lines would mount it.
HOST_CLI = Path(__file__).parent / "host_cli.py"


def nerve_source() -> Path:
    """Nerve's source: ``NERVE_SOURCE``, else ``../shared/nerve`` from the repository root."""
    named = os.environ.get("NERVE_SOURCE")
    return Path(named) if named else REPO_ROOT.parent / "shared" / "nerve"


class Machine:
    """A fresh machine for Nerve: HOME, Nerve's state folder and a configuration folder."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.state = self.home / ".nerve"  # NERVE-7: $NERVE_HOME's default
        self.config_dir = self.home / "nerve-config"
        self.workspace = self.home / "nerve-workspace"
        self.home.mkdir()
        self.config_dir.mkdir()

    def environment(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a command runs with: no variable of Nerve's or the package's, an
        API key so Nerve's non-interactive init has one, and ``extra`` over it."""
        env = clean_environment(self.home)
        env.pop("OPENAI_API_KEY", None)
        env["ANTHROPIC_API_KEY"] = "sk-ant-test-not-a-real-key"
        env.update(extra or {})
        return env


RunHost = Callable[..., subprocess.CompletedProcess]


def nerve_is_patched() -> bool:
    """Whether the Nerve installed here carries patches/nerve-adoption.patch (NERVE-18)."""
    import importlib.util

    spec = importlib.util.find_spec("nerve.agent.engine")
    if spec is None or spec.origin is None:
        return False
    return "nerve_memory" in Path(spec.origin).read_text(encoding="utf-8")
