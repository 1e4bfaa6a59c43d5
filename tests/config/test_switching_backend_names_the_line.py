"""``init --memory-backend loom`` on an instance whose configuration names memU says which line
switches it, and so does doctor, beside the init that words the files for memU again
(FLEET-4, INIT-2).

Init words the files; the platform names the backend. Unlocked, the line goes into
``config.local.yaml``, which outranks the other layers; locked, that file is not read and the
line is the service's ``NERVE_MEMORY_BACKEND``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.config.loader import load_config

LOCKED_SETTINGS = "lockdown: true\nmemory:\n  backend: ${NERVE_MEMORY_BACKEND:-memu}\n"


@pytest.fixture(autouse=True)
def no_nerve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NERVE_WORKSPACE", "NERVE_CONFIG_DIR", "NERVE_LOCKDOWN", "NERVE_MEMORY_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def folders(tmp_path: Path, local: str | None = "memory:\n  backend: memu\n") -> list[str]:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir(exist_ok=True)
    if local is not None:
        (config_dir / "config.local.yaml").write_text(local, encoding="utf-8")
    return ["--workspace", str(tmp_path / "ws"), "--config-dir", str(config_dir)]


def init(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["init", "--non-interactive", "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


class TestInit:
    def test_names_the_line_that_switches_a_memu_instance_to_loom(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        summary = init(capsys, "--memory-backend", "loom", *folders(tmp_path))
        local = tmp_path / "cfg" / "config.local.yaml"
        assert summary["wording"] == "loom"
        assert summary["warnings"] == [
            f"{local} names memory.backend: memu, so the instance keeps using memu while its "
            f"files are worded for loom; to switch it, change it in {local} to memory: "
            "{backend: loom}"
        ]
        assert not any("--memory-backend memu" in line for line in summary["warnings"])

    def test_the_line_it_names_switches_the_instance(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The line, written as said, makes the configuration name Loom."""
        argv = folders(tmp_path, local=None)
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: memu\n")
        (warning,) = init(capsys, "--memory-backend", "loom", *argv)["warnings"]
        local = tmp_path / "cfg" / "config.local.yaml"
        said = warning.split(f"to switch it, add to {local}: ", 1)[1]
        local.write_text(said + "\n", encoding="utf-8")
        assert load_config(tmp_path / "cfg", tmp_path / "ws", env={}).memory_backend == "loom"
        again = init(capsys, "--memory-backend", "loom", *argv)
        assert again["warnings"] == []

    def test_without_the_flag_init_follows_the_configuration_and_says_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        summary = init(capsys, *folders(tmp_path))
        assert (summary["wording"], summary["warnings"]) == ("memu", [])

    def test_a_locked_instance_is_told_the_service_variable(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("NERVE_MEMORY_BACKEND", "memu")
        (tmp_path / "ws" / "config").mkdir(parents=True)
        (tmp_path / "ws" / "config" / "settings.yaml").write_text(LOCKED_SETTINGS)
        summary = init(
            capsys, "--memory-backend", "loom", "--data", "lockdown=true", *folders(tmp_path)
        )
        (warning,) = [w for w in summary["warnings"] if "to switch it" in w]
        assert warning.endswith(
            "to switch it, set NERVE_MEMORY_BACKEND=loom in the service's environment"
        )


class TestDoctor:
    def test_files_worded_for_loom_under_a_memu_configuration_get_the_switch_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        init(capsys, "--memory-backend", "loom", *folders(tmp_path))
        assert main(["doctor", "--offline", "--json", *folders(tmp_path)]) == 0
        checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
        wording = checks["workspace.wording"]
        local = tmp_path / "cfg" / "config.local.yaml"
        assert wording["status"] == "WARN"
        assert wording["advice"].endswith(
            "; or, to switch the instance to loom as its files are worded, change it in "
            f"{local} to memory: {{backend: loom}}"
        )
