"""Doctor's JSON for a monitor: an overall status, and checks named, never numbered (FLEET-4).

A monitor keys its alerts on a check's id from run to run; an id that is the check's position
among its kind (``config.warning.1``) moves to another check as soon as one more appears.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.doctor.check import ERR, OK, WARN, Check, Report

PLANTED = "Remember with mcp__nerve__memorize.\n"


@pytest.fixture(autouse=True)
def no_nerve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NERVE_WORKSPACE", "NERVE_CONFIG_DIR", "NERVE_LOCKDOWN", "NERVE_MEMORY_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Loom workspace provisioned by init, copied by each test."""
    root = tmp_path_factory.mktemp("provisioned")
    argv = ["init", "--non-interactive", "--memory-backend", "loom"]
    assert main([*argv, "--workspace", str(root / "ws"), "--config-dir", str(root / "c")]) == 0
    return root / "ws"


class Instance:
    def __init__(self, root: Path, provisioned: Path) -> None:
        self.workspace, self.config_dir = root / "ws", root / "cfg"
        shutil.copytree(provisioned, self.workspace, symlinks=True)
        self.config_dir.mkdir()

    def configure(self, text: str) -> None:
        (self.config_dir / "config.yaml").write_text(text, encoding="utf-8")

    def doctor(self, capsys: pytest.CaptureFixture[str]) -> dict:
        argv = ["doctor", "--offline", "--json", "--workspace", str(self.workspace)]
        status = main([*argv, "--config-dir", str(self.config_dir)])
        report = json.loads(capsys.readouterr().out)
        assert report["summary"]["exit_status"] == status
        return report


@pytest.fixture
def instance(tmp_path: Path, provisioned: Path, capsys: pytest.CaptureFixture[str]) -> Instance:
    capsys.readouterr()  # what the module's init printed
    return Instance(tmp_path, provisioned)


def ids(report: dict) -> list[str]:
    return [check["id"] for check in report["checks"]]


class TestTheOverallStatus:
    @pytest.mark.parametrize(
        ("statuses", "overall"),
        [((OK, OK), OK), ((OK, WARN), WARN), ((WARN, ERR, OK), ERR)],
    )
    def test_is_that_of_the_worst_check(self, statuses: tuple[str, ...], overall: str) -> None:
        checks = tuple(
            Check(f"area.check_{n}", status, "m", advice=None if status == OK else "do")
            for n, status in enumerate(statuses)
        )
        report = Report(checks).as_json()
        assert list(report)[:2] == ["schema", "status"]
        assert report["status"] == overall
        assert report["summary"]["exit_status"] == (1 if overall == ERR else 0)

    def test_a_clean_loom_instance_is_ok_and_keeps_every_documented_field(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("memory:\n  backend: loom\nmcp_gateway_url: http://127.0.0.1:9\n")
        report = instance.doctor(capsys)
        assert report["schema"] == 1
        assert set(report) == {"schema", "status", "checks", "summary"}
        assert set(report["summary"]) == {"passed", "total", "warnings", "errors", "exit_status"}
        assert (report["status"], report["summary"]["exit_status"]) == (OK, 0)

    def test_a_configuration_that_does_not_load_is_error(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("memory:\n  backend: Loom\n")
        assert instance.doctor(capsys)["status"] == ERR


class TestChecksAreNamed:
    def test_a_loader_warning_is_named_by_its_key_whatever_warns_before_it(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("memory:\n  backend: loom\n  colour: blue\n")
        first = [i for i in ids(instance.doctor(capsys)) if i.startswith("config.warning")]
        instance.configure("aaa_typo: 1\nmemory:\n  backend: loom\n  colour: blue\n")
        second = [i for i in ids(instance.doctor(capsys)) if i.startswith("config.warning")]
        assert first == ["config.warning.memory.colour"]
        assert second == ["config.warning.aaa_typo", "config.warning.memory.colour"]

    def test_a_key_warned_of_in_two_files_gets_the_second_file_after_it(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("lockdown: true\n")
        (instance.config_dir / "config.local.yaml").write_text("lockdown: true\n")
        named = [i for i in ids(instance.doctor(capsys)) if i.startswith("config.warning")]
        assert named == ["config.warning.lockdown", "config.warning.lockdown@config.local.yaml"]

    def test_a_wording_place_is_named_by_file_line_and_tool(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("memory:\n  backend: loom\n")
        memory_md = instance.workspace / "MEMORY.md"
        lines = memory_md.read_text(encoding="utf-8").splitlines(keepends=True)
        memory_md.write_text("".join([*lines[:2], PLANTED, *lines[2:]]), encoding="utf-8")
        places = [i for i in ids(instance.doctor(capsys)) if i.startswith("workspace.tool_names.")]
        assert places == ["workspace.tool_names.MEMORY.md:3:mcp__nerve__memorize"]

    def test_every_id_of_a_run_is_unique(
        self, instance: Instance, capsys: pytest.CaptureFixture[str]
    ) -> None:
        instance.configure("memroy: 1\nmemory:\n  backend: loom\n  colour: blue\n")
        (instance.workspace / "TOOLS.md").write_text(
            "Use mcp__nerve__memorize and mcp__nerve__recall.\n" * 8, encoding="utf-8"
        )
        named = ids(instance.doctor(capsys))
        assert len(named) == len(set(named))
        assert not any(part.isdigit() for i in named for part in i.split("."))
        assert "workspace.tool_names.TOOLS.md:more" in named
