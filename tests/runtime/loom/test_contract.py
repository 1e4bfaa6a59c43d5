"""CON-2: the backend held to the contract fixture, on the wire and in what it reads.

Every test of this folder that uses the ``gateway`` fixture has each call it sent checked
against the fixture when it ends (see ``conftest.py``). The tests here check that check, and
the runtime's own declarations: the answer fields it may read, the tools it calls, and the
fixed values it sends.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway, SeenCall
from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import MESSAGE_ROLES
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.recall import PACK_MODE, PACK_SECTIONS, RECALL_SEARCH_TOP_K
from provisioner.runtime.transcripts import Message
from tests.support.contract import contract_problems
from tests.support.repo import CONTRACT_FIXTURE

from .config_files import loom_config

pytestmark = pytest.mark.anyio


class TestDeclarations:
    def test_the_fields_the_backend_may_read_are_the_fixture_s_result_fields(self) -> None:
        for op, entry in CONTRACT_FIXTURE["ops"].items():
            assert contract.DECLARED_READS[op] == frozenset(entry["result_fields"]), op

    def test_each_op_is_called_through_the_tool_that_serves_it(self) -> None:
        assert {
            op: entry["tool"] for op, entry in CONTRACT_FIXTURE["ops"].items()
        } == contract.TOOLS

    def test_the_fixed_values_the_backend_sends_are_the_fixture_s(self) -> None:
        ops = CONTRACT_FIXTURE["ops"]
        assert ops["context.pack"]["fixed_values"]["mode"] == [PACK_MODE]
        assert ops["context.pack"]["fixed_values"]["sections"] == [list(PACK_SECTIONS)]
        assert ops["search.query"]["fixed_values"]["top_k"] == [RECALL_SEARCH_TOP_K]
        roles = ops["memory.set_from_messages"]["fixed_values"]["messages[].role"]
        assert set(roles) == MESSAGE_ROLES


class TestAccessor:
    def test_a_field_the_fixture_does_not_declare_is_refused(self) -> None:
        answer = {"results": [], "abstained": False, "abstain_reason": "low scores"}
        with pytest.raises(contract.UndeclaredField):
            contract.field(answer, contract.SEARCH_QUERY, "abstain_reason")
        with pytest.raises(contract.UndeclaredField):
            contract.records(answer, contract.SEARCH_QUERY, "results[]", ("score",))

    def test_a_declared_field_is_read(self) -> None:
        answer = {"results": [{"memory_key": "k", "content_excerpt": "t", "score": 1}]}
        found = contract.records(
            answer, contract.SEARCH_QUERY, "results[]", ("memory_key", "content_excerpt")
        )
        assert found == [{"memory_key": "k", "content_excerpt": "t"}]

    @pytest.mark.parametrize("answer", [[], {"results": {"a": 1}}, {"results": ["text"]}])
    def test_an_answer_of_the_wrong_shape_is_a_broken_answer(self, answer: object) -> None:
        with pytest.raises(BrokenAnswer):
            contract.records(answer, contract.SEARCH_QUERY, "results[]", ("memory_key",))


class TestWireCheck:
    def test_the_wire_check_catches_an_undeclared_argument_and_a_value_out_of_set(self) -> None:
        calls = [
            SeenCall("loom_search", {"query": "q", "top_k": 3}, None, "json"),
            SeenCall("loom_context_pack", {"mode": "startup", "max_items": 5}, None, "json"),
            SeenCall("loom_op", {"op": "admin.purge"}, None, "json"),
        ]
        problems = contract_problems(calls)
        assert any("top_k = 3" in problem for problem in problems)
        assert any("'max_items' is not declared" in problem for problem in problems)
        assert any(problem.startswith("loom_op:") for problem in problems)

    async def test_every_lifecycle_call_sent_stays_within_the_fixture(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """Recall (pack and search), extraction with context, both modes, and the probe."""
        gateway.app.store.remember("fact")
        config = loom_config(tmp_path, gateway.base_url, namespace="agent")
        message = Message(id=1, role="user", content="hi", created_at="2026-11-30T09:00:00Z")
        async with LoomMemory.from_config(config) as memory:
            await memory.startup_recall("s-1")
            gateway.app.faults.switch("policy@loom_context_pack")
            await memory.startup_recall("s-2")
            gateway.app.faults.switch("")
            await memory.extract([message], context=[message], session_id="s-1")
            await memory.extract([message], session_id="s-1", defer=True)
            await memory.health()
        tools = {call.tool for call in gateway.app.calls}
        assert tools == set(contract.TOOLS.values())
        assert contract_problems(gateway.app.calls) == []
