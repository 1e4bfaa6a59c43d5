"""The README holds in Nerve's world (NERVE-12): its command blocks run verbatim with Nerve
installed beside the package.

The README's own tests run here again, unchanged, in the venv that holds Nerve: the quick tour,
"Try Loom locally" and "Switch an instance to Loom". The venv's scripts come first on PATH, so
every ``nerve-provisioner`` the blocks type is the one installed beside Nerve. Without Nerve
the same tests run in the package's default suite.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.nerve_host.machine import NO_NERVE

pytest.importorskip("nerve.cli", reason=NO_NERVE)

import tests.migration.test_readme as switch
import tests.runtime.loom.test_readme as try_loom
import tests.test_docs as docs


@pytest.fixture(autouse=True)
def this_venv_first_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripts of the venv that holds Nerve and the package, ahead of any other."""
    scripts = Path(sys.executable).parent
    assert (scripts / "nerve-provisioner").is_file()
    monkeypatch.setenv("PATH", f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}")


class TestTheQuickTourBesideNerve(docs.TestQuickTour):
    """The tour, verbatim, with Nerve installed."""


class TestTryLoomLocallyBesideNerve(try_loom.TestTryLoomLocally):
    """The section "Try Loom locally", verbatim after its install line, with Nerve installed."""


class TestSwitchAnInstanceBesideNerve(switch.TestSwitchAnInstanceToLoom):
    """The section "Switch an instance to Loom", verbatim, with Nerve installed."""
