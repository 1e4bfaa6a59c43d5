"""Nerve's engine, wired to the runtime the one documented way (NERVE-5).

``LoomMemory`` is opened where Nerve's engine starts and closed where it stops, built from
plain values or from Nerve's own configuration — the mapping Nerve merges from its layers, or
a config object of that shape — without this package's config loader. The section "Wiring it
into Nerve's engine" of docs/architecture.md is run block by block, as written, against the
dev gateway and a temporary folder.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from provisioner.devgateway import RunningGateway
from provisioner.runtime import LoomMemory, StateStore, memory_backend
from provisioner.runtime.loom.backend import NOT_RECALLED
from provisioner.runtime.transcripts import SqliteTranscripts
from provisioner.templating.texts import job_prompt
from provisioner.workspace.render import Answers, render_workspace
from tests.runtime.gateway.tracking import TransportLog, settled_fds
from tests.support.repo import REPO_ROOT

pytestmark = pytest.mark.anyio

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
SECTION = "## Wiring it into Nerve's engine"
STEPS = ("Initialize.", "The startup recall.", "The sweep loop.", "The job loader.", "Shutdown.")
FD_SLACK = 2  # as in tests/runtime/gateway/test_leaks.py
CYCLES = 40
WAIT_GUARD_S = 60.0  # a bound on waiting for the sweep task, never a timing assertion
NEEDS_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")


def nerve_settings(gateway_url: str, **loom: Any) -> dict[str, Any]:
    """A merged configuration as Nerve holds it: its own keys beside the ones the runtime reads.

    Values that went through ``${VAR}`` are strings, as Nerve's expansion leaves them.
    """
    return {
        "timezone": "Europe/Berlin",
        "agent": {"model": "claude-sonnet-4-6", "backend": "claude"},
        "memory": {
            "backend": "loom",
            "loom": loom,
            "recall_model": "claude-sonnet-4-6",
            "fast_model": "claude-haiku-4-5-20251001",
            "sqlite_dsn": "sqlite:////var/lib/nerve/memu.sqlite",
            "semantic_dedup_threshold": 0.85,
            "categories": [{"name": "people", "description": "who is who"}],
        },
        "mcp_gateway_url": gateway_url,
        "gateway": {"host": "127.0.0.1", "port": 8900},
    }


def state_fds(path: Path) -> int:
    """Descriptors of this process open on the state file (or its WAL and shared memory)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(path))
    return count


