"""The README's command blocks, run one after another on one machine as a reader would
(NERVE-12): the quick tour, "Try Loom locally", "Switch an instance to Loom" and "Operate a
fleet", verbatim (the install lines left out: the package is installed), in one HOME, from a
copy of the checkout. Each section must leave the machine so that the next one runs: no step
assumes something no earlier step made (a memU store, a nerve.db), and the switch is written
where the configuration is read. (That a section stops its own gateway is held by its own
test: the harness stops whatever a script leaves running.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.readme_blocks import port_is_free, run_commands, section_commands
from tests.test_docs import checkout_copy

SECTIONS = (
    "## Quick tour",
    "## Try Loom locally",
    "## Switch an instance to Loom",
    "## Operate a fleet",
)
INSTALL = "pip install"
GATEWAY_PORT = 8787  # the dev gateway's default, which the sections name


@pytest.mark.slow
def test_the_readmes_sections_run_one_after_another_on_one_machine(tmp_path: Path) -> None:
    assert port_is_free(GATEWAY_PORT), f"the README's gateway port {GATEWAY_PORT} is taken"
    home = tmp_path / "home"
    home.mkdir()
    checkout = checkout_copy(tmp_path / "checkout")
    for heading in SECTIONS:
        commands = [line for line in section_commands(heading) if INSTALL not in line]
        done = run_commands(commands, cwd=checkout, home=home)
        assert done.returncode == 0, f"{heading}:\n{done.stdout}\n{done.stderr}"
    assert "memory:\n  backend: loom" in (home / ".nerve" / "config.local.yaml").read_text("utf-8")
