"""FLEET-1 with real processes: a workspace whose init lock another process holds, and an
interrupt in the middle of ``fleet update`` followed by a run that finishes the job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from provisioner.workspace.render import MANIFEST_PATH
from tests.fleet.provisioning import Provision
from tests.support.machine_faults import process_holding
from tests.support.processes import clean_environment, read_terminal
from tests.support.repo import REPO_ROOT

HOLD_THE_LOCK = """
import sys
from pathlib import Path
from provisioner.workspace.fs import WorkspaceRoot
from provisioner.workspace.lock import WorkspaceLock
with WorkspaceRoot(Path(sys.argv[1])) as root, WorkspaceLock(root):
    print("held", flush=True)
    sys.stdin.read()
"""
NAMES = ("a", "b", "c")
POLL_S = 0.02


@contextmanager
def lock_held(workspace: Path, env: dict[str, str]) -> Iterator[None]:
    """Another process holds ``workspace``'s init lock for the block."""
    with process_holding(HOLD_THE_LOCK, str(workspace), env=env):
        yield


def wording(workspace: Path) -> str:
    return json.loads((workspace / MANIFEST_PATH).read_text())["answers"]["memory_backend"]


@pytest.fixture
def switched_fleet(tmp_path: Path, provision: Provision) -> Path:
    """Three memU workspaces whose configuration now names Loom; the inventory of them."""
    for name in NAMES:
        provision(name)
    (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: loom\n")
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text("".join(f"- {{workspace: {n}, config_dir: cfg}}\n" for n in NAMES))
    return inventory


def fleet_command(inventory: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "provisioner",
        "fleet",
        "update",
        "--inventory",
        str(inventory),
        *args,
    ]


def environment(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "home").mkdir(exist_ok=True)
    return clean_environment(tmp_path / "home", {"PYTHONPATH": str(REPO_ROOT)})


@pytest.mark.slow
class TestBusy:
    def test_a_workspace_another_init_holds_is_busy_exit_75_and_the_others_are_updated(
        self, tmp_path: Path, switched_fleet: Path
    ) -> None:
        env = environment(tmp_path)
        with lock_held(tmp_path / "b", env):
            ran = subprocess.run(
                fleet_command(switched_fleet, "--json"),
                capture_output=True,
                text=True,
                env=env,
                timeout=120,
            )
        assert ran.returncode == 75, ran.stderr
        statuses = {w["workspace"]: w["status"] for w in json.loads(ran.stdout)["workspaces"]}
        assert statuses == {"a": "up_to_date", "b": "busy", "c": "up_to_date"}
        assert "another nerve init" in ran.stderr and "b" in ran.stderr
        assert [wording(tmp_path / n) for n in NAMES] == ["loom", "memu", "loom"]


@pytest.mark.slow
class TestInterrupted:
    @pytest.mark.parametrize(
        ("stop", "status", "said"),
        [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
        ids=["SIGINT", "SIGTERM"],
    )
    def test_a_stop_signal_mid_update_reports_what_finished_and_a_second_run_finishes(
        self, tmp_path: Path, switched_fleet: Path, stop: signal.Signals, status: int, said: str
    ) -> None:
        env = environment(tmp_path)
        with lock_held(tmp_path / "b", env):
            # One worker: a is updated, then the run waits on b's lock while c waits its turn.
            update = subprocess.Popen(
                fleet_command(switched_fleet, "--jobs", "1", "--json"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            while wording(tmp_path / "a") != "loom":
                assert update.poll() is None, update.communicate()
                time.sleep(POLL_S)
            update.send_signal(stop)
            out, err = update.communicate(timeout=120)
        assert update.returncode == status, err
        assert err.rstrip().endswith(f": {said}") and "Traceback" not in err
        report = json.loads(out)
        assert (report["exit_status"], report["interrupted"]) == (status, stop.name)
        statuses = {w["workspace"]: w["status"] for w in report["workspaces"]}
        # b, when under way at the signal (waiting on its lock), finished as busy; c never began
        assert (statuses["a"], statuses["c"]) == ("up_to_date", "not_started")
        assert statuses["b"] in ("busy", "not_started")
        assert report["changed"] == 1
        assert [wording(tmp_path / n) for n in NAMES] == ["loom", "memu", "memu"]
        for name in NAMES:
            assert not (tmp_path / name / ".nerve" / "journal.json").exists()
            assert not (tmp_path / name / ".nerve" / "init.lock").exists()
        again = subprocess.run(
            fleet_command(switched_fleet), capture_output=True, text=True, env=env, timeout=120
        )
        assert again.returncode == 0, again.stdout + again.stderr
        assert [wording(tmp_path / n) for n in NAMES] == ["loom", "loom", "loom"]
        check = subprocess.run(
            [*fleet_command(switched_fleet)[:4], "check", "--inventory", str(switched_fleet)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert check.returncode == 0, check.stdout


@pytest.mark.slow
class TestProgress:
    def test_on_a_terminal_stderr_shows_progress_and_stdout_stays_the_json(
        self, tmp_path: Path, switched_fleet: Path
    ) -> None:
        leader, follower = os.openpty()
        try:
            process = subprocess.Popen(
                [*fleet_command(switched_fleet, "--json")[:4], "check", "--inventory",
                 str(switched_fleet), "--json"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                env=environment(tmp_path), text=True,
            )  # fmt: skip
        finally:
            os.close(follower)
        shown = read_terminal(leader)
        out, _err = process.communicate(timeout=120)
        assert process.returncode == 1
        assert "\rchecked 3/3 workspaces" in shown
        assert json.loads(out)["summary"]["drift"] == 3
