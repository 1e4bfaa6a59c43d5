"""REL-15 and FLEET-1: a fault of the machine in one workspace takes the status every command
gives it (75 full or busy, 73 read-only), never 2; a busy workspace is ``busy``, and its 75
hides neither the conflicts found elsewhere nor their previews in the JSON.

Real faults: a full tmpfs, a read-only bind mount, an init lock held by another process.
"""

from __future__ import annotations

import json
from pathlib import Path

from provisioner.runtime.gateway.masking import MASK
from tests.fleet.provisioning import EARLIER_LINE, Provision, Ran, run_main
from tests.fleet.test_fleet_processes import environment, lock_held
from tests.support.machine_faults import fill, full_disk, read_only


def inventory_of(tmp_path: Path, *names: str) -> Path:
    inventory = tmp_path / "fleet.json"
    inventory.write_text(json.dumps([{"workspace": n, "config_dir": "cfg"} for n in names]))
    return inventory


def update(inventory: Path) -> Ran:
    return run_main(["fleet", "update", "--inventory", str(inventory), "--json"])


def switch_to_loom(tmp_path: Path) -> None:
    (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")


class TestMachineFaults:
    def test_a_full_disk_is_75_for_that_workspace_and_the_run_and_the_others_go_on(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        with full_disk(tmp_path / "disk") as disk:
            provision("disk/a")
            provision("b")
            switch_to_loom(tmp_path)
            fill(disk)
            ran = update(inventory_of(tmp_path, "disk/a", "b"))
        assert ran.status == 75, ran.stderr
        full, fine = ran.json()["workspaces"]
        assert (full["status"], full["exit_status"]) == ("error", 75)
        assert "the disk is full" in full["error"]
        assert fine["status"] == "up_to_date"
        assert ran.json()["exit_status"] == 75
        [line] = ran.stderr.splitlines()
        assert "disk/a" in line and "the disk is full" in line

    def test_a_read_only_workspace_is_73(self, tmp_path: Path, provision: Provision) -> None:
        provision("ro/a")
        provision("b")
        switch_to_loom(tmp_path)
        with read_only(tmp_path / "ro") as kind:
            ran = update(inventory_of(tmp_path, "ro/a", "b"))
        assert ran.status == 73, ran.stderr
        failed, fine = ran.json()["workspaces"]
        assert (failed["status"], failed["exit_status"]) == ("error", 73)
        said = "read-only" if kind == "read_only" else "permission denied"
        assert said in failed["error"]
        assert fine["status"] == "up_to_date"

    def test_an_input_error_outranks_a_full_disk_for_the_run(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        """A person must fix the input before any retry helps: 2, not 75."""
        with full_disk(tmp_path / "disk") as disk:
            provision("disk/a")
            switch_to_loom(tmp_path)
            fill(disk)
            ran = update(inventory_of(tmp_path, "disk/a", "missing"))
        assert ran.status == 2
        statuses = [(w["status"], w["exit_status"]) for w in ran.json()["workspaces"]]
        assert statuses == [("error", 75), ("error", 2)]


class TestBusy:
    def test_busy_is_its_own_status_and_its_75_keeps_the_conflicts_found(
        self, tmp_path: Path, provision: Provision, older_assets: Path
    ) -> None:
        for name in ("a", "b"):
            provision(name, assets=older_assets)
        agents = tmp_path / "a" / "AGENTS.md"
        agents.write_text(agents.read_text().replace(EARLIER_LINE, "This guide is mine now."))
        inventory = inventory_of(tmp_path, "a", "b")
        with lock_held(tmp_path / "b", environment(tmp_path)):
            ran = update(inventory)
        assert ran.status == 75
        document = ran.json()
        conflicted, busy = document["workspaces"]
        assert (busy["status"], busy["exit_status"]) == ("busy", 75)
        assert "another nerve init" in busy["error"]
        assert conflicted["status"] == "conflict"
        [conflict] = [f for f in conflicted["files"] if f["action"] == "conflict"]
        assert conflict["path"] == "AGENTS.md"
        assert "<<<<<<< the file as it is" in conflict["preview"]
        assert "This guide is mine now." in conflict["preview"]
        text = run_main(["fleet", "update", "--inventory", str(inventory)]).stdout
        assert "\n".join(f"    {line}" for line in conflict["preview"].splitlines()) in text
        assert document["summary"]["busy"] == 1 and document["summary"]["conflict"] == 1
        assert document["exit_status"] == 75


class TestCredentials:
    def test_a_gateway_url_with_a_secret_is_masked_in_every_line_of_the_fleet(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        provision("a")
        secret = "[https://agent:s3cret@gw.example/?token=s3cret]"
        (tmp_path / "cfg" / "config.yaml").write_text(
            f"memory: {{backend: loom}}\nmcp_gateway_url: {secret}\n"
        )
        for command in ("check", "update"):
            text = run_main(["fleet", command, "--inventory", str(inventory_of(tmp_path, "a"))])
            shown = run_main(
                ["fleet", command, "--inventory", str(inventory_of(tmp_path, "a")), "--json"]
            )
            for ran in (text, shown):
                assert ran.status == 2
                assert "s3cret" not in ran.stdout + ran.stderr
                assert f"https://{MASK}@gw.example/?{MASK}" in ran.stderr