class TestClosing:
    async def test_aclose_closes_every_http_client_the_backend_opened(
        self, gateway: RunningGateway
    ) -> None:
        """NERVE-5, GW-8: the engine's shutdown leaves no client open."""
        log = TransportLog()
        memory = LoomMemory(gateway_url=gateway.base_url, transport_factory=log)
        await memory.open()
        await memory.startup_recall("s-1")
        await memory.health()
        await memory.aclose()
        assert len(log.built) >= 2, "the catalog reader and the Loom client each have one"
        assert log.all_closed

    async def test_closing_twice_is_safe_and_leaves_the_backend_closed(
        self, gateway: RunningGateway
    ) -> None:
        """NERVE-5: a second aclose() does nothing; a closed backend refuses to be used."""
        log = TransportLog()
        memory = await LoomMemory(gateway_url=gateway.base_url, transport_factory=log).open()
        await memory.aclose()
        await memory.aclose()
        assert log.all_closed
        with pytest.raises(RuntimeError, match="not open"):
            await memory.startup_recall("s-1")
        with pytest.raises(RuntimeError, match="not open"):
            memory.state  # noqa: B018 - the property is what raises

    async def test_closing_a_backend_never_opened_does_nothing(
        self, gateway: RunningGateway
    ) -> None:
        log = TransportLog()
        memory = LoomMemory(gateway_url=gateway.base_url, transport_factory=log)
        await memory.aclose()
        assert log.built == []

    async def test_async_with_closes_as_aclose_does(self, gateway: RunningGateway) -> None:
        log = TransportLog()
        async with LoomMemory(gateway_url=gateway.base_url, transport_factory=log) as memory:
            assert memory.available
        assert log.built and log.all_closed

    async def test_opening_an_open_backend_is_refused_and_opens_nothing_more(
        self, gateway: RunningGateway
    ) -> None:
        log = TransportLog()
        memory = await LoomMemory(gateway_url=gateway.base_url, transport_factory=log).open()
        built = len(log.built)
        with pytest.raises(RuntimeError, match="open already"):
            await memory.open()
        assert len(log.built) == built
        await memory.aclose()
        assert log.all_closed

    async def test_a_failed_open_leaves_nothing_open(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """A state path that cannot be a database fails the open, which opens no client."""
        log = TransportLog()
        memory = LoomMemory(
            gateway_url=gateway.base_url, state_path=tmp_path, transport_factory=log
        )
        with pytest.raises((sqlite3.Error, OSError)):
            await memory.open()
        assert log.built == []
        with pytest.raises(RuntimeError, match="not open"):
            memory.state  # noqa: B018 - the property is what raises
        await memory.aclose()

    @NEEDS_PROC
    async def test_opening_and_closing_many_times_leaves_no_descriptor_open(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """GW-8: each cycle opens real clients and a state file and closes them all."""
        settings = nerve_settings(gateway.base_url)
        state_path = tmp_path / "state.sqlite3"

        async def cycle(session_id: str) -> None:
            memory = await LoomMemory.from_settings(settings, state_path=state_path).open()
            await memory.startup_recall(session_id)
            await memory.aclose()

        await cycle("warm-up")  # the loop, the TLS context, the first SQLite open
        baseline = await settled_fds()
        for number in range(CYCLES):
            await cycle(f"s-{number}")
        assert abs(await settled_fds() - baseline) <= FD_SLACK
        assert state_fds(state_path) == 0

    @NEEDS_PROC
    async def test_the_state_file_it_opened_is_closed_and_a_given_store_stays_open(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        own_path = tmp_path / "own.sqlite3"
        memory = await LoomMemory(gateway_url=gateway.base_url, state_path=own_path).open()
        assert state_fds(own_path) > 0
        await memory.aclose()
        assert state_fds(own_path) == 0

        with StateStore(tmp_path / "given.sqlite3") as given:
            async with LoomMemory(gateway_url=gateway.base_url, state=given) as memory:
                await memory.startup_recall("s-1")
            assert given.frozen_recall("s-1") is not None, "the caller's store is still open"

    async def test_a_closed_backend_opens_again_and_keeps_its_frozen_recalls(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REC-3 across an engine restart: the state file keeps the frozen recall."""
        gateway.app.store.remember("takes tea with lemon")
        memory = LoomMemory(gateway_url=gateway.base_url, state_path=tmp_path / "state.sqlite3")
        first = await (await memory.open()).startup_recall("s-1")
        await memory.aclose()
        gateway.app.store.remember("moved to Berlin")
        second = await (await memory.open()).startup_recall("s-1")
        await memory.aclose()
        assert first.recalled and first.items == ("takes tea with lemon",)
        assert second == first


@dataclass
class LoomSection:
    org: str | None = None
    namespace: str | None = None
    defer_extraction: bool = False


@dataclass
class MemoryWithLoom:
    """Nerve's ``MemoryConfig`` once it carries the backend and its section."""

    backend: str = "memu"
    loom: LoomSection = field(default_factory=LoomSection)
    recall_model: str = "claude-sonnet-4-6"


@dataclass
class MemoryAsNerveHasIt:
    """Nerve's ``MemoryConfig`` today: memU's models and store, no backend, no Loom section."""

    recall_model: str = "claude-sonnet-4-6"
    memorize_model: str = "claude-sonnet-4-6"
    fast_model: str = "claude-haiku-4-5-20251001"
    embed_model: str = ""
    sqlite_dsn: str = ""
    semantic_dedup_threshold: float = 0.85
    knowledge_filter: bool = False
    categories: list[Any] = field(default_factory=list)


@dataclass
class NerveLikeConfig:
    memory: Any
    mcp_gateway_url: str = ""
    timezone: str = "America/New_York"


LOOM = {"backend": "loom"}
BAD_SETTINGS = [  # (settings, the key named, what the line says of it)
    ({"memory": ["loom"]}, "memory", "is a list; expected a mapping"),
    ({"memory": {"backend": "Loom"}}, "memory.backend", "'Loom' is not a memory backend"),
    ({"memory": {"backend": 1}}, "memory.backend", "an int is not a memory backend"),
    ({"memory": {**LOOM, "loom": "ada"}}, "memory.loom", "is a string; expected a mapping"),
    ({"memory": {**LOOM, "loom": {"org": "Acme"}}}, "memory.loom.org", "'Acme' is not a Loom"),
    ({"memory": {**LOOM, "loom": {"namespace": 7}}}, "memory.loom.namespace", "an int is not"),
    (
        {"memory": {**LOOM, "loom": {"defer_extraction": "maybe"}}},
        "memory.loom.defer_extraction",
        "'maybe' is not a boolean; expected true or false",
    ),
    (
        {"memory": LOOM, "mcp_gateway_url": "ftp://gw"},
        "mcp_gateway_url",
        "'ftp://gw' is not a usable URL; expected an absolute http or https URL",
    ),
    (
        {"memory": LOOM, "mcp_gateway_url": "http://gw/?x=1"},
        "mcp_gateway_url",
        "'http://gw/?***' has a query or fragment; expected a plain base URL",
    ),
    ({"memory": LOOM, "mcp_gateway_url": 8787}, "mcp_gateway_url", "is an int; expected"),
    ({"memory": LOOM, "mcp_gateway_url": "http://g w"}, "mcp_gateway_url", "has blanks"),
]


class TestFromNerveSettings:
    async def test_a_mapping_shaped_like_nerves_config_builds_the_backend(
        self, gateway: RunningGateway
    ) -> None:
        """NERVE-5: memory.backend, memory.loom.* and the top-level mcp_gateway_url are read;
        Nerve's other keys are left alone, and `${VAR}` strings such as "true" are understood."""
        settings = nerve_settings(
            gateway.base_url + "/", org="acme", namespace="ada", defer_extraction="True"
        )
        async with LoomMemory.from_settings(settings) as memory:
            assert memory.available
            assert memory.defer_extraction is True
            report = memory.diagnostics()
        assert report["gateway_url"] == gateway.base_url
        assert report["identity"]["org"] == "acme"
        assert report["identity"]["namespace"] == "ada"
        assert report["identity"]["namespace_source"] == "config"

    async def test_a_config_object_of_that_shape_builds_the_same_backend(
        self, gateway: RunningGateway
    ) -> None:
        gateway.app.store.remember("prefers short answers", namespace="ada")
        memory_section = MemoryWithLoom(backend="loom", loom=LoomSection(namespace="ada"))
        config = NerveLikeConfig(memory=memory_section, mcp_gateway_url=gateway.base_url)
        async with LoomMemory.from_settings(config) as memory:
            recall = await memory.startup_recall("s-1")
        assert recall.items == ("prefers short answers",)

    def test_nerves_config_object_as_it_is_today_names_the_key_it_lacks(self) -> None:
        """Nerve's MemoryConfig has no backend field: the error says so and what to pass."""
        config = NerveLikeConfig(memory=MemoryAsNerveHasIt(), mcp_gateway_url="http://gw")
        with pytest.raises(ValueError) as caught:
            LoomMemory.from_settings(config)
        text = str(caught.value)
        assert text.startswith("memory.backend: 'memu' is not 'loom'")
        assert "MemoryAsNerveHasIt has no 'backend' field" in text
        assert "merged configuration mapping" in text

    @pytest.mark.parametrize(
        "settings", [{}, {"memory": None}, {"memory": {"backend": "memu"}}, {"memory": {}}]
    )
    def test_a_memu_configuration_is_refused_naming_memory_backend(self, settings) -> None:
        """LOOM-1: the Loom backend is only built for memory.backend: loom."""
        with pytest.raises(ValueError, match=r"^memory\.backend: 'memu' is not 'loom'"):
            LoomMemory.from_settings(settings)

    @pytest.mark.parametrize(("settings", "key", "problem"), BAD_SETTINGS)
    def test_a_bad_value_is_one_line_naming_its_key(self, settings, key: str, problem) -> None:
        """CONF-7's shape without the loader: where, what is wrong, what is expected, one line."""
        with pytest.raises(ValueError) as caught:
            LoomMemory.from_settings(settings)
        text = str(caught.value)
        assert text.startswith(f"{key}: ")
        assert problem in text
        assert "\n" not in text

    def test_credentials_in_the_gateway_url_are_never_quoted_back(self) -> None:
        settings = {"memory": {"backend": "loom"}, "mcp_gateway_url": "http://ada:s3cret@gw:8787"}
        with pytest.raises(ValueError) as caught:
            LoomMemory.from_settings(settings)
        text = str(caught.value)
        assert text.startswith("mcp_gateway_url: 'http://***@gw:8787' has credentials in it")
        assert "s3cret" not in text and "ada" not in text

    def test_settings_that_are_no_mapping_and_no_object_are_refused(self) -> None:
        with pytest.raises(ValueError, match=r"^settings: is a string; expected Nerve's merged"):
            LoomMemory.from_settings("memory: {backend: loom}")

    async def test_without_a_gateway_url_the_backend_opens_and_is_unavailable(
        self, tmp_path: Path
    ) -> None:
        """LOOM-2: an empty mcp_gateway_url is no gateway, never an error."""
        settings = nerve_settings("")
        state_path = tmp_path / "state.sqlite3"
        async with LoomMemory.from_settings(settings, state_path=state_path) as memory:
            assert not memory.available
            assert await memory.startup_recall("s-1") == NOT_RECALLED
        assert state_path.is_file()

    @pytest.mark.parametrize(
        ("settings", "backend"),
        [
            ({}, "memu"),
            ({"memory": {"backend": ""}}, "memu"),
            ({"memory": {"backend": None, "recall_model": "x"}}, "memu"),
            ({"memory": {"backend": "memu"}}, "memu"),
            ({"memory": {"backend": "loom"}}, "loom"),
            (NerveLikeConfig(memory=MemoryAsNerveHasIt()), "memu"),
            (NerveLikeConfig(memory=MemoryWithLoom(backend="loom")), "loom"),
        ],
    )
    def test_memory_backend_names_the_configured_backend(self, settings, backend: str) -> None:
        """CONF-4: unset or empty is memU, as the loader has it."""
        assert memory_backend(settings) == backend


class TestPlainValues:
    async def test_plain_values_build_the_backend(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        gateway.app.store.remember("likes rain", namespace="ada")
        memory = LoomMemory(
            gateway_url=gateway.base_url, namespace="ada", state_path=tmp_path / "s.sqlite3"
        )
        async with memory:
            assert (await memory.startup_recall("s-1")).items == ("likes rain",)

    @pytest.mark.parametrize(
        ("values", "expected"),
        [
            ({"org": "Acme"}, "org: 'Acme' is not a Loom name; expected 1 to 63 characters"),
            ({"namespace": "a.b"}, "namespace: 'a.b' is not a Loom name"),
            ({"gateway_url": "gw:8787"}, "gateway_url: 'gw:8787' is not a usable URL"),
            ({"defer_extraction": "yes"}, "defer_extraction: 'yes' is not a boolean"),
        ],
    )
    def test_a_bad_plain_value_names_its_parameter(self, values, expected: str) -> None:
        with pytest.raises(ValueError) as caught:
            LoomMemory(**values)
        assert str(caught.value).startswith(expected)

    def test_a_state_store_and_a_state_path_together_are_refused(self, tmp_path: Path) -> None:
        with StateStore(":memory:") as store, pytest.raises(ValueError, match="both given"):
            LoomMemory(state=store, state_path=tmp_path / "state.sqlite3")


class TestWithoutTheConfigLoader:
    def test_building_from_nerves_settings_loads_no_config_loader_yaml_or_templates(
        self,
    ) -> None:
        """The runtime reads Nerve's settings itself: no provisioner.config, no PyYAML."""
        code = (
            "import asyncio, json, sys\n"
            "from provisioner.runtime import LoomMemory, memory_backend\n"
            "settings = {'memory': {'backend': 'loom', 'loom': {'namespace': 'ada'}}}\n"
            "assert memory_backend(settings) == 'loom'\n"
            "async def main():\n"
            "    async with LoomMemory.from_settings(settings) as memory:\n"
            "        await memory.startup_recall('s-1')\n"
            "asyncio.run(main())\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        loaded = set(json.loads(done.stdout))
        assert "provisioner.runtime.loom.settings" in loaded
        assert not {name for name in loaded if name.startswith("provisioner.config")}
        tops = {name.split(".")[0] for name in loaded}
        assert not tops & {"yaml", "jinja2", "copier", "mcp", "starlette"}


# --- the documented wiring, run as written ----------------------------------------------------


def section_text() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert SECTION in text, f"docs/architecture.md has no section {SECTION!r}"
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def section_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", section_text(), flags=re.DOTALL)


async def run_block(number: int, namespace: dict[str, Any]) -> None:
    """Run block ``number`` of the section as written, top-level ``await`` included."""
    code = compile(
        section_blocks()[number],
        f"docs/architecture.md: wiring block {number + 1}",
        "exec",
        flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
    )
    result = eval(code, namespace)
    if inspect.iscoroutine(result):
        await result


async def wait_for(condition: Any) -> None:
    """Until ``condition()`` holds; the guard only keeps a broken run from hanging."""
    loop = asyncio.get_running_loop()
    give_up = loop.time() + WAIT_GUARD_S
    while not condition():
        assert loop.time() < give_up, "the sweep task did not get through"
        await asyncio.sleep(0.01)


class TestTheWiringSection:
    def test_the_section_shows_each_step_in_a_few_lines(self) -> None:
        text = section_text()
        positions = [text.index(f"**{step}**") for step in STEPS]
        assert positions == sorted(positions)
        blocks = section_blocks()
        assert len(blocks) == len(STEPS)
        for block in blocks:
            assert len([line for line in block.splitlines() if line.strip()]) <= 12

    async def test_the_blocks_run_as_written_against_the_dev_gateway(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """NERVE-5, REC-3, REC-4, SWEEP-3, TXT-7: initialize, recall, sweep, jobs, shutdown."""
        workspace = tmp_path / "workspace"  # a memU workspace, switched to Loom
        render_workspace(Answers(profile="personal", memory_backend="memu"), workspace)
        transcripts = SqliteTranscripts(tmp_path / "nerve" / "transcripts.sqlite3")
        last_id = transcripts.add_message(
            "s-1", "user", "I take my tea with lemon.", "2026-12-01T09:00:00+00:00"
        )
        namespace: dict[str, Any] = {
            "settings": nerve_settings(gateway.base_url, namespace="ada"),
            "config_dir": tmp_path / "nerve",
            "nerve_home": tmp_path / "nerve-home",
            "workspace": workspace,
            "transcripts": transcripts,
        }
        try:
            await run_block(0, namespace)  # initialize
            memory = namespace["memory"]
            assert isinstance(memory, LoomMemory) and memory.available
            assert (tmp_path / "nerve-home" / "memory" / "state.sqlite3").is_file()

            await run_block(1, namespace)  # the startup recall
            session_block = namespace["session_block"]
            gateway.app.faults.switch("policy")
            failed = await session_block("s-2")
            assert "could not be recalled" in failed
            assert "s-2" not in namespace["frozen_blocks"], "a failed recall is not kept"
            gateway.app.faults.switch("")
            gateway.app.store.remember("prefers short answers", namespace="ada")
            recalled = await session_block("s-2")
            assert "- prefers short answers" in recalled
            gateway.app.store.remember("moved to Berlin", namespace="ada")
            assert await session_block("s-2") == recalled, "the same bytes on every rebuild"

            await run_block(2, namespace)  # the sweep loop
            await wait_for(lambda: memory.state.watermark("s-1") == last_id)
            assert "I take my tea with lemon." in gateway.app.store.memory_texts("ada")

            await run_block(3, namespace)  # the job loader
            jobs = {job["id"]: job for job in namespace["jobs"]}
            maintenance = jobs["memory-maintenance"]["prompt"]
            assert maintenance == job_prompt("memory-maintenance", "loom")

            await run_block(4, namespace)  # shutdown
            assert namespace["sweep_task"].cancelled()
            with pytest.raises(RuntimeError, match="not open"):
                memory.state  # noqa: B018 - the property is what raises
        finally:
            task = namespace.get("sweep_task")
            if task is not None and not task.done():
                task.cancel()
            if namespace.get("memory") is not None:
                await namespace["memory"].aclose()
            transcripts.close()
