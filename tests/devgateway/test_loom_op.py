"""``loom_op`` in the dev gateway, and the follow-up's calls held to the contract (SWEEP-15, CON-2).

The stand-in keeps a queued extraction in its queue and stores nothing of it until a status
call finds it done (queued, then running, then done, by default); a forced ``failed`` (the
``queue`` fault) stores nothing, and the retry op puts a failed batch back. Ids that
are not the caller's are left out of both answers. The runtime's ``ExtractionQueue`` asks
through ``loom_op`` exactly what the contract fixture declares.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx
import jsonschema
import pytest

from provisioner.devgateway import (
    FaultPlan,
    FaultSpecError,
    RunningGateway,
    SeenCall,
    parse_fault_spec,
)
from provisioner.devgateway.faults import fault_usage
from provisioner.runtime.gateway.errors import PolicyRefused
from provisioner.runtime.loom import contract
from provisioner.runtime.loom.answers import QUEUE_IDS_PER_CALL
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.loom.queue import ExtractionQueue, extraction_queue
from provisioner.runtime.transcripts import Message
from tests.support.contract import argument_paths, contract_problems
from tests.support.repo import CONTRACT_FIXTURE

from .calls import tools_call
from .test_dev_gateway import rpc_of

STATUS = "memory.extraction_status_mine"
RETRY = "memory.extraction_retry_mine"


def message(number: int, text: str) -> dict[str, str]:
    return {"role": "user", "content": text, "created_at": f"2026-11-30T09:{number:02d}:00Z"}


def queue(client: httpx.Client, gateway: RunningGateway, texts: Sequence[str], **extra: Any) -> str:
    """Queue ``texts`` as one batch through the wire; the queue id Loom answered."""
    messages = [message(n, text) for n, text in enumerate(texts)]
    arguments = {"messages": messages, "defer": True, "session_id": "s-1", **extra}
    answer = rpc_of(
        tools_call(client, gateway.base_url, "loom_memory_set_from_messages", arguments)
    )
    return str(answer["result"]["structuredContent"]["queue_id"])


def loom_op(client: httpx.Client, gateway: RunningGateway, op: str, params: Any) -> dict[str, Any]:
    """One ``loom_op`` call through the wire: its JSON-RPC message."""
    arguments = {"op": op, "params": params}
    return rpc_of(tools_call(client, gateway.base_url, "loom_op", arguments))


def states(answer: dict[str, Any]) -> dict[str, str]:
    return {
        item["queue_id"]: item["state"] for item in answer["result"]["structuredContent"]["items"]
    }


def loom_op_problems(calls: Sequence[SeenCall]) -> list[str]:
    """CON-2 for the calls of ``loom_op``: each names an op the fixture reaches through it,
    with only the arguments that op's entry declares; the other calls as tests/runtime/loom
    checks."""
    problems = contract_problems([call for call in calls if call.tool != "loom_op"])
    declared = CONTRACT_FIXTURE["loom_op_ops"]
    for call in (call for call in calls if call.tool == "loom_op"):
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        op, params = arguments.get("op"), arguments.get("params")
        if set(arguments) != {"op", "params"} or op not in declared:
            problems.append(f"loom_op: {sorted(arguments)} naming {op!r} is not declared")
            continue
        entry = declared[op]
        for path, _value in argument_paths(params):
            if path not in entry["arguments"]:
                problems.append(f"loom_op {op}: argument {path!r} is not declared")
        if entry["tool"] != "loom_op":
            problems.append(f"{op}: the fixture serves it through {entry['tool']}")
    return problems


class TestCatalog:
    def test_the_catalog_lists_loom_op_beside_the_default_tools(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        tools = client.get(f"{gateway.base_url}/catalog").json()["servers"][0]["tools"]
        assert "loom_op" in tools
        assert set(contract.TOOLS.values()) <= set(tools)

    def test_an_unlisted_tool_leaves_the_catalog_and_a_call_is_refused_by_policy(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """A platform that does not grant ``loom_op``: not listed, and -32001 if called."""
        gateway.app.unlist("loom_op")
        tools = client.get(f"{gateway.base_url}/catalog").json()["servers"][0]["tools"]
        assert "loom_op" not in tools and "loom_search" in tools
        answer = loom_op(client, gateway, STATUS, {"queue_ids": ["q-1"]})
        assert answer["error"]["code"] == -32001
        gateway.app.unlist()
        assert "loom_op" in client.get(f"{gateway.base_url}/catalog").json()["servers"][0]["tools"]


class TestQueue:
    def test_a_queued_batch_is_stored_only_once_its_status_says_done(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """Queued, then running, then done over successive status calls; stored at done."""
        store = gateway.app.store
        queue_id = queue(client, gateway, ["likes tea", "lives in Oslo"])
        seen = []
        for _ in range(4):
            seen.append(states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})))
            if seen[-1][queue_id] != "done":
                assert store.extracted_texts() == []
        assert [answer[queue_id] for answer in seen] == ["queued", "running", "done", "done"]
        assert store.extracted_texts() == ["likes tea", "lives in Oslo"]

    def test_with_no_polls_before_done_a_batch_is_written_when_queued(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.store.queue_polls_before_done = 0
        queue_id = queue(client, gateway, ["likes tea"])
        assert gateway.app.store.extracted_texts() == ["likes tea"]
        assert states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})) == {
            queue_id: "done"
        }
        assert gateway.app.store.extracted_texts() == ["likes tea"]

    def test_ids_that_are_not_the_caller_s_are_left_out(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """Caller-bound: another namespace's batch, an unknown id and a stranger's text."""
        mine = queue(client, gateway, ["likes tea"])
        theirs = queue(client, gateway, ["likes coffee"], namespace="team")
        asked = {"queue_ids": [mine, theirs, "q-999", "not-a-queue-id", mine]}
        assert states(loom_op(client, gateway, STATUS, asked)) == {mine: "queued"}
        assert states(loom_op(client, gateway, RETRY, asked)) == {mine: "queued"}

    def test_a_failed_batch_stores_nothing_and_a_retry_queues_it_again(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        store = gateway.app.store
        queue_id = queue(client, gateway, ["likes tea"])
        failed = store.answer(STATUS, {"queue_ids": [queue_id]}, forced=lambda: "failed")
        assert failed["items"][0]["state"] == "failed"
        assert states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})) == {
            queue_id: "failed"
        }
        assert store.extracted_texts() == []
        assert states(loom_op(client, gateway, RETRY, {"queue_ids": [queue_id]})) == {
            queue_id: "queued"
        }
        for _ in range(3):
            loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})
        assert store.queue_states() == {queue_id: "done"}
        assert store.extracted_texts() == ["likes tea"]

    def test_a_retry_of_a_batch_that_did_not_fail_changes_nothing(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.store.queue_polls_before_done = 0
        queue_id = queue(client, gateway, ["likes tea"])
        assert states(loom_op(client, gateway, RETRY, {"queue_ids": [queue_id]})) == {
            queue_id: "done"
        }
        assert gateway.app.store.extracted_texts() == ["likes tea"]

    @pytest.mark.parametrize("op", [STATUS, RETRY])
    def test_every_answer_fits_the_op_s_result_schema_in_the_fixture(
        self, gateway: RunningGateway, client: httpx.Client, op: str
    ) -> None:
        queue_id = queue(client, gateway, ["likes tea"])
        gateway.app.store.answer(STATUS, {"queue_ids": [queue_id]}, forced=lambda: "failed")
        answer = loom_op(client, gateway, op, {"queue_ids": [queue_id, "q-7"]})
        structured = answer["result"]["structuredContent"]
        jsonschema.validate(structured, CONTRACT_FIXTURE["loom_op_ops"][op]["result_schema"])
        assert json.loads(answer["result"]["content"][0]["text"]) == structured

    @pytest.mark.parametrize(
        "arguments",
        [
            {"op": "memory.extraction_status", "params": {"queue_ids": ["q-1"]}},  # off MCP
            {"op": "admin.purge", "params": {}},
            {"op": STATUS, "params": {"queue_ids": []}},
            {"op": STATUS, "params": {"queue_ids": [f"q-{n}" for n in range(101)]}},
            {"op": STATUS, "params": {"queue_ids": ["q-1"], "limit": 5}},
            {"op": STATUS},
            {"op": STATUS, "params": {"queue_ids": ["q-1"]}, "extra": True},
            {"op": 7, "params": {}},
        ],
    )
    def test_loom_op_refuses_what_the_op_s_schema_or_the_stand_in_does_not_take(
        self, gateway: RunningGateway, client: httpx.Client, arguments: dict[str, Any]
    ) -> None:
        answer = rpc_of(tools_call(client, gateway.base_url, "loom_op", arguments))
        assert answer["error"]["code"] == -32602
        assert gateway.app.store.queue_states() == {}


class TestContract:
    def test_the_ops_and_fields_the_runtime_uses_through_loom_op_are_the_fixture_s(
        self,
    ) -> None:
        """CON-2: the follow-up's ops, the fields it reads, and the ids a call may carry."""
        entries = CONTRACT_FIXTURE["loom_op_ops"]
        assert set(entries) == contract.LOOM_OP_OPS
        for op, entry in entries.items():
            assert entry["tool"] == contract.LOOM_OP_TOOL
            assert contract.DECLARED_READS[op] == frozenset(entry["result_fields"])
            assert entry["params_schema"]["properties"]["queue_ids"]["maxItems"] == (
                QUEUE_IDS_PER_CALL
            )

    def test_the_check_catches_an_op_and_an_argument_the_fixture_does_not_declare(
        self,
    ) -> None:
        calls = [
            SeenCall("loom_op", {"op": "admin.purge", "params": {}}, None, "json"),
            SeenCall(
                "loom_op", {"op": STATUS, "params": {"queue_ids": ["q"], "limit": 1}}, None, "json"
            ),
            SeenCall("loom_op", {"op": RETRY, "params": {"queue_ids": ["q"]}}, None, "json"),
        ]
        problems = loom_op_problems(calls)
        assert len(problems) == 2
        assert "admin.purge" in problems[0] and "'limit' is not declared" in problems[1]

    def test_every_follow_up_call_sent_stays_within_the_fixture(
        self, gateway: RunningGateway
    ) -> None:
        """Status and retry, with the namespace override, more ids than one call takes."""
        gateway.app.store.queue_polls_before_done = 0

        async def follow_up() -> None:
            async with LoomMemory(gateway_url=gateway.base_url, namespace="agent") as memory:
                sent = [Message(id=1, role="user", content="x", created_at="2026-11-30T09:00:00Z")]
                extracted = await memory.extract(sent, session_id="s-1", defer=True)
                queue = extraction_queue(memory)
                assert isinstance(queue, ExtractionQueue) and queue.listed()
                ids = [extracted.queue_id or "", *(f"q-{n}" for n in range(200, 300))]
                with pytest.raises(ValueError):
                    await queue.status(ids)  # 101 ids: no call made
                assert (await queue.status(ids[:100])).states == {ids[0]: "done"}
                assert (await queue.retry(ids[:1])).states == {ids[0]: "done"}

        asyncio.run(follow_up())
        tools = [call.tool for call in gateway.app.calls]
        assert tools == ["loom_memory_set_from_messages", "loom_op", "loom_op"]
        assert loom_op_problems(list(gateway.app.calls)) == []
        assert gateway.app.calls[1].arguments["params"]["namespace"] == "agent"

    def test_a_backend_whose_catalog_does_not_list_loom_op_says_so(
        self, gateway: RunningGateway
    ) -> None:
        gateway.app.unlist("loom_op")

        async def ask() -> None:
            async with LoomMemory(gateway_url=gateway.base_url) as memory:
                queue = extraction_queue(memory)
                assert queue is not None and not queue.listed()
                with pytest.raises(PolicyRefused):
                    await queue.status(["q-1"])

        asyncio.run(ask())

    def test_a_backend_without_a_gateway_has_no_queue(self) -> None:
        async def ask() -> None:
            async with LoomMemory() as memory:
                assert extraction_queue(memory) is None

        asyncio.run(ask())


