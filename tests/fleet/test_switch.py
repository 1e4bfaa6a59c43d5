"""``nerve-provisioner fleet switch --to loom`` on real instances against the dev gateway
(FLEET-7, FLEET-8, FLEET-9).

Each instance is a workspace provisioned for memU by init, its configuration folder, memU's
store in memu-py's layout and a ``nerve.db`` in Nerve's schema (``tests.fleet.switching``);
Loom is the dev gateway's stand-in on loopback, whose store says what reached it. The command
runs through ``main`` in this process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.fleet.switch_budget import FleetBudget, FleetLoom
from provisioner.runtime.gateway.errors import MayPass
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.transcripts import Message
from testbed.fleet_switch import (
    AGENT_LINE,
    Shape,
    build_instance,
    expected_swept,
    inventory,
    item_text,
    provision_template,
)
from tests.runner import run_cli
from tests.support.processes import clean_environment, read_terminal

SHAPE = Shape(items=3, sessions=2, messages=4, memorized=1)
EXTRACT_TOOL = "loom_memory_set_from_messages"


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=2, answers="json") as running:
        yield running


@pytest.fixture
def template(tmp_path: Path) -> Path:
    return provision_template(tmp_path / "built")


def switch(root: Path, *args: str) -> tuple[int, dict, str]:
    done = run_cli(
        ["fleet", "switch", "--inventory", str(root / "fleet.yaml"), "--to", "loom", *args],
        env=clean_environment(root / "home"),
    )
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout) if "--json" in args else {}
    return done.returncode, report, done.stderr


def fleet(root: Path, template: Path, names: list[str], **edited: bool) -> Path:
    for name in names:
        build_instance(root, template, name, SHAPE, edited=edited.get(name, False))
    return inventory(root, names)


def local_config(root: Path, name: str) -> dict:
    return yaml.safe_load((root / name / "config" / "config.local.yaml").read_text("utf-8"))


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class TestAFleetSwitched:
    def test_every_instance_gets_the_switch_the_wording_its_memories_and_its_conversations(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        names = ["a", "b"]
        fleet(tmp_path, template, names, a=True)
        status, report, _ = switch(tmp_path, "--gateway", gateway.base_url, "--json")
        assert status == 0
        assert report["schema"] == 1
        assert [i["status"] for i in report["instances"]] == ["switched", "switched"]
        first = report["instances"][0]
        assert first["workspace"] == "a/ws"
        assert first["phases"]["config"]["written"] == ["memory.backend", "mcp_gateway_url"]
        actions = {f["path"]: f["action"] for f in first["phases"]["workspace"]["files"]}
        assert actions["AGENTS.md"] == "merge"
        assert first["phases"]["migrate"]["sent"] == SHAPE.items
        assert first["phases"]["migrate"]["verdicts"]["clear"] == SHAPE.items
        assert first["phases"]["sweep"]["messages_taken"] == len(expected_swept(["a"], SHAPE))
        assert report["summary"]["switched"] == 2
        assert report["summary"]["memories_sent"] == 2 * SHAPE.items

        for name in names:
            assert local_config(tmp_path, name) == {
                "memory": {"backend": "loom"},
                "mcp_gateway_url": gateway.base_url,
            }
        agents = (tmp_path / "a" / "ws" / "AGENTS.md").read_text("utf-8")
        assert AGENT_LINE in agents
        store = gateway.app.store
        keys = Counter(store.memory_keys())
        assert all(keys[f"memu-{n}-item-{i}"] == 1 for n in names for i in range(SHAPE.items))
        assert {item_text(n, i) for n in names for i in range(SHAPE.items)} <= set(
            store.memory_texts()
        )
        extracted = store.extracted_texts()
        assert sorted(extracted) == sorted(expected_swept(names, SHAPE))  # each once

    def test_a_second_run_costs_each_instance_one_look_and_no_call(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        fleet(tmp_path, template, ["a", "b"])
        assert switch(tmp_path, "--gateway", gateway.base_url)[0] == 0
        calls = len(gateway.app.calls)
        status, report, _ = switch(tmp_path, "--gateway", gateway.base_url, "--json")
        assert status == 0
        assert [i["status"] for i in report["instances"]] == ["already_switched"] * 2
        assert all(i["phases"] == {} for i in report["instances"])
        assert len(gateway.app.calls) == calls

    def test_an_instance_with_its_own_gateway_keeps_it(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        fleet(tmp_path, template, ["a"])
        own = tmp_path / "a" / "config" / "config.local.yaml"
        own.write_text(f"mcp_gateway_url: {gateway.base_url}\nweb_port: 8900\n", "utf-8")
        status, report, _ = switch(tmp_path, "--gateway", "http://127.0.0.1:9", "--json")
        assert status == 0, report
        assert report["instances"][0]["phases"]["config"]["written"] == ["memory.backend"]
        assert local_config(tmp_path, "a") == {
            "mcp_gateway_url": gateway.base_url,
            "web_port": 8900,
            "memory": {"backend": "loom"},
        }


class TestWhatAnInstanceLacks:
    def test_an_instance_without_memu_or_nerve_db_is_switched_and_named_for_it(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        build_instance(tmp_path, template, "bare", Shape(items=0, sessions=0))
        inventory(tmp_path, ["bare"])
        status, report, _ = switch(tmp_path, "--gateway", gateway.base_url, "--json")
        assert status == 0
        (bare,) = report["instances"]
        assert bare["status"] == "switched"
        assert bare["lacked"] == ["memu_db", "nerve_db"]
        assert set(bare["phases"]) == {"config", "workspace"}
        assert local_config(tmp_path, "bare")["memory"] == {"backend": "loom"}
        assert gateway.app.calls == type(gateway.app.calls)()  # nothing was sent

    def test_a_locked_instance_is_left_to_the_platform_its_files_untouched(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        fleet(tmp_path, template, ["locked", "open"])
        settings = tmp_path / "locked" / "ws" / "config" / "settings.yaml"
        settings.write_text("lockdown: true\n" + settings.read_text("utf-8"), "utf-8")
        before = tree_digest(tmp_path / "locked")
        status, report, _ = switch(tmp_path, "--gateway", gateway.base_url, "--json")
        assert status == 1  # as fleet update's: something is left for a person
        locked, opened = report["instances"]
        assert locked["status"] == "locked"
        assert "NERVE_MEMORY_BACKEND=loom" in locked["error"]
        assert locked["phases"] == {}
        assert opened["status"] == "switched"
        assert tree_digest(tmp_path / "locked") == before

    def test_no_gateway_at_all_is_one_line_and_nothing_written(
        self, tmp_path: Path, template: Path
    ) -> None:
        fleet(tmp_path, template, ["a"])
        before = tree_digest(tmp_path / "a")
        status, report, stderr = switch(tmp_path, "--json")
        assert status == 2
        assert report["instances"][0]["status"] == "error"
        assert "no mcp_gateway_url, and no --gateway given" in stderr
        assert tree_digest(tmp_path / "a") == before


class TestBadInput:
    def test_a_switch_key_that_is_not_a_path_refuses_the_inventory(self, tmp_path: Path) -> None:
        (tmp_path / "fleet.yaml").write_text(
            "- {workspace: a/ws, config_dir: a/config, nerve_home: 7}\n", "utf-8"
        )
        status, _, stderr = switch(tmp_path)
        assert status == 2
        assert "entry 1 (a/ws): nerve_home is not a path" in stderr
        assert len(stderr.strip().splitlines()) == 1

    def test_a_gateway_that_is_no_url_is_a_usage_error(self, tmp_path: Path) -> None:
        (tmp_path / "fleet.yaml").write_text("- {workspace: a/ws, config_dir: a/c}\n", "utf-8")
        status, _, stderr = switch(tmp_path, "--gateway", "ftp://x")
        assert status == 2
        assert "--gateway" in stderr


class TestTheFleetsBudget:
    def test_it_grows_per_answer_and_is_cut_once_per_generation(self) -> None:
        async def scenario() -> FleetBudget:
            budget = FleetBudget(start=4, cap=8, floor=2)
            async with budget.slot() as first, budget.slot() as second:
                for _ in range(5):
                    budget.answered(first)
                assert budget.limit == 8  # grown by one per answer, up to the cap
                budget.turned_away(first)
                budget.turned_away(second)  # the same overload: cut once
                assert budget.limit == 6  # three quarters
                budget.answered(second)  # launched before the cut: old news
                assert budget.limit == 6
            async with budget.slot() as third:
                budget.turned_away(third)
            return budget

        budget = asyncio.run(scenario())
        assert (budget.limit, budget.cuts) == (4, 2)

    def test_a_cut_never_goes_below_the_floor(self) -> None:
        async def scenario() -> FleetBudget:
            budget = FleetBudget(start=3, cap=3, floor=2)
            for _ in range(3):
                async with budget.slot() as call:
                    budget.turned_away(call)
            return budget

        budget = asyncio.run(scenario())
        assert (budget.limit, budget.cuts) == (2, 3)

    def test_the_calls_in_flight_never_pass_the_limit(self) -> None:
        async def scenario() -> tuple[int, int]:
            budget = FleetBudget(start=3, cap=3, floor=1)

            async def call() -> None:
                async with budget.slot():
                    await asyncio.sleep(0)

            await asyncio.gather(*(call() for _ in range(20)))
            return budget.peak, budget.limit

        assert asyncio.run(scenario()) == (3, 3)

    def test_an_extraction_turned_away_is_sent_again_after_the_gateways_retry_after(
        self,
    ) -> None:
        waits: list[float] = []

        async def sleep(seconds: float) -> None:
            waits.append(seconds)

        async def scenario(url: str) -> tuple[int, FleetBudget]:
            budget = FleetBudget(start=4, cap=8, floor=1)
            async with LoomMemory(gateway_url=url) as memory:
                loom = FleetLoom(memory, budget, sleep=sleep)
                message = Message(1, "user", "I keep bees on the roof", "2026-11-30T10:00:00Z")
                extracted = await loom.extract([message], session_id="s1")
                assert extracted.accepted == 1
                return loom.resent, budget

        with serve_in_thread(seed=0, answers="json", faults=f"429:3@{EXTRACT_TOOL}") as running:
            with pytest.raises(MayPass):  # five refusals: the last goes to the sweep
                asyncio.run(scenario(running.base_url))
            assert waits == [3.0] * 4
            waits.clear()
            running.app.faults.switch(f"429:3@{EXTRACT_TOOL}=0.5", seed=1)  # 429, then Loom
            resent, budget = asyncio.run(scenario(running.base_url))
        assert (resent, waits) == (1, [3.0])
        assert budget.cuts == 1


@pytest.mark.slow
class TestProgress:
    def test_on_a_terminal_stderr_shows_progress_and_stdout_stays_the_json(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        fleet(tmp_path, template, ["a", "b"])
        leader, follower = os.openpty()
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "provisioner", "fleet", "switch", "--inventory",
                 str(tmp_path / "fleet.yaml"), "--to", "loom", "--gateway", gateway.base_url,
                 "--json"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                env=clean_environment(tmp_path / "home"), text=True,
            )  # fmt: skip
        finally:
            os.close(follower)
        shown = read_terminal(leader)
        out, _err = process.communicate(timeout=120)
        assert process.returncode == 0, shown
        assert "\rswitched 1/2 instances" in shown and "\rswitched 2/2 instances" in shown
        assert json.loads(out)["summary"]["switched"] == 2

    def test_off_a_terminal_stderr_stays_quiet(
        self, tmp_path: Path, template: Path, gateway: RunningGateway
    ) -> None:
        fleet(tmp_path, template, ["a"])
        status, report, stderr = switch(tmp_path, "--gateway", gateway.base_url, "--json")
        assert status == 0 and report["summary"]["switched"] == 1
        assert stderr == ""
