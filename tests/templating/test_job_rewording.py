"""Built-in jobs keep working when an instance moves from memU to Loom (TXT-7).

A workspace provisioned for memU, by this package or by Nerve's own bootstrap, keeps its cron
files after the switch. Its maintenance job must then not run memU's prompt, which deletes and
prunes, against Loom's tools; but a prompt someone wrote or edited is theirs and runs as
written.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from provisioner import __version__
from provisioner.templating import jobs
from provisioner.templating.backends import MEMU_TOOLS, loom_core_tools
from provisioner.templating.jobs import (
    NERVE_BOOTSTRAP,
    effective_job_prompt,
    is_shipped_memu_prompt,
    load_cron_jobs,
    prompt_digest,
    record_current_memu_prompts,
    reword_jobs,
    shipped_memu_digests,
    unrecorded_memu_prompts,
)
from provisioner.templating.texts import JOB_PROMPTS, NERVES_OWN_LOOM_TOOLS, job_prompt
from provisioner.templating.wording import loom_tools_named, memu_tools_named
from provisioner.workspace.render import Answers, render_workspace


@pytest.fixture(scope="module")
def memu_cron(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``config/cron`` of a personal workspace really rendered for memU."""
    destination = tmp_path_factory.mktemp("memu-personal") / "workspace"
    render_workspace(Answers(profile="personal", memory_backend="memu"), destination)
    return destination / "config" / "cron"


@pytest.fixture
def cron_dir(memu_cron: Path, tmp_path: Path) -> Path:
    """A private copy of the memU cron folder, to edit."""
    target = tmp_path / "cron"
    shutil.copytree(memu_cron, target)
    return target


def jobs_by_id(loaded: list[dict]) -> dict[str, dict]:
    return {job["id"]: job for job in loaded}


def file_jobs(path: Path) -> dict[str, dict]:
    return jobs_by_id(yaml.safe_load(path.read_text(encoding="utf-8"))["jobs"])


WriteRegistry = Callable[[dict], None]


def read_registry(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteRegistry]:
    """Point the shipped-prompt registry at a file of the test's own making (none at first).

    The registry holds digests; ``write`` takes ``{shipper: {job_id: [prompt, …]}}`` and
    records each prompt's digest, as the real file does.
    """
    path = tmp_path / "shipped-memu-prompts.json"

    def write(content: dict) -> None:
        digests = {
            shipper: {job: [prompt_digest(p) for p in prompts] for job, prompts in by_job.items()}
            for shipper, by_job in content.items()
        }
        path.write_text(json.dumps(digests), encoding="utf-8")

    monkeypatch.setattr(jobs, "shipped_prompts_file", lambda: path)
    monkeypatch.setattr(jobs, "shipped_memu_digests", lambda: read_registry(path))
    yield write


class TestShippedJobRewording:
    """TXT-7: a shipped memU prompt runs in its Loom wording while the backend is Loom."""

    def test_a_system_yaml_rendered_for_memu_gets_the_loom_prompts_under_loom(
        self, cron_dir: Path
    ) -> None:
        loaded = jobs_by_id(load_cron_jobs(cron_dir, "loom"))
        assert set(loaded) == set(JOB_PROMPTS)
        for job_id, job in loaded.items():
            assert job["prompt"] == job_prompt(job_id, "loom")

    def test_only_the_prompt_changes(self, cron_dir: Path) -> None:
        """Schedule, mode and conditions of a built-in job are the file's, whatever the backend."""
        written = file_jobs(cron_dir / "system.yaml")
        for job_id, job in jobs_by_id(load_cron_jobs(cron_dir, "loom")).items():
            assert {**job, "prompt": None} == {**written[job_id], "prompt": None}

    def test_under_memu_nothing_changes(self, cron_dir: Path) -> None:
        assert jobs_by_id(load_cron_jobs(cron_dir, "memu")) == file_jobs(cron_dir / "system.yaml")

    def test_the_rendered_memu_prompts_are_recorded_as_shipped(self, memu_cron: Path) -> None:
        for job_id, job in file_jobs(memu_cron / "system.yaml").items():
            assert is_shipped_memu_prompt(job_id, job["prompt"])

    def test_this_versions_memu_prompts_are_all_in_the_registry(self) -> None:
        """Otherwise an install of this version would never be reworded after a switch."""
        assert unrecorded_memu_prompts() == []
        assert __version__ in shipped_memu_digests()

    def test_reword_jobs_leaves_the_parsed_document_as_it_was(self, memu_cron: Path) -> None:
        """The loader works on a copy, so a caller can still write back what it read."""
        document = yaml.safe_load((memu_cron / "system.yaml").read_text(encoding="utf-8"))
        before = json.dumps(document, sort_keys=True)
        reworded = reword_jobs(document, "loom")
        assert json.dumps(document, sort_keys=True) == before
        assert reworded["jobs"][0]["prompt"] != document["jobs"][0]["prompt"]


