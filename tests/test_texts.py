"""The runtime texts Nerve puts in front of an agent, per backend and case (TXT-3…TXT-6, TXT-8).

The texts are checked for what they must say and, just as much, for what they must not name:
a Loom text that still names a memU tool, or a text for a client without the ``loom`` server
that names any memory tool, sends the agent after tools it does not have.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from provisioner import texts
from provisioner.backends import MEMU_TOOLS, loom_core_tools
from provisioner.jinja_env import shared_environment
from provisioner.render import Answers, render_workspace
from provisioner.texts import (
    EXTERNAL_AGENTS,
    JOB_PROMPTS,
    all_texts,
    codex_note,
    external_agent_memory,
    job_prompt,
    memory_section,
    session_context,
    worker_onboarding,
)
from provisioner.wording import loom_tools_named, memu_tools_named

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"

# The tools the agent itself uses, as the Loom contract lists them (contracts/loom-ops.md).
# loom_memory_set_from_messages is Nerve's, and loom_op is not in the default list.
AGENT_LOOM_TOOLS = frozenset(
    {
        "loom_search",
        "loom_context_pack",
        "loom_memory_get",
        "loom_memory_set",
        "loom_namespace_summary",
        "loom_namespace_validate",
    }
)
VERDICTS = ("clear", "merge", "duplicate", "conflict", "refines", "rejected")


def names_no_tool_at_all(text: str) -> bool:
    """True when ``text`` names no MCP tool and no memU or Loom tool, even in bare prose."""
    if "mcp__" in text or loom_tools_named(text) or memu_tools_named(text):
        return False
    return not any(re.search(rf"\b{tool}\b", text) for tool in MEMU_TOOLS)


def every_loom_tool_is_addressed_on_the_loom_server(text: str) -> bool:
    """Each ``loom_*`` tool the text names is written ``mcp__loom__loom_*`` (BACK-3)."""
    mentions = list(re.finditer(r"(?<![A-Za-z0-9])loom_[a-z0-9]+(?:_[a-z0-9]+)*", text))
    return bool(mentions) and all(
        text[: mention.start()].endswith("mcp__loom__") for mention in mentions
    )


def single_section(text: str) -> bool:
    """The text is one Markdown section: it opens with its heading and has no other."""
    headings = [line for line in text.splitlines() if line.startswith("#")]
    return text.startswith("## ") and len(headings) == 1


class TestMemorySectionUnderMemu:
    """TXT-3, memU case: memU's tools and the hot/long-term rules, and nothing of Loom."""

    def test_it_names_all_nine_memu_tools_on_nerves_server(self) -> None:
        text = memory_section("memu", client_has_loom=False, available=True)
        assert memu_tools_named(text) == set(MEMU_TOOLS)
        for tool in MEMU_TOOLS:
            assert f"mcp__nerve__{tool}" in text

    def test_it_names_no_loom_tool(self) -> None:
        text = memory_section("memu", client_has_loom=False, available=True)
        assert loom_tools_named(text) == set()
        assert "loom" not in text.lower()

    def test_it_gives_the_hot_and_long_term_memory_rules(self) -> None:
        text = memory_section("memu", client_has_loom=False, available=True)
        assert "`MEMORY.md`" in text
        assert "Hot memory" in text
        assert "long-term memory" in text

    def test_memu_has_one_case_whatever_the_loom_flags_say(self) -> None:
        """memU does not depend on the catalog: every flag combination gives the same bytes."""
        bodies = {
            memory_section("memu", client_has_loom=has_loom, available=available)
            for has_loom in (True, False)
            for available in (True, False)
        }
        assert len(bodies) == 1


