"""The wording lint inside ``nerve golden check`` (GOLD-5, BACK-4).

A violation is planted in a private copy of the templates, and the goldens of a private golden
copy are then updated to match it: the check that follows can fail on wording alone, so each
WORDING line is what makes it fail, not a byte difference.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.backends import MEMU_TOOLS, UnknownBackend
from provisioner.cli.summary import golden_report_text
from provisioner.golden.check import CheckReport, lint_renders, read_goldens
from provisioner.templating.folder import loom_core_tools
from provisioner.templating.texts import RuntimeText
from provisioner.templating.wording import (
    WordingProblem,
    lint_catalog_worded,
    lint_runtime_texts,
    lint_text,
    loom_tools_named,
    memu_tools_named,
)
from tests.runner import run_cli
from tests.support.processes import clean_environment
from tests.support.repo import GOLDEN_DIR, REPO_ROOT

CONTRACT_FIXTURE = REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json"
_WORDING_LINE = re.compile(r"^WORDING  (\S+): names '([^']+)' \((.*)\)$")
CORE = frozenset({"loom_search", "loom_memory_set", "loom_namespace_validate"})
NAMEABLE = {"memu": frozenset(MEMU_TOOLS), "loom": CORE}


def _append_after(path: Path, anchor: str, addition: str) -> None:
    """Plant ``addition`` right after ``anchor``; fails loudly if the anchor moved."""
    text = path.read_text(encoding="utf-8")
    assert text.count(anchor) == 1, (path, anchor)
    path.write_text(text.replace(anchor, anchor + addition), encoding="utf-8")


def _nerve(
    home: Path, *args: str, env: dict[str, str], python: bool = False
) -> subprocess.CompletedProcess:
    """Run the CLI (in this process, ``tests.runner``; or, with ``python=True``, the
    interpreter) with a clean environment."""
    home.mkdir(parents=True, exist_ok=True)
    if not python:
        return run_cli(args, env=clean_environment(home, env), cwd=home)
    return subprocess.run(
        [sys.executable, *args],
        input="",
        capture_output=True,
        text=True,
        env=clean_environment(home, env),
        cwd=home,
        timeout=120,
    )


@pytest.fixture(scope="module")
def violations(tmp_path_factory) -> subprocess.CompletedProcess:
    """``golden check`` of templates with four planted violations, goldens updated to match.

    * memU AGENTS.md wording names `loom_search`;
    * Loom TOOLS.md names `mcp__nerve__memorize`;
    * the Loom Codex note names `loom_memory_get` whatever the catalog (a core tool, so only
      the catalog lint finds it);
    * Loom MEMORY.md names a bare backticked `memory_recall`;
    * the Loom system-prompt section (with the loom server) names `loom_op`, not in core.

    None of them is in a memU job prompt, so updating memU goldens records nothing in the
    package's shipped-prompt registry.
    """
    root = tmp_path_factory.mktemp("wording")
    partials = root / "assets" / "templates" / "partials"
    shutil.copytree(REPO_ROOT / "templates", root / "assets" / "templates")
    shutil.copytree(REPO_ROOT / "skills", root / "assets" / "skills")
    _append_after(
        partials / "memu/agents-memory.md",
        "You have two kinds of memory.",
        " Search with `loom_search` first.",
    )
    _append_after(
        partials / "loom/tools-memory.md",
        "| --- | --- |\n",
        "| `mcp__nerve__memorize` | store one fact |\n",
    )
    _append_after(
        partials / "loom/memory-hot.md",
        "so keep it under a page.",
        " Check with `memory_recall` first.",
    )
    _append_after(
        partials / "loom/codex-note.md",
        "MCP tools on the `nerve` server.\n",
        "Read a memory with `mcp__loom__loom_memory_get`.\n",
    )
    _append_after(
        partials / "loom/memory-section.md",
        "- `mcp__loom__loom_namespace_validate`: the integrity report of a namespace.\n",
        "- `mcp__loom__loom_op`: run any Loom op.\n",
    )
    goldens = root / "golden"
    env = {"NERVE_ASSETS_DIR": str(root / "assets")}
    home = root / "home"
    # `golden update` refuses to freeze wording problems, so the goldens matching the planted
    # render are written straight from it, in a process that renders from the copy.
    write = _nerve(home, "-c", _WRITE_RENDER_AS_GOLDENS, str(goldens), env=env, python=True)
    assert write.returncode == 0, write.stdout + write.stderr
    return _nerve(home, "golden", "check", "--golden-dir", str(goldens), env=env)


_WRITE_RENDER_AS_GOLDENS = """
import sys, tempfile
from pathlib import Path
from provisioner.golden.check import render_expected
target = Path(sys.argv[1])
with tempfile.TemporaryDirectory() as scratch:
    for path, rendered in render_expected(Path(scratch)).items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_bytes(rendered.content)
        (target / path).chmod(0o755 if rendered.executable else 0o644)
