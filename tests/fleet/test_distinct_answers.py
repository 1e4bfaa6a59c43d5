"""FLEET-5 at real size: instances with their own names render without a Copier run each.

The quick render (``provisioner.workspace.jinja_render``) must write exactly what Copier
writes: the goldens and Copier's own render hold it byte for byte, exec bits and manifest
included, for every golden's answers and for answers with names of their own. A fleet whose
workspaces each have their own agent and user names then makes one Copier run per profile
and backend, not one per workspace, and judges and writes what init would.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.fleet.inventory import read_inventory
from provisioner.fleet.run import FleetRun
from provisioner.golden.check import default_golden_dir, read_goldens
from provisioner.templating.folder import rendering_from
from provisioner.workspace.jinja_render import RenderCache, render_through_jinja
from provisioner.workspace.render import Answers, RenderedFile, TemplateRenderer
from tests.fleet.provisioning import AGENT_LINE, Provision, add_agent_line, tree

NAMED = [
    Answers(agent_name="Orbit", user_name="Ana Lima", timezone="Europe/Berlin"),
    Answers(memory_backend="loom", agent_name="Atlas ü {{ x }}", user_name='O\'Brien "Bo"'),
    Answers(profile="worker", agent_name="Sorter", worker_task="  Sort the inbox daily  "),
    Answers(profile="worker", memory_backend="loom", lockdown=True, agent_name="Locked"),
    Answers(profile="personal", memory_backend="loom", lockdown=True, user_name="Tab\there"),
]


def by_path(files: list[RenderedFile]) -> dict[str, tuple[bytes, bool]]:
    return {f.path: (f.content, f.executable) for f in files}


def render_once(answers: Answers) -> list[RenderedFile]:
    """The render through Copier alone, from the active template folder."""
    return TemplateRenderer().render(answers)


class TestTheQuickRender:
    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("profile", PROFILES)
    def test_it_writes_the_goldens(self, backend: str, profile: str) -> None:
        golden_dir = default_golden_dir()
        goldens = read_goldens(golden_dir, [backend])
        expected = {
            path.removeprefix(f"{backend}/{profile}/"): (f.content, f.executable)
            for path, f in goldens.items()
            if path.startswith(f"{backend}/{profile}/")
        }
        with rendering_from(golden_dir.parent):
            rendered = render_through_jinja(Answers(profile=profile, memory_backend=backend))
        assert by_path(rendered) == expected

    @pytest.mark.parametrize("answers", NAMED, ids=lambda a: f"{a.profile}-{a.memory_backend}")
    def test_it_writes_what_copier_writes_for_answers_of_their_own(self, answers: Answers) -> None:
        assert by_path(render_through_jinja(answers)) == by_path(render_once(answers))

    def test_a_copied_file_keeps_its_exec_bit_and_its_bytes(self, assets_copy: Path) -> None:
        """A file that is no template is copied as it is, exec bit included, as Copier does."""
        script = assets_copy / "templates" / "workspace" / "config" / "cron" / "gates" / "run.sh"
        script.write_bytes(b"#!/bin/sh\nexit 0 # {{ not rendered }}\n")
        script.chmod(0o755)
        with rendering_from(assets_copy):
            quick = render_through_jinja(Answers())
            assert by_path(quick) == by_path(render_once(Answers()))
        assert by_path(quick)["config/cron/gates/run.sh"] == (script.read_bytes(), True)


class TestTheRenderCache:
    def test_one_copier_run_per_profile_and_backend_however_many_names(self) -> None:
        cache = RenderCache()
        names = [Answers(agent_name=f"Agent {n}", user_name=f"Person {n}") for n in range(6)]
        workers = [Answers(profile="worker", agent_name=f"Worker {n}") for n in range(3)]
        for answers in [*names, *workers, names[0]]:
            assert by_path(cache.render(answers)) == by_path(render_once(answers))
        assert cache.renders == 9  # each set of answers once; the repeat is kept
        assert cache.copier_renders == 2  # the first personal and the first worker

    def test_a_quick_render_that_differs_from_copier_is_not_used(self) -> None:
        def differs(answers: Answers) -> list[RenderedFile]:
            return [RenderedFile("AGENTS.md", b"not what Copier writes\n", False)]

        cache = RenderCache(quick_render=differs)
        for n in range(3):
            answers = Answers(agent_name=f"Agent {n}")
            assert by_path(cache.render(answers)) == by_path(render_once(answers))
        assert cache.copier_renders == 3

    def test_the_kept_renders_are_bounded(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(RenderCache, "KEPT_RENDERS", 2)
        cache = RenderCache()
        first = Answers(agent_name="First")
        for name in ("First", "Second", "Third"):
            cache.render(Answers(agent_name=name))
        cache.render(first)
        assert cache.renders == 4  # the first was let go and rendered again


def test_a_fleet_of_named_instances_is_judged_and_updated_as_init_would(
    tmp_path: Path, provision: Provision
) -> None:
    """Six instances with their own names, provisioned by init; after a switch to Loom the
    fleet re-words each in its own names and keeps an agent's line, with two Copier runs."""
    entries = []
    for n in range(6):
        config = tmp_path / f"i{n}" / "config"
        config.mkdir(parents=True)
        (config / "config.yaml").write_text("memory:\n  backend: memu\n")
        profile = "worker" if n % 3 == 2 else "personal"
        provision(
            f"i{n}/ws", "--config-dir", str(config), "--profile", profile,
            "--data", f"agent_name=Agent {n}", "--data", f"timezone={'Asia/Tokyo' if n else 'UTC'}",
        )  # fmt: skip
        entries.append({"workspace": f"i{n}/ws", "config_dir": f"i{n}/config"})
    add_agent_line(tmp_path / "i0" / "ws" / "AGENTS.md")
    inventory = tmp_path / "fleet.yaml"
    inventory.write_text(yaml.safe_dump(entries))
    assert {o.status for o in FleetRun().all(read_inventory(inventory))} == {"up_to_date"}
    for n in range(6):
        (tmp_path / f"i{n}" / "config" / "config.yaml").write_text("memory:\n  backend: loom\n")
    reference = tmp_path / "reference"
    shutil.copytree(tmp_path, reference, ignore=shutil.ignore_patterns("reference"))
    run = FleetRun(update=True, cache=RenderCache())
    assert {o.status for o in run.all(read_inventory(inventory))} == {"up_to_date"}
    assert run.cache.copier_renders == 2 and run.cache.renders == 6
    for n in range(6):  # what init alone writes, workspace by workspace
        provision(f"reference/i{n}/ws", "--config-dir", str(reference / f"i{n}" / "config"))
        assert tree(tmp_path / f"i{n}" / "ws") == tree(reference / f"i{n}" / "ws")
        assert f"Agent {n}" in (tmp_path / f"i{n}" / "ws" / "AGENTS.md").read_text()
    assert AGENT_LINE in (tmp_path / "i0" / "ws" / "AGENTS.md").read_text()