class TestTheQueueStatusFault:
    def test_a_rule_names_the_state_a_queued_batch_moves_to(self) -> None:
        (rule,) = parse_fault_spec("queue:failed@loom_op=0.5")
        assert (rule.name, rule.argument, rule.tool, rule.probability) == (
            "queue",
            "failed",
            "loom_op",
            0.5,
        )
        assert "queue:STATE" in fault_usage()

    @pytest.mark.parametrize("spec", ["queue", "queue:lost", "queue:"])
    def test_a_rule_without_a_state_loom_names_is_refused(self, spec: str) -> None:
        with pytest.raises(FaultSpecError, match="queue"):
            parse_fault_spec(spec)

    def test_it_decides_no_answer_of_its_own(self) -> None:
        plan = FaultPlan("queue:failed")
        assert plan.choose("loom_op", b"{}") is None
        assert plan.queue_state("loom_op") == "failed"
        assert FaultPlan("queue:done@loom_search").queue_state("loom_op") is None

    def test_switched_at_run_time_it_fails_a_queued_batch_and_a_retry_brings_it_back(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """What a developer does with POST /_dev/faults: batches fail, nothing is stored."""
        queue_id = queue(client, gateway, ["likes tea"])
        switched = client.post(
            f"{gateway.base_url}/_dev/faults", json={"faults": "queue:failed@loom_op"}
        )
        assert switched.status_code == 200
        assert states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})) == {
            queue_id: "failed"
        }
        assert gateway.app.store.extracted_texts() == []
        client.post(f"{gateway.base_url}/_dev/faults", json={"faults": "queue:done"})
        loom_op(client, gateway, RETRY, {"queue_ids": [queue_id]})
        assert states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})) == {
            queue_id: "done"
        }
        assert gateway.app.store.extracted_texts() == ["likes tea"]

    def test_a_batch_written_stays_written_whatever_the_rule_says(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.store.queue_polls_before_done = 0
        queue_id = queue(client, gateway, ["likes tea"])
        gateway.app.faults.switch("queue:failed")
        assert states(loom_op(client, gateway, STATUS, {"queue_ids": [queue_id]})) == {
            queue_id: "done"
        }
