"""FLEET-1: ``fleet check|update`` over an inventory of workspaces made by real init runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from provisioner.backends import MEMU_TOOLS
from provisioner.fleet.inventory import read_inventory
from provisioner.fleet.run import STATUSES, FleetRun
from provisioner.workspace.jinja_render import RenderCache
from provisioner.workspace.merge import MARKED
from tests.fleet.provisioning import (
    AGENT_LINE,
    EARLIER_LINE,
    Provision,
    add_agent_line,
    run_main,
    tree,
)


def configure(folder: Path, backend: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(f"memory:\n  backend: {backend}\n")


@pytest.fixture
def fleet(tmp_path: Path, provision: Provision) -> Path:
    """Four instances under ``tmp_path/instances``, two on memU and two on Loom, the first
    of each with an edited AGENTS.md; the inventory names their folders relatively."""
    entries = []
    for index, backend in enumerate(["memu", "memu", "loom", "loom"]):
        name = f"i{index}"
        configure(tmp_path / "instances" / name / "config", backend)
        provision(
            f"instances/{name}/ws", "--config-dir", str(tmp_path / "instances" / name / "config")
        )
        if index in (0, 2):
            add_agent_line(tmp_path / "instances" / name / "ws" / "AGENTS.md")
        entries.append(
            {"workspace": f"instances/{name}/ws", "config_dir": f"instances/{name}/config"}
        )
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump(entries))
    return tmp_path / "fleet.yaml"


def counts(**given: int) -> dict[str, int]:
    """A summary: every status of FLEET-1 counted, those not given as 0."""
    return {status: given.get(status, 0) for status in STATUSES}


def fleet_run(*args: str):
    return run_main(["fleet", *args])


def switch_all_to(tmp_path: Path, backend: str) -> None:
    for index in range(4):
        configure(tmp_path / "instances" / f"i{index}" / "config", backend)


class TestCheck:
    def test_a_fleet_as_this_version_writes_it_is_up_to_date(self, fleet: Path) -> None:
        ran = fleet_run("check", "--inventory", str(fleet), "--json")
        assert ran.status == 0, ran.stdout
        document = ran.json()
        assert document["schema"] == 1
        assert document["summary"] == counts(up_to_date=4)
        assert [w["workspace"] for w in document["workspaces"]] == [
            f"instances/i{index}/ws" for index in range(4)
        ]
        assert document["workspaces"][0]["files"] == [{"path": "AGENTS.md", "action": "keep"}]

    def test_a_backend_switch_is_drift_and_check_writes_nothing(
        self, fleet: Path, tmp_path: Path
    ) -> None:
        switch_all_to(tmp_path, "loom")
        before = tree(tmp_path / "instances")
        ran = fleet_run("check", "--inventory", str(fleet), "--json")
        assert ran.status == 1
        statuses = [w["status"] for w in ran.json()["workspaces"]]
        assert statuses == ["drift", "drift", "up_to_date", "up_to_date"]
        first = {f["path"]: f["action"] for f in ran.json()["workspaces"][0]["files"]}
        assert first["AGENTS.md"] == "merge" and first["TOOLS.md"] == "reword"
        assert tree(tmp_path / "instances") == before

    def test_the_text_report_has_a_line_per_workspace_and_the_counts(self, fleet: Path) -> None:
        ran = fleet_run("check", "--inventory", str(fleet))
        lines = ran.stdout.splitlines()
        assert lines[0].split() == ["up_to_date", "instances/i0/ws"]
        assert lines[-1] == "4 workspaces: 4 up to date"
        assert ran.stderr == ""  # no progress off a terminal


class TestUpdate:
    def test_a_backend_switch_across_the_fleet_ends_up_to_date_with_edits_kept(
        self, fleet: Path, tmp_path: Path
    ) -> None:
        switch_all_to(tmp_path, "loom")
        ran = fleet_run("update", "--inventory", str(fleet), "--json")
        assert ran.status == 0, ran.stdout
        assert ran.json()["summary"]["up_to_date"] == 4
        first = {f["path"]: f["action"] for f in ran.json()["workspaces"][0]["files"]}
        assert first["AGENTS.md"] == "merge"
        for index in range(4):
            agents = (tmp_path / "instances" / f"i{index}" / "ws" / "AGENTS.md").read_text()
            assert not any(name in agents for name in MEMU_TOOLS)
            assert (AGENT_LINE in agents) == (index in (0, 2))
        assert fleet_run("check", "--inventory", str(fleet)).status == 0

    def test_each_set_of_answers_is_rendered_once_for_the_whole_fleet(
        self, fleet: Path, tmp_path: Path
    ) -> None:
        switch_all_to(tmp_path, "loom")
        run = FleetRun(update=True, cache=RenderCache())
        outcomes = run.all(read_inventory(fleet))
        assert {o.status for o in outcomes} == {"up_to_date"}
        # Loom's render, once for all four; the merges' bases are the texts kept in each
        # workspace, so no earlier render is made again.
        assert run.cache.renders == 1

    def test_a_conflict_is_left_and_exits_1_while_the_others_are_updated(
        self, tmp_path: Path, provision: Provision, older_assets: Path
    ) -> None:
        configure(tmp_path / "cfg", "memu")
        for name in ("a", "b"):
            provision(name, assets=older_assets)
        agents = tmp_path / "a" / "AGENTS.md"
        agents.write_text(agents.read_text().replace(EARLIER_LINE, "This guide is mine now."))
        before = agents.read_bytes()
        inventory = tmp_path / "fleet.json"
        inventory.write_text(
            json.dumps([{"workspace": n, "config_dir": "cfg"} for n in ("a", "b")])
        )
        ran = fleet_run("update", "--inventory", str(inventory))
        assert ran.status == 1
        assert agents.read_bytes() == before
        assert "conflict   a" in ran.stdout and "<<<<<<< the file as it is" in ran.stdout
        assert "up_to_date b" in ran.stdout
        inline = fleet_run("update", "--inventory", str(inventory), "--conflict", "inline")
        assert inline.status == 1
        assert MARKED in agents.read_text()

    def test_a_memory_backend_in_the_inventory_overrides_the_config_and_says_it_mismatches(
        self, tmp_path: Path, provision: Provision
    ) -> None:
        """FLEET-1: worded for Loom while the configuration has the instance use memU is never
        up to date, after the update as at the check."""
        provision("ws")
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text("- {workspace: ws, config_dir: cfg, memory_backend: loom}\n")
        updated = fleet_run("update", "--inventory", str(inventory), "--json")
        assert updated.status == 1
        assert "mcp__loom__" in (tmp_path / "ws" / "TOOLS.md").read_text()
        [workspace] = updated.json()["workspaces"]
        assert workspace["status"] == "mismatch"
        assert "worded for loom while its configuration names memu" in workspace["note"]
        checked = fleet_run("check", "--inventory", str(inventory))
        assert checked.status == 1
        assert checked.stdout.startswith("mismatch   ws\n  worded for loom")
        configure(tmp_path / "cfg", "loom")
        assert fleet_run("check", "--inventory", str(inventory)).status == 0


class TestErrors:
    def test_a_bad_entry_among_good_ones_refuses_the_inventory_before_any_work(
        self, fleet: Path, tmp_path: Path
    ) -> None:
        entries = yaml.safe_load(fleet.read_text())
        entries.insert(2, {"workspace": "instances/i9/ws", "config": "instances/i9/config"})
        fleet.write_text(yaml.safe_dump(entries))
        switch_all_to(tmp_path, "loom")
        before = tree(tmp_path / "instances")
        ran = fleet_run("update", "--inventory", str(fleet))
        assert ran.status == 2
        [line] = ran.stderr.splitlines()
        assert "entry 3 (instances/i9/ws): unknown key config" in line
        assert "expected a mapping with workspace and config_dir" in line
        assert tree(tmp_path / "instances") == before

    @pytest.mark.parametrize(
        ("text", "fragment"),
        [
            ("- workspace: ws\n", "entry 1 (ws): config_dir is missing"),
            ("- {workspace: ws, config_dir: cfg, memory_backend: mem0}\n", "'mem0' is not a"),
            ("workspace: ws\n", "not a list of workspaces"),
            ("- [ws, cfg]\n", "entry 1: is list, not a mapping"),
            (
                "- {workspace: ws, config_dir: c}\n- {workspace: ./ws, config_dir: c}\n",
                "entry 2 (./ws): the same workspace as entry 1",
            ),
            ("- {workspace: ws\n", "not YAML at line"),
        ],
    )
    def test_a_bad_inventory_is_one_line_naming_what_and_where(
        self, tmp_path: Path, text: str, fragment: str
    ) -> None:
        inventory = tmp_path / "fleet.yaml"
        inventory.write_text(text)
        ran = fleet_run("check", "--inventory", str(inventory))
        assert ran.status == 2
        [line] = ran.stderr.splitlines()
        assert fragment in line and str(inventory) in line

    def test_a_failing_workspace_is_an_error_and_the_others_go_on(
        self, fleet: Path, tmp_path: Path
    ) -> None:
        entries = yaml.safe_load(fleet.read_text())
        (tmp_path / "instances" / "file").write_text("not a folder\n")
        entries.insert(1, {"workspace": "instances/file", "config_dir": "instances/i0/config"})
        fleet.write_text(yaml.safe_dump(entries))
        switch_all_to(tmp_path, "loom")
        ran = fleet_run("update", "--inventory", str(fleet), "--json")
        assert ran.status == 2
        document = ran.json()
        assert document["summary"] == counts(up_to_date=4, error=1)
        [failed] = [w for w in document["workspaces"] if w["status"] == "error"]
        assert failed["workspace"] == "instances/file" and "not a folder" in failed["error"]
        assert "instances/file" in ran.stderr and len(ran.stderr.splitlines()) == 1
