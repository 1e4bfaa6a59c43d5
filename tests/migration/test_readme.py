"""The README's "Switch an instance to Loom" commands, run as written on a memU instance.

The instance is made first, as a platform would have it: a workspace provisioned for memU
(its MEMORY.md edited by the agent), memU's store with a few memories, and Nerve's
``nerve.db`` with one conversation memU memorized part of (``last_memorized_at``) and one it
never saw. Then every command of the section runs verbatim in bash with HOME pointing at that
instance (MIG-1, MIG-2, issue 19).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from testbed.memu_db import MemuDb
from testbed.nerve_db import NerveDb, native
from tests.support.processes import RunNerve
from tests.support.readme_blocks import port_is_free, run_commands, section_commands

SECTION = "## Switch an instance to Loom"
GATEWAY_PORT = 8787  # the dev gateway's default, which the section's config line names
MEMU_ITEMS = 5
MEMORIZED_TURNS = 6  # of session "old": memU had memorized these when the instance switched
NEW_TURNS = 4  # of session "old", after memU's point
FRESH_TURNS = 3  # of session "fresh", which memU never saw


def _memu_instance(home: Path, run_nerve: RunNerve) -> None:
    nerve_dir = home / ".nerve"
    done = run_nerve("init", "--non-interactive", env={"HOME": str(home)})
    assert done.returncode == 0, done.stderr
    memory_md = home / "nerve-workspace" / "MEMORY.md"
    memory_md.write_text(
        memory_md.read_text(encoding="utf-8") + "\nAsk mcp__nerve__memorize to keep a fact.\n",
        encoding="utf-8",
    )
    nerve_dir.mkdir(exist_ok=True)
    memu = MemuDb(nerve_dir / "memu.sqlite")
    for index in range(MEMU_ITEMS):
        memu.add_item(f"remembered fact {index}", categories=("Work",) if index % 2 else ())
    nerve = NerveDb(nerve_dir / "nerve.db")
    nerve.session("old")
    nerve.session("fresh")
    nerve.add_many("old", MEMORIZED_TURNS + NEW_TURNS)
    nerve.set_last_memorized_at("old", native(0, MEMORIZED_TURNS - 1))
    nerve.add_many("fresh", FRESH_TURNS)
    nerve.close()


class TestSwitchAnInstanceToLoom:
    def test_the_section_names_every_step(self) -> None:
        commands = section_commands(SECTION)
        for step in (
            "migrate --dry-run",
            "init --memory-backend loom",
            "memory migrate",
            "--plan",
            "memory sweep",
            "nerve-provisioner doctor",
        ):
            assert any(step in line for line in commands), f"no {step!r} in the section"

    @pytest.mark.slow
    def test_the_commands_run_as_written_and_lose_nothing(
        self, tmp_path: Path, run_nerve: RunNerve
    ) -> None:
        assert port_is_free(GATEWAY_PORT), f"the section's gateway port {GATEWAY_PORT} is taken"
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        _memu_instance(home, run_nerve)
        done = run_commands(section_commands(SECTION), cwd=tmp_path, home=home)
        assert done.returncode == 0, done.stdout + done.stderr
        out = done.stdout
        # memU's memories: counted first, then each written once
        assert f"migrate dry run: {MEMU_ITEMS} memU items" in out, out
        assert f"{MEMU_ITEMS} would be written" in out, out
        assert f"{MEMU_ITEMS} of {MEMU_ITEMS} memU items done, 0 left" in out, out
        # the sweep starts where memU stopped: the plan and the sweep send only the rest
        due = NEW_TURNS + FRESH_TURNS
        plan = re.search(r"^plan .*nothing was sent$", out, re.MULTILINE)
        assert plan is not None and f"{due} messages in" in plan[0], out
        assert f"leaving {MEMORIZED_TURNS} messages to memU" in out, out
        assert re.search(rf"^sweep done: 2 of 2 sessions, .* {due} messages taken", out, re.M), out
        # doctor: the migration done, the kept memU tool named with its file and line
        assert re.search(r"\[OK\]\s+memory\.migration:", out), out
        assert re.search(r"\[WARN\]\s+workspace\.tool_names.*MEMORY\.md:\d+", out), out
        dev_loom = home / ".nerve" / "dev-loom"
        assert dev_loom.is_dir()
        kept = json.loads((home / "nerve-workspace" / ".nerve" / "provisioned.json").read_text())
        assert kept["answers"]["memory_backend"] == "loom"
