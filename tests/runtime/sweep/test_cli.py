"""``nerve memory import`` and ``nerve memory sweep`` through the CLI, against the dev gateway."""

from __future__ import annotations

import json
import os
import pty
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.cli.main import main
from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.state import StateStore
from provisioner.runtime.sweep.lock import sweep_lock
from provisioner.runtime.transcripts import SqliteTranscripts
from tests.support.processes import read_terminal


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=3, answers="mixed") as running:
        yield running


def write_config(config_dir: Path, lines: list[str]) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "config.local.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def loom_config(config_dir: Path, gateway_url: str) -> None:
    write_config(config_dir, ["memory:", "  backend: loom", f"mcp_gateway_url: {gateway_url}"])


def jsonl(path: Path, records: list[object]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def message(session: str, n: int, **changes: object) -> dict[str, object]:
    record = {
        "session_id": session,
        "role": "user" if n % 2 == 0 else "assistant",
        "content": f"fact {n} of {session}",
        "created_at": f"2026-11-30T10:{n:02d}:00+00:00",
    }
    record.update(changes)
    return record


def paths(tmp_path: Path) -> list[str]:
    """The instance's folder options; both folders exist, as named ones must."""
    (tmp_path / "cfg").mkdir(exist_ok=True)
    (tmp_path / "ws").mkdir(exist_ok=True)
    return [
        "--workspace",
        str(tmp_path / "ws"),
        "--config-dir",
        str(tmp_path / "cfg"),
    ]


class TestImport:
    def test_good_lines_are_imported_in_one_go(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """A JSON-lines file becomes transcript messages in the default database."""
        source = jsonl(tmp_path / "in.jsonl", [message("a", n) for n in range(3)] + [""])
        assert main(["memory", "import", str(source), "--json", *paths(tmp_path)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["imported"], report["sessions"]) == (3, 1)
        assert report["into"] == str(tmp_path / "cfg" / "memory" / "transcripts.sqlite3")
        with SqliteTranscripts(report["into"]) as transcripts:
            contents = [m.content for m in transcripts.messages_after("a", 0, 10)]
        assert contents == ["fact 0 of a", "fact 1 of a", "fact 2 of a"]

    def test_bad_lines_are_named_by_number_and_nothing_is_imported(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """One line on stderr names every bad line; exit 2; the database stays empty."""
        records: list[object] = [
            message("a", 0),
            "{not json",
            message("a", 2, role="bot"),
            message("a", 3, created_at="yesterday"),
            {"session_id": "a", "role": "user", "content": "x"},
            message("a", 5, extra=1),
            message("", 6),
        ]
        source = jsonl(tmp_path / "in.jsonl", records)
        target = tmp_path / "t.sqlite3"
        status = main(["memory", "import", str(source), "--transcripts", str(target)])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1
        assert "6 bad lines, nothing imported" in err
        for number in (2, 3, 4, 5):
            assert f"line {number}:" in err
        assert "(and 1 more)" in err
        with SqliteTranscripts(target) as transcripts:
            assert transcripts.count() == 0

    def test_a_missing_file_is_a_usage_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert main(["memory", "import", str(tmp_path / "none.jsonl"), *paths(tmp_path)]) == 2
        assert "no such file" in capsys.readouterr().err

    def test_a_device_or_folder_is_not_read_as_messages(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """/dev/zero would never end; a folder is no file of lines."""
        for source in ("/dev/zero", str(tmp_path)):
            assert main(["memory", "import", source, *paths(tmp_path)]) == 2
            assert "is not a regular file" in capsys.readouterr().err


class TestSweepCommand:
    def test_a_sweep_takes_every_imported_message_and_reports_json(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The whole path: import, sweep once through LoomMemory and the dev gateway."""
        loom_config(tmp_path / "cfg", gateway.base_url)
        records = [message(s, n) for s in ("a", "b") for n in range(30)]
        source = jsonl(tmp_path / "in.jsonl", records)
        assert main(["memory", "import", str(source), *paths(tmp_path)]) == 0
        capsys.readouterr()
        assert main(["memory", "sweep", "--once", "--json", *paths(tmp_path)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["stopped"] == "done" and report["messages_taken"] == 60
        assert sorted(gateway.app.store.memory_texts()) == sorted(r["content"] for r in records)
        with StateStore(tmp_path / "cfg" / "memory" / "state.sqlite3") as state:
            assert state.watermark("a") > 0 and state.watermark("b") > state.watermark("a")

    def test_a_sweep_with_no_gateway_url_ends_early_with_status_75(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """SWEEP-13: memory cannot be reached at all; the report says why and nothing moves."""
        write_config(tmp_path / "cfg", ["memory:", "  backend: loom"])
        source = jsonl(tmp_path / "in.jsonl", [message("a", 0)])
        main(["memory", "import", str(source), *paths(tmp_path)])
        capsys.readouterr()
        assert main(["memory", "sweep", *paths(tmp_path)]) == 75
        assert capsys.readouterr().out.startswith("sweep unavailable: no mcp_gateway_url is set;")

    def test_under_memu_the_sweep_refuses_with_one_line(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        write_config(tmp_path / "cfg", ["memory:", "  backend: memu"])
        assert main(["memory", "sweep", *paths(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "memory.backend is 'memu'" in err

    def test_while_another_sweep_holds_the_lock_the_command_returns_at_once(
        self, tmp_path: Path, gateway: RunningGateway, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """SWEEP-11, SWEEP-13: exit 0 (the other sweep reports on these windows), the report
        says a sweep is running, nothing is sent."""
        loom_config(tmp_path / "cfg", gateway.base_url)
        source = jsonl(tmp_path / "in.jsonl", [message("a", 0)])
        main(["memory", "import", str(source), *paths(tmp_path)])
        capsys.readouterr()
        state_path = tmp_path / "cfg" / "memory" / "state.sqlite3"
        StateStore(state_path).close()
        with sweep_lock(str(state_path), None) as held:
            assert held
            assert main(["memory", "sweep", "--json", *paths(tmp_path)]) == 0
        report = json.loads(capsys.readouterr().out)
        assert (report["stopped"], report["exit_status"]) == ("already_running", 0)
        assert not [c for c in gateway.app.calls if c.tool == "loom_memory_set_from_messages"]

    @pytest.mark.slow
    def test_a_terminal_gets_a_progress_line_per_session(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """On a TTY stderr shows sessions done / total, messages taken and the budget."""
        loom_config(tmp_path / "cfg", gateway.base_url)
        records = [message(s, n) for s in ("a", "b", "c") for n in range(4)]
        main(["memory", "import", str(jsonl(tmp_path / "in.jsonl", records)), *paths(tmp_path)])
        leader, follower = pty.openpty()
        command = [sys.executable, "-m", "provisioner", "memory", "sweep", *paths(tmp_path)]
        done = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=120,
            env={**os.environ, "NO_PROXY": "*"},
        )
        os.close(follower)
        shown = read_terminal(leader)
        assert done.returncode == 0
        for count in (1, 2, 3):
            assert f"sessions {count}/3" in shown
        assert "12 messages taken, budget 100 messages / 128 KiB" in shown

    @pytest.mark.slow
    def test_every_sweeps_again_until_interrupted_and_keeps_what_it_took(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """``--every 1s`` prints a report per sweep; Ctrl-C ends it with status 130."""
        loom_config(tmp_path / "cfg", gateway.base_url)
        main(["memory", "import", str(jsonl(tmp_path / "in.jsonl", [message("a", 0)])),
              *paths(tmp_path)])  # fmt: skip
        command = [sys.executable, "-m", "provisioner", "memory", "sweep", "--every", "1s",
                   "--json", *paths(tmp_path)]  # fmt: skip
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_PROXY": "*"},
        )  # fmt: skip
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        second = json.loads(process.stdout.readline())
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
        assert (first["messages_taken"], second["messages_taken"]) == (1, 0)
        assert process.returncode == 130 and "interrupted" in err
        with StateStore(tmp_path / "cfg" / "memory" / "state.sqlite3") as state:
            assert state.watermark("a") > 0

    @pytest.mark.parametrize("every", ["0", "soon", "5d", "-1m"])
    def test_a_bad_period_is_a_usage_error(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str], every: str
    ) -> None:
        assert main(["memory", "sweep", "--every", every, *paths(tmp_path)]) == 2
        assert "Traceback" not in capsys.readouterr().err

    def test_once_and_every_exclude_each_other(self, tmp_path: Path) -> None:
        assert main(["memory", "sweep", "--once", "--every", "5m", *paths(tmp_path)]) == 2

    @pytest.mark.slow
    def test_the_installed_command_sweeps_in_a_real_process(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """A real ``nerve`` process: import, then sweep; plain text report on stdout."""
        loom_config(tmp_path / "cfg", gateway.base_url)
        source = jsonl(tmp_path / "in.jsonl", [message("a", n) for n in range(5)])
        env = {**os.environ, "NO_PROXY": "*"}
        command = [sys.executable, "-m", "provisioner", "memory"]
        subprocess.run([*command, "import", str(source), *paths(tmp_path)], check=True, env=env)
        done = subprocess.run(
            [*command, "sweep", *paths(tmp_path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("sweep done: 1 of 1 session,")
        assert "5 messages taken" in done.stdout


class TestDamagedFiles:
    """A state or transcripts file that is not a database is bad input: one line, exit 2."""

    @pytest.fixture
    def config_dir(self, tmp_path: Path) -> Path:
        config_dir = tmp_path / "cfg"
        loom_config(config_dir, "http://127.0.0.1:9")
        (config_dir / "memory").mkdir()
        return config_dir

    @pytest.mark.parametrize(
        "command", [["memory", "sweep", "--once"], ["memory", "recall", "s1"], ["memory", "status"]]
    )
    def test_a_state_file_that_is_not_a_database_is_named_and_left_alone(
        self,
        command: list[str],
        config_dir: Path,
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        state = config_dir / "memory" / "state.sqlite3"
        state.write_bytes(b"not a database, just text " * 40)
        assert main([*command, *paths(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"{state}: cannot be opened as the memory state" in err  # REL-4: one opener
        assert state.read_bytes() == b"not a database, just text " * 40

    def test_a_folder_where_the_state_file_belongs_is_one_line(
        self, config_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        (config_dir / "memory" / "state.sqlite3").mkdir()
        assert main(["memory", "status", *paths(tmp_path)]) == 2
        assert "cannot be opened as the memory state" in capsys.readouterr().err

    def test_a_transcripts_file_that_is_not_a_database_imports_nothing(
        self, config_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        transcripts = config_dir / "memory" / "transcripts.sqlite3"
        transcripts.write_bytes(b"x" * 4096)
        source = jsonl(tmp_path / "in.jsonl", [message("s", 0)])
        assert main(["memory", "import", str(source), *paths(tmp_path)]) == 2
        assert f"{transcripts}: cannot be opened as the transcripts" in capsys.readouterr().err
        assert transcripts.read_bytes() == b"x" * 4096

    def test_a_state_file_from_a_newer_version_is_refused_not_misread(
        self, config_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        state = config_dir / "memory" / "state.sqlite3"
        with StateStore(state):
            pass
        database = sqlite3.connect(state)
        database.execute("PRAGMA user_version = 999")
        database.close()
        assert main(["memory", "status", *paths(tmp_path)]) == 2
        assert "newer than this package's" in capsys.readouterr().err