"""


def _reported(check: subprocess.CompletedProcess) -> list[tuple[str, str, str]]:
    """(text, tool, reason) of every WORDING line of a text report."""
    return [
        (match[1], match[2], match[3])
        for line in check.stdout.splitlines()
        if (match := _WORDING_LINE.match(line))
    ]


class TestUpdateRefusesPlantedWording:
    def test_update_will_not_freeze_a_wording_problem(self, tmp_path):
        """GOLD-5: a render that breaks the wording rules never becomes a golden."""
        assets = tmp_path / "assets"
        shutil.copytree(REPO_ROOT / "templates", assets / "templates")
        shutil.copytree(REPO_ROOT / "skills", assets / "skills")
        _append_after(
            assets / "templates/partials/loom/memory-hot.md",
            "so keep it under a page.",
            " Check with `memory_recall` first.",
        )
        goldens = tmp_path / "golden"
        shutil.copytree(GOLDEN_DIR, goldens)
        before = read_goldens(goldens, ("memu", "loom"))
        env = {"NERVE_ASSETS_DIR": str(assets)}
        update = _nerve(
            tmp_path / "home", "golden", "update", "--golden-dir", str(goldens), env=env
        )
        assert update.returncode == 2, update.stdout + update.stderr
        assert "wording problem" in update.stderr and "memory_recall" in update.stderr
        assert read_goldens(goldens, ("memu", "loom")) == before


class TestCheckFailsOnPlantedWording:
    def test_wording_problems_alone_fail_the_check(self, violations):
        """GOLD-5: with goldens matching byte for byte, the lint is what fails the check."""
        assert violations.returncode == 1, violations.stdout + violations.stderr
        lines = violations.stdout.splitlines()
        problems = [line for line in lines if line.startswith("WORDING  ")]
        assert problems, violations.stdout
        shown = ("WORDING  ", " " * 9, "golden check: ", "not accepted: ")  # where, why not
        assert all(line.startswith(shown) for line in lines), violations.stdout
        summary = next(line for line in lines if line.startswith("golden check: "))
        assert summary.startswith(f"golden check: {len(problems)} problems")

    def test_a_memu_partial_naming_loom_search_is_reported(self, violations):
        """GOLD-5: memU wording names no ``loom_*`` tool."""
        assert (
            "memu/personal/AGENTS.md",
            "loom_search",
            "a Loom tool in memU wording",
        ) in _reported(violations)

    def test_a_loom_partial_naming_a_qualified_memu_tool_is_reported(self, violations):
        """GOLD-5: Loom wording names none of memU's nine tools, qualified or not."""
        assert (
            "loom/personal/TOOLS.md",
            "memorize",
            "a memU tool in Loom wording",
        ) in _reported(violations)

    def test_a_loom_partial_naming_a_bare_backticked_memu_tool_is_reported(self, violations):
        """GOLD-5: a backticked bare name is a tool name too."""
        assert (
            "loom/worker/MEMORY.md",
            "memory_recall",
            "a memU tool in Loom wording",
        ) in _reported(violations)

    def test_a_loom_text_naming_a_tool_outside_the_core_list_is_reported(self, violations):
        """GOLD-5, BACK-4: every ``loom_*`` named must be in Loom's default list."""
        assert (
            "loom/texts/memory_section@core.md",
            "loom_op",
            "not in Loom's default tool list",
        ) in _reported(violations)

    def test_a_loom_text_naming_a_core_tool_its_catalog_lacks_is_reported(self, violations):
        """GOLD-5, TXT-3: a catalog-worded text names only the tools it was worded for."""
        reported = _reported(violations)
        assert (
            "loom/texts/codex_note@three-tools.md",
            "loom_memory_get",
            "not in the catalog this text was worded for: "
            "loom_context_pack, loom_memory_set, loom_search",
        ) in reported
        assert (
            "loom/texts/codex_note@no-loom-server.md",
            "loom_memory_get",
            "not in the catalog this text was worded for: no tools",
        ) in reported
        assert not any(text == "loom/texts/codex_note@core.md" for text, _, _ in reported)

    def test_only_the_planted_violations_are_reported(self, violations):
        """GOLD-5: the lint names the planted tools and nothing the shipped wording says."""
        assert {tool for _text, tool, _reason in _reported(violations)} == {
            "loom_search",
            "memorize",
            "memory_recall",
            "loom_op",
            "loom_memory_get",
        }