class TestMemorySectionUnderLoomWithTheServer:
    """TXT-3, Loom case where the session's client gets the ``loom`` server from the catalog."""

    @pytest.fixture
    def text(self) -> str:
        return memory_section("loom", client_has_loom=True, available=True)

    def test_it_names_the_agents_loom_tools_and_only_those(self, text: str) -> None:
        assert loom_tools_named(text) == AGENT_LOOM_TOOLS
        assert loom_tools_named(text) <= loom_core_tools()

    def test_every_loom_tool_is_addressed_on_the_loom_server(self, text: str) -> None:
        assert every_loom_tool_is_addressed_on_the_loom_server(text)

    def test_it_names_no_memu_tool(self, text: str) -> None:
        assert memu_tools_named(text) == set()
        assert "mcp__nerve__" not in text

    def test_it_names_the_home_and_the_shared_namespaces(self, text: str) -> None:
        assert "home namespace" in text
        assert "shared namespaces" in text

    def test_it_says_to_propose_a_change_where_the_agent_is_not_the_writer(self, text: str) -> None:
        assert "`proposed: true`" in text
        assert "not the writer" in text
        assert "tell the human" in text

    @pytest.mark.parametrize("verdict", VERDICTS)
    def test_it_names_each_write_verdict(self, text: str, verdict: str) -> None:
        assert f"`{verdict}`" in text

    def test_a_pinned_conflict_is_explained_as_rejected_with_pinned_conflict(
        self, text: str
    ) -> None:
        bullet = next(b for b in re.split(r"\n(?=- )", text) if "`rejected`" in b)
        assert bullet.index("PINNED_CONFLICT") > bullet.index("`rejected`")

    def test_there_is_no_pending_verdict(self, text: str) -> None:
        assert "pending" not in text.lower()

    def test_it_says_that_a_search_may_abstain(self, text: str) -> None:
        assert "abstain" in text
        assert "`abstained: true`" in text

    def test_extracted_facts_are_found_with_loom_search(self, text: str) -> None:
        """The bullet that mentions extracted facts is the ``loom_search`` one."""
        bullets = re.split(r"\n(?=- )", text)
        extracted = [bullet for bullet in bullets if "extracted" in bullet]
        assert extracted, "the section does not mention extracted facts"
        assert all("mcp__loom__loom_search" in bullet for bullet in extracted)

    def test_it_is_one_section(self, text: str) -> None:
        assert single_section(text)


class TestMemorySectionUnderLoomWithoutTheServer:
    """TXT-3, Loom case where the client has no ``loom`` server (local mode, early catalog)."""

    @pytest.fixture
    def text(self) -> str:
        return memory_section("loom", client_has_loom=False, available=True)

    def test_it_says_memory_cannot_be_used_in_this_session(self, text: str) -> None:
        assert "cannot be used in this session" in text

    def test_it_names_no_memory_tool(self, text: str) -> None:
        assert names_no_tool_at_all(text)

    def test_it_is_one_section(self, text: str) -> None:
        assert single_section(text)


class TestMemorySectionWhenLoomIsUnavailable:
    """TXT-3, Loom backend that did not start (no gateway URL) or is in an outage."""

    @pytest.mark.parametrize("client_has_loom", [True, False])
    def test_it_says_memory_is_unavailable(self, client_has_loom: bool) -> None:
        text = memory_section("loom", client_has_loom=client_has_loom, available=False)
        assert "unavailable" in text
        assert single_section(text)

    @pytest.mark.parametrize("client_has_loom", [True, False])
    def test_it_names_no_memory_tool(self, client_has_loom: bool) -> None:
        text = memory_section("loom", client_has_loom=client_has_loom, available=False)
        assert names_no_tool_at_all(text)

    def test_an_outage_reads_differently_from_a_client_without_the_server(self) -> None:
        unavailable = memory_section("loom", client_has_loom=True, available=False)
        no_server = memory_section("loom", client_has_loom=False, available=True)
        assert unavailable != no_server
        assert "cannot be used in this session" not in unavailable


