"""``nerve doctor`` lints the workspace's own files for tools the backend's sessions lack (OPS-2).

Every test provisions with the real ``nerve init``, edits files as an agent or a person would,
and runs the real ``nerve doctor --offline``. The places doctor reports are checked against
the lines that were planted, and the command it advises is run as printed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from provisioner.doctor.wording import (
    FINDINGS_PER_FILE,
    FINDINGS_SHOWN,
    LINT_FILE_MAX_BYTES,
    LINT_MAX_FILES,
    MENTIONS_COUNTED_MAX,
    SKILLS_MAX_ENTRIES,
)
from provisioner.templating.folder import loom_core_tools
from tests.doctor.test_doctor import Instance, assert_text_matches_json, by_id
from tests.runner import run_cli
from tests.support.processes import RunNerve, clean_environment

LOOM_CONFIG = "memory:\n  backend: loom\nmcp_gateway_url: http://127.0.0.1:9\n"
MEMU_CONFIG = "memory:\n  backend: memu\n"
NOT_DEFAULT = "loom_memory_purge_everything"  # a loom_* name no default list will hold
# What a personal workspace gives the lint to read: six prompt files, two skills, two job files.
SHIPPED_READ = 10
PLANTED_MEMU = "Keep each fact with `mcp__nerve__memorize` before the session ends.\n"


def _init(root: Path, *flags: str) -> Path:
    """A workspace provisioned by the real ``nerve init`` under ``root`` (in this process)."""
    (root / "home").mkdir(parents=True, exist_ok=True)
    done = run_cli(
        ["init", "--non-interactive", "--workspace", "ws", "--config-dir", "cfg", *flags],
        env=clean_environment(root / "home"),
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    return root / "ws"


@pytest.fixture(scope="module")
def memu_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _init(tmp_path_factory.mktemp("memu"))


@pytest.fixture(scope="module")
def loom_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _init(tmp_path_factory.mktemp("loom"), "--memory-backend", "loom")


@pytest.fixture
def memu(tmp_path: Path, run_nerve: RunNerve, memu_workspace: Path) -> Instance:
    return Instance(tmp_path / "instance", run_nerve, memu_workspace)


@pytest.fixture
def loom(tmp_path: Path, run_nerve: RunNerve, loom_workspace: Path) -> Instance:
    instance = Instance(tmp_path / "instance", run_nerve, loom_workspace)
    instance.configure(LOOM_CONFIG)
    return instance


def plant(path: Path, text: str, *, after_line: int) -> int:
    """Insert ``text`` after line ``after_line`` of ``path``; the planted line's number."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(after_line, text)
    path.write_text("".join(lines), encoding="utf-8")
    return after_line + 1


