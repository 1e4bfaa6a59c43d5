"""FLEET-4: output a monitor can read, and input a monitor's operator cannot get quietly wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet.provisioning import Provision, run_main


def configure(tmp_path: Path, text: str, name: str = "config.yaml") -> None:
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "cfg" / name).write_text(text)


def folders(tmp_path: Path) -> list[str]:
    return ["--workspace", str(tmp_path / "ws"), "--config-dir", str(tmp_path / "cfg")]


class TestSchemaAndOverallStatus:
    def test_doctor_json_carries_the_schema_and_the_worst_status(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        ran = run_main(["doctor", "--offline", "--json", *folders(tmp_path)])
        report = ran.json()
        assert list(report)[:2] == ["schema", "status"]
        assert report["schema"] == 1 and report["status"] == "OK"
        configure(tmp_path, "memory:\n  backend: loom\n")  # no gateway URL: an ERR among them
        switched = run_main(["doctor", "--offline", "--json", *folders(tmp_path)]).json()
        statuses = {check["status"] for check in switched["checks"]}
        assert statuses == {"OK", "WARN", "ERR"} and switched["status"] == "ERR"

    def test_memory_status_json_under_memu_carries_schema_and_status(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        ran = run_main(["memory", "status", "--json", *folders(tmp_path)])
        assert ran.status == 0
        assert ran.json() == {
            "schema": 1,
            "status": "not_loom",
            "backend": "memu",
            "kept_in": "memU",
        }


class TestMissingFoldersAreRefused:
    @pytest.mark.parametrize(
        ("command", "flag"),
        [
            (["memory", "status", "--json"], "--config-dir"),
            (["memory", "recall", "s1"], "--config-dir"),
            (["doctor", "--offline"], "--config-dir"),
        ],
    )
    def test_a_folder_that_does_not_exist_is_one_line_and_exit_2(
        self, provision: Provision, tmp_path: Path, command: list[str], flag: str
    ) -> None:
        provision("ws")
        given = {"--workspace": str(tmp_path / "ws"), "--config-dir": str(tmp_path / "cfg")}
        given[flag] = str(tmp_path / "typo")
        ran = run_main([*command, *(word for pair in given.items() for word in pair)])
        assert ran.status == 2 and ran.stdout == ""
        assert ran.stderr.splitlines() == [
            f"nerve-provisioner: error: {flag} {tmp_path / 'typo'}: no such folder; "
            "expected an existing folder"
        ]


class TestLikelyTypos:
    def test_a_misspelt_top_level_key_names_the_key_it_probably_meant(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        configure(tmp_path, "memroy:\n  backend: loom\n")
        ran = provision("ws")
        assert "memroy: unknown key, ignored; did you mean memory?" in ran.stderr

    def test_nerves_own_top_level_keys_do_not_warn(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        configure(tmp_path, "timezone: UTC\nagent:\n  model: x\ntelegram: {}\n")
        assert "unknown key" not in provision("ws").stderr

    def test_a_misspelt_memory_key_names_the_key_it_probably_meant(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        configure(tmp_path, "memory:\n  backnd: loom\n")
        ran = provision("ws")
        assert "memory.backnd: unknown key, ignored; did you mean backend?" in ran.stderr


class TestSwitchAdvice:
    def test_init_for_loom_on_a_config_naming_memu_says_which_line_switches_it(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        configure(tmp_path, "memory:\n  backend: memu\n")
        ran = provision("ws", "--memory-backend", "loom")
        local = tmp_path / "cfg" / "config.local.yaml"
        assert (
            f"names memory.backend: memu, so the instance keeps using memu while its files are "
            f"worded for loom; to switch it, add to {local}: memory: {{backend: loom}}"
        ) in ran.stderr

    def test_when_the_local_file_names_memu_the_advice_is_to_change_it_there(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        configure(tmp_path, "memory:\n  backend: memu\n", name="config.local.yaml")
        ran = provision("ws", "--memory-backend", "loom")
        local = tmp_path / "cfg" / "config.local.yaml"
        assert f"change it in {local} to memory: {{backend: loom}}" in ran.stderr

    def test_no_advice_when_the_config_names_the_same_backend_or_none(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        assert "to switch it" not in provision("a", "--memory-backend", "loom").stderr
        configure(tmp_path, "memory:\n  backend: loom\n")
        assert "to switch it" not in provision("b", "--memory-backend", "loom").stderr


class TestCheckIdsAreNames:
    def ids(self, tmp_path: Path) -> list[str]:
        ran = run_main(["doctor", "--offline", "--json", *folders(tmp_path)])
        return [check["id"] for check in ran.json()["checks"]]

    def test_a_config_warning_is_named_by_its_key_and_file(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws")
        configure(tmp_path, "memroy: {}\nlockdown: true\n")
        configure(tmp_path, "lockdown: true\n", name="config.local.yaml")
        warnings = [i for i in self.ids(tmp_path) if i.startswith("config.warning.")]
        assert sorted(warnings) == [
            "config.warning.lockdown",
            "config.warning.lockdown@config.local.yaml",
            "config.warning.memroy",
        ]

    def test_a_place_naming_another_backends_tool_is_named_by_file_line_and_tool(
        self, provision: Provision, tmp_path: Path
    ) -> None:
        provision("ws", "--memory-backend", "loom")
        configure(tmp_path, "memory:\n  backend: loom\n")
        memory = tmp_path / "ws" / "MEMORY.md"
        lines = memory.read_text().splitlines(keepends=True)
        memory.write_text("".join([*lines[:2], "Use `mcp__nerve__memorize` often.\n", *lines[2:]]))
        assert "workspace.tool_names.MEMORY.md:3:mcp__nerve__memorize" in self.ids(tmp_path)
