"""Shared test helpers: running the command line (in this process, or as a real ``nerve``
process where a test is about one), and copies of the templates."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.runner import run_cli

REPO_ROOT = Path(__file__).resolve().parent.parent
GOLDEN_DIR = REPO_ROOT / "golden"

# Variables that would change what nerve does; each CLI test starts without them.
_NERVE_VARIABLES = ("NERVE_", "LOOM_", "COPIER_", "CI")


def clean_environment(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without nerve's own variables, HOME set to ``home``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(_NERVE_VARIABLES)}
    env["HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env.update(extra or {})
    return env


RunNerve = Callable[..., subprocess.CompletedProcess]


@pytest.fixture
def run_nerve(tmp_path: Path) -> RunNerve:
    """Run the command line ``python -m provisioner …`` (the same CLI as ``nerve``) in this
    process, through ``main(argv)`` (``tests.runner``).

    Runs in ``tmp_path`` with a clean environment whose HOME is a fresh folder, so no user
    configuration or earlier run leaks in. ``input`` is fed to stdin; stdin is never a TTY.
    """
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)

    def run(
        *args: str,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess:
        return run_cli(args, input=input, env=clean_environment(home, env), cwd=cwd or tmp_path)

    return run


@pytest.fixture
def nerve_process(tmp_path: Path) -> RunNerve:
    """``run_nerve`` as a real process, for a test about what only a second process meets
    (a lock this process holds)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)

    def run(
        *args: str,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "provisioner", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=clean_environment(home, env),
            cwd=cwd or tmp_path,
            timeout=120,
        )

    return run


@pytest.fixture
def assets_copy(tmp_path: Path) -> Path:
    """A private copy of templates/ and skills/ to plant changes in (``NERVE_ASSETS_DIR``)."""
    root = tmp_path / "assets"
    shutil.copytree(REPO_ROOT / "templates", root / "templates")
    shutil.copytree(REPO_ROOT / "skills", root / "skills")
    return root


@pytest.fixture
def golden_copy(tmp_path: Path) -> Path:
    """A private copy of golden/ for tests that update goldens."""
    target = tmp_path / "golden"
    shutil.copytree(GOLDEN_DIR, target)
    return target


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
