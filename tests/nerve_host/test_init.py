"""A fresh machine through Nerve's own init with the package mounted (NERVE-10).

``nerve init --memory-backend loom --non-interactive`` runs Nerve's real init (its wizard
writes its own workspace text), then the package's: the workspace ends worded for Loom, with
no memU tool named in the files the agent reads, while a file the agent edited is kept.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

pytest.importorskip("nerve.workspace", reason=NO_NERVE)

from importlib import resources

from provisioner.templating.wording import lint_text, nameable_by_backend

WORDED = (
    "AGENTS.md",
    "TOOLS.md",
    "MEMORY.md",
    "skills/nerve-dev/SKILL.md",
    "skills/nerve-workspace/SKILL.md",
    "config/cron/system.yaml",
    "config/cron/jobs.yaml",
)


def init_loom(run_host: RunHost, machine: Machine) -> str:
    done = run_host(
        "-c",
        str(machine.config_dir),
        "init",
        "--memory-backend",
        "loom",
        "--non-interactive",
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def memu_names(workspace: Path) -> dict[str, list[str]]:
    """The files among ``WORDED`` whose text names a tool Loom sessions do not have."""
    nameable = nameable_by_backend()
    found = {}
    for relative in WORDED:
        text = (workspace / relative).read_text(encoding="utf-8")
        problems = lint_text(relative, text, "loom", nameable)
        if problems:
            found[relative] = sorted({problem.tool for problem in problems})
    return found


class TestAFreshMachine:
    def test_nerves_init_then_the_packages_leaves_every_file_worded_for_loom(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        summary = init_loom(run_host, machine)
        assert "worded for loom" in summary
        for relative in WORDED:
            assert f"kept       {relative}" not in summary, summary
        assert memu_names(machine.workspace) == {}
        manifest = json.loads(
            (machine.workspace / ".nerve" / "provisioned.json").read_text(encoding="utf-8")
        )
        assert manifest["answers"]["memory_backend"] == "loom"

    def test_nerves_settings_are_kept_not_reworded(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        """Nerve's wizard writes its settings (model, timezone, …): configuration, not text."""
        init_loom(run_host, machine)
        settings = (machine.workspace / "config" / "settings.yaml").read_text(encoding="utf-8")
        assert "timezone" in settings


class TestAnEditedWorkspace:
    def test_a_file_the_agent_edited_is_kept_and_the_shipped_ones_are_reworded(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        """Nerve's init first (memU wording), an edit to MEMORY.md, then the switch: MEMORY.md
        is the agent's and stays; Nerve's untouched AGENTS.md is its shipped text, by bytes."""
        done = run_host("-c", str(machine.config_dir), "init", "--non-interactive", mounted=False)
        assert done.returncode == 0, done.stderr
        shipped = resources.files("nerve") / "templates" / "personal" / "AGENTS.md"
        assert (machine.workspace / "AGENTS.md").read_bytes() == shipped.read_bytes()
        memory = machine.workspace / "MEMORY.md"
        edited = memory.read_text(encoding="utf-8") + "\n- Ada takes her tea with lemon.\n"
        memory.write_text(edited, encoding="utf-8")
        summary = init_loom(run_host, machine)
        assert "re-worded  AGENTS.md" in summary
        assert "kept       MEMORY.md" in summary
        assert memory.read_text(encoding="utf-8") == edited
        assert "AGENTS.md" not in memu_names(machine.workspace)


class TestTheHintsNameNervesCommand:
    def test_the_diff_command_init_prints_runs_as_printed_through_nerve(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        """NERVE-1: the kept file's hint names ``nerve diff``, which exists where it ran."""
        summary = init_loom(run_host, machine)
        hint = next(line for line in summary.splitlines() if "(edited; see: " in line)
        command = shlex.split(hint.split("(edited; see: ", 1)[1].rstrip(")"))
        assert command[:2] == ["nerve", "diff"]
        shown = run_host("-c", str(machine.config_dir), *command[1:])
        assert shown.returncode == 1, shown.stderr  # 1: it showed a difference
        assert shown.stdout.startswith("--- ")
