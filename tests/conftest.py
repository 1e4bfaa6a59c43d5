"""Fixtures every test may ask for: the command line run in this process (or as a real
``nerve`` process where a test is about one), and copies of the templates."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.runner import run_cli
from tests.support.processes import RunNerve, clean_environment
from tests.support.repo import GOLDEN_DIR, REPO_ROOT


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
