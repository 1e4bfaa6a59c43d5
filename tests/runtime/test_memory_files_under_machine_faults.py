"""The memory commands meet a busy, full, read-only or damaged state or transcripts file with
one line naming the file and its cause, and the status a monitor acts on (REL-4).

Busy or full is 75 (try again later), read-only or permission 73, damaged 2 (a file to look
at). Only a file that is not a database at all is to be moved aside: moving a state file that
is merely busy or full would throw away the record of what went to Loom.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.runtime import sqlite_file
from provisioner.runtime.state import StateStore
from provisioner.runtime.transcripts import SqliteTranscripts
from tests.support.machine_faults import damage, fill, full_disk, held_by_another_process, read_only

UNREACHABLE_GATEWAY = "http://127.0.0.1:9/mcp"  # nothing listens: the file fails first
FAST_BUSY_TIMEOUT_MS = 200  # wait this long for the other process, not the real five seconds

STATE = Path("memory") / "state.sqlite3"
TRANSCRIPTS = Path("memory") / "transcripts.sqlite3"
STATE_COMMANDS = [["memory", "status"], ["memory", "recall", "s1"]]
PAGE_COMMAND = ["web", "--port", "0"]  # the Memory page reads the state it finds


def loom_config(config_dir: Path) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.local.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {UNREACHABLE_GATEWAY}\n", encoding="utf-8"
    )


def with_files(config_dir: Path) -> None:
    """The configuration, and a state and transcripts file as earlier runs left them."""
    loom_config(config_dir)
    StateStore(config_dir / STATE).close()
    SqliteTranscripts(config_dir / TRANSCRIPTS).close()


def messages(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    line = {"session_id": "s1", "role": "user", "content": "hi"}
    line["created_at"] = "2026-11-30T10:00:00Z"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


def run(command: list[str], tmp_path: Path, config_dir: Path) -> int:
    (tmp_path / "ws").mkdir(exist_ok=True)  # memory status refuses a workspace not there
    return main([*command, "--workspace", str(tmp_path / "ws"), "--config-dir", str(config_dir)])


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.fixture(autouse=True)
def short_busy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_file, "BUSY_TIMEOUT_MS", FAST_BUSY_TIMEOUT_MS)


class TestABusyFile:
    @pytest.mark.parametrize("command", STATE_COMMANDS)
    def test_a_state_file_another_process_holds_is_75_and_fine(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        loom_config(config_dir)
        state = config_dir / STATE
        state.parent.mkdir()
        with held_by_another_process(state):
            status = run(command, tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 75
        assert f"{state}: busy" in err and "the file is fine" in err
        assert "aside" not in err

    def test_the_memory_page_meeting_a_busy_state_is_75_before_it_serves(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        pytest.importorskip("provisioner.web.serve", reason="the web extra is not installed")
        config_dir = tmp_path / "cfg"
        loom_config(config_dir)
        state = config_dir / STATE
        state.parent.mkdir()
        with held_by_another_process(state):
            status = run(PAGE_COMMAND, tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 75
        assert f"{state}: busy" in err and "aside" not in err

    def test_transcripts_another_process_holds_are_75_and_nothing_is_imported(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        loom_config(config_dir)
        transcripts = config_dir / TRANSCRIPTS
        transcripts.parent.mkdir()
        with held_by_another_process(transcripts):
            status = run(["memory", "import", str(messages(tmp_path))], tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 75
        assert f"{transcripts}: busy" in err and "nothing imported" in err
        assert "aside" not in err


class TestAFullDisk:
    @pytest.mark.parametrize("command", STATE_COMMANDS)
    def test_a_state_file_on_a_full_disk_is_75_and_said_to_be_full(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        with full_disk(tmp_path / "cfg") as config_dir:
            with_files(config_dir)
            fill(config_dir)
            status = run(command, tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 75
        assert f"{config_dir / STATE}: the disk is full" in err
        assert "aside" not in err

    def test_an_import_onto_a_full_disk_is_75_and_imports_nothing(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        source = messages(tmp_path)
        with full_disk(tmp_path / "cfg") as config_dir:
            with_files(config_dir)
            fill(config_dir)
            status = run(["memory", "import", str(source)], tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 75
        assert f"{config_dir / TRANSCRIPTS}: the disk is full" in err
        assert "nothing imported" in err and "aside" not in err


class TestAFileThatCannotBeWritten:
    @pytest.mark.parametrize("command", STATE_COMMANDS)
    def test_a_state_file_that_cannot_be_written_is_73(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        with_files(config_dir)
        with read_only(config_dir / "memory") as kind:
            status = run(command, tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 73
        cause = "the file system is read-only" if kind == "read_only" else "permission denied"
        assert f"{config_dir / STATE}: {cause}" in err
        assert "aside" not in err

    def test_an_import_into_transcripts_that_cannot_be_written_is_73(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        with_files(config_dir)
        with read_only(config_dir / "memory"):
            status = run(["memory", "import", str(messages(tmp_path))], tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 73
        assert f"{config_dir / TRANSCRIPTS}: " in err and "nothing imported" in err


class TestADamagedFile:
    @pytest.mark.parametrize("command", STATE_COMMANDS)
    def test_a_damaged_state_file_is_2_and_to_be_kept(
        self, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        with_files(config_dir)
        damage(config_dir / STATE)
        before = (config_dir / STATE).read_bytes()
        status = run(command, tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 2
        assert f"{config_dir / STATE}: damaged" in err and "keep it" in err
        assert "aside" not in err
        assert (config_dir / STATE).read_bytes() == before

    def test_damaged_transcripts_are_2_and_nothing_is_imported(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        with_files(config_dir)
        damage(config_dir / TRANSCRIPTS)
        status = run(["memory", "import", str(messages(tmp_path))], tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 2
        assert f"{config_dir / TRANSCRIPTS}: damaged" in err and "nothing imported" in err
        assert "aside" not in err


class TestAFileThatIsNotTheirs:
    def test_only_a_file_that_is_not_a_database_is_to_be_moved_aside(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        config_dir = tmp_path / "cfg"
        loom_config(config_dir)
        state = config_dir / STATE
        state.parent.mkdir()
        state.write_bytes(b"notes, not a database " * 200)
        status = run(["memory", "status"], tmp_path, config_dir)
        err = one_line(capsys)
        assert status == 2
        assert f"{state}: cannot be opened as the memory state (not a database)" in err
        assert "move it aside" in err