def places(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The places' ``workspace.tool_names.FILE:LINE:TOOL`` checks, in order."""
    return [c for c in report["checks"] if c["id"].startswith("workspace.tool_names.")]


def head(report: dict[str, Any]) -> dict[str, Any]:
    return by_id(report)["workspace.tool_names"]


def advised_command(advice: str) -> list[str]:
    """The command between the backticks of a place's advice."""
    assert advice.startswith("`") and advice.endswith("` shows the shipped wording"), advice
    return shlex.split(advice[1 : advice.index("`", 1)])


class TestAfterASwitchToLoom:
    """Issue scenario: memU, an edited MEMORY.md, the switch, and the edit kept in the file."""

    @pytest.fixture
    def switched(self, memu: Instance, run_nerve: RunNerve) -> tuple[Instance, int]:
        line = plant(memu.workspace / "MEMORY.md", PLANTED_MEMU, after_line=3)
        memu.configure(LOOM_CONFIG, name="config.local.yaml")
        done = run_nerve(
            "init",
            "--non-interactive",
            "--memory-backend",
            "loom",
            "--workspace",
            str(memu.workspace),
            "--config-dir",
            str(memu.config_dir),
        )
        assert done.returncode == 0, done.stderr
        # FLEET-3: the edit is kept and Loom's wording merged in around it
        assert "merged     MEMORY.md" in done.stdout, "init must keep the edit"
        merged = (memu.workspace / "MEMORY.md").read_text(encoding="utf-8").splitlines()
        assert merged.index(PLANTED_MEMU.rstrip("\n")) + 1 == line
        return memu, line

    def test_a_kept_memory_md_naming_a_memu_tool_warns_with_file_and_line(
        self, switched: tuple[Instance, int]
    ) -> None:
        """OPS-2: file:line, the tool, and the nerve diff command."""
        instance, line = switched
        report = instance.doctor_json("--offline")
        first = places(report)[0]
        assert first["status"] == "WARN"
        assert first["message"] == (
            f"MEMORY.md:{line}: names mcp__nerve__memorize, which Loom sessions do not have"
        )
        assert first["advice"] == (
            f"`python -m provisioner diff --workspace {instance.workspace} MEMORY.md` shows the "
            "shipped wording"
        )
        assert first["source"] == f"{instance.workspace / 'MEMORY.md'}:{line}"
        assert head(report)["status"] == "WARN"
        assert report["summary"]["exit_status"] == 0, "a wording problem is no ERR"

    def test_only_the_edited_file_is_reported(self, switched: tuple[Instance, int]) -> None:
        """Every file init re-worded names Loom's tools; the kept one alone names memU's."""
        instance, _line = switched
        report = instance.doctor_json("--offline")
        assert {c["message"].split(":", 1)[0] for c in places(report)} == {"MEMORY.md"}
        assert head(report)["message"].startswith(
            f"{SHIPPED_READ} files the agent reads: 1 names tools"
        )

    def test_the_advised_nerve_diff_runs_and_shows_the_planted_line(
        self, switched: tuple[Instance, int], run_nerve: RunNerve
    ) -> None:
        """The command in the advice works as printed, with a workspace-relative file."""
        instance, _line = switched
        command = advised_command(places(instance.doctor_json("--offline"))[0]["advice"])
        assert command[:4] == ["python", "-m", "provisioner", "diff"]
        shown = run_nerve(*command[3:])
        assert shown.returncode == 1, shown.stderr  # 1: it showed a difference
        assert "-" + PLANTED_MEMU in shown.stdout
        assert "+++ nerve-init/MEMORY.md" in shown.stdout

    def test_text_and_json_carry_the_same_places(self, switched: tuple[Instance, int]) -> None:
        instance, line = switched
        text = instance.doctor("--offline").stdout
        assert_text_matches_json(text, instance.doctor_json("--offline"))
        named = f"workspace.tool_names.MEMORY.md:{line}:mcp__nerve__memorize"
        assert f"[WARN] {named}: MEMORY.md:{line}: names" in text


class TestBeforeInitRuns:
    def test_shipped_files_are_left_to_the_wording_check_and_edits_name_the_backend(
        self, memu: Instance, run_nerve: RunNerve
    ) -> None:
        """memory.backend switched, init not run yet: workspace.wording names the fix for the
        shipped files; the edited one is listed, its diff against Loom's wording."""
        line = plant(memu.workspace / "MEMORY.md", PLANTED_MEMU, after_line=1)
        memu.configure(LOOM_CONFIG)
        report = memu.doctor_json("--offline")
        assert by_id(report)["workspace.wording"]["status"] == "WARN"
        assert {c["message"].split(":", 1)[0] for c in places(report)} == {"MEMORY.md"}
        assert "left to workspace.wording" in head(report)["message"]
        first = places(report)[0]
        assert first["message"].startswith(f"MEMORY.md:{line}: names mcp__nerve__memorize")
        command = advised_command(first["advice"])
        assert command[4:8] == ["--workspace", str(memu.workspace), "--memory-backend", "loom"]
        shown = run_nerve(*command[3:])
        assert shown.returncode == 1 and "mcp__loom__loom_memory_set" in shown.stdout


class TestCleanWorkspaces:
    def test_a_clean_loom_workspace_has_no_such_warning(self, loom: Instance) -> None:
        report = loom.doctor_json("--offline")
        assert head(report)["status"] == "OK"
        assert head(report)["message"] == (
            f"{SHIPPED_READ} files the agent reads: none names a tool Loom sessions do not have"
        )
        assert places(report) == []

    def test_a_clean_memu_workspace_has_no_such_warning(self, memu: Instance) -> None:
        memu.configure(MEMU_CONFIG)
        report = memu.doctor_json("--offline")
        assert head(report)["status"] == "OK"
        assert places(report) == []


class TestWhatIsNamed:
    def test_a_loom_tool_in_a_memu_workspace_warns(self, memu: Instance) -> None:
        """OPS-2 the other way round: memU sessions have no loom_* tool."""
        memu.configure(MEMU_CONFIG)
        line = plant(
            memu.workspace / "AGENTS.md", "Search with `loom_search` first.\n", after_line=2
        )
        only = places(memu.doctor_json("--offline"))
        assert [c["message"] for c in only] == [
            f"AGENTS.md:{line}: names mcp__loom__loom_search, which memU sessions do not have"
        ]

    def test_a_loom_tool_outside_the_default_list_warns_under_loom(self, loom: Instance) -> None:
        """BACK-4: sessions get Loom's default tools, and only those are named."""
        assert NOT_DEFAULT not in loom_core_tools()
        planted = f"Wipe with `mcp__loom__{NOT_DEFAULT}`.\n"
        line = plant(loom.workspace / "TOOLS.md", planted, after_line=0)
        only = places(loom.doctor_json("--offline"))
        assert [c["message"] for c in only] == [
            f"TOOLS.md:{line}: names mcp__loom__{NOT_DEFAULT}, which is not among the tools "
            "Loom sessions get by default"
        ]

    def test_a_bare_backticked_memu_tool_counts_and_prose_does_not(self, loom: Instance) -> None:
        path = loom.workspace / "SOUL.md"
        path.write_text(
            "I memorize names easily.\n\nUse `memory_recall` for the past.\n", encoding="utf-8"
        )
        only = places(loom.doctor_json("--offline"))
        assert [c["message"] for c in only] == [
            "SOUL.md:3: names mcp__nerve__memory_recall, which Loom sessions do not have"
        ]

    @pytest.mark.parametrize("ending", ["\r\n", "\r"])
    def test_lines_are_counted_with_any_line_ending(self, loom: Instance, ending: str) -> None:
        text = ending.join(["# Me", "", "", "call mcp__nerve__memorize", ""])
        (loom.workspace / "USER.md").write_bytes(text.encode("utf-8"))
        only = places(loom.doctor_json("--offline"))
        assert only[0]["message"].startswith("USER.md:4: names mcp__nerve__memorize")

    def test_a_skill_the_agent_wrote_has_advice_without_a_diff(self, loom: Instance) -> None:
        """A file init never wrote has no shipped wording: the advice says so."""
        skill = loom.workspace / "skills" / "mine" / "SKILL.md"
        skill.parent.mkdir()
        skill.write_text("---\nname: mine\n---\nUse `memorize`.\n", encoding="utf-8")
        only = places(loom.doctor_json("--offline"))
        assert only[0]["message"] == (
            "skills/mine/SKILL.md:4: names mcp__nerve__memorize, which Loom sessions do not have"
        )
        assert "nerve init did not record" in only[0]["advice"]

    def test_a_workspace_init_never_provisioned_is_linted_too(self, loom: Instance) -> None:
        (loom.workspace / ".nerve/provisioned.json").unlink()
        plant(loom.workspace / "MEMORY.md", PLANTED_MEMU, after_line=0)
        only = places(loom.doctor_json("--offline"))
        assert only[0]["message"].startswith("MEMORY.md:1: names mcp__nerve__memorize")
        assert "nerve init did not record" in only[0]["advice"]


USER_JOB = """\
# Mine. A comment naming mcp__nerve__memorize is shown to no agent.
jobs:
  - id: weekly-notes
    description: a description naming mcp__nerve__memorize is shown to no agent either
    schedule: "0 9 * * 1"
    prompt: |
      Read the week's notes.
      Keep each fact with `mcp__nerve__memorize`.
"""


class TestCronPrompts:
    """OPS-2, TXT-7: a job's prompt is put before an agent, so it is linted; the rest of a job
    file is not, nor a built-in prompt the loader runs in the backend's own wording."""

    def test_a_user_job_s_prompt_naming_a_memu_tool_warns_at_its_line(self, loom: Instance) -> None:
        (loom.workspace / "config/cron/jobs.yaml").write_text(USER_JOB, encoding="utf-8")
        only = places(loom.doctor_json("--offline"))
        assert [c["message"] for c in only] == [
            "config/cron/jobs.yaml:8: names mcp__nerve__memorize, which Loom sessions do not have"
        ]
        assert only[0]["advice"] == (
            f"`python -m provisioner diff --workspace {loom.workspace} config/cron/jobs.yaml` "
            "shows the "
            "shipped wording"
        )

    def test_shipped_memu_prompts_the_loader_rewords_are_not_reported(self, memu: Instance) -> None:
        """A memU workspace's system.yaml, edited (a schedule) and kept after the switch: its
        built-in prompts still name memU's tools, and run in Loom's wording all the same."""
        system = memu.workspace / "config/cron/system.yaml"
        text = system.read_text(encoding="utf-8")
        assert "mcp__nerve__" in text
        system.write_text(text.replace('"0 5 * * *"', '"0 6 * * *"'), encoding="utf-8")
        memu.configure(LOOM_CONFIG)
        report = memu.doctor_json("--offline")
        assert "config/cron/system.yaml" not in json.dumps(places(report))
        assert "not read" not in head(report)["message"]

    def test_an_edited_built_in_prompt_runs_as_written_and_is_linted(self, memu: Instance) -> None:
        system = memu.workspace / "config/cron/system.yaml"
        lines = system.read_text(encoding="utf-8").splitlines(keepends=True)
        first_prompt = next(n for n, line in enumerate(lines) if line.strip() == "prompt: |")
        lines.insert(first_prompt + 1, "      Also call `mcp__nerve__memorize` once.\n")
        system.write_text("".join(lines), encoding="utf-8")
        memu.configure(LOOM_CONFIG)
        messages = [c["message"] for c in places(memu.doctor_json("--offline"))]
        assert messages[0] == (
            f"config/cron/system.yaml:{first_prompt + 2}: names mcp__nerve__memorize, "
            "which Loom sessions do not have"
        )
        assert all(m.startswith("config/cron/system.yaml:") for m in messages)

    def test_under_memu_a_job_naming_a_loom_tool_warns(self, memu: Instance) -> None:
        memu.configure(MEMU_CONFIG)
        job = "jobs:\n  - id: x\n    prompt: Search with `loom_search`.\n"
        (memu.workspace / "config/cron/jobs.yaml").write_text(job, encoding="utf-8")
        only = places(memu.doctor_json("--offline"))
        assert [c["message"] for c in only] == [
            "config/cron/jobs.yaml:3: names mcp__loom__loom_search, which memU sessions do not have"
        ]

    @pytest.mark.parametrize(
        "planted",
        [
            "jobs: [",
            "- just a list\n",
            "jobs: nope\n",
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"b{n}: &b{n} [{', '.join(['*' + ('a' if n == 1 else f'b{n - 1}')] * 10)}]\n"
                for n in range(1, 12)
            ),
        ],
        ids=["broken", "a list", "jobs not a list", "an alias bomb"],
    )
    def test_a_job_file_that_is_not_one_is_named_not_read(
        self, loom: Instance, planted: str
    ) -> None:
        (loom.workspace / "config/cron/jobs.yaml").write_text(planted, encoding="utf-8")
        report = loom.doctor_json("--offline")
        assert (
            "not read: config/cron/jobs.yaml (not YAML with a jobs list)"
            in (head(report)["message"])
        )
        assert places(report) == []

    def test_a_cron_folder_that_is_a_link_is_not_entered(
        self, loom: Instance, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "jobs.yaml").write_text(USER_JOB, encoding="utf-8")
        cron = loom.workspace / "config/cron"
        shutil.rmtree(cron)
        cron.symlink_to(outside, target_is_directory=True)
        report = loom.doctor_json("--offline")
        assert "not read: config/cron (a link)" in head(report)["message"]
        assert places(report) == []


