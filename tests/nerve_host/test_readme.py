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

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

pytest.importorskip("nerve.cli", reason=NO_NERVE)

import tests.migration.test_readme as switch
import tests.runtime.loom.test_readme as try_loom
import tests.test_docs as docs
from provisioner.integrations.nerve import nerve_settings
from testbed.memu_db import MemuDb
from testbed.nerve_db import NerveDb
from tests.support.readme_blocks import run_commands, section_commands


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


class TestSwitchOnAnInstanceNervesInitSetUp:
    """The section "Switch an instance to Loom", verbatim, on an instance Nerve's own init set
    up: its configuration in a folder of its own that Nerve's pointer file names, memU's store
    and ``nerve.db`` in ``$NERVE_HOME`` (NERVE-12)."""

    @pytest.mark.slow
    def test_the_switch_lands_where_nerve_reads_and_memus_memories_move(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        done = run_host("-c", str(machine.config_dir), "init", "--non-interactive", mounted=False)
        assert done.returncode == 0, done.stderr
        memu = MemuDb(machine.state / "memu.sqlite")
        for index in range(3):
            memu.add_item(f"remembered fact {index}")
        nerve = NerveDb(machine.state / "nerve.db")
        nerve.session("old")
        nerve.add_many("old", 4)
        nerve.close()
        assert switch.port_is_free(switch.GATEWAY_PORT)
        ran = run_commands(section_commands(switch.SECTION), cwd=machine.home, home=machine.home)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "3 of 3 memU items done, 0 left" in ran.stdout, ran.stdout
        assert not (machine.state / "config.local.yaml").exists()  # not where Nerve never reads
        settings = nerve_settings(machine.config_dir)
        assert settings["memory"]["backend"] == "loom"
        assert settings["mcp_gateway_url"] == "http://127.0.0.1:8787"
