"""The health probe and diagnostics (LOOM-3, LOOM-4) and the agent's tools (TXT-3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.gateway.errors import InternalFault
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.report import WITHHELD, ErrorRecord
from provisioner.runtime.loom.types import Identity
from provisioner.runtime.memory_contract import MemoryBackendUnavailable
from tests.support.clock import FakeClock

from .config_files import loom_config

pytestmark = pytest.mark.anyio


class TestHealth:
    async def test_the_probe_names_what_loom_resolved(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """LOOM-3: namespace.summary names org, namespace, shared namespaces and the count."""
        gateway.app.store.remember("one")
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            identity = await memory.health()
        assert identity == Identity(
            org="dev",
            namespace="agent",
            shared_namespaces=("team",),
            memory_count=1,
            org_source="loom",
            namespace_source="loom",
        )
        assert gateway.app.calls[0].arguments == {}

    async def test_org_and_namespace_overrides_win_and_say_so(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """LOOM-3: memory.loom.org / namespace override Loom; the probe asks that namespace."""
        config = loom_config(tmp_path, gateway.base_url, org="acme", namespace="notes")
        async with LoomMemory.from_config(config) as memory:
            identity = await memory.health()
            report = memory.diagnostics()["identity"]
        assert (identity.org, identity.org_source) == ("acme", "config")
        assert (identity.namespace, identity.namespace_source) == ("notes", "config")
        assert gateway.app.calls[0].arguments == {"namespace": "notes"}
        assert report["org"] == "acme" and report["namespace_source"] == "config"

    async def test_without_a_gateway_url_the_probe_is_unavailable(self, tmp_path: Path) -> None:
        async with LoomMemory.from_config(loom_config(tmp_path, None)) as memory:
            with pytest.raises(MemoryBackendUnavailable):
                await memory.health()

    async def test_a_memu_configuration_builds_no_loom_backend(self, tmp_path: Path) -> None:
        """LOOM-1: built only when memory.backend is loom."""
        config_dir = tmp_path / "memu"
        config_dir.mkdir()
        from provisioner.config.loader import load_config

        with pytest.raises(ValueError, match="memu"):
            LoomMemory.from_config(load_config(config_dir, None, env={}))


class TestDiagnostics:
    async def test_diagnostics_name_the_gateway_catalog_identity_and_breaker(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """LOOM-4."""
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            await memory.health()
            report = memory.diagnostics()
        assert report["available"] is True
        assert report["gateway_url"] == gateway.base_url
        assert report["catalog"]["generation"] == 1
        assert report["catalog"]["lists_loom"] is True
        assert "loom_search" in report["catalog"]["loom_tools"]
        assert report["identity"]["namespace"] == "agent"
        assert report["identity"]["namespace_source"] == "loom"
        assert report["breaker"]["state"] == "closed"
        assert report["last_error"] is None
        json.dumps(report)  # what nerve memory status --json prints

    async def test_an_open_breaker_says_when_it_closes(
        self, tmp_path: Path, clock: FakeClock
    ) -> None:
        """LOOM-4, GW-7: breaker state and the wall time it lets a call through again."""
        running = serve_in_thread()
        config = loom_config(tmp_path, running.base_url)
        async with LoomMemory.from_config(
            config, clock=clock, wall_clock=lambda: 1_800_000_000.0
        ) as memory:
            running.stop()
            await memory.startup_recall("s-1")
            report = memory.diagnostics()
        assert report["breaker"]["state"] == "open"
        assert report["breaker"]["closes_at"] == "2027-01-15T08:00:15+00:00"
        assert report["last_error"]["kind"] == "GatewayUnreachable"
        assert report["available"] is False

    async def test_a_gateway_never_reached_shows_the_catalog_s_read_error(
        self, tmp_path: Path, unreachable_url: str
    ) -> None:
        config = loom_config(tmp_path, unreachable_url)
        async with LoomMemory.from_config(config) as memory:
            await memory.startup_recall("s-1")
            report = memory.diagnostics()
        assert report["catalog"]["read_error"] == "unreachable"
        assert report["catalog"]["lists_loom"] is False
        assert report["last_error"]["kind"] == "CatalogError"

    async def test_the_sweep_s_own_error_shows_as_the_last_one(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        async with LoomMemory.from_config(
            loom_config(tmp_path, gateway.base_url), wall_clock=lambda: 1_800_000_000.0
        ) as memory:
            memory.note_error("sweep", InternalFault("Loom could not take the batch"))
            memory.note_batch_budget({"messages": 50, "bytes": 65536})
            report = memory.diagnostics()
        assert report["last_error"] == {
            "at": "2027-01-15T08:00:00+00:00",
            "op": "sweep",
            "kind": "InternalFault",
            "message": "Loom could not take the batch",
        }
        assert report["batch_budget"] == {"messages": 50, "bytes": 65536}

    def test_an_error_quoting_sent_text_is_kept_without_its_message(self) -> None:
        """LOOM-4: no message text ever, even when Loom's fault echoes it."""
        record = ErrorRecord(lambda: 0.0)
        secret = "my bank PIN is 4921 and the door code is 7788"
        record.note("extract", InternalFault(f"cannot process: {secret[:30]}"), sent_texts=[secret])
        assert record.last is not None
        assert record.last.message == WITHHELD
        record.note("extract", InternalFault("database busy"), sent_texts=[secret])
        assert record.last.message == "database busy"