class TestMemorySectionIsDeterministic:
    """TXT-3: the section depends only on its inputs, so a rebuilt prompt keeps its bytes."""

    CASES = (
        ("memu", False, True, "memory_section.md"),
        ("loom", True, True, "memory_section@loom-client.md"),
        ("loom", False, True, "memory_section@no-loom-client.md"),
        ("loom", False, False, "memory_section@unavailable.md"),
    )

    @pytest.mark.parametrize(("backend", "has_loom", "available", "golden"), CASES)
    def test_the_same_inputs_give_the_same_bytes_in_a_fresh_environment(
        self, backend: str, has_loom: bool, available: bool, golden: str
    ) -> None:
        """A second render, from a newly built Jinja environment, matches the first byte for
        byte, and both match the golden rendered at another time: nothing time-dependent."""
        first = memory_section(backend, client_has_loom=has_loom, available=available)
        shared_environment.cache_clear()
        try:
            second = memory_section(backend, client_has_loom=has_loom, available=available)
        finally:
            shared_environment.cache_clear()
        assert first.encode() == second.encode()
        assert first.encode() == (GOLDEN_DIR / backend / "texts" / golden).read_bytes()


class TestSessionContext:
    """TXT-4, REC-4: the recalled memories, as a block or in the legacy shape."""

    ITEMS = ("Ada prefers tea.", "The launch moved\nto March.", "Bob owns the &lt;api&gt;.")

    @staticmethod
    def item_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("- ")]

    def test_the_block_opens_and_closes_with_its_tags_on_their_own_lines(self) -> None:
        lines = session_context(self.ITEMS, recalled=True).splitlines()
        assert lines[0] == "<session-context>"
        assert lines[-1] == "</session-context>"

    def test_each_item_is_exactly_one_line(self) -> None:
        text = session_context(self.ITEMS, recalled=True)
        assert self.item_lines(text) == [
            "- Ada prefers tea.",
            "- The launch moved to March.",
            "- Bob owns the &lt;api&gt;.",
        ]

    def test_the_legacy_shape_is_a_recalled_memories_section_with_the_same_lines(self) -> None:
        block = session_context(self.ITEMS, recalled=True, shape="block")
        legacy = session_context(self.ITEMS, recalled=True, shape="legacy")
        assert legacy.startswith("# Recalled Memories\n")
        assert "session-context>" not in legacy
        assert self.item_lines(legacy) == self.item_lines(block)

    @pytest.mark.parametrize("shape", texts.SHAPES)
    def test_a_failed_recall_says_memories_could_not_be_recalled(self, shape: str) -> None:
        text = session_context(None, recalled=False, shape=shape)
        assert "could not be recalled" in text
        assert "No memories were recalled" not in text
        assert self.item_lines(text) == []

    @pytest.mark.parametrize("shape", texts.SHAPES)
    def test_a_failed_recall_differs_from_a_recall_that_found_nothing(self, shape: str) -> None:
        failed = session_context(None, recalled=False, shape=shape)
        empty = session_context([], recalled=True, shape=shape)
        assert failed != empty
        assert "No memories were recalled" in empty
        assert "could not be recalled" not in empty

    def test_a_failed_recall_in_the_block_still_has_both_tags(self) -> None:
        lines = session_context(None, recalled=False).splitlines()
        assert (lines[0], lines[-1]) == ("<session-context>", "</session-context>")

    def test_an_item_that_sanitizes_to_nothing_gets_no_line(self) -> None:
        text = session_context(["  \n\x00  ", "kept"], recalled=True)
        assert self.item_lines(text) == ["- kept"]

    def test_an_unknown_shape_is_refused(self) -> None:
        with pytest.raises(ValueError, match="shape"):
            session_context([], recalled=True, shape="html")


def client_texts(backend: str, client_has_loom: bool) -> dict[str, str]:
    """Every TXT-5 text of ``backend`` for one kind of client, by name."""
    found = {
        "worker_onboarding": worker_onboarding(backend, client_has_loom=client_has_loom),
        "codex_note": codex_note(backend, client_has_loom=client_has_loom),
    }
    for agent in EXTERNAL_AGENTS:
        found[f"external_agent_memory:{agent}"] = external_agent_memory(
            backend, agent, client_has_loom=client_has_loom
        )
    return found