class TestEditedPrompts:
    """TXT-7: a prompt that is not byte for byte a shipped one runs as written."""

    @pytest.mark.parametrize(
        ("job_id", "old", "new"),
        [
            ("memory-maintenance", "Update rather than delete.", "Update rather than delete!"),
            ("inbox-processor", "Process the inbox:", "Process the inbox;"),
        ],
    )
    def test_a_prompt_edited_by_one_byte_runs_as_written(
        self, cron_dir: Path, job_id: str, old: str, new: str
    ) -> None:
        system = cron_dir / "system.yaml"
        raw = system.read_text(encoding="utf-8")
        assert raw.count(old) == 1
        system.write_text(raw.replace(old, new), encoding="utf-8")
        edited = file_jobs(system)[job_id]["prompt"]
        assert edited == job_prompt(job_id, "memu").replace(old, new)

        loaded = jobs_by_id(load_cron_jobs(cron_dir, "loom"))
        assert loaded[job_id]["prompt"] == edited

    def test_a_prompt_with_one_more_trailing_newline_runs_as_written(self) -> None:
        prompt = job_prompt("memory-maintenance", "memu") + "\n"
        assert effective_job_prompt("memory-maintenance", prompt, "loom") == prompt

    def test_a_shipped_prompt_under_another_jobs_id_runs_as_written(self) -> None:
        """Shipped means shipped for that job: the inbox prompt is no maintenance prompt."""
        prompt = job_prompt("inbox-processor", "memu")
        assert effective_job_prompt("memory-maintenance", prompt, "loom") == prompt

    def test_a_users_own_job_with_a_memu_prompt_runs_as_written(self) -> None:
        prompt = job_prompt("memory-maintenance", "memu")
        assert effective_job_prompt("weekly-review", prompt, "loom") == prompt


class TestOldInstallWithOnlyJobsYaml:
    """TXT-7: an install from before system.yaml kept its built-in jobs in jobs.yaml."""

    def test_the_shipped_memu_prompts_in_jobs_yaml_are_reworded_too(self, cron_dir: Path) -> None:
        (cron_dir / "system.yaml").rename(cron_dir / "jobs.yaml")
        loaded = jobs_by_id(load_cron_jobs(cron_dir, "loom"))
        assert set(loaded) == set(JOB_PROMPTS)
        for job_id, job in loaded.items():
            assert job["prompt"] == job_prompt(job_id, "loom")

    def test_an_edited_prompt_in_jobs_yaml_runs_as_written(self, cron_dir: Path) -> None:
        raw = (cron_dir / "system.yaml").read_text(encoding="utf-8")
        (cron_dir / "system.yaml").unlink()
        (cron_dir / "jobs.yaml").write_text(
            raw.replace("for yesterday's date", "for today's date"), encoding="utf-8"
        )
        loaded = jobs_by_id(load_cron_jobs(cron_dir, "loom"))
        assert "today's date" in loaded["memory-maintenance"]["prompt"]
        assert "mcp__nerve__memory_records_by_date" in loaded["memory-maintenance"]["prompt"]
        assert loaded["inbox-processor"]["prompt"] == job_prompt("inbox-processor", "loom")