class TestAgentTools:
    async def test_the_agent_tools_are_what_the_catalog_lists_for_loom(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """TXT-3: the memory section is worded from this set."""
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            tools = memory.agent_tools()
        assert tools == frozenset(gateway.app.catalog()["servers"][0]["tools"])


class TestLastErrorKept:
    async def test_another_process_sees_the_last_error_through_the_state_file(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """LOOM-4: `nerve memory status` runs apart from the sweep; the state file carries it."""
        from provisioner.runtime.state import StateStore

        config = loom_config(tmp_path, gateway.base_url)
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            async with LoomMemory.from_config(
                config, state=state, wall_clock=lambda: 1_800_000_000.0
            ) as sweeping:
                sweeping.note_error("extract", InternalFault("Loom could not take the batch"))
        with StateStore(path) as state:
            async with LoomMemory.from_config(config, state=state) as status:
                report = status.diagnostics()
        assert report["last_error"] == {
            "at": "2027-01-15T08:00:00+00:00",
            "op": "extract",
            "kind": "InternalFault",
            "message": "Loom could not take the batch",
        }

    async def test_the_error_recorded_last_is_shown_whatever_its_time(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """REL-7: after the clock was set back, the current error has the earlier time; it
        is still the one shown, by this process and by the next."""
        from provisioner.runtime.state import StateStore

        config = loom_config(tmp_path, gateway.base_url)
        with StateStore(tmp_path / "state.sqlite3") as state:
            async with LoomMemory.from_config(
                config, state=state, wall_clock=lambda: 2_000.0
            ) as before:
                before.note_error("recall", InternalFault("stale"))
            async with LoomMemory.from_config(
                config, state=state, wall_clock=lambda: 1_000.0
            ) as after:
                after.note_error("extract", InternalFault("current"))
                report = after.diagnostics()
            assert state.last_error() == (1_000.0, "extract", "InternalFault", "current", None)
            async with LoomMemory.from_config(config, state=state) as status:
                later = status.diagnostics()
        assert report["last_error"]["message"] == later["last_error"]["message"] == "current"

    async def test_a_withheld_message_is_withheld_in_the_state_file_too(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """LOOM-4: no message text ever, also on disk."""
        from provisioner.runtime.state import StateStore

        secret = "my bank PIN is 4921 and the door code is 7788"
        path = tmp_path / "state.sqlite3"
        with StateStore(path) as state:
            async with LoomMemory.from_config(
                loom_config(tmp_path, gateway.base_url), state=state
            ) as memory:
                memory.note_error(
                    "extract", InternalFault(f"cannot process: {secret}"), sent_texts=[secret]
                )
            kept = state.last_error()
        assert kept is not None and kept[3] == WITHHELD
        on_disk = b"".join(part.read_bytes() for part in tmp_path.glob("state.sqlite3*"))
        assert b"last_error" in on_disk and b"4921" not in on_disk
