"""FLEET-2: drift judged against the templates this version ships, by ``init --check`` and
by doctor, on workspaces made by real init runs."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.fleet.provisioning import Provision, add_agent_line, run_main, tree


def check(tmp_path: Path, *args: str) -> list[str]:
    return [
        "init",
        "--check",
        "--workspace",
        str(tmp_path / "ws"),
        "--config-dir",
        str(tmp_path / "cfg"),
        *args,
    ]


def configure(tmp_path: Path, backend: str) -> None:
    (tmp_path / "cfg" / "config.yaml").write_text(f"memory:\n  backend: {backend}\n")


class TestInitCheck:
    def test_a_workspace_as_this_version_writes_it_is_up_to_date_and_exits_0(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        ran = run_main(check(tmp_path, "--json"))
        assert ran.status == 0
        assert ran.json() == {
            "schema": 1,
            "workspace": str(tmp_path / "ws"),
            "status": "up_to_date",
            "files": [],
        }

    def test_a_backend_switch_lists_every_change_and_writes_nothing(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        add_agent_line(tmp_path / "ws" / "AGENTS.md")
        (tmp_path / "ws" / "SOUL.md").write_text("My own soul.\n")
        before = tree(tmp_path)
        ran = run_main(check(tmp_path, "--memory-backend", "loom", "--json"))
        assert ran.status == 1
        actions = {f["path"]: f["action"] for f in ran.json()["files"]}
        assert actions["AGENTS.md"] == "merge"
        assert actions["TOOLS.md"] == "reword"
        assert actions["SOUL.md"] == "keep"
        assert ran.json()["status"] == "drift"
        assert tree(tmp_path) == before

    def test_the_text_names_each_file_and_the_command_that_applies_it(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        ran = run_main(check(tmp_path, "--memory-backend", "loom"))
        assert ran.status == 1
        assert "would re-word TOOLS.md" in ran.stdout.replace("  ", " ")
        command = ran.stdout.splitlines()[-1].removeprefix("To apply: ")
        applied = run_main(shlex.split(command)[1:])
        assert applied.status == 0, applied.stderr
        assert run_main(check(tmp_path, "--memory-backend", "loom")).status == 0

    def test_a_workspace_not_there_yet_is_all_to_create_and_stays_absent(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        (tmp_path / "cfg").mkdir(exist_ok=True)
        ran = run_main(check(tmp_path, "--json"))
        assert ran.status == 1
        assert {f["action"] for f in ran.json()["files"]} == {"create"}
        assert "AGENTS.md" in [f["path"] for f in ran.json()["files"]]
        assert not (tmp_path / "ws").exists()

    def test_check_takes_no_lock_and_leaves_no_journal(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        run_main(check(tmp_path, "--memory-backend", "loom"))
        assert sorted(p.name for p in (tmp_path / "ws" / ".nerve").iterdir()) == [
            "bases.json",
            "provisioned.json",
        ]


class TestDoctorReportsDrift:
    def drift_check(self, tmp_path: Path) -> dict:
        ran = run_main(
            [
                "doctor",
                "--offline",
                "--json",
                "--workspace",
                str(tmp_path / "ws"),
                "--config-dir",
                str(tmp_path / "cfg"),
            ]
        )
        [found] = [c for c in ran.json()["checks"] if c["id"] == "workspace.drift"]
        return found

    def test_a_workspace_init_just_wrote_is_ok(self, provision: Provision, tmp_path: Path) -> None:
        provision("ws")
        assert self.drift_check(tmp_path)["status"] == "OK"

    def test_a_switch_in_the_config_warns_with_advice_that_fixes_it(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        add_agent_line(tmp_path / "ws" / "AGENTS.md")
        configure(tmp_path, "loom")
        found = self.drift_check(tmp_path)
        assert found["status"] == "WARN"
        assert "AGENTS.md" in found["message"] and "loom" in found["message"]
        command = found["advice"].removeprefix("run ")
        assert command.startswith("nerve-provisioner init ")
        assert run_main(shlex.split(command)[1:]).status == 0
        assert self.drift_check(tmp_path)["status"] == "OK"

    def test_an_edited_file_whose_template_did_not_change_is_no_drift(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        add_agent_line(tmp_path / "ws" / "AGENTS.md")
        assert self.drift_check(tmp_path)["status"] == "OK"