class TestUserJobsReplaceBuiltInOnes:
    """A job in jobs.yaml with a built-in job's id replaces the built-in one."""

    def test_a_jobs_yaml_job_with_the_same_id_replaces_the_system_one(self, cron_dir: Path) -> None:
        own = {
            "id": "memory-maintenance",
            "schedule": "0 5 * * 0",
            "prompt": "Summarise the week's memories for me.\n",
        }
        mine = {"id": "weekly-review", "schedule": "0 9 * * 1", "prompt": "Plan the week.\n"}
        (cron_dir / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [own, mine]}), encoding="utf-8")
        loaded = load_cron_jobs(cron_dir, "loom")
        ids = [job["id"] for job in loaded]
        assert sorted(ids) == sorted([*JOB_PROMPTS, "weekly-review"])
        by_id = jobs_by_id(loaded)
        assert by_id["memory-maintenance"] == own
        assert by_id["weekly-review"] == mine
        assert by_id["inbox-processor"]["prompt"] == job_prompt("inbox-processor", "loom")


class TestShippedPromptRegistry:
    """TXT-7: every memU prompt any version shipped counts, not only this version's."""

    OLD = "Tidy up memU: merge, prune and delete yesterday's records.\n"

    def test_a_prompt_recorded_for_an_older_version_still_counts_as_shipped(
        self, registry: WriteRegistry
    ) -> None:
        registry({"0.0.1": {"memory-maintenance": [self.OLD]}, "0.1.0": {}})
        assert is_shipped_memu_prompt("memory-maintenance", self.OLD)
        loom = job_prompt("memory-maintenance", "loom")
        assert effective_job_prompt("memory-maintenance", self.OLD, "loom") == loom

    def test_an_old_prompt_in_an_old_install_is_reworded(
        self, registry: WriteRegistry, tmp_path: Path
    ) -> None:
        registry({"0.0.1": {"memory-maintenance": [self.OLD]}})
        cron = tmp_path / "old-cron"
        cron.mkdir()
        old_job = {"id": "memory-maintenance", "schedule": "30 3 * * *", "prompt": self.OLD}
        (cron / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [old_job]}), encoding="utf-8")
        (loaded,) = load_cron_jobs(cron, "loom")
        assert loaded["prompt"] == job_prompt("memory-maintenance", "loom")

    def test_the_registry_decides_what_counts_as_shipped(self, registry: WriteRegistry) -> None:
        """With a registry that lacks the current prompt, the current prompt runs as written:
        the comparison is with the record, not with whatever the templates render today."""
        registry({"0.0.1": {"memory-maintenance": [self.OLD]}})
        current = job_prompt("memory-maintenance", "memu")
        assert not is_shipped_memu_prompt("memory-maintenance", current)
        assert effective_job_prompt("memory-maintenance", current, "loom") == current

    def test_a_missing_registry_rewords_nothing(self, registry: WriteRegistry) -> None:
        assert not jobs.shipped_prompts_file().exists()
        assert jobs.shipped_memu_digests() == {}
        assert effective_job_prompt("memory-maintenance", self.OLD, "loom") == self.OLD

    def test_under_memu_even_a_shipped_prompt_is_left_alone(self, registry: WriteRegistry) -> None:
        registry({"0.0.1": {"memory-maintenance": [self.OLD]}})
        assert effective_job_prompt("memory-maintenance", self.OLD, "memu") == self.OLD


