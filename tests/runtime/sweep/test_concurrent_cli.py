"""``nerve memory sweep`` sweeping sessions side by side (SWEEP-14), as a user runs it.

The real command runs in a process of its own against ``nerve dev gateway`` on loopback, whose
``latency`` fault makes Loom take its time over every extraction, as a real Loom does, so that
the sweep's windows overlap. The gateway counts the calls Loom is answering at once, in all and
for one session: the tests assert on those counts and on what Loom stored, never on time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.budget import WAITING_MAX_MESSAGES
from provisioner.runtime.state import StateStore
from provisioner.runtime.transcripts import SqliteTranscripts
from tests.support.processes import assert_one_line_error, clean_environment

EXTRACT = "loom_memory_set_from_messages"
PER_SESSION = WAITING_MAX_MESSAGES + 1  # two batches a session: 100 messages, then one
SWEEP_WAIT_S = 120  # a sweep that has not ended by then is stuck (a guard, not a timing)

pytestmark = pytest.mark.slow


def fill(config_dir: Path, sessions: int) -> dict[str, int]:
    """``sessions`` sessions of ``PER_SESSION`` messages in the default transcripts file;
    each session's last message id."""
    path = config_dir / "memory" / "transcripts.sqlite3"
    path.parent.mkdir(parents=True, exist_ok=True)
    names = [f"chat-{index}" for index in range(sessions)]
    with SqliteTranscripts(path) as transcripts:
        transcripts.add_messages(
            (
                name,
                "user" if n % 2 == 0 else "assistant",
                f"fact {n} of {name}",
                f"2026-11-30T10:{n % 60:02d}:00Z",
            )
            for name in names
            for n in range(PER_SESSION)
        )
        return {name: transcripts.messages_after(name, 0, PER_SESSION)[-1].id for name in names}


def configure(config_dir: Path, gateway: RunningGateway, *loom_lines: str) -> Path:
    config_dir.mkdir(parents=True, exist_ok=True)
    lines = ["memory:", "  backend: loom", "  loom:", *(f"    {line}" for line in loom_lines)]
    if not loom_lines:
        lines.pop()
    lines.append(f"mcp_gateway_url: {gateway.base_url}")
    path = config_dir / "config.local.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sweep(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """``nerve memory sweep --json`` as its own process, in a clean environment."""
    options = ["--workspace", str(tmp_path / "ws"), "--config-dir", str(tmp_path / "cfg")]
    return subprocess.run(
        [sys.executable, "-m", "provisioner", "memory", "sweep", "--json", *options],
        capture_output=True,
        text=True,
        env=clean_environment(tmp_path / "home"),
        cwd=tmp_path,
        timeout=SWEEP_WAIT_S,
    )


def watermarks(config_dir: Path, sessions: dict[str, int]) -> dict[str, int]:
    with StateStore(config_dir / "memory" / "state.sqlite3") as state:
        return {session: state.watermark(session) for session in sessions}


class TestTheCommandSweepsSideBySide:
    def test_a_slow_loom_sees_as_many_calls_at_once_as_the_configuration_allows(
        self, tmp_path: Path
    ) -> None:
        """``sweep_concurrency: 3``: the limit grows from one to three as windows go through,
        and Loom answers three extractions at once, never two of one session; every message
        is stored once and every watermark is at its session's end."""
        config_dir = tmp_path / "cfg"
        with serve_in_thread(faults=f"latency:1@{EXTRACT}", answers="json") as gateway:
            configure(config_dir, gateway, "sweep_concurrency: 3")
            last = fill(config_dir, 6)
            result = sweep(tmp_path)
            stored = gateway.app.store.memory_texts()
            seen = (gateway.app.most_at_once, gateway.app.most_for_one_session)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert (report["sessions_swept"], report["messages_taken"]) == (6, 6 * PER_SESSION)
        assert (report["batches_sent"], report["stopped"]) == (12, "done")
        assert seen == (3, 1)
        assert len(stored) == len(set(stored)) == 6 * PER_SESSION
        assert watermarks(config_dir, last) == last

    def test_a_limit_of_one_keeps_one_window_at_a_time(self, tmp_path: Path) -> None:
        """``sweep_concurrency: 1``: the sessions take their turns, as a sweep always did."""
        config_dir = tmp_path / "cfg"
        with serve_in_thread(faults=f"latency:0.2@{EXTRACT}", answers="json") as gateway:
            configure(config_dir, gateway, "sweep_concurrency: 1")
            last = fill(config_dir, 3)
            result = sweep(tmp_path)
            seen = (gateway.app.most_at_once, gateway.app.most_for_one_session)
            order = [call.arguments["session_id"] for call in gateway.app.calls]
        assert result.returncode == 0, result.stderr
        assert seen == (1, 1)
        assert order == [name for name in last for _ in range(2)]
        assert watermarks(config_dir, last) == last

    @pytest.mark.parametrize("value", ["0", "33", "lots", "2.5"])
    def test_a_value_it_cannot_use_is_one_line_and_exit_2(self, tmp_path: Path, value: str) -> None:
        """CONF-7: the file, the key and what it takes; nothing is swept."""
        with serve_in_thread() as gateway:
            path = configure(tmp_path / "cfg", gateway, f"sweep_concurrency: {value}")
            fill(tmp_path / "cfg", 1)
            result = sweep(tmp_path)
            calls = list(gateway.app.calls)
        assert_one_line_error(result, str(path), "memory.loom.sweep_concurrency", "1 to 32")
        assert calls == []
