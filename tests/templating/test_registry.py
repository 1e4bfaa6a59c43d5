"""A third backend is one registry entry plus its template branches (BACK-1).

The test registers ``zep`` from a temporary copy of the templates (its choice in
``copier.yml`` and its partials) and renders, lints and goldens it, touching no module of the
package but the registry: configuration, init's memory step and summary line, golden
protection and the wording lint all come from the entry.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.backends import (
    BACKEND_NAMES,
    BACKENDS,
    Backend,
    GoldenGuard,
    get_backend,
    register,
    unregister,
)
from provisioner.cli.summary import init_summary_text
from provisioner.config.loader import load_config
from provisioner.golden import check as golden
from provisioner.templating.folder import ASSETS_ENV
from provisioner.templating.questions import load_questions
from provisioner.workspace.init import InitWorker
from provisioner.workspace.render import Answers, render_workspace
from tests.support.repo import GOLDEN_DIR, REPO_ROOT

ZEP_TOOLS = frozenset({"zep_search", "zep_add"})
ZEP_PATTERN = re.compile(r"(?<![A-Za-z0-9])(?P<tool>zep_[a-z]+)")


def zep_entry() -> Backend:
    return Backend(
        name="zep",
        display_name="Zep",
        mcp_server="zep",
        tool_pattern=ZEP_PATTERN,
        nameable=lambda folder: ZEP_TOOLS,
        served_by_gateway=False,
        goldens=GoldenGuard(by_name_only=False),
    )


def add_zep_templates(assets: Path) -> None:
    """Zep's branches: the choice in copier.yml and one partial per memU partial."""
    copier = assets / "templates" / "copier.yml"
    text = copier.read_text()
    assert text.count("    - loom\n") == 1
    copier.write_text(text.replace("    - loom\n", "    - loom\n    - zep\n"))
    partials = assets / "templates" / "partials"
    (partials / "zep").mkdir()
    for partial in sorted((partials / "memu").iterdir()):
        (partials / "zep" / partial.name).write_text(
            "Long-term memory lives in Zep: search it with `mcp__zep__zep_search`.\n"
        )


@pytest.fixture
def zep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The templates with zep's branches, active, and zep registered; both undone after."""
    assets = tmp_path / "assets"
    shutil.copytree(REPO_ROOT / "templates", assets / "templates")
    shutil.copytree(REPO_ROOT / "skills", assets / "skills")
    add_zep_templates(assets)
    monkeypatch.setenv(ASSETS_ENV, str(assets))
    register(zep_entry())
    try:
        yield assets
    finally:
        unregister("zep")


class TestAThirdBackend:
    def test_it_renders_with_its_own_wording(self, zep, tmp_path):
        """BACK-1: the templates' branches are chosen by the backend's name."""
        rendered = render_workspace(Answers(memory_backend="zep"), tmp_path / "ws")
        agents = next(f for f in rendered if f.path == "AGENTS.md").content.decode()
        assert "mcp__zep__zep_search" in agents
        assert "mcp__nerve__" not in agents and "loom_" not in agents

    def test_it_is_a_choice_everywhere_the_registry_is_read(self, zep):
        """BACK-1: the names are a live view of the registry: the CLI's choices, config keys."""
        assert "zep" in BACKEND_NAMES
        assert load_questions()[1].choices == tuple(BACKEND_NAMES)

    def test_the_configuration_accepts_it_and_its_section(self, zep, tmp_path):
        """CONF-4, CONF-7: memory.backend: zep loads; memory.zep is a known key."""
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backend: zep\n  zep: {}\n")
        config = load_config(tmp_path / "cfg")
        assert config.memory_backend == "zep"
        assert config.warnings == ()

    def test_init_runs_its_setup_step_and_summary_line(self, zep, tmp_path):
        """INIT-3: with no step of its own, nothing is asked and the line names it."""
        worker = InitWorker(
            workspace=tmp_path / "ws",
            config_dir=tmp_path / "cfg",
            mode="non-interactive",
            backend="zep",
        )
        result = worker.run()
        assert result.memory_step == {"backend": "zep", "asked": False}
        assert "Memory: zep." in init_summary_text(result, tmp_path / "cfg")

    def test_its_goldens_are_written_and_then_checked_and_linted(self, zep, tmp_path):
        """GOLD-1…GOLD-5: update writes golden/zep/…, and check finds every file in place."""
        goldens = tmp_path / "golden"
        shutil.copytree(GOLDEN_DIR, goldens)
        touched = golden.update(goldens, list(BACKEND_NAMES), env={})
        assert any(path.startswith("zep/personal/") for path in touched)
        assert (goldens / "zep" / "worker" / "AGENTS.md").is_file()
        assert any((goldens / "zep" / "texts").glob("memory_section*.md"))
        report = golden.check(goldens)
        assert report.ok, (report.differences[:3], report.wording[:3])

    def test_the_wording_lint_holds_it_to_its_own_tools(self, zep, tmp_path):
        """GOLD-5: a memU tool in zep's wording is a problem, found through the registry."""
        partial = zep / "templates" / "partials" / "zep" / "tools-memory.md"
        partial.write_text("Call `mcp__nerve__memorize` to store a memory.\n")
        expected = golden.render_expected(tmp_path / "scratch", ["zep"])
        problems = golden.lint_renders(expected)
        assert {problem.tool for problem in problems} == {"memorize"}
        assert all(problem.backend == "zep" for problem in problems)

    def test_unregistering_leaves_the_two_built_in_backends(self, zep):
        unregister("zep")
        assert tuple(BACKEND_NAMES) == ("memu", "loom")
        register(zep_entry())  # the fixture unregisters it again
        with pytest.raises(ValueError, match="built in"):
            unregister("memu")


class TestTheBuiltInEntries:
    def test_loom_owns_its_settings_section_and_memu_has_none(self):
        """BACK-1: memory.loom's keys and checks live on Loom's entry."""
        assert BACKENDS["loom"].settings is not None
        assert "namespace" in BACKENDS["loom"].settings.keys
        assert BACKENDS["memu"].settings is None

    def test_memu_goldens_are_protected_by_name(self):
        """GOLD-3: memU goldens are rewritten only when asked for by name."""
        assert get_backend("memu").goldens.by_name_only
        assert not get_backend("loom").goldens.by_name_only

    def test_a_name_registered_twice_is_refused(self):
        with pytest.raises(ValueError, match="registered already"):
            register(BACKENDS["loom"])