TXT5_NAMES = sorted(client_texts("memu", False))


class TestClientTextsUnderLoom:
    """TXT-5: onboarding, Codex note and external-agent bundles under Loom."""

    @pytest.mark.parametrize("name", TXT5_NAMES)
    def test_a_client_with_the_loom_server_is_told_loom_tools(self, name: str) -> None:
        text = client_texts("loom", True)[name]
        named = loom_tools_named(text)
        assert named, f"{name} names no Loom tool"
        assert named <= AGENT_LOOM_TOOLS
        assert every_loom_tool_is_addressed_on_the_loom_server(text)

    @pytest.mark.parametrize("name", TXT5_NAMES)
    def test_a_client_with_the_loom_server_is_told_no_memu_tool(self, name: str) -> None:
        text = client_texts("loom", True)[name]
        assert memu_tools_named(text) == set()
        assert "mcp__nerve__" not in text

    @pytest.mark.parametrize("name", TXT5_NAMES)
    def test_a_client_without_the_loom_server_is_told_no_memory_tool_at_all(
        self, name: str
    ) -> None:
        assert names_no_tool_at_all(client_texts("loom", False)[name])

    @pytest.mark.parametrize("agent", sorted(EXTERNAL_AGENTS))
    @pytest.mark.parametrize("client_has_loom", [True, False])
    def test_an_external_agent_bundle_names_its_agent(
        self, agent: str, client_has_loom: bool
    ) -> None:
        label, _hint = EXTERNAL_AGENTS[agent]
        assert label in external_agent_memory("loom", agent, client_has_loom=client_has_loom)


class TestClientTextsUnderMemu:
    """TXT-5: under memU the same texts name memU's tools, and never Loom's."""

    @pytest.mark.parametrize("name", TXT5_NAMES)
    def test_they_name_memu_tools_on_nerves_server(self, name: str) -> None:
        text = client_texts("memu", False)[name]
        assert memu_tools_named(text)
        assert loom_tools_named(text) == set()
        assert "mcp__loom__" not in text

    @pytest.mark.parametrize("name", TXT5_NAMES)
    def test_they_do_not_depend_on_the_loom_flag(self, name: str) -> None:
        assert client_texts("memu", True)[name] == client_texts("memu", False)[name]

    @pytest.mark.parametrize("agent", sorted(EXTERNAL_AGENTS))
    def test_an_external_agent_bundle_names_its_agent_and_where_it_is_configured(
        self, agent: str
    ) -> None:
        label, hint = EXTERNAL_AGENTS[agent]
        text = external_agent_memory("memu", agent, client_has_loom=False)
        assert label in text
        assert hint in text

    def test_an_unknown_external_agent_is_refused(self) -> None:
        with pytest.raises(ValueError, match="external agent"):
            external_agent_memory("memu", "vim", client_has_loom=False)