class TestCheckPrintsWordingLines:
    def test_the_text_report_gives_each_problem_a_wording_line(self):
        """GOLD-5: in the text report a problem is one WORDING line naming text and tool."""
        problem = WordingProblem("memu/worker/AGENTS.md", "memu", "loom_search", "a Loom tool")
        output = golden_report_text(CheckReport(wording=[problem], files_checked=3))
        assert "WORDING  memu/worker/AGENTS.md: names 'loom_search' (a Loom tool)\n" in output
        assert "1 problem in 3 rendered files" in output


class TestToolNamesInText:
    def test_a_qualified_loom_tool_counts_as_its_bare_name(self):
        """GOLD-5: ``mcp__loom__loom_search`` names the tool ``loom_search``."""
        assert loom_tools_named("Call `mcp__loom__loom_search` first.") == {"loom_search"}

    def test_a_bare_loom_tool_counts_wherever_it_stands(self):
        """GOLD-5: every ``loom_*`` token is a Loom tool name, backticked or not."""
        text = "use loom_memory_set, then (loom_search)."
        assert loom_tools_named(text) == {"loom_memory_set", "loom_search"}

    def test_the_loom_server_and_words_ending_in_loom_name_no_tool(self):
        """GOLD-5: the ``loom`` server, ``mcp__loom__`` and ``heirloom_x`` are not tools."""
        assert loom_tools_named("the `loom` server, mcp__loom__ tools, heirloom_x") == set()

    def test_each_of_the_nine_memu_tools_is_recognised_qualified_and_bare(self):
        """GOLD-5, BACK-3: no memU tool hides behind another's name."""
        for tool in MEMU_TOOLS:
            assert memu_tools_named(f"call mcp__nerve__{tool} now") == {tool}
            assert memu_tools_named(f"call `{tool}` now") == {tool}

    def test_prose_memorize_is_not_a_tool_name(self):
        """GOLD-5: Loom wording may say "memorize" or "recall" as words."""
        assert memu_tools_named("Memorize what matters; recall it with memory recall.") == set()

    def test_a_longer_name_that_starts_with_a_memu_tool_is_not_that_tool(self):
        """GOLD-5: ``memorize_all`` is not ``memorize``."""
        assert memu_tools_named("mcp__nerve__memorize_all and `memorize_all`") == set()


