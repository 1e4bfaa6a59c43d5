"""MIG-1, CON-1, CON-2: the migration's write held to the contract fixture, the caller-bound ops
the fixture now declares, and the constants doctor repeats."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from provisioner.doctor import migration as doctor_migration
from provisioner.migration import ledger
from provisioner.runtime.gateway.errors import BrokenAnswer
from provisioner.runtime.loom import answers, contract
from provisioner.runtime.loom.types import WRITE_VERDICTS, MemoryWrite
from tests.support.repo import CONTRACT_FIXTURE
from tests.test_loom_contract_fixture import STAND_IN, edit_toolsets, generator

FULL_WRITE = MemoryWrite(
    memory_key="memu-0f9a",
    text="prefers tea",
    kind="profile",
    tags=("Food", "Home"),
    created_at="2025-01-01T09:00:00Z",
    updated_at="2025-01-02T09:00:00.5Z",
    happened_at="2024-12-31T00:00:00Z",
)


class TestTheWriteAgainstTheFixture:
    entry = CONTRACT_FIXTURE["operator_ops"]["memory.set"]

    def test_the_write_goes_through_the_tool_the_fixture_names(self) -> None:
        assert {contract.MEMORY_SET: self.entry["tool"]} == contract.OPERATOR_TOOLS
        assert self.entry["tool"] == "loom_memory_set"

    def test_the_fields_read_are_the_fixture_s(self) -> None:
        declared = contract.DECLARED_READS[contract.MEMORY_SET]
        assert declared == frozenset(self.entry["result_fields"])

    def test_every_argument_a_write_can_carry_is_declared(self) -> None:
        sent = answers.write_arguments(FULL_WRITE, namespace="agent")
        assert sorted(sent) == self.entry["arguments"]

    def test_the_bounds_checked_before_sending_are_loom_s(self) -> None:
        params = self.entry["params_schema"]["properties"]
        assert params["text"]["maxLength"] == answers.MEMORY_TEXT_MAX_CHARS
        assert params["kind"]["maxLength"] == answers.KIND_MAX_CHARS
        assert params["tags"]["maxItems"] == answers.TAGS_MAX
        assert params["tags"]["items"]["maxLength"] == answers.TAG_MAX_CHARS

    def test_the_verdicts_are_loom_s_six(self) -> None:
        assert sorted(WRITE_VERDICTS) == self.entry["result_values"]["verdict"]

    @pytest.mark.parametrize(
        ("change", "says"),
        [
            ({"memory_key": "memu id"}, "memory_key"),
            ({"text": ""}, "text"),
            ({"text": "x" * 20_001}, "text"),
            ({"kind": "k" * 41}, "kind"),
            ({"tags": ("",)}, "tags"),
            ({"created_at": "2025-01-01 09:00:00"}, "created_at"),
        ],
    )
    def test_a_write_loom_would_refuse_is_refused_before_any_call(
        self, change: dict[str, object], says: str
    ) -> None:
        write = MemoryWrite(**{**FULL_WRITE.__dict__, **change})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=says) as refused:
            answers.write_arguments(write, namespace=None)
        assert "prefers tea" not in str(refused.value)


class TestTheAnswer:
    def test_a_verdict_out_of_the_six_is_a_broken_answer(self) -> None:
        with pytest.raises(BrokenAnswer):
            answers.written_from({"memory_key": "memu-1", "verdict": "pending"})

    def test_a_reason_that_is_no_code_is_dropped(self) -> None:
        """A reason quoting the memory must not reach a report."""
        quoted = answers.written_from(
            {"memory_key": "memu-1", "verdict": "rejected", "reason": "contradicts: likes tea"}
        )
        coded = answers.written_from(
            {"memory_key": "memu-1", "verdict": "rejected", "reason": "PINNED_CONFLICT"}
        )
        assert (quoted.reason, coded.reason) == (None, "PINNED_CONFLICT")

    @pytest.mark.parametrize(
        "answer", [[], {"verdict": "clear"}, {"memory_key": "", "verdict": "clear"}]
    )
    def test_an_answer_of_the_wrong_shape_is_a_broken_answer(self, answer: object) -> None:
        with pytest.raises(BrokenAnswer):
            answers.written_from(answer)


class TestCallerBoundOps:
    """SWEEP-15's ops, reached through ``loom_op``: declared for whoever follows queued
    extractions up."""

    def test_both_ops_are_reached_through_loom_op_with_queue_ids(self) -> None:
        ops = CONTRACT_FIXTURE["loom_op_ops"]
        assert sorted(ops) == ["memory.extraction_retry_mine", "memory.extraction_status_mine"]
        for entry in ops.values():
            assert entry["tool"] == "loom_op"
            assert entry["arguments"] == ["namespace", "queue_ids"]
            assert entry["required_arguments"] == ["queue_ids"]
            assert entry["result_values"] == {
                "items[].state": ["done", "failed", "queued", "running"]
            }

    def test_an_op_kept_off_mcp_cannot_be_reached_through_loom_op(self) -> None:
        checkout = generator.load_checkout(STAND_IN)
        off = checkout.__class__(
            ops=checkout.ops,
            tools=checkout.tools,
            core=checkout.core,
            off_mcp=checkout.off_mcp | {"memory.extraction_status_mine"},
        )
        with pytest.raises(generator.Refusal, match=r"memory\.extraction_status_mine"):
            generator.build_fixture(off, {})

    def test_a_checkout_without_loom_op_is_refused(self, tmp_path: Path) -> None:
        copy = Path(shutil.copytree(STAND_IN, tmp_path / "loom"))

        def drop_loom_op(document: dict[str, object]) -> None:
            tools = document["tools"]
            assert isinstance(tools, dict)
            del tools["loom_op"]
            lists = document["lists"]
            assert isinstance(lists, dict)
            for names in lists.values():
                if "loom_op" in names:
                    names.remove("loom_op")

        edit_toolsets(copy, drop_loom_op)
        with pytest.raises(generator.Refusal, match="through loom_op"):
            generator.build_fixture(generator.load_checkout(copy), {})


class TestDoctorReadsTheLedgerAsWritten:
    def test_doctor_s_statuses_are_the_ledger_s(self) -> None:
        """One constant, not a copy kept equal: a copy of its own in doctor would be another
        object, and could drift from what the ledger writes."""
        assert doctor_migration.LEDGER_FINAL_STATUSES is ledger.LEDGER_FINAL_STATUSES
        assert doctor_migration.LEDGER_FAILING is ledger.LEDGER_FAILING
