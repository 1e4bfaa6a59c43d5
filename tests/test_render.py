"""The workspace render itself: profiles, backends, the template as data, the wheel."""

from __future__ import annotations

import subprocess
import sys
import venv

import pytest
import yaml

from provisioner.templating import assets
from provisioner.templating.backends import BACKEND_NAMES, PROFILES
from provisioner.templating.questions import load_questions, question_named
from provisioner.workspace.render import MANIFEST_PATH, Answers, render_workspace
from tests.conftest import REPO_ROOT, clean_environment

PERSONAL_FILES = {"SOUL.md", "IDENTITY.md", "USER.md", "AGENTS.md", "TOOLS.md", "MEMORY.md"}
WORKER_FILES = {"SOUL.md", "AGENTS.md", "TOOLS.md", "MEMORY.md", "TASK.md"}
SHARED_FILES = {
    "skills/nerve-dev/SKILL.md",
    "skills/nerve-workspace/SKILL.md",
    "config/cron/system.yaml",
    "config/cron/jobs.yaml",
    "config/settings.yaml",
    MANIFEST_PATH,
}


@pytest.fixture(scope="module")
def renders(tmp_path_factory) -> dict[tuple[str, str], dict[str, bytes]]:
    """One render per (backend, profile), shared by the tests of this module."""
    out: dict[tuple[str, str], dict[str, bytes]] = {}
    for backend in BACKEND_NAMES:
        for profile in PROFILES:
            folder = tmp_path_factory.mktemp(f"{backend}-{profile}")
            files = render_workspace(Answers(profile=profile, memory_backend=backend), folder)
            out[backend, profile] = {rendered.path: rendered.content for rendered in files}
    return out


class TestProfiles:
    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    def test_personal_gets_its_six_files_and_the_shared_ones(self, renders, backend):
        """BACK-2: personal is SOUL, IDENTITY, USER, AGENTS, TOOLS, MEMORY (+ skills, cron)."""
        assert set(renders[backend, "personal"]) == PERSONAL_FILES | SHARED_FILES

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    def test_worker_gets_its_five_files_and_the_shared_ones(self, renders, backend):
        """BACK-2: worker is SOUL, AGENTS, TOOLS, MEMORY, TASK (+ skills, cron)."""
        assert set(renders[backend, "worker"]) == WORKER_FILES | SHARED_FILES

    def test_only_personal_gets_the_inbox_processor(self, renders):
        """TXT-6: inbox-processor is a personal job."""
        for (_backend, profile), files in renders.items():
            jobs = yaml.safe_load(files["config/cron/system.yaml"])["jobs"]
            ids = [job["id"] for job in jobs]
            expected = ["memory-maintenance", "inbox-processor"]
            assert ids == (expected if profile == "personal" else expected[:1])


class TestAnswersReachTheFiles:
    def test_names_and_timezone_fill_soul_identity_and_user(self, tmp_path):
        """TXT-1: SOUL/IDENTITY/USER are templated so init answers fill them."""
        answers = Answers(agent_name="Orbit", user_name="Ada", timezone="America/Chicago")
        files = {f.path: f.content.decode() for f in render_workspace(answers, tmp_path / "w")}
        assert "Orbit" in files["SOUL.md"] and "Ada" in files["SOUL.md"]
        assert "America/Chicago" in files["IDENTITY.md"]
        assert "**Name:** Ada" in files["USER.md"]

    def test_lockdown_settings_name_the_switch_as_variables(self, tmp_path):
        """CONF-3: a locked workspace's tracked settings take the switch from the environment."""
        files = render_workspace(Answers(lockdown=True), tmp_path / "w")
        settings = next(f for f in files if f.path == "config/settings.yaml").content.decode()
        assert "backend: ${NERVE_MEMORY_BACKEND:-memu}" in settings
        assert "mcp_gateway_url: ${NERVE_MCP_BASE_URL:-}" in settings
        assert "dashboard_url: ${LOOM_DASHBOARD_URL:-}" in settings

    def test_the_manifest_records_answers_and_hashes(self, renders):
        """INIT-4: answers and a hash of every shipped file are recorded in the workspace."""
        import json

        manifest = json.loads(renders["loom", "worker"][MANIFEST_PATH])
        assert manifest["answers"]["memory_backend"] == "loom"
        assert manifest["answers"]["profile"] == "worker"
        assert set(manifest["files"]) == (WORKER_FILES | SHARED_FILES) - {MANIFEST_PATH}


class TestTemplateIsData:
    def test_backend_and_profile_choices_match_the_registry(self):
        """BACK-1: copier.yml offers exactly the registry's backends and profiles."""
        assert question_named("memory_backend").choices == tuple(BACKEND_NAMES)
        assert question_named("profile").choices == PROFILES

    def test_every_question_has_a_type_help_and_default(self):
        """The template declares each question fully, so init can ask and default it."""
        for question in load_questions():
            assert question.type in {"str", "bool"}, question.name
            assert question.help and question.help != question.name, question.name
            assert question.default is not None, question.name

    def test_copier_loads_the_shared_jinja_extension(self):
        """One Jinja environment: Copier's render and the runtime texts share settings."""
        document = yaml.safe_load((assets.template_dir() / "copier.yml").read_text())
        assert document["_jinja_extensions"] == [
            "provisioner.templating.jinja_env.NerveTemplateExtension"
        ]

    def test_the_shared_environment_keeps_trailing_newlines_and_strips_nothing(self):
        """Copier-compatible settings: trailing newline kept, no implicit stripping."""
        from provisioner.templating.jinja_env import make_environment

        environment = make_environment()
        rendered = environment.from_string("{% if true %}\n  a\n{% endif %}\n").render()
        assert rendered == "\n  a\n\n"


@pytest.mark.slow
class TestInstalledWheel:
    def test_a_non_editable_install_carries_templates_and_skills(self, tmp_path):
        """§1: templates/ and skills/ reach the wheel; `nerve init` works from it."""
        wheel_dir = tmp_path / "wheels"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-w",
                str(wheel_dir),
                str(REPO_ROOT),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        wheel = next(wheel_dir.glob("nerve_provisioner-*.whl"))
        environment = tmp_path / "venv"
        venv.create(environment, system_site_packages=True, with_pip=True)
        python = environment / "bin" / "python"
        subprocess.run(
            [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        home = tmp_path / "home"
        home.mkdir()
        env = clean_environment(home)
        where = subprocess.run(
            [str(python), "-c", "import provisioner.templating.assets as a; print(a.asset_root())"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=True,
        )
        assert str(environment) in where.stdout
        nerve = environment / "bin" / "nerve"
        result = subprocess.run(
            [str(nerve), "init", "--non-interactive", "--workspace", str(tmp_path / "ws")],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "ws" / "skills" / "nerve-dev" / "SKILL.md").is_file()
        site_packages = {p for p in environment.rglob("*") if p.is_file()}
        update = subprocess.run(
            [str(nerve), "golden", "update", "--backend", "memu"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert update.returncode == 2 and "not a checkout" in update.stderr, update.stderr
        assert {p for p in environment.rglob("*") if p.is_file()} == site_packages
        core = subprocess.run(
            [
                str(python),
                "-c",
                "import provisioner.templating.backends as b; print(sorted(b.loom_core_tools()))",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=True,
        )
        assert "loom_search" in core.stdout
