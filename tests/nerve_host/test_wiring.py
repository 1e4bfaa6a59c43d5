"""The engine wiring of docs/architecture.md, run block by block on Nerve's real objects
(NERVE-11): settings from ``nerve_settings`` over the files Nerve's init wrote, the sweeper
from ``nerve_sweeper`` on the ``nerve.db`` Nerve's ``Database`` wrote, the jobs into Nerve's
``CronJob``, and recalled items into Nerve's system-prompt builder; the dev gateway stands in
for the platform's.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost

nerve_db = pytest.importorskip("nerve.db", reason=NO_NERVE)

from nerve import config as nerve_config  # noqa: E402
from nerve.agent.prompts import build_system_prompt  # noqa: E402
from nerve.cron.jobs import CronJob  # noqa: E402

from provisioner.devgateway import serve_in_thread  # noqa: E402
from provisioner.integrations.nerve import nerve_settings  # noqa: E402
from provisioner.runtime import LoomMemory  # noqa: E402
from tests.runtime.loom.test_engine_wiring import (  # noqa: E402
    run_block,
    section_blocks,
    section_text,
    wait_for,
)

pytestmark = pytest.mark.anyio
NAMESPACE = "ada"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def write_conversation(path: Path) -> int:
    database = nerve_db.Database(path)
    await database.connect()
    try:
        await database.create_session("chat")
        await database.add_message("chat", "user", "Which tea do I take?")
        return await database.add_message("chat", "assistant", "Tea with lemon, you said.")
    finally:
        await database.close()


def switch_to_loom(machine: Machine, gateway_url: str) -> None:
    local = machine.config_dir / "config.local.yaml"
    data = yaml.safe_load(local.read_text(encoding="utf-8")) or {}
    data["memory"] = {
        **(data.get("memory") or {}),
        "backend": "loom",
        "loom": {"namespace": NAMESPACE},
    }
    data["mcp_gateway_url"] = gateway_url
    local.write_text(yaml.safe_dump(data), encoding="utf-8")


class TestTheWiringOnNervesObjects:
    async def test_the_documented_blocks_run_as_written_inside_nerve(
        self, machine: Machine, run_host: RunHost
    ) -> None:
        done = run_host(
            "-c", str(machine.config_dir), "init", "--memory-backend", "loom", "--non-interactive"
        )
        assert done.returncode == 0, done.stderr
        last_id = await write_conversation(machine.state / "nerve.db")
        with serve_in_thread(seed=5) as gateway:
            switch_to_loom(machine, gateway.base_url)
            loaded = nerve_config.load_config(machine.config_dir)
            namespace: dict[str, Any] = {
                "settings": nerve_settings(),
                "config_dir": machine.config_dir,
                "nerve_home": machine.state,
                "workspace": loaded.workspace,
                "transcripts": None,  # Nerve's own nerve.db, in $NERVE_HOME
            }
            try:
                await run_block(0, namespace)  # initialize
                memory = namespace["memory"]
                assert isinstance(memory, LoomMemory) and memory.available

                await run_block(1, namespace)  # the startup recall
                gateway.app.store.remember("prefers short answers", namespace=NAMESPACE)
                recall = await memory.startup_recall("next")
                prompt = await asyncio.to_thread(
                    build_system_prompt,
                    loaded.workspace,
                    "next",
                    recalled_memories=list(recall.items),
                )
                assert "- prefers short answers" in prompt

                await run_block(2, namespace)  # the sweep loop, on nerve.db
                await wait_for(lambda: memory.state.watermark("chat") == last_id)
                texts = gateway.app.store.memory_texts(NAMESPACE)
                assert "Which tea do I take?" in texts

                await run_block(3, namespace)  # the job loader
                jobs = [CronJob.from_dict(job, gates=False) for job in namespace["jobs"]]
                assert "memory-maintenance" in {job.id for job in jobs}

                await run_block(4, namespace)  # shutdown
                assert namespace["sweep_task"].cancelled()
            finally:
                task = namespace.get("sweep_task")
                if task is not None and not task.done():
                    task.cancel()
                if namespace.get("memory") is not None:
                    await namespace["memory"].aclose()
                sweeper = namespace.get("sweeper")
                if sweeper is not None:
                    sweeper.close()

    def test_the_host_code_the_wiring_takes_is_what_the_docs_state(self) -> None:
        lines = sum(
            len([line for line in block.splitlines() if line.strip()]) for block in section_blocks()
        )
        stated = re.search(r"The five blocks are (\d+) lines of host code", section_text())
        assert stated is not None and int(stated.group(1)) == lines
