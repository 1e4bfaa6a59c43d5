"""The extraction call the sweep makes through the backend (SWEEP-3, SWEEP-4, LOOM-2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway
from provisioner.runtime.gateway.errors import InternalFault, ServerNotListed
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.types import Extracted, WrittenMemory
from provisioner.runtime.memory_contract import MemoryBackendUnavailable
from provisioner.runtime.transcripts import Message

from .config_files import loom_config

pytestmark = pytest.mark.anyio

WHEN = "2026-11-30T09:00:00+00:00"


def message(number: int, content: str, role: str = "user") -> Message:
    return Message(id=number, role=role, content=content, created_at=WHEN)


class TestExtract:
    async def test_one_call_carries_the_messages_and_the_context_as_role_and_content(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """SWEEP-3: one loom_memory_set_from_messages call; context turns without ids or times."""
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            await memory.extract(
                [message(3, "likes green tea"), message(4, "noted", role="assistant")],
                context=[message(2, "earlier turn")],
                session_id="s-1",
            )
        (call,) = gateway.app.calls
        assert call.tool == "loom_memory_set_from_messages"
        assert call.arguments == {
            "messages": [
                {"role": "user", "content": "likes green tea", "created_at": WHEN},
                {"role": "assistant", "content": "noted", "created_at": WHEN},
            ],
            "context": [{"role": "user", "content": "earlier turn"}],
            "defer": False,
            "session_id": "s-1",
        }

    async def test_a_waiting_extraction_answers_accepted_and_written(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            extracted = await memory.extract(
                [message(1, "likes tea"), message(2, "likes tea")], session_id="s-1"
            )
        assert extracted == Extracted(
            accepted=2,
            written=(WrittenMemory("agent-1", "clear"), WrittenMemory("agent-1", "duplicate")),
        )

    async def test_a_queued_extraction_answers_its_queue_id(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """SWEEP-4: defer true queues the batch; the answer names it."""
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            extracted = await memory.extract([message(1, "x")], session_id="s-1", defer=True)
        assert extracted.queue_id == "q-1"
        assert gateway.app.calls[0].arguments["defer"] is True

    async def test_the_namespace_override_goes_with_the_call(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        config = loom_config(tmp_path, gateway.base_url, namespace="notes")
        async with LoomMemory.from_config(config) as memory:
            await memory.extract([message(1, "x")], session_id="s-1")
        assert gateway.app.calls[0].arguments["namespace"] == "notes"
        assert gateway.app.store.memory_texts("notes") == ["x"]

    @pytest.mark.parametrize(
        ("messages", "session_id"),
        [([], "s-1"), ([message(1, "x", role="developer")], "s-1"), ([message(1, "x")], "")],
    )
    async def test_arguments_loom_would_refuse_raise_before_any_call(
        self, tmp_path: Path, gateway: RunningGateway, messages: list[Message], session_id: str
    ) -> None:
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            with pytest.raises(ValueError):
                await memory.extract(messages, session_id=session_id)
        assert not gateway.app.calls

    async def test_a_failure_is_the_gateway_client_s_outcome_and_is_noted(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """SWEEP-8 needs Loom's uncoded fault as InternalFault, unchanged."""
        gateway.app.faults.switch("fail-text:poison")
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            await memory.extract([message(1, "fine")], session_id="s-1")
            with pytest.raises(InternalFault):
                await memory.extract([message(2, "a poison pill")], session_id="s-1")
            last = memory.diagnostics()["last_error"]
        assert (last["op"], last["kind"]) == ("extract", "InternalFault")

    async def test_without_a_gateway_url_extraction_is_unavailable(self, tmp_path: Path) -> None:
        """LOOM-2: the sweep keeps its watermark on MemoryBackendUnavailable."""
        async with LoomMemory.from_config(loom_config(tmp_path, None)) as memory:
            with pytest.raises(MemoryBackendUnavailable):
                await memory.extract([message(1, "x")], session_id="s-1")

    async def test_a_catalog_without_loom_raises_server_not_listed(
        self, tmp_path: Path, catalog_without_loom: str
    ) -> None:
        """LOOM-2: built and unavailable; the call says the catalog lists no loom."""
        async with LoomMemory.from_config(loom_config(tmp_path, catalog_without_loom)) as memory:
            assert memory.available is False
            assert memory.agent_tools() == frozenset()
            with pytest.raises(ServerNotListed):
                await memory.extract([message(1, "x")], session_id="s-1")
