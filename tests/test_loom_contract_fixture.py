"""Tests of the Loom contract fixture and its generator (CON-1, CON-3, BACK-4).

The generator runs as a real process on the stand-in checkout (CON-3), or on a copy of it that
one edit has broken; the wording scan and the schema reader are also called directly, so a
planted wording or schema can be tried without rendering anything.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from provisioner.templating.folder import PACKAGED_FIXTURE, TemplateFolder

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "scripts" / "loom_contract_fixture.py"
STAND_IN = REPO_ROOT / "tests" / "fixtures" / "loom-checkout"
COMMITTED = REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json"
TOOLSETS = "mcp/toolsets.yaml"
EXIT_STALE = 1
EXIT_REFUSED = 2

LIFECYCLE_TOOLS = {  # contracts/loom-ops.md, "Ops Nerve itself calls"
    "context.pack": "loom_context_pack",
    "search.query": "loom_search",
    "memory.set_from_messages": "loom_memory_set_from_messages",
    "namespace.summary": "loom_namespace_summary",
}
WRITE_VERDICTS = ["clear", "conflict", "duplicate", "merge", "refines", "rejected"]  # TXT-3


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loom_contract_fixture", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


generator = load_generator()


def run_generator(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )


def committed() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text(encoding="utf-8"))


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A copy of the stand-in checkout that a test may break."""
    return Path(shutil.copytree(STAND_IN, tmp_path / "loom"))


def edit_op(checkout: Path, op: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = checkout / "sdk" / "ops" / f"{op}.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")


