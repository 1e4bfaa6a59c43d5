"""REL-9: ``nerve memory sweep`` stopped by a service manager's SIGTERM ends as Ctrl-C ends it:
a line saying so, ``python -m provisioner: terminated`` and exit 143 (130 for SIGINT), nothing lost.

Real processes and real signals against the dev gateway; each signal is sent once the process
has shown (by its output, or by the call the gateway holds) that it is where the test wants it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.state import StateStore
from tests.support.processes import clean_environment

EXTRACT = "loom_memory_set_from_messages"
POLLS_MAX = 60_000  # polls of 1 ms for the gateway to hold the call: a stuck run fails


class Instance:
    """A configuration folder for ``gateway`` with one session of one message imported."""

    def __init__(self, root: Path, gateway: RunningGateway) -> None:
        self.config = root / "cfg"
        self.config.mkdir()
        (self.config / "config.local.yaml").write_text(
            f"memory:\n  backend: loom\nmcp_gateway_url: {gateway.base_url}\n", encoding="utf-8"
        )
        self.options = ["--config-dir", str(self.config), "--workspace", str(root / "ws")]
        self.env = clean_environment(root / "home")
        record = {
            "session_id": "kitchen",
            "role": "user",
            "content": "the kettle is blue",
            "created_at": "2026-11-30T10:00:00+00:00",
        }
        (root / "in.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
        subprocess.run(
            [*self.command("import"), str(root / "in.jsonl"), *self.options],
            check=True,
            env=self.env,
            capture_output=True,
        )

    def command(self, verb: str) -> list[str]:
        return [sys.executable, "-m", "provisioner", "memory", verb]

    def sweep(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.command("sweep"), *args, *self.options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )

    def watermark(self) -> int:
        with StateStore(self.config / "memory" / "state.sqlite3") as state:
            return state.watermark("kitchen")


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=1) as running:
        yield running


def wait_for_a_held_extraction(gateway: RunningGateway, process: subprocess.Popen[str]) -> bool:
    """Poll until the gateway holds an extraction it will never answer (``hang``)."""
    for _poll in range(POLLS_MAX):
        if any(call.tool == EXTRACT and call.fault for call in list(gateway.app.calls)):
            return True
        if process.poll() is not None:
            return False
        time.sleep(0.001)
    return False


class TestAStopSignalMidSweep:
    @pytest.mark.parametrize(
        ("how", "status", "said"),
        [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")],
        ids=["SIGTERM", "SIGINT"],
    )
    def test_the_sweep_says_it_was_stopped_and_exits_with_the_signal_s_status(
        self,
        tmp_path: Path,
        gateway: RunningGateway,
        how: signal.Signals,
        status: int,
        said: str,
    ) -> None:
        instance = Instance(tmp_path, gateway)
        gateway.app.faults.switch(f"hang@{EXTRACT}")
        process = instance.sweep()
        try:
            assert wait_for_a_held_extraction(gateway, process), "no extraction was held"
            process.send_signal(how)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert process.returncode == status and out == ""
        assert "Traceback" not in err
        lines = err.strip().splitlines()
        assert lines[-2].startswith(f"sweep interrupted: stopped by {how.name}; ")
        assert lines[-1] == f"python -m provisioner: {said}"
        assert instance.watermark() == 0  # nothing taken, nothing lost: the next sweep sends it

    def test_a_sweep_every_interval_stopped_between_sweeps_ends_with_a_json_object(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        instance = Instance(tmp_path, gateway)
        process = instance.sweep("--every", "1h", "--json")
        assert process.stdout is not None
        try:
            first = json.loads(process.stdout.readline())  # the first sweep's report
            process.send_signal(signal.SIGTERM)
            out, err = process.communicate(timeout=60)
        finally:
            process.kill()
        assert (first["stopped"], first["exit_status"]) == ("done", 0)
        stopped = json.loads(out)
        assert (stopped["stopped"], stopped["exit_status"]) == ("interrupted", 143)
        assert process.returncode == 143 and err.strip().endswith(
            "python -m provisioner: terminated"
        )
        assert instance.watermark() == 1