# TXT-7: the SHA-256 of the two memU prompts Nerve's bootstrap (nerve/bootstrap.py of
# ClickHouse/nerve, CORE_CRONS and PRODUCTIVITY_CRONS) writes to system.yaml, as a job reads them
# back. Every commit of that file to date holds these two; docs/cron.md says how to derive them.
NERVE_PROMPT_DIGESTS = {
    "memory-maintenance": "0c5962b1318c069c58ed8bb1d359ea10d934214f1581d8c49ecbcec2e572be35",
    "inbox-processor": "9b499c3ac89982d60aae9dfbd8fcafb1acbc6ac6810228e918e30f132d072f76",
}
HEX_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class TestNervesOwnShippedPrompts:
    """TXT-7 for real installs: Nerve's bootstrap wrote its own memU prompts to system.yaml."""

    def test_the_registry_holds_the_digests_of_nerves_current_prompts(self) -> None:
        recorded = shipped_memu_digests()[NERVE_BOOTSTRAP]
        for job_id, digest in NERVE_PROMPT_DIGESTS.items():
            assert digest in recorded[job_id], job_id

    def test_the_registry_holds_digests_and_never_a_prompt_text(self) -> None:
        """Prompts this package did not write are recorded by digest only."""
        for shipper, by_job in shipped_memu_digests().items():
            for job_id, digests in by_job.items():
                assert job_id in JOB_PROMPTS, (shipper, job_id)
                assert digests and all(HEX_DIGEST.match(d) for d in digests), (shipper, job_id)

    def test_a_nerve_install_switched_to_loom_gets_the_loom_maintenance_prompt(
        self, registry: WriteRegistry, tmp_path: Path
    ) -> None:
        """A prompt as Nerve's bootstrap writes it (``yaml.safe_dump``: long lines folded,
        non-ASCII escaped) is recognised by the digest of the string a job loads back."""
        stand_in = (
            "You are running a daily memory job \u2014 work silently.\n\n"
            + "A line long enough for the dumper to fold it across lines. " * 4
            + "\n"
        )
        registry({NERVE_BOOTSTRAP: {"memory-maintenance": [stand_in]}})
        cron = tmp_path / "nerve-cron"
        cron.mkdir()
        job = {"id": "memory-maintenance", "schedule": "0 5 * * *", "prompt": stand_in}
        with open(cron / "system.yaml", "w", encoding="utf-8") as handle:
            handle.write("# System cron jobs, written by the bootstrap.\n\n")
            yaml.safe_dump({"jobs": [job]}, handle, default_flow_style=False, sort_keys=False)
        (loaded,) = load_cron_jobs(cron, "loom")
        assert loaded["prompt"] == job_prompt("memory-maintenance", "loom")

    def test_a_digest_is_the_sha256_of_the_prompts_utf8_bytes(self) -> None:
        abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2
        assert prompt_digest("abc") == abc
        assert prompt_digest("\u00e9") == hashlib.sha256(b"\xc3\xa9").hexdigest()


class TestRecordingThisVersionsPrompts:
    """TXT-7: ``golden update --backend memu`` records digests and never drops one."""

    def test_recording_adds_this_versions_digests_and_keeps_every_other(
        self, registry: WriteRegistry
    ) -> None:
        registry({"0.0.1": {"memory-maintenance": ["an old prompt\n"]}})
        before = jobs.shipped_memu_digests()
        assert record_current_memu_prompts() is True
        after = jobs.shipped_memu_digests()
        assert after["0.0.1"] == before["0.0.1"]
        for job_id in JOB_PROMPTS:
            assert after[__version__][job_id] == [prompt_digest(job_prompt(job_id, "memu"))]

    def test_recording_twice_writes_once(self, registry: WriteRegistry) -> None:
        registry({})
        assert record_current_memu_prompts() is True
        assert record_current_memu_prompts() is False
        assert unrecorded_memu_prompts() == []


class TestCronFilesThatAreNotJobLists:
    """A cron file that is not a mapping with a ``jobs`` list is refused, never half read."""

    def test_a_file_that_is_not_a_jobs_mapping_is_refused(self, cron_dir: Path) -> None:
        (cron_dir / "jobs.yaml").write_text("- id: a\n", encoding="utf-8")
        with pytest.raises(ValueError, match="jobs"):
            load_cron_jobs(cron_dir, "loom")

    def test_a_job_without_an_id_is_refused_not_dropped(self, cron_dir: Path) -> None:
        """A job the loader cannot name would vanish silently; it is an error instead."""
        (cron_dir / "jobs.yaml").write_text(
            "jobs:\n  - id: a\n    prompt: x\n  - prompt: y\n", encoding="utf-8"
        )
        with pytest.raises(ValueError, match=r"jobs\[1\].*'id'"):
            load_cron_jobs(cron_dir, "loom")


# NERVE-6: the built-in jobs Nerve has besides memory-maintenance and inbox-processor.
NERVES_OTHER_JOBS = ("task-planner", "skill-extractor", "skill-reviser")