def edit_toolsets(checkout: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = checkout / TOOLSETS
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(yaml.safe_dump(document), encoding="utf-8")


def assert_refused(checkout: Path, tmp_path: Path, *fragments: str) -> str:
    """Run on ``checkout``: exit 2, one stderr line holding ``fragments``, nothing written."""
    out = tmp_path / "fixture.json"
    result = run_generator("--loom-checkout", checkout, "--out", out)
    assert result.returncode == EXIT_REFUSED, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert not out.exists()
    return lines[0]


class TestCommittedFixture:
    """CON-1: the committed fixture is exactly what the stand-in checkout generates."""

    def test_the_committed_fixture_equals_a_fresh_generation(self, tmp_path: Path) -> None:
        fresh = tmp_path / "fresh.json"
        result = run_generator("--loom-checkout", STAND_IN, "--out", fresh)
        assert result.returncode == 0, result.stderr
        assert fresh.read_bytes() == COMMITTED.read_bytes()

    def test_check_passes_on_the_committed_fixture(self) -> None:
        result = run_generator("--loom-checkout", STAND_IN, "--check")
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout == ""

    def test_check_fails_with_a_diff_on_a_modified_copy_and_leaves_it_alone(
        self, tmp_path: Path
    ) -> None:
        copy = tmp_path / "fixture.json"
        modified = COMMITTED.read_text(encoding="utf-8").replace('"startup"', '"handoff"')
        copy.write_text(modified, encoding="utf-8")
        result = run_generator("--loom-checkout", STAND_IN, "--check", "--out", copy)
        assert result.returncode == EXIT_STALE
        assert '-          "handoff"' in result.stdout
        assert '+          "startup"' in result.stdout
        assert "stale" in result.stderr
        assert copy.read_text(encoding="utf-8") == modified

    def test_check_fails_when_the_fixture_is_missing(self, tmp_path: Path) -> None:
        absent = tmp_path / "absent.json"
        result = run_generator("--loom-checkout", STAND_IN, "--check", "--out", absent)
        assert result.returncode == EXIT_STALE
        assert not absent.exists()

    def test_the_fixture_bytes_are_sorted_indented_and_end_with_a_newline(self) -> None:
        text = COMMITTED.read_text(encoding="utf-8")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"

    def test_the_fixture_holds_no_absolute_path(self) -> None:
        strings: list[str] = []

        def collect(node: Any) -> None:
            if isinstance(node, dict):
                strings.extend(node)
                for value in node.values():
                    collect(value)
            elif isinstance(node, list):
                for value in node:
                    collect(value)
            elif isinstance(node, str):
                strings.append(node)

        collect(committed())
        assert strings
        assert not [text for text in strings if text.startswith(("/", "~")) or ":\\" in text]


class TestWhatTheFixtureDeclares:
    """CON-1, BACK-4: the fixture says what Nerve sends and reads, and the default tool list."""

    def test_each_lifecycle_op_is_served_by_its_own_core_tool(self) -> None:
        ops = committed()["ops"]
        assert {op: entry["tool"] for op, entry in ops.items()} == LIFECYCLE_TOOLS

    def test_the_fixed_values_are_startup_memories_both_defer_modes_top_k_and_roles(self) -> None:
        ops = committed()["ops"]
        assert ops["context.pack"]["fixed_values"] == {
            "mode": ["startup"],
            "sections": [["memories"]],
        }
        assert ops["search.query"]["fixed_values"] == {"top_k": [10]}
        roles = ["assistant", "system", "tool", "user"]
        assert ops["memory.set_from_messages"]["fixed_values"] == {
            "defer": [False, True],
            "messages[].role": roles,
            "context[].role": roles,
        }

    def test_each_op_carries_its_params_and_result_schemas_from_the_checkout(self) -> None:
        """The dev gateway validates calls against these, so they must be Loom's own."""
        for section in ("ops", "agent_ops"):
            for op, entry in committed()[section].items():
                document = json.loads((STAND_IN / "sdk" / "ops" / f"{op}.json").read_text())
                assert entry["params_schema"] == document["params"], op
                assert entry["result_schema"] == document["result"], op

    def test_a_top_k_the_schema_does_not_allow_is_refused(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        usage = generator.NERVE_USAGE["search.query"]
        arguments = {**usage.arguments, "top_k": (500,)}
        monkeypatch.setitem(
            generator.NERVE_USAGE, "search.query", generator.OpUsage(arguments, usage.reads)
        )
        checkout = generator.load_checkout(STAND_IN)
        with pytest.raises(generator.Refusal, match="top_k"):
            generator.build_fixture(checkout, {})

    def test_the_fields_nerve_reads_include_the_recall_and_extraction_answers(self) -> None:
        ops = committed()["ops"]
        assert "sections.memories.items[].text" in ops["context.pack"]["result_fields"]
        assert "results[].content_excerpt" in ops["search.query"]["result_fields"]
        assert "accepted" in ops["memory.set_from_messages"]["result_fields"]
        assert "shared_namespaces[]" in ops["namespace.summary"]["result_fields"]

    def test_the_write_verdicts_are_loom_s_six_and_none_is_pending(self) -> None:
        fixture = committed()
        extraction = fixture["ops"]["memory.set_from_messages"]["result_values"]
        assert extraction["written[].verdict"] == WRITE_VERDICTS
        assert fixture["agent_ops"]["memory.set"]["result_values"]["verdict"] == WRITE_VERDICTS

    def test_the_agent_proposes_with_proposed_true(self) -> None:
        memory_set = committed()["agent_ops"]["memory.set"]
        assert memory_set["tool"] == "loom_memory_set"
        assert memory_set["fixed_values"] == {"proposed": [True]}

    def test_core_tools_are_the_sorted_default_list_without_loom_op(self) -> None:
        listed = yaml.safe_load((STAND_IN / TOOLSETS).read_text(encoding="utf-8"))["lists"]
        core = committed()["core_tools"]
        assert core == sorted(listed["core"])
        assert "loom_op" not in core

    def test_the_wording_tools_are_all_in_core_and_include_the_integrity_report(self) -> None:
        fixture = committed()
        assert set(fixture["wording_tools"]) <= set(fixture["core_tools"])
        assert "loom_namespace_validate" in fixture["wording_tools"]  # TXT-6
        assert fixture["wording_tools"] == sorted(fixture["wording_tools"])


class TestRefusedCheckouts:
    """CON-1: a checkout that disagrees with Nerve's usage is refused (exit 2, one line)."""

    def test_an_op_nerve_calls_that_loom_keeps_off_mcp_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        edit_toolsets(checkout, lambda doc: doc["off_mcp"].append("memory.set_from_messages"))
        assert_refused(checkout, tmp_path, TOOLSETS, "off_mcp", "memory.set_from_messages")

    def test_an_op_served_only_through_loom_op_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def drop_search_tool(doc: dict[str, Any]) -> None:
            del doc["tools"]["loom_search"]
            doc["lists"]["core"].remove("loom_search")

        edit_toolsets(checkout, drop_search_tool)
        assert_refused(checkout, tmp_path, TOOLSETS, "search.query")

    def test_an_op_whose_tool_is_not_in_core_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        edit_toolsets(checkout, lambda doc: doc["lists"]["core"].remove("loom_namespace_summary"))
        assert_refused(checkout, tmp_path, "loom_namespace_summary", "namespace.summary", "core")

    def test_an_argument_the_params_do_not_declare_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        edit_op(checkout, "search.query", lambda doc: doc["params"]["properties"].pop("top_k"))
        assert_refused(checkout, tmp_path, "sdk/ops/search.query.json", "'top_k'")

    def test_a_message_field_the_params_do_not_declare_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def drop_created_at(doc: dict[str, Any]) -> None:
            item = doc["params"]["properties"]["messages"]["items"]
            del item["properties"]["created_at"]
            item["required"].remove("created_at")

        edit_op(checkout, "memory.set_from_messages", drop_created_at)
        assert_refused(checkout, tmp_path, "memory.set_from_messages.json", "messages[].created_at")

    def test_a_required_argument_nerve_does_not_send_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def require_tenant(doc: dict[str, Any]) -> None:
            doc["params"]["properties"]["tenant"] = {"type": "string"}
            doc["params"]["required"] = ["tenant"]

        edit_op(checkout, "namespace.summary", require_tenant)
        assert_refused(checkout, tmp_path, "namespace.summary.json", "tenant")

    def test_a_result_field_the_schema_does_not_declare_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def drop_abstained(doc: dict[str, Any]) -> None:
            del doc["result"]["properties"]["abstained"]
            doc["result"]["required"].remove("abstained")

        edit_op(checkout, "search.query", drop_abstained)
        assert_refused(checkout, tmp_path, "search.query.json", "result", "'abstained'")

    def test_a_nested_result_field_the_schema_does_not_declare_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def rename_text(doc: dict[str, Any]) -> None:
            memories = doc["result"]["properties"]["sections"]["properties"]["memories"]
            item = memories["properties"]["items"]["items"]
            item["properties"]["body"] = item["properties"].pop("text")
            item["required"] = ["memory_key", "namespace", "body"]

        edit_op(checkout, "context.pack", rename_text)
        assert_refused(checkout, tmp_path, "context.pack.json", "sections.memories.items[].text")

    def test_a_mode_the_enum_does_not_allow_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def drop_startup(doc: dict[str, Any]) -> None:
            doc["params"]["properties"]["mode"]["enum"] = ["task", "handoff"]

        edit_op(checkout, "context.pack", drop_startup)
        assert_refused(checkout, tmp_path, "context.pack.json", '"startup"', "'mode'")

    def test_a_section_the_enum_does_not_allow_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        def rename_memories(doc: dict[str, Any]) -> None:
            doc["params"]["properties"]["sections"]["items"]["enum"] = ["facts", "decisions"]

        edit_op(checkout, "context.pack", rename_memories)
        assert_refused(checkout, tmp_path, "context.pack.json", '["memories"]', "'sections'")

    def test_a_defer_that_is_not_a_boolean_is_refused(self, checkout: Path, tmp_path: Path) -> None:
        def defer_as_string(doc: dict[str, Any]) -> None:
            doc["params"]["properties"]["defer"] = {"type": "string", "enum": ["now", "later"]}

        edit_op(checkout, "memory.set_from_messages", defer_as_string)
        assert_refused(checkout, tmp_path, "memory.set_from_messages.json", "false", "'defer'")

    def test_a_checkout_without_op_schemas_is_refused(self, checkout: Path, tmp_path: Path) -> None:
        shutil.rmtree(checkout / "sdk" / "ops")
        assert_refused(checkout, tmp_path, "sdk/ops", "no such folder")

    def test_a_checkout_without_toolsets_is_refused(self, checkout: Path, tmp_path: Path) -> None:
        (checkout / TOOLSETS).unlink()
        assert_refused(checkout, tmp_path, TOOLSETS, "no such file")

    def test_a_path_that_is_no_folder_is_refused(self, tmp_path: Path) -> None:
        assert_refused(tmp_path / "nowhere", tmp_path, "nowhere", "no such folder")

    def test_toolsets_that_are_not_yaml_are_refused(self, checkout: Path, tmp_path: Path) -> None:
        (checkout / TOOLSETS).write_text("tools: [unclosed\n", encoding="utf-8")
        assert_refused(checkout, tmp_path, TOOLSETS, "cannot be read")

    def test_toolsets_without_a_core_list_are_refused(self, checkout: Path, tmp_path: Path) -> None:
        edit_toolsets(checkout, lambda doc: doc["lists"].pop("core"))
        assert_refused(checkout, tmp_path, TOOLSETS, "lists.core")

    def test_an_op_file_that_is_not_json_is_refused(self, checkout: Path, tmp_path: Path) -> None:
        (checkout / "sdk" / "ops" / "memory.get.json").write_text("{not json", encoding="utf-8")
        assert_refused(checkout, tmp_path, "sdk/ops/memory.get.json", "cannot be read")

    def test_an_op_file_naming_another_op_is_refused(self, checkout: Path, tmp_path: Path) -> None:
        edit_op(checkout, "memory.get", lambda doc: doc.update(op="memory.fetch"))
        assert_refused(checkout, tmp_path, "sdk/ops/memory.get.json", "does not name its op")

    def test_a_wording_tool_that_core_does_not_list_is_refused(
        self, checkout: Path, tmp_path: Path
    ) -> None:
        # BACK-4: the rendered Loom wording names loom_namespace_validate (TXT-6).
        edit_toolsets(checkout, lambda doc: doc["lists"]["core"].remove("loom_namespace_validate"))
        line = assert_refused(checkout, tmp_path, "loom_namespace_validate", "lists.core")
        assert line.split("refused: ", 1)[1].startswith("loom/")


class TestWordingScan:
    """BACK-4: every ``loom_*`` tool the Loom wording names must be in the default list."""

    CORE = ("loom_search", "loom_memory_set", "loom_namespace_validate")

    def test_a_wording_naming_loom_op_is_refused(self) -> None:
        texts = {"loom/texts/planted.md": "Call `mcp__loom__loom_op` with any op name."}
        with pytest.raises(generator.Refusal, match=r"loom/texts/planted\.md: .*loom_op"):
            generator.wording_tools(texts, self.CORE)

    def test_a_wording_naming_loom_admin_purge_is_refused(self) -> None:
        texts = {
            "loom/personal/TOOLS.md": "Search with loom_search.",
            "loom/personal/AGENTS.md": "Clean up with loom_admin_purge.",
        }
        with pytest.raises(generator.Refusal, match=r"AGENTS\.md: .*loom_admin_purge"):
            generator.wording_tools(texts, self.CORE)

    def test_wording_within_core_gives_the_sorted_tools_it_names(self) -> None:
        texts = {
            "a.md": "Use mcp__loom__loom_search, then loom_memory_set.",
            "b.md": "Run loom_namespace_validate; memory is kept in Loom.",
            "c.md": "No tools here.",
        }
        found = generator.wording_tools(texts, self.CORE)
        assert found == ["loom_memory_set", "loom_namespace_validate", "loom_search"]

    def test_a_refusal_is_a_single_line(self) -> None:
        texts = {"x.md": "loom_op\nand loom_admin_purge"}
        with pytest.raises(generator.Refusal) as refused:
            generator.wording_tools(texts, self.CORE)
        assert "\n" not in str(refused.value)
        assert "loom_admin_purge, loom_op" in str(refused.value)


SCHEMA_UNDER_TEST: dict[str, Any] = {  # uses $ref, anyOf, items, bounds
    "type": "object",
    "$defs": {"Role": {"type": "string", "enum": ["user", "assistant"]}},
    "properties": {
        "count": {"type": "integer", "minimum": 1},
        "flag": {"type": "boolean"},
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["role"],
                "properties": {"role": {"$ref": "#/$defs/Role"}},
            },
        },
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "additionalProperties": {"type": "string"},
}


class TestSchemaReader:
    """CON-1: the generator's own JSON Schema subset judges paths and fixed values right."""

    def check(self, path: str, value: Any) -> str | None:
        (node,) = generator.schemas_at(SCHEMA_UNDER_TEST, path)
        return generator.validation_error(value, node, SCHEMA_UNDER_TEST)

    def test_a_path_through_a_list_and_a_reference_is_declared(self) -> None:
        assert generator.schemas_at(SCHEMA_UNDER_TEST, "turns[].role")

    def test_a_field_only_additional_properties_allow_is_not_declared(self) -> None:
        assert generator.schemas_at(SCHEMA_UNDER_TEST, "anything") == []
        assert generator.schemas_at(SCHEMA_UNDER_TEST, "turns[].name") == []

    def test_a_boolean_is_not_an_integer(self) -> None:
        assert self.check("count", True) is not None
        assert self.check("count", 2) is None

    def test_a_value_below_the_minimum_is_refused(self) -> None:
        assert "minimum" in (self.check("count", 0) or "")

    def test_an_enum_behind_a_reference_is_enforced(self) -> None:
        assert self.check("turns[].role", "assistant") is None
        assert "one of" in (self.check("turns[].role", "robot") or "")

    def test_any_of_accepts_a_value_one_branch_allows(self) -> None:
        assert self.check("note", None) is None
        assert self.check("note", 3) is not None

    def test_a_list_item_with_an_undeclared_field_is_refused(self) -> None:
        assert self.check("turns", [{"role": "user"}]) is None
        assert self.check("turns", [{"role": "user", "extra": 1}]) is not None
        assert self.check("turns", [{}]) is not None

    def test_the_paths_a_schema_requires_follow_only_what_is_sent(self) -> None:
        schema = {
            "type": "object",
            "required": ["messages"],
            "properties": {
                "messages": {
                    "type": "array",
                    "items": {"type": "object", "required": ["role"], "properties": {"role": {}}},
                },
                "context": {
                    "type": "array",
                    "items": {"type": "object", "required": ["text"], "properties": {"text": {}}},
                },
            },
        }
        quiet = generator.requirements(schema, ["messages[].role"])
        assert quiet.when_sent == {"messages", "messages[].role"}
        sent = generator.requirements(schema, ["messages[].role", "context[].text"])
        assert sent.when_sent == {"messages", "messages[].role", "context[].text"}
        assert sent.always == {"messages", "messages[].role"}


class TestThePackagedCopy:
    """BACK-4: an installed package has no tests/ folder; it reads its own copy instead."""

    def test_the_copy_installed_with_the_package_is_the_committed_fixture(self) -> None:
        assert PACKAGED_FIXTURE.read_bytes() == COMMITTED.read_bytes(), (
            "run scripts/loom_contract_fixture.py, which writes both"
        )

    def test_a_folder_without_a_checkout_fixture_reads_the_packaged_copy(
        self, tmp_path: Path
    ) -> None:
        assert TemplateFolder(tmp_path).loom_fixture_path == PACKAGED_FIXTURE
        assert TemplateFolder(REPO_ROOT).loom_fixture_path == COMMITTED

    def test_the_generator_writes_the_packaged_copy_with_the_fixture(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Both places as the generator names them, moved under tmp_path for the run."""
        assert (generator.DEFAULT_OUT, generator.PACKAGED_OUT) == (COMMITTED, PACKAGED_FIXTURE)
        monkeypatch.setattr(generator, "DEFAULT_OUT", tmp_path / "fixture.json")
        monkeypatch.setattr(generator, "PACKAGED_OUT", tmp_path / "packaged.json")
        assert generator.main(["--loom-checkout", str(STAND_IN)]) == 0
        assert (tmp_path / "packaged.json").read_bytes() == COMMITTED.read_bytes()
        assert (tmp_path / "fixture.json").read_bytes() == COMMITTED.read_bytes()
