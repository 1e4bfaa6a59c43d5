"""A fleet switch killed with SIGKILL at each of its steps in turn, then run again: every
memory and message reaches Loom once, beyond what was in flight at the kill (FLEET-8).

Real processes (``python -m provisioner fleet switch``) against the dev gateway on loopback,
on instances with a real memU store, a ``nerve.db`` in Nerve's schema and a provisioned
workspace with an agent's edit. The switch's test hook kills the process right after its N-th
step: a phase noted, or a call Loom answered before the answer is recorded — the worst moment,
since Loom has the write or the batch and the instance's record does not. For N = 1, 2, …, a
fresh fleet is switched with the kill at N and then switched again to its end, until a run
with the kill set finishes on its own: every step of the fleet has been a kill's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.fleet.switch import KILL_AT_ENV
from testbed.fleet_switch import (
    AGENT_LINE,
    Shape,
    build_instance,
    expected_swept,
    inventory,
    provision_template,
)
from tests.support.processes import clean_environment

SHAPE = Shape(items=2, sessions=2, messages=4, memorized=1)
NAMES = ["a", "b"]
STEPS_MAX = 40  # far past the steps of two such instances
KILLED = -9  # subprocess's returncode for a child SIGKILL ended
WINDOWS_IN_FLIGHT = 2  # a kill after one answer: that window and the other session's
WRITE_TOOL = "loom_memory_set"


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5, answers="json") as running:
        yield running


def switch(root: Path, url: str, kill_at: int | None) -> subprocess.CompletedProcess[str]:
    extra = {KILL_AT_ENV: str(kill_at)} if kill_at else {}
    command = [sys.executable, "-m", "provisioner", "fleet", "switch", "--inventory",
               str(root / "fleet.yaml"), "--to", "loom", "--gateway", url, "--jobs", "1",
               "--json"]  # fmt: skip
    return subprocess.run(
        command,
        env=clean_environment(root / "home", extra),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def build_fleet(root: Path, template: Path, names: list[str]) -> None:
    root.mkdir()
    for name in names:
        build_instance(root, template, name, SHAPE, edited=True)
    inventory(root, names)


def writes_of(gateway: RunningGateway, names: list[str]) -> int:
    keys = {f"memu-{name}-item-{n}" for name in names for n in range(SHAPE.items)}
    return sum(
        1 for call in gateway.app.calls
        if call.tool == WRITE_TOOL and call.arguments.get("memory_key") in keys
    )  # fmt: skip


@pytest.mark.slow
def test_killed_at_each_step_then_run_again_everything_reaches_loom_once(
    tmp_path: Path, gateway: RunningGateway
) -> None:
    template = provision_template(tmp_path)
    store = gateway.app.store
    steps_killed = 0
    for kill_at in range(1, STEPS_MAX + 1):
        names = [f"k{kill_at}{name}" for name in NAMES]
        root = tmp_path / f"kill-{kill_at}"
        build_fleet(root, template, names)
        killed = switch(root, gateway.base_url, kill_at=kill_at)
        assert "Traceback" not in killed.stderr, killed.stderr
        if killed.returncode != KILLED:
            assert killed.returncode == 0, killed.stderr
            break
        steps_killed += 1
        done = switch(root, gateway.base_url, kill_at=None)
        assert done.returncode == 0, (kill_at, done.stdout, done.stderr)
        report = json.loads(done.stdout)
        assert {i["status"] for i in report["instances"]} <= {"switched", "already_switched"}

        keys = Counter(store.memory_keys())
        assert all(
            keys[f"memu-{name}-item-{n}"] == 1 for name in names for n in range(SHAPE.items)
        ), kill_at
        sent = writes_of(gateway, names)  # each once, one in flight at most sent again
        assert len(names) * SHAPE.items <= sent <= len(names) * SHAPE.items + 1, kill_at

        extracted = Counter(t for t in store.extracted_texts() if t.startswith(f"k{kill_at}"))
        assert set(extracted) == set(expected_swept(names, SHAPE)), kill_at
        again = sum(count - 1 for count in extracted.values())
        assert again <= WINDOWS_IN_FLIGHT * SHAPE.messages, kill_at  # the windows in flight

        for name in names:
            agents = (root / name / "ws" / "AGENTS.md").read_text(encoding="utf-8")
            assert AGENT_LINE in agents

    else:
        pytest.fail(f"still killed at step {STEPS_MAX}")
    calls_before = len(gateway.app.calls)
    last = switch(tmp_path / "kill-1", gateway.base_url, kill_at=None)
    assert last.returncode == 0, last.stderr
    statuses = [i["status"] for i in json.loads(last.stdout)["instances"]]
    assert statuses == ["already_switched"] * len(NAMES)
    assert len(gateway.app.calls) == calls_before  # a switched instance costs no call
    # Per instance at least: config, workspace, each write, migrate, each batch, sweep.
    assert steps_killed >= len(NAMES) * (4 + SHAPE.items + SHAPE.sessions)