class TestHostileFiles:
    """The agent may plant anything: doctor follows no link, reads a bounded amount, and
    reports what it could not read instead of failing."""

    def test_links_out_of_the_workspace_are_not_followed(
        self, loom: Instance, tmp_path: Path
    ) -> None:
        outside = tmp_path / "outside"
        (outside / "evil").mkdir(parents=True)
        (outside / "MEMORY.md").write_text(PLANTED_MEMU, encoding="utf-8")
        (outside / "evil" / "SKILL.md").write_text(PLANTED_MEMU, encoding="utf-8")
        (loom.workspace / "MEMORY.md").unlink()
        (loom.workspace / "MEMORY.md").symlink_to(outside / "MEMORY.md")
        (loom.workspace / "skills" / "evil").symlink_to(outside / "evil")
        nested = loom.workspace / "skills" / "nerve-workspace" / "SKILL.md"
        nested.unlink()
        nested.symlink_to(outside / "MEMORY.md")
        report = loom.doctor_json("--offline")
        assert places(report) == [], "nothing behind a link was read"
        message = head(report)["message"]
        assert head(report)["status"] == "WARN"
        for path in ("MEMORY.md", "skills/evil", "skills/nerve-workspace/SKILL.md"):
            assert f"{path} (a link)" in message
        assert "check the rest by hand" in head(report)["advice"]

    def test_a_skills_folder_that_is_a_link_is_not_entered(
        self, loom: Instance, tmp_path: Path
    ) -> None:
        elsewhere = tmp_path / "elsewhere"
        shutil.move(loom.workspace / "skills", elsewhere)
        (elsewhere / "x").mkdir()
        (elsewhere / "x" / "SKILL.md").write_text(PLANTED_MEMU, encoding="utf-8")
        (loom.workspace / "skills").symlink_to(elsewhere)
        report = loom.doctor_json("--offline")
        assert places(report) == []
        assert "skills (a link)" in head(report)["message"]

    def test_a_fifo_and_a_non_utf8_file_are_reported_not_read(self, loom: Instance) -> None:
        (loom.workspace / "SOUL.md").unlink()
        os.mkfifo(loom.workspace / "SOUL.md")
        (loom.workspace / "USER.md").write_bytes(b"\xff\xfe mcp__nerve__memorize \x00\x81\n")
        result = loom.doctor("--offline", "--json")
        assert result.returncode == 0 and "Traceback" not in result.stderr
        report = json.loads(result.stdout)
        message = head(report)["message"]
        assert "SOUL.md (not a plain file)" in message
        assert "USER.md (not UTF-8 text)" in message
        assert places(report) == []

    def test_a_huge_file_is_read_only_up_to_the_limit(self, loom: Instance) -> None:
        filler = b"- an ordinary line of notes\n" * (LINT_FILE_MAX_BYTES // 28 + 10)
        early = b"# Agents\nUse `memorize`.\n"
        late = b"Past the limit: mcp__nerve__memory_delete\n"
        (loom.workspace / "AGENTS.md").write_bytes(early + filler + late + filler)
        report = loom.doctor_json("--offline")
        assert [c["message"] for c in places(report)] == [
            "AGENTS.md:2: names mcp__nerve__memorize, which Loom sessions do not have"
        ]
        limit = f"{LINT_FILE_MAX_BYTES // 1024} KiB"
        assert f"read only the first {limit} of AGENTS.md" in head(report)["message"]

    def test_a_file_cut_inside_a_character_is_still_read(self, loom: Instance) -> None:
        """No line break before the limit and a multi-byte character across it."""
        body = b"mcp__nerve__memorize " + b"\xc3\xa9" * LINT_FILE_MAX_BYTES
        (loom.workspace / "TOOLS.md").write_bytes(body)
        report = loom.doctor_json("--offline")
        assert places(report)[0]["message"].startswith("TOOLS.md:1: names mcp__nerve__memorize")


class TestBoundedOutput:
    def test_one_file_shows_a_few_places_and_says_how_many_more(self, loom: Instance) -> None:
        count = FINDINGS_PER_FILE + 3
        (loom.workspace / "MEMORY.md").write_text(PLANTED_MEMU * count, encoding="utf-8")
        shown = places(loom.doctor_json("--offline"))
        assert len(shown) == FINDINGS_PER_FILE + 1
        assert [c["message"].split(":")[1] for c in shown[:-1]] == [
            str(n) for n in range(1, FINDINGS_PER_FILE + 1)
        ]
        assert shown[-1]["message"] == (
            "MEMORY.md: 3 more places naming tools Loom sessions do not have"
        )

    def test_a_file_naming_tools_everywhere_is_counted_only_so_far(self, loom: Instance) -> None:
        """A planted file costs a bounded count; the line says the count stopped."""
        lines = MENTIONS_COUNTED_MAX + 10
        (loom.workspace / "MEMORY.md").write_text(PLANTED_MEMU * lines, encoding="utf-8")
        report = loom.doctor_json("--offline")
        assert places(report)[-1]["message"] == (
            f"MEMORY.md: at least {MENTIONS_COUNTED_MAX - FINDINGS_PER_FILE} more places "
            "naming tools Loom sessions do not have"
        )
        assert f"in at least {MENTIONS_COUNTED_MAX} places" in head(report)["message"]

    def test_many_files_show_a_bounded_number_of_places_in_all(self, loom: Instance) -> None:
        files = FINDINGS_SHOWN // FINDINGS_PER_FILE + 3
        for number in range(files):
            skill = loom.workspace / "skills" / f"s{number:02d}" / "SKILL.md"
            skill.parent.mkdir()
            skill.write_text(PLANTED_MEMU * FINDINGS_PER_FILE, encoding="utf-8")
        shown = places(loom.doctor_json("--offline"))
        located = [c for c in shown if c["source"] and c["source"].rpartition(":")[2].isdigit()]
        assert len(located) == FINDINGS_SHOWN
        assert shown[-1]["message"].startswith(
            f"{3 * FINDINGS_PER_FILE} more places naming tools Loom sessions do not have, "
            "in 3 more files: skills/s"
        )

    def test_files_past_the_limit_are_counted_not_read(self, loom: Instance) -> None:
        extra = LINT_MAX_FILES  # more skills than doctor reads, with the shipped files too
        for number in range(extra):
            skill = loom.workspace / "skills" / f"t{number:03d}" / "SKILL.md"
            skill.parent.mkdir()
            skill.write_text("plain\n", encoding="utf-8")
        report = loom.doctor_json("--offline")
        message = head(report)["message"]
        assert message.startswith(f"{LINT_MAX_FILES} files the agent reads")
        assert f"{SHIPPED_READ} more past the {LINT_MAX_FILES} files doctor reads" in message

    def test_a_skills_folder_with_too_many_entries_is_looked_at_only_so_far(
        self, loom: Instance
    ) -> None:
        crowd = loom.workspace / "skills" / "crowd"
        crowd.mkdir()
        for number in range(SKILLS_MAX_ENTRIES):
            (crowd / f"n{number:05d}").touch()
        (crowd / "SKILL.md").write_text(PLANTED_MEMU, encoding="utf-8")
        result = loom.doctor("--offline", "--json")
        assert result.returncode == 0, result.stderr
        message = head(json.loads(result.stdout))["message"]
        assert "skills/crowd (more entries than doctor looks at)" in message