@pytest.fixture(scope="module")
def system_yaml(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """The raw ``config/cron/system.yaml`` of a real render, per (backend, profile)."""
    found = {}
    for backend in ("memu", "loom"):
        for profile in ("personal", "worker"):
            destination = tmp_path_factory.mktemp(f"{backend}-{profile}") / "workspace"
            render_workspace(Answers(profile=profile, memory_backend=backend), destination)
            raw = (destination / "config" / "cron" / "system.yaml").read_text(encoding="utf-8")
            found[(backend, profile)] = raw
    return found


def parsed_jobs(raw: str) -> dict[str, dict]:
    return {job["id"]: job for job in yaml.safe_load(raw)["jobs"]}


class TestJobPrompts:
    """TXT-6, TXT-8: the built-in job prompts, one source for the file and the runtime."""

    @pytest.mark.parametrize("backend", ["memu", "loom"])
    @pytest.mark.parametrize("job_id", sorted(JOB_PROMPTS))
    def test_the_runtime_prompt_equals_the_one_in_the_rendered_system_yaml(
        self, system_yaml: dict[tuple[str, str], str], backend: str, job_id: str
    ) -> None:
        jobs = parsed_jobs(system_yaml[(backend, "personal")])
        assert jobs[job_id]["prompt"] == job_prompt(job_id, backend)

    @pytest.mark.parametrize("backend", ["memu", "loom"])
    def test_the_worker_profile_has_maintenance_and_no_inbox_processor(
        self, system_yaml: dict[tuple[str, str], str], backend: str
    ) -> None:
        jobs = parsed_jobs(system_yaml[(backend, "worker")])
        assert set(jobs) == {"memory-maintenance"}
        assert jobs["memory-maintenance"]["prompt"] == job_prompt("memory-maintenance", backend)

    @pytest.mark.parametrize("backend", ["memu", "loom"])
    @pytest.mark.parametrize("profile", ["personal", "worker"])
    def test_every_prompt_is_a_yaml_block_scalar(
        self, system_yaml: dict[tuple[str, str], str], backend: str, profile: str
    ) -> None:
        """A block scalar keeps the prompt readable in a diff; a quoted string would not."""
        raw = system_yaml[(backend, profile)]
        prompt_lines = [line.strip() for line in raw.splitlines() if "prompt:" in line]
        assert prompt_lines
        assert prompt_lines == ["prompt: |"] * len(parsed_jobs(raw))

    def test_the_loom_maintenance_prompt_runs_the_integrity_report_on_the_home_namespace(
        self,
    ) -> None:
        prompt = job_prompt("memory-maintenance", "loom")
        assert "mcp__loom__loom_namespace_validate" in prompt
        assert "home namespace" in prompt
        assert memu_tools_named(prompt) == set()

    def test_the_loom_maintenance_prompt_never_changes_memories_through_loom(self) -> None:
        """It names only Loom's read-only tools, and every sentence about deleting, pruning or
        merging forbids it."""
        prompt = job_prompt("memory-maintenance", "loom")
        assert loom_tools_named(prompt) <= {"loom_namespace_summary", "loom_namespace_validate"}
        sentences = re.split(r"(?<=[.;:])\s+", " ".join(prompt.split()))
        for sentence in sentences:
            if re.search(r"\b(delet|prun|merg|remov|forget)", sentence, re.IGNORECASE):
                assert sentence.lower().startswith("do not"), sentence

    def test_the_memu_maintenance_prompt_reviews_yesterday_dedupes_and_prunes(self) -> None:
        prompt = job_prompt("memory-maintenance", "memu")
        assert "yesterday" in prompt
        assert {"memory_records_by_date", "memory_update", "memory_delete"} <= memu_tools_named(
            prompt
        )
        assert "Prune" in prompt

    def test_the_loom_inbox_processor_writes_facts_with_loom_tools(self) -> None:
        prompt = job_prompt("inbox-processor", "loom")
        assert "loom_memory_set" in loom_tools_named(prompt)
        assert memu_tools_named(prompt) == set()

    def test_the_memu_inbox_processor_memorizes_facts(self) -> None:
        prompt = job_prompt("inbox-processor", "memu")
        assert "memorize" in memu_tools_named(prompt)
        assert loom_tools_named(prompt) == set()

    def test_an_unknown_job_is_refused(self) -> None:
        with pytest.raises(ValueError, match="built-in job"):
            job_prompt("backup", "memu")


class TestAllTexts:
    """GOLD-1: every text in every case is listed once, for the goldens."""

    def test_every_text_has_a_unique_golden_name_per_backend(self) -> None:
        names = [(text.backend, text.file_name) for text in all_texts()]
        assert len(names) == len(set(names))

    def test_the_memory_section_has_its_four_cases(self) -> None:
        cases = {(t.backend, t.case) for t in all_texts() if t.name == "memory_section"}
        assert cases == {
            ("memu", None),
            ("loom", "loom-client"),
            ("loom", "no-loom-client"),
            ("loom", "unavailable"),
        }
