"""FLEET-6 and the README: the fleet as the docs show it, run as written.

The README's "Operate a fleet" block runs verbatim; docs/fleet.md's Ansible playbook runs,
as written on the page, against workspaces on localhost (local connection) when
``ansible-playbook`` is installed, and reads the fleet's ``--json`` and exit statuses.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet.provisioning import AGENT_LINE, EARLIER_LINE, Provision, add_agent_line
from tests.fleet.test_fleet_processes import environment, lock_held
from tests.support.processes import clean_environment
from tests.support.readme_blocks import run_commands, section_commands
from tests.support.repo import REPO_ROOT

FLEET_PAGE = REPO_ROOT / "docs" / "fleet.md"
RECAP = re.compile(
    r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", re.M
)


@pytest.mark.slow
class TestTheReadmeSection:
    def test_operate_a_fleet_runs_as_written(self, tmp_path: Path) -> None:
        home = tmp_path / "home"
        home.mkdir()
        done = run_commands(section_commands("## Operate a fleet"), cwd=tmp_path, home=home)
        assert done.returncode == 0, done.stderr
        assert "exit 1: b drifts" in done.stdout
        assert done.stdout.rstrip().endswith("2 workspaces: 2 up to date")
        agents = (home / "fleet" / "b" / "ws" / "AGENTS.md").read_text()
        assert "Answer in short paragraphs." in agents and "mcp__loom__" in agents
        assert "2 instances: 2 switched" in done.stdout  # FLEET-7
        assert "switched         a/ws (no memu_db or nerve_db)" in done.stdout
        for name in ("a", "b"):
            local = (home / "fleet" / name / "config" / "config.local.yaml").read_text()
            assert "backend: loom" in local and "http://127.0.0.1:8787" in local


def playbook_text() -> str:
    """The one YAML block of docs/fleet.md that is a playbook (it has ``hosts:``)."""
    blocks = re.findall(r"```yaml\n(.*?)```", FLEET_PAGE.read_text(encoding="utf-8"), re.S)
    (playbook,) = [block for block in blocks if "hosts:" in block]
    return playbook


def ansible_playbook() -> str | None:
    beside = Path(sys.executable).with_name("ansible-playbook")
    return str(beside) if beside.exists() else shutil.which("ansible-playbook")


def nerve_provisioner(folder: Path) -> str:
    """A ``nerve-provisioner`` that runs this checkout's package, whatever is installed: the
    module tasks of Ansible do not keep the test's ``PYTHONPATH``."""
    script = folder / "nerve-provisioner"
    script.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(REPO_ROOT))} "
        f'exec {shlex.quote(sys.executable)} -m provisioner "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow
@pytest.mark.skipif(
    ansible_playbook() is None,
    reason="ansible-playbook is not installed (pip install ansible-core, in the test extra)",
)
class TestTheAnsiblePlaybook:
    def play(
        self, tmp_path: Path, inventory: Path, *options: str
    ) -> tuple[subprocess.CompletedProcess, tuple]:
        playbook = tmp_path / "nerve-fleet.yml"
        playbook.write_text(playbook_text())
        hosts = tmp_path / "hosts.ini"
        hosts.write_text(
            "[nerve_hosts]\n"
            f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        )
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        env = clean_environment(
            home,
            {
                "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
                "ANSIBLE_HOME": str(home / ".ansible"),
                "ANSIBLE_RETRY_FILES_ENABLED": "0",
            },
        )
        ran = subprocess.run(
            [
                str(ansible_playbook()),
                "-i", str(hosts),
                str(playbook),
                "-e", f"nerve_provisioner={nerve_provisioner(tmp_path)}",
                "-e", f"fleet_inventory={inventory}",
                *options,
            ],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
        )  # fmt: skip
        recap = RECAP.search(ran.stdout)
        assert recap is not None, ran.stdout + ran.stderr
        return ran, tuple(int(value) for value in recap.groups())

    def fleet(self, tmp_path: Path, provision: Provision, **assets: Path) -> Path:
        for name in ("a", "b"):
            provision(name, **assets)
        inventory = tmp_path / "fleet.json"
        inventory.write_text(
            json.dumps([{"workspace": n, "config_dir": "cfg"} for n in ("a", "b")])
        )
        return inventory

    def test_drift_is_updated_and_reported_changed_then_nothing_changes(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        inventory = self.fleet(tmp_path, provision)
        add_agent_line(tmp_path / "a" / "AGENTS.md")
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        ran, (_ok, changed, failed) = self.play(tmp_path, inventory)
        assert (changed, failed) == (1, 0), ran.stdout
        agents = (tmp_path / "a" / "AGENTS.md").read_text()
        assert AGENT_LINE in agents and "mcp__loom__" in agents
        again, (_ok, changed, failed) = self.play(tmp_path, inventory)
        assert (changed, failed) == (0, 0), again.stdout
        assert "Update the workspaces" in again.stdout and "skipping" in again.stdout

    def test_a_conflict_left_fails_the_host_naming_the_workspace(
        self, tmp_path: Path, provision: Provision, older_assets: Path
    ) -> None:
        inventory = self.fleet(tmp_path, provision, assets=older_assets)
        agents = tmp_path / "b" / "AGENTS.md"
        agents.write_text(agents.read_text().replace(EARLIER_LINE, "This guide is mine now."))
        ran, (_ok, _changed, failed) = self.play(tmp_path, inventory)
        assert failed == 1, ran.stdout
        assert "left for a person: b (conflict)" in ran.stdout
        assert "This guide is mine now." in agents.read_text()

    def test_under_check_mode_drift_shows_as_changed_and_nothing_is_written(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        inventory = self.fleet(tmp_path, provision)
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        before = {n: (tmp_path / n / "TOOLS.md").read_bytes() for n in ("a", "b")}
        ran, (_ok, changed, failed) = self.play(tmp_path, inventory, "--check")
        assert (changed, failed) == (1, 0), ran.stdout
        assert "would update a, b" in ran.stdout
        assert {n: (tmp_path / n / "TOOLS.md").read_bytes() for n in ("a", "b")} == before

    def test_a_workspace_in_error_fails_the_host_after_its_good_workspaces_are_updated(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        inventory = self.fleet(tmp_path, provision)
        entries = json.loads(inventory.read_text())
        inventory.write_text(json.dumps([*entries, {"workspace": "gone", "config_dir": "cfg"}]))
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        ran, (_ok, changed, failed) = self.play(tmp_path, inventory)
        assert (changed, failed) == (1, 1), ran.stdout
        assert "left for a person: gone (error)" in ran.stdout
        for name in ("a", "b"):
            assert "mcp__loom__" in (tmp_path / name / "TOOLS.md").read_text()

    def test_a_busy_workspace_is_retried_then_fails_the_host_the_others_updated(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        inventory = self.fleet(tmp_path, provision)
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
        retries = ("-e", "fleet_busy_retries=1", "-e", "fleet_busy_delay=0")
        with lock_held(tmp_path / "b", environment(tmp_path)):
            ran, (_ok, _changed, failed) = self.play(tmp_path, inventory, *retries)
        assert failed == 1, ran.stdout
        assert ran.stdout.count("FAILED - RETRYING: [localhost]: Update the workspaces") == 1
        assert "mcp__loom__" in (tmp_path / "a" / "TOOLS.md").read_text()
        assert "mcp__loom__" not in (tmp_path / "b" / "TOOLS.md").read_text()
