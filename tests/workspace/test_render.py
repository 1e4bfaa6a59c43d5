"""The workspace render itself: profiles, backends, the template as data, the wheel."""

from __future__ import annotations

import subprocess
import sys
import venv

import pytest
import yaml

from provisioner.backends import BACKEND_NAMES, PROFILES
from provisioner.templating.folder import active_folder
from provisioner.templating.questions import load_questions, question_named
from provisioner.workspace.render import (
    MANIFEST_PATH,
    Answers,
    TemplateRenderer,
    render_workspace,
)
from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

PERSONAL_FILES = {"SOUL.md", "IDENTITY.md", "USER.md", "AGENTS.md", "TOOLS.md", "MEMORY.md"}
WORKER_FILES = {"SOUL.md", "AGENTS.md", "TOOLS.md", "MEMORY.md"}  # TASK.md only with a task
SHARED_FILES = {
    "skills/nerve-dev/SKILL.md",
    "skills/nerve-workspace/SKILL.md",
    "config/cron/system.yaml",
    "config/cron/jobs.yaml",
    "config/cron/gates/README.md",
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
    def test_worker_without_a_task_gets_four_files_and_the_shared_ones(self, renders, backend):
        """BACK-2: worker is SOUL, AGENTS, TOOLS, MEMORY, TASK (+ skills, cron); NERVE-6: TASK
        only once a task is given, and these renders give none."""
        assert set(renders[backend, "worker"]) == WORKER_FILES | SHARED_FILES

    def test_only_personal_gets_the_inbox_processor(self, renders):
        """TXT-6: inbox-processor is a personal job."""
        for (_backend, profile), files in renders.items():
            jobs = yaml.safe_load(files["config/cron/system.yaml"])["jobs"]
            ids = [job["id"] for job in jobs]
            assert ids[0] == "memory-maintenance"
            assert ("inbox-processor" in ids) == (profile == "personal")


# NERVE-6: Nerve's built-in jobs as nerve/bootstrap.py (ClickHouse/nerve) writes them: id,
# schedule, session mode, and the fields it adds to a persistent job.
NERVES_JOBS = {
    "memory-maintenance": {"schedule": "0 5 * * *", "session_mode": "isolated"},
    "inbox-processor": {
        "schedule": "*/30 * * * *",
        "session_mode": "persistent",
        "context_rotate_hours": 24,
        "reminder_mode": True,
        "run_if": [{"type": "messages", "consumer": "inbox"}],
    },
    "task-planner": {
        "schedule": "0 */4 * * *",
        "session_mode": "persistent",
        "context_rotate_hours": 168,
        "run_if": [{"type": "tasks", "status": "pending"}],
    },
    "skill-extractor": {
        "schedule": "0 */12 * * *",
        "session_mode": "persistent",
        "context_rotate_hours": 168,
    },
    "skill-reviser": {
        "schedule": "0 3 * * 0",
        "session_mode": "persistent",
        "context_rotate_hours": 168,
    },
}
# NERVE-6: which jobs each profile gets, in Nerve's order, and which are on when Nerve's setup
# asks nothing (its non-interactive defaults, the ones its README lists).
NERVES_ENABLED = {
    "personal": {
        "memory-maintenance": True,
        "inbox-processor": True,
        "task-planner": True,
        "skill-extractor": False,
        "skill-reviser": False,
    },
    "worker": {
        "memory-maintenance": True,
        "task-planner": True,
        "skill-extractor": True,
        "skill-reviser": True,
    },
}


def system_jobs(files: dict[str, bytes]) -> list[dict]:
    return yaml.safe_load(files["config/cron/system.yaml"])["jobs"]


class TestNervesBuiltInJobs:
    """NERVE-6: system.yaml carries Nerve's built-in jobs, with Nerve's ids, schedules, modes."""

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("profile", PROFILES)
    def test_each_profile_gets_nerves_jobs_in_nerves_order(self, renders, backend, profile):
        ids = [job["id"] for job in system_jobs(renders[backend, profile])]
        assert ids == list(NERVES_ENABLED[profile])

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("profile", PROFILES)
    def test_each_job_has_nerves_schedule_session_mode_and_run_fields(
        self, renders, backend, profile
    ):
        """Rotation, reminder mode and gates as Nerve writes them; a field Nerve leaves out
        (reminder_mode false, no gate) is left out here too."""
        for job in system_jobs(renders[backend, profile]):
            run_fields = {
                key: job[key]
                for key in job
                if key not in ("id", "description", "prompt", "enabled")
            }
            assert run_fields == NERVES_JOBS[job["id"]], job["id"]

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("profile", PROFILES)
    def test_jobs_are_on_as_nerves_unattended_setup_turns_them_on(self, renders, backend, profile):
        enabled = {job["id"]: job["enabled"] for job in system_jobs(renders[backend, profile])}
        assert enabled == NERVES_ENABLED[profile]

    @pytest.mark.parametrize("profile", PROFILES)
    def test_only_prompts_and_the_maintenance_description_differ_between_backends(
        self, renders, profile
    ):
        """The backend words what a job says, never when or how it runs."""
        memu, loom = (system_jobs(renders[backend, profile]) for backend in ("memu", "loom"))
        for mine, theirs in zip(memu, loom, strict=True):
            assert mine["prompt"] != theirs["prompt"], mine["id"]
            ignored = {"prompt"} | (
                {"description"} if mine["id"] == "memory-maintenance" else set()
            )
            assert {k: v for k, v in mine.items() if k not in ignored} == {
                k: v for k, v in theirs.items() if k not in ignored
            }, mine["id"]

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    def test_every_job_carries_a_description_as_nerves_do(self, renders, backend):
        """Nerve's job list and web UI show it."""
        for job in system_jobs(renders[backend, "personal"]):
            assert isinstance(job["description"], str) and job["description"].strip(), job["id"]


class TestGatesFolder:
    """NERVE-6: config/cron/gates/ exists, as in a workspace Nerve set up, with nothing to run."""

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("profile", PROFILES)
    def test_the_gates_folder_holds_only_a_readme_nerve_never_imports(
        self, renders, backend, profile
    ):
        """Nerve imports the *.py files directly in it: a README keeps the folder, runs nothing."""
        in_gates = [
            path for path in renders[backend, profile] if path.startswith("config/cron/gates/")
        ]
        assert in_gates == ["config/cron/gates/README.md"]
        readme = renders[backend, profile]["config/cron/gates/README.md"].decode()
        assert "`*.py`" in readme and "only files you trust" in readme

    def test_init_creates_the_gates_folder_in_the_workspace(self, run_nerve, tmp_path):
        done = run_nerve("init", "--non-interactive", "--workspace", "ws")
        assert done.returncode == 0, done.stderr
        gates = tmp_path / "ws" / "config" / "cron" / "gates"
        assert gates.is_dir() and not list(gates.glob("*.py"))


class TestTaskFile:
    """NERVE-6: Nerve puts TASK.md into every system prompt, so it is written only with a task."""

    def test_a_worker_without_a_task_gets_no_task_file_and_is_told_to_ask(self, renders):
        files = renders["memu", "worker"]
        assert "TASK.md" not in files
        agents = " ".join(files["AGENTS.md"].decode().split())
        assert "No assignment was given at setup: ask the person who started you" in agents

    def test_a_task_of_blanks_is_no_task(self, tmp_path):
        files = render_workspace(Answers(profile="worker", worker_task="   "), tmp_path / "w")
        assert "TASK.md" not in {rendered.path for rendered in files}

    def test_a_given_task_is_written_as_nerves_own_setup_writes_it(self, tmp_path):
        """``# Task``, a blank line, the task: the shape Nerve's first boot of a worker reads as
        the raw task to work out, with no placeholder sections taken for part of it."""
        answers = Answers(profile="worker", worker_task=" Triage the bug queue ")
        files = {f.path: f.content for f in render_workspace(answers, tmp_path / "w")}
        assert files["TASK.md"] == b"# Task\n\nTriage the bug queue\n"
        first_line = files["AGENTS.md"].decode().splitlines()[2]
        assert (
            first_line
            == "You are Nerve, a worker agent with one assignment, described in `TASK.md`."
        )

    def test_init_writes_task_md_only_when_the_task_is_given(self, run_nerve, tmp_path):
        worker = ("init", "--non-interactive", "--profile", "worker")
        given = run_nerve(*worker, "--workspace", "given", "--data", "worker_task=Watch CI")
        blank = run_nerve(*worker, "--workspace", "blank")
        assert given.returncode == 0 and blank.returncode == 0, given.stderr + blank.stderr
        assert (tmp_path / "given" / "TASK.md").read_text() == "# Task\n\nWatch CI\n"
        assert not (tmp_path / "blank" / "TASK.md").exists()
        assert (tmp_path / "blank" / "AGENTS.md").is_file()


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

    @pytest.mark.parametrize("backend", BACKEND_NAMES)
    @pytest.mark.parametrize("lockdown", [True, False])
    def test_the_settings_file_alone_renders_as_the_whole_render_has_it(
        self, tmp_path, backend, lockdown
    ):
        """CONF-3: init reads the settings it is about to place from this one-file render."""
        answers = Answers(memory_backend=backend, lockdown=lockdown)
        files = {f.path: f.content for f in render_workspace(answers, tmp_path / "w")}
        assert TemplateRenderer().tracked_settings(answers) == files["config/settings.yaml"]

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
        document = yaml.safe_load((active_folder().template_dir / "copier.yml").read_text())
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
            [
                str(python),
                "-c",
                "import provisioner.templating.folder as f; print(f.active_folder().root)",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=True,
        )
        assert str(environment) in where.stdout
        command = environment / "bin" / "nerve-provisioner"  # NERVE-1: no `nerve` script
        assert not (environment / "bin" / "nerve").exists()
        result = subprocess.run(
            [str(command), "init", "--non-interactive", "--workspace", str(tmp_path / "ws")],
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
            [str(command), "golden", "update", "--backend", "memu"],
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
                "import provisioner.templating.folder as f; print(sorted(f.loom_core_tools()))",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=True,
        )
        assert "loom_search" in core.stdout