class TestLintText:
    def test_memu_text_naming_memu_tools_is_clean(self):
        """GOLD-5: memU wording names its own tools freely."""
        assert lint_text("t", "`mcp__nerve__memorize` and `memory_recall`", "memu", NAMEABLE) == []

    def test_memu_text_naming_a_loom_tool_is_a_problem_even_if_core(self):
        """GOLD-5: memU wording names no ``loom_*`` tool at all."""
        assert lint_text("t", "try mcp__loom__loom_search", "memu", NAMEABLE) == [
            WordingProblem("t", "memu", "loom_search", "a Loom tool in memU wording")
        ]

    def test_loom_text_naming_core_tools_is_clean(self):
        """GOLD-5: core tools are what Loom wording is for."""
        text = "`mcp__loom__loom_search`, then `mcp__loom__loom_memory_set`; memorize it."
        assert lint_text("t", text, "loom", NAMEABLE) == []

    def test_loom_text_naming_a_memu_tool_is_a_problem(self):
        """GOLD-5: memU's tools are not offered under Loom."""
        assert lint_text("t", "use `session_context`", "loom", NAMEABLE) == [
            WordingProblem("t", "loom", "session_context", "a memU tool in Loom wording")
        ]

    def test_loom_text_naming_a_tool_outside_core_is_a_problem(self):
        """BACK-4: a tool Loom does not list by default is not there for the agent."""
        assert lint_text("t", "use mcp__loom__loom_op", "loom", NAMEABLE) == [
            WordingProblem("t", "loom", "loom_op", "not in Loom's default tool list")
        ]

    def test_a_tool_named_twice_is_one_problem_and_problems_come_sorted(self):
        """GOLD-5: the report lists each tool once per text, in a stable order."""
        problems = lint_text("t", "loom_b loom_a loom_b", "memu", NAMEABLE)
        assert [problem.tool for problem in problems] == ["loom_a", "loom_b"]

    def test_an_unknown_backend_is_a_caller_error_not_a_finding(self):
        """BACK-1: a backend outside the registry must not lint as clean."""
        with pytest.raises(UnknownBackend):
            lint_text("t", "text", "mem0", NAMEABLE)


class TestLintOfTheShippedWording:
    def test_the_core_list_is_the_contract_fixtures(self):
        """BACK-4: the lint's core list is read from the fixture, never typed by hand."""
        fixture = json.loads(CONTRACT_FIXTURE.read_text(encoding="utf-8"))
        assert loom_core_tools() == frozenset(fixture["core_tools"])

    def test_the_committed_goldens_pass_the_lint(self):
        """GOLD-5: the shipped wording of both backends is clean."""
        assert lint_renders(read_goldens(GOLDEN_DIR, ("memu", "loom"))) == []

    def test_every_shipped_runtime_text_names_only_tools_of_its_catalog(self):
        """GOLD-5, TXT-3: no case of a catalog-worded text sends the agent after a tool its
        client was not granted."""
        assert lint_runtime_texts(("memu", "loom")) == []


def _text(body: str, tools: frozenset[str] | None, backend: str = "loom") -> RuntimeText:
    return RuntimeText(backend, "memory_section", "case", body, tools)


class TestLintCatalogWorded:
    def test_a_tool_outside_the_set_is_a_problem_even_if_core(self):
        """GOLD-5: a core tool the catalog did not grant must not be named."""
        text = _text("`mcp__loom__loom_memory_get`", frozenset({"loom_search"}))
        assert lint_catalog_worded([text]) == [
            WordingProblem(
                "loom/texts/memory_section@case.md",
                "loom",
                "loom_memory_get",
                "not in the catalog this text was worded for: loom_search",
            )
        ]

    def test_tools_inside_the_set_are_clean(self):
        text = _text("`mcp__loom__loom_search`", frozenset({"loom_search", "loom_memory_set"}))
        assert lint_catalog_worded([text]) == []

    def test_a_text_not_worded_from_a_catalog_is_left_to_the_backend_lint(self):
        assert lint_catalog_worded([_text("`mcp__loom__loom_search`", None)]) == []

    def test_an_empty_set_allows_no_tool(self):
        problems = lint_catalog_worded([_text("loom_search and loom_memory_set", frozenset())])
        assert [problem.tool for problem in problems] == ["loom_memory_set", "loom_search"]
