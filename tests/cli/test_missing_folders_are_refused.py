"""A folder named on the command line or in a variable that does not exist is refused with one
line and exit status 2 by every command but init (FLEET-4).

Before, ``memory status --config-dir /typo`` read no configuration, took the default backend
and said "memory is kept in memU" with exit 0: a monitor saw a healthy memU instance. The sweep
said the backend was memU, and the memory page served that. Init creates the workspace and
reads the configuration folder only when it is there, so it still takes both; doctor reports a
missing workspace as its own check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli.main import main


@pytest.fixture(autouse=True)
def no_nerve_variables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("NERVE_WORKSPACE", "NERVE_CONFIG_DIR", "NERVE_LOCKDOWN", "NERVE_MEMORY_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err, captured.err
    return captured.err


class TestAConfigDirThatDoesNotExist:
    """Refused before anything is read, sent or listened on."""

    @pytest.mark.parametrize(
        "command",
        [
            ["memory", "status"],
            ["memory", "status", "--json"],
            ["memory", "recall", "s1"],
            ["memory", "sweep"],
            ["memory", "sweep", "--json"],
            ["memory", "migrate", "--dry-run"],
            ["memory", "import", "messages.jsonl"],
            ["web", "--port", "0"],
        ],
    )
    def test_is_refused_by_every_command_that_reads_it(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "ws").mkdir()
        missing = tmp_path / "typo"
        argv = [*command, "--workspace", str(tmp_path / "ws"), "--config-dir", str(missing)]
        assert main(argv) == 2
        line = one_line_error(capsys)
        assert f"--config-dir {missing}: no such folder; expected an existing folder" in line
        assert "memU" not in line
        assert not missing.exists(), "nothing was made where the typo points"

    def test_is_refused_by_doctor_even_with_json(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        missing = tmp_path / "typo"
        argv = ["doctor", "--offline", "--json", "--config-dir", str(missing)]
        assert main([*argv, "--workspace", str(tmp_path)]) == 2
        assert f"--config-dir {missing}: no such folder" in one_line_error(capsys)

    def test_named_by_its_variable_is_refused_naming_the_variable(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        missing = tmp_path / "typo"
        monkeypatch.setenv("NERVE_CONFIG_DIR", str(missing))
        assert main(["memory", "status", "--workspace", str(tmp_path)]) == 2
        assert f"NERVE_CONFIG_DIR={missing}: no such folder" in one_line_error(capsys)

    def test_a_file_in_its_place_is_refused_as_not_a_folder(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        file = tmp_path / "config.yaml"
        file.write_text("memory: {}\n", encoding="utf-8")
        assert main(["memory", "status", "--config-dir", str(file)]) == 2
        assert f"--config-dir {file}: not a folder" in one_line_error(capsys)


class TestWhatStillRuns:
    def test_an_existing_config_dir_under_memu_still_says_memu_with_schema_and_status(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        assert main(["memory", "status", "--json", "--config-dir", str(config_dir)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report == {"schema": 1, "status": "not_loom", "backend": "memu", "kept_in": "memU"}

    def test_doctor_reports_a_missing_workspace_as_its_check(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "cfg").mkdir()
        missing = tmp_path / "ws"
        argv = ["doctor", "--offline", "--json", "--config-dir", str(tmp_path / "cfg")]
        assert main([*argv, "--workspace", str(missing)]) == 1
        checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
        assert checks["workspace.manifest"]["message"] == f"no workspace folder at {missing}"

    def test_init_creates_the_workspace_and_takes_a_config_dir_not_made_yet(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        workspace, config_dir = tmp_path / "new-ws", tmp_path / "new-cfg"
        argv = ["init", "--non-interactive", "--workspace", str(workspace)]
        assert main([*argv, "--config-dir", str(config_dir)]) == 0
        assert (workspace / "AGENTS.md").is_file()


class TestAWorkspaceThatDoesNotExist:
    def test_is_refused_by_diff(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        missing = tmp_path / "typo"
        assert main(["diff", "--workspace", str(missing)]) == 2
        assert f"--workspace {missing}: no such folder" in one_line_error(capsys)


class TestMemoryStatusRefusesWhatDoctorRefuses:
    """FLEET-4: status must not answer "kept in memU", exit 0, where doctor finds a fault."""

    def test_a_workspace_that_does_not_exist_is_refused(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (tmp_path / "cfg").mkdir()
        missing = tmp_path / "ws"
        argv = ["memory", "status", "--json", "--config-dir", str(tmp_path / "cfg")]
        assert main([*argv, "--workspace", str(missing)]) == 2
        assert f"--workspace {missing}: no such folder" in one_line_error(capsys)

    def test_a_misspelt_memory_key_is_refused_naming_the_key_meant(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        (config_dir / "config.yaml").write_text("memroy:\n  backend: loom\n", encoding="utf-8")
        (tmp_path / "ws").mkdir()
        argv = ["memory", "status", "--config-dir", str(config_dir)]
        assert main([*argv, "--workspace", str(tmp_path / "ws")]) == 2
        line = one_line_error(capsys)
        assert (
            f"{config_dir / 'config.yaml'}: memroy: unknown key, likely a misspelt memory" in line
        )
        assert "memU" not in line

    def test_an_unknown_key_unlike_its_own_still_answers(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        (config_dir / "config.yaml").write_text("colour_scheme: dark\n", encoding="utf-8")
        assert main(["memory", "status", "--json", "--config-dir", str(config_dir)]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == "not_loom"