@pytest.fixture(scope="module")
def memu_worker_cron(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``config/cron`` of a worker workspace really rendered for memU."""
    destination = tmp_path_factory.mktemp("memu-worker") / "workspace"
    render_workspace(Answers(profile="worker", memory_backend="memu"), destination)
    return destination / "config" / "cron"


class TestNervesOtherJobsUnderLoom:
    """NERVE-6, TXT-7: the task and skill jobs, worded per backend and re-worded like the rest."""

    def test_a_memu_worker_switched_to_loom_runs_every_job_in_its_loom_wording(
        self, memu_worker_cron: Path
    ) -> None:
        loaded = jobs_by_id(load_cron_jobs(memu_worker_cron, "loom"))
        assert set(loaded) == {"memory-maintenance", *NERVES_OTHER_JOBS}
        for job_id, job in loaded.items():
            assert job["prompt"] == job_prompt(job_id, "loom"), job_id

    @pytest.mark.parametrize("job_id", NERVES_OTHER_JOBS)
    def test_the_memu_prompt_names_memory_only_through_memus_tools(self, job_id: str) -> None:
        prompt = job_prompt(job_id, "memu")
        assert memu_tools_named(prompt), job_id
        assert loom_tools_named(prompt) == set()
        assert all(f"mcp__nerve__{tool}" in prompt for tool in memu_tools_named(prompt))

    @pytest.mark.parametrize("job_id", NERVES_OTHER_JOBS)
    def test_the_loom_prompt_names_only_loom_tools_the_agent_has_by_default(
        self, job_id: str
    ) -> None:
        """Loom's default list, less the extraction tool that is Nerve's own, never memU's."""
        prompt = job_prompt(job_id, "loom")
        allowed = loom_core_tools() - NERVES_OWN_LOOM_TOOLS
        assert loom_tools_named(prompt) and loom_tools_named(prompt) <= allowed
        assert all(f"mcp__loom__{tool}" in prompt for tool in loom_tools_named(prompt))
        assert memu_tools_named(prompt) == set()

    @pytest.mark.parametrize("job_id", NERVES_OTHER_JOBS)
    def test_both_wordings_ask_for_the_same_nerve_tools_apart_from_memory(
        self, job_id: str
    ) -> None:
        """Only the memory steps are re-worded: tasks, plans, skills and notify stay the same."""

        def nerve_tools(prompt: str) -> set[str]:
            named = set(re.findall(r"mcp__nerve__(\w+)", prompt))
            return named - set(MEMU_TOOLS)

        memu, loom = job_prompt(job_id, "memu"), job_prompt(job_id, "loom")
        assert nerve_tools(memu) == nerve_tools(loom)
        assert "notify" in nerve_tools(memu)

    @pytest.mark.parametrize(
        ("job_id", "plan_type"),
        [("skill-extractor", "skill-create"), ("skill-reviser", "skill-update")],
    )
    def test_a_skill_job_proposes_through_the_approval_flow_with_its_plan_type(
        self, job_id: str, plan_type: str
    ) -> None:
        """Nerve carries out an approved skill plan with skill_create or skill_update by its
        plan type; a plan without one would be carried out as a generic task."""
        for backend in ("memu", "loom"):
            prompt = " ".join(job_prompt(job_id, backend).split())
            assert f'`mcp__nerve__task_create` and `source: "{job_id}"`' in prompt
            assert f'`mcp__nerve__plan_propose` and `plan_type: "{plan_type}"`' in prompt

    def test_a_skill_job_turned_on_in_jobs_yaml_keeps_its_loom_wording(
        self, cron_dir: Path
    ) -> None:
        """docs/cron.md: copy the job into jobs.yaml to turn it on; its unedited prompt is still
        a shipped one, so under Loom it runs in Loom's wording."""
        job = {**file_jobs(cron_dir / "system.yaml")["skill-extractor"], "enabled": True}
        (cron_dir / "jobs.yaml").write_text(yaml.safe_dump({"jobs": [job]}), encoding="utf-8")
        loaded = jobs_by_id(load_cron_jobs(cron_dir, "loom"))["skill-extractor"]
        assert loaded["enabled"] is True
        assert loaded["prompt"] == job_prompt("skill-extractor", "loom")

    def test_a_task_planner_prompt_this_package_did_not_ship_runs_as_written(self) -> None:
        """Nerve's own prompts of these jobs are not recorded (they name no memory tool)."""
        prompt = "Pick one open task and propose a plan with plan_propose.\n"
        assert effective_job_prompt("task-planner", prompt, "loom") == prompt
