"""``nerve init`` driven as a real process (INIT-1…INIT-6, CONF-7 at the command line)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from provisioner.templating.backends import MEMU_TOOLS
from provisioner.templating.wording import loom_tools_named, memu_tools_named
from provisioner.workspace.merge import BASES_PATH
from provisioner.workspace.render import MANIFEST_PATH
from tests.support.processes import assert_one_line_error, clean_environment
from tests.support.repo import GOLDEN_DIR

WORDED_FILES = ("AGENTS.md", "TOOLS.md", "MEMORY.md", "config/cron/system.yaml")


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file below ``root``: bytes and exec bit, by relative path."""
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            executable = bool(path.stat().st_mode & stat.S_IXUSR)
            files[path.relative_to(root).as_posix()] = (path.read_bytes(), executable)
    return files


def init(run_nerve, *args: str, **kwargs) -> subprocess.CompletedProcess:
    result = run_nerve("init", *args, **kwargs)
    assert result.returncode == 0, result.stderr
    return result


class TestNonInteractive:
    def test_defaults_give_a_memu_personal_workspace(self, run_nerve, tmp_path):
        """INIT-1: no mode flag and no TTY means non-interactive, on the template defaults."""
        init(run_nerve, "--workspace", "ws")
        ws = tmp_path / "ws"
        assert {"SOUL.md", "IDENTITY.md", "USER.md", "AGENTS.md", "TOOLS.md", "MEMORY.md"} <= set(
            os.listdir(ws)
        )
        agents = (ws / "AGENTS.md").read_text()
        assert "mcp__nerve__memorize" in agents
        assert not loom_tools_named(agents)

    def test_loom_worker_names_loom_tools_and_none_of_memus(self, run_nerve, tmp_path):
        """INIT-2, BACK-3: a Loom worker workspace names mcp__loom__ tools only."""
        init(
            run_nerve,
            "--non-interactive",
            "--memory-backend",
            "loom",
            "--profile",
            "worker",
            "--workspace",
            "w2",
            "--data",
            "worker_task=triage",
        )
        ws = tmp_path / "w2"
        assert (ws / "TASK.md").is_file() and not (ws / "USER.md").exists()
        for name in (*WORDED_FILES, "skills/nerve-workspace/SKILL.md"):
            text = (ws / name).read_text()
            assert "mcp__loom__loom_" in text, name
            assert not memu_tools_named(text), name
            assert not any(f"mcp__nerve__{tool}" in text for tool in MEMU_TOOLS), name

    def test_data_flags_and_environment_fill_the_answers(self, run_nerve, tmp_path):
        """INIT-1: values from flags, --data and NERVE_* variables, flags first."""
        init(
            run_nerve,
            "--workspace",
            "ws",
            "--data",
            "agent_name=Orbit",
            "--data",
            "timezone=Europe/Berlin",
            env={"NERVE_USER_NAME": "Ada", "NERVE_AGENT_NAME": "Ignored"},
        )
        identity = (tmp_path / "ws" / "IDENTITY.md").read_text()
        assert "**Name:** Orbit" in identity
        assert "Europe/Berlin" in identity
        assert "personal assistant to Ada" in identity

    def test_init_says_it_does_not_set_memory_backend(self, run_nerve):
        """INIT-2: init words the files; the platform sets memory.backend."""
        result = init(run_nerve, "--workspace", "ws", "--memory-backend", "loom")
        assert "does not set memory.backend" in result.stdout
        assert "config.local.yaml" in result.stdout

    def test_console_script_is_the_same_cli(self, tmp_path):
        """§0, NERVE-1: the `nerve-provisioner` console script runs the same command line as
        python -m."""
        script = Path(sys.executable).with_name("nerve-provisioner")
        if not script.exists():
            script = Path(shutil.which("nerve-provisioner") or "nerve-provisioner")
        home = tmp_path / "home"
        home.mkdir()
        result = subprocess.run(
            [str(script), "init", "--non-interactive", "--workspace", str(tmp_path / "ws")],
            capture_output=True,
            text=True,
            env=clean_environment(home),
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "ws" / "AGENTS.md").is_file()


class TestMatchesGoldens:
    @pytest.mark.parametrize("backend", ["memu", "loom"])
    @pytest.mark.parametrize("profile", ["personal", "worker"])
    def test_init_output_equals_the_golden_render(self, run_nerve, tmp_path, backend, profile):
        """GOLD-1, INIT-4: init writes exactly the golden files, bytes and exec bits, and
        beside them (FLEET-3) the text of each, kept as the base of a later merge."""
        init(run_nerve, "--memory-backend", backend, "--profile", profile, "--workspace", "ws")
        written = tree(tmp_path / "ws")
        bases, _executable = written.pop(BASES_PATH)
        golden = tree(GOLDEN_DIR / backend / profile)
        assert written == golden
        shipped = {
            content.decode() for path, (content, _) in golden.items() if path != MANIFEST_PATH
        }
        assert set(json.loads(bases)["texts"].values()) == shipped


class TestBackendChoice:
    def test_without_the_flag_init_follows_the_configured_backend(self, run_nerve, tmp_path):
        """INIT-2: memory.backend in the existing configuration words the files."""
        config = tmp_path / "cfg"
        config.mkdir()
        (config / "config.local.yaml").write_text("memory:\n  backend: loom\n")
        result = init(run_nerve, "--workspace", "ws", "--config-dir", "cfg", "--json")
        summary = json.loads(result.stdout)
        assert summary["wording"] == "loom"
        assert summary["wording_source"].endswith("config.local.yaml")

    def test_the_configured_backend_is_env_expanded(self, run_nerve, tmp_path):
        """INIT-2, CONF-3: a locked instance's ${NERVE_MEMORY_BACKEND:-memu} is followed."""
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        (config_dir / "config.yaml").write_text(
            "memory:\n  backend: ${NERVE_MEMORY_BACKEND:-memu}\n"
        )
        args = ("--workspace", "ws", "--config-dir", "cfg", "--json")
        with_variable = init(run_nerve, *args, env={"NERVE_MEMORY_BACKEND": "loom"})
        assert json.loads(with_variable.stdout)["wording"] == "loom"

    def test_the_flag_outranks_the_configuration(self, run_nerve, tmp_path):
        """INIT-2: --memory-backend wins over what the configuration names."""
        config = tmp_path / "cfg"
        config.mkdir()
        (config / "config.local.yaml").write_text("memory:\n  backend: loom\n")
        result = init(
            run_nerve, "--workspace", "ws", "--config-dir", "cfg", "--memory-backend", "memu"
        )
        assert "mcp__nerve__memorize" in (tmp_path / "ws" / "AGENTS.md").read_text()
        assert "from --memory-backend" in result.stdout


class TestMemoryStep:
    def test_loom_asks_nothing_and_reports_a_missing_gateway(self, run_nerve):
        """INIT-3: under Loom the memory step asks nothing, and says the URL is not set."""
        result = init(run_nerve, "--workspace", "ws", "--memory-backend", "loom", "--json")
        memory = json.loads(result.stdout)["memory"]
        assert memory == {"backend": "loom", "asked": False, "mcp_gateway_url": None}

    def test_loom_reports_the_configured_gateway(self, run_nerve, tmp_path):
        """INIT-3: a configured mcp_gateway_url is reported."""
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.yaml").write_text("mcp_gateway_url: http://127.0.0.1:8787/\n")
        result = init(
            run_nerve, "--workspace", "ws", "--config-dir", "cfg", "--memory-backend", "loom"
        )
        assert "MCP gateway at http://127.0.0.1:8787." in result.stdout

    def test_terminal_memu_offers_the_embeddings_key(self, run_nerve, tmp_path):
        """INIT-3: under memU the terminal setup offers the optional key and stores it."""
        answers = "\n" * 5 + "sk-test-123\n"  # five questions, then the key
        result = init(
            run_nerve, "--terminal", "--workspace", "ws", "--config-dir", "cfg", input=answers
        )
        assert "embeddings" in result.stderr
        stored = yaml.safe_load((tmp_path / "cfg" / "config.local.yaml").read_text())
        assert stored["openai_api_key"] == "sk-test-123"  # NERVE-8: where Nerve reads it
        assert "memory" not in stored
        assert "sk-test-123" not in result.stdout

    def test_terminal_loom_never_asks_for_a_key(self, run_nerve, tmp_path):
        """INIT-3: no OpenAI key question under Loom."""
        result = init(
            run_nerve, "--terminal", "--memory-backend", "loom", "--workspace", "ws", input="\n" * 6
        )
        assert "embeddings" not in result.stderr
        assert not (tmp_path / "home" / ".nerve" / "config.local.yaml").exists()


class TestPrompts:
    def test_terminal_asks_every_question_in_plain_lines(self, run_nerve, tmp_path):
        """INIT-1: terminal mode reads one answer per line from stdin."""
        answers = "worker\nScout\nEurope/Paris\nTriage the bug queue\nno\n\n"  # no key
        result = init(run_nerve, "--terminal", "--workspace", "ws", input=answers)
        prompts = result.stderr
        for label in ("profile", "name", "Timezone", "task", "Locked"):
            assert label in prompts, label
        task = (tmp_path / "ws" / "TASK.md").read_text()
        assert "Triage the bug queue" in task
        assert "You are Scout" in (tmp_path / "ws" / "AGENTS.md").read_text()

    def test_a_bad_answer_is_asked_again(self, run_nerve, tmp_path):
        """INIT-1: an answer that does not fit its question is explained and asked again."""
        answers = "robot\npersonal\n\n\nMars/Olympus\nUTC\nno\n\n"
        result = init(run_nerve, "--terminal", "--workspace", "ws", input=answers)
        assert "'robot' is not one of: personal, worker" in result.stderr
        assert "'Mars/Olympus' is not an IANA timezone" in result.stderr

    def test_slim_asks_only_the_essentials(self, run_nerve, tmp_path):
        """INIT-1: slim asks profile, agent name, user name, timezone; defaults for the rest."""
        result = init(
            run_nerve, "--slim", "--workspace", "ws", input="personal\nOrbit\nAda\nAsia/Tokyo\n"
        )
        asked = [line for line in result.stderr.split(": ") if "[" in line]
        assert len(asked) == 4, result.stderr
        assert "Locked" not in result.stderr
        manifest = json.loads((tmp_path / "ws" / MANIFEST_PATH).read_text())
        assert manifest["answers"] == {
            "agent_name": "Orbit",
            "lockdown": False,
            "memory_backend": "memu",
            "profile": "personal",
            "timezone": "Asia/Tokyo",
            "user_name": "Ada",
        }

    def test_input_ending_early_is_a_clear_error(self, run_nerve, tmp_path):
        """INIT-1: stdin closing mid-way ends with one line, and nothing is written."""
        result = run_nerve("init", "--terminal", "--workspace", "ws", input="personal\n")
        assert_one_line_error(result, "input ended while asking")
        assert not (tmp_path / "ws").exists()


class TestRerun:
    def test_rerun_rewords_shipped_files_and_merges_edited_ones(self, run_nerve, tmp_path):
        """INIT-5, FLEET-3: untouched files are re-worded; an edited file keeps its edit and
        gets the template's change by a three-way merge, and is listed as merged."""
        init(run_nerve, "--workspace", "ws")
        memory = tmp_path / "ws" / "MEMORY.md"
        memory.write_text(memory.read_text() + "- The user's dog is called Pixel.\n")
        result = init(run_nerve, "--workspace", "ws", "--memory-backend", "loom", "--json")
        summary = json.loads(result.stdout)
        assert "AGENTS.md" in summary["reworded"]
        assert "config/cron/system.yaml" in summary["reworded"]
        assert summary["merged"] == ["MEMORY.md"] and summary["kept"] == []
        loom_memory = run_nerve("render", "--backend", "loom", "--out", "loom-render")
        assert loom_memory.returncode == 0, loom_memory.stderr
        rendered = (tmp_path / "loom-render" / "MEMORY.md").read_text()
        assert memory.read_text() == rendered + "- The user's dog is called Pixel.\n"
        assert "mcp__loom__loom_search" in (tmp_path / "ws" / "AGENTS.md").read_text()

    def test_an_edited_file_whose_template_did_not_change_is_kept(self, run_nerve, tmp_path):
        """INIT-5: with the same wording, an edited file is kept as it is and listed."""
        init(run_nerve, "--workspace", "ws")
        memory = tmp_path / "ws" / "MEMORY.md"
        edited = memory.read_text() + "- The user's dog is called Pixel.\n"
        memory.write_text(edited)
        summary = json.loads(init(run_nerve, "--workspace", "ws", "--json").stdout)
        assert [kept["path"] for kept in summary["kept"]] == ["MEMORY.md"]
        assert memory.read_text() == edited

    def test_the_listed_command_shows_the_difference(self, run_nerve, tmp_path):
        """INIT-5: the command named for a kept file shows how it differs from the render
        (kept: written by someone else before init, so there is nothing to merge from)."""
        init(run_nerve, "--workspace", "other")
        (tmp_path / "ws").mkdir()
        memory = tmp_path / "ws" / "MEMORY.md"
        memory.write_text((tmp_path / "other" / "MEMORY.md").read_text() + "my own note\n")
        result = init(run_nerve, "--workspace", "ws", "--memory-backend", "loom", "--json")
        command = json.loads(result.stdout)["kept"][0]["diff_command"].split()
        assert command[:4] == ["python", "-m", "provisioner", "diff"]
        diff = run_nerve(*command[3:])
        assert diff.returncode == 1
        assert "-my own note" in diff.stdout
        added = [line for line in diff.stdout.splitlines() if line.startswith("+")]
        assert any("mcp__loom__" in line for line in added), diff.stdout

    def test_a_second_identical_run_changes_nothing(self, run_nerve, tmp_path):
        """INIT-5, INIT-6: a re-run with the same answers reports every file unchanged."""
        init(run_nerve, "--workspace", "ws")
        before = tree(tmp_path / "ws")
        summary = json.loads(init(run_nerve, "--workspace", "ws", "--json").stdout)
        assert summary["created"] == summary["reworded"] == summary["kept"] == []
        assert tree(tmp_path / "ws") == before

    def test_a_file_written_by_someone_else_is_never_overwritten(self, run_nerve, tmp_path):
        """INIT-5: with no record of what was shipped, an existing file is kept."""
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "AGENTS.md").write_text("hand-written guide\n")
        summary = json.loads(init(run_nerve, "--workspace", "ws", "--json").stdout)
        assert [kept["path"] for kept in summary["kept"]] == ["AGENTS.md"]
        assert (ws / "AGENTS.md").read_text() == "hand-written guide\n"

    def test_files_the_new_profile_does_not_render_are_left_and_listed(self, run_nerve, tmp_path):
        """INIT-5: switching profile removes nothing; the files it no longer renders are named."""
        init(run_nerve, "--workspace", "ws")
        summary = json.loads(
            init(
                run_nerve,
                *("--workspace", "ws", "--profile", "worker", "--data", "worker_task=triage"),
                "--json",
            ).stdout
        )
        assert summary["no_longer_rendered"] == ["IDENTITY.md", "USER.md"]
        assert "TASK.md" in summary["created"]
        assert (tmp_path / "ws" / "USER.md").is_file()

    def test_recorded_answers_carry_over_to_the_next_run(self, run_nerve, tmp_path):
        """INIT-4: the answers recorded in the workspace are the next run's defaults."""
        init(run_nerve, "--workspace", "ws", "--data", "agent_name=Orbit")
        init(run_nerve, "--workspace", "ws", "--memory-backend", "loom")
        assert "You are Orbit" in (tmp_path / "ws" / "AGENTS.md").read_text()

    def test_text_summary_lists_every_category(self, run_nerve, tmp_path):
        """INIT-6: the text summary names created, re-worded and kept files."""
        first = init(run_nerve, "--workspace", "ws")
        assert "created    AGENTS.md" in first.stdout
        (tmp_path / "ws" / "SOUL.md").write_text("mine\n")
        second = init(run_nerve, "--workspace", "ws", "--memory-backend", "loom")
        assert "re-worded  AGENTS.md" in second.stdout
        assert "kept       SOUL.md" in second.stdout
        assert "python -m provisioner diff --workspace" in second.stdout


class TestCopierIsolation:
    def test_a_users_copier_settings_do_not_leak_in(self, run_nerve, tmp_path):
        """INIT-4: Copier runs with a clean Settings(), ignoring the user's settings file."""
        settings = tmp_path / "copier-settings.yml"
        settings.write_text("defaults:\n  agent_name: Leaked\n  timezone: Asia/Tokyo\n")
        init(run_nerve, "--workspace", "ws", env={"COPIER_SETTINGS_PATH": str(settings)})
        identity = (tmp_path / "ws" / "IDENTITY.md").read_text()
        assert "Leaked" not in identity and "UTC" in identity


class TestConfigWarnings:
    def test_an_unknown_memory_key_warns_but_init_goes_on(self, run_nerve, tmp_path):
        """CONF-7: unknown keys under memory warn; init still provisions."""
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.yaml").write_text("memory:\n  backnd: loom\n")
        result = init(run_nerve, "--workspace", "ws", "--config-dir", "cfg", "--json")
        assert "python -m provisioner: warning:" in result.stderr and "backnd" in result.stderr
        assert any("backnd" in warning for warning in json.loads(result.stdout)["warnings"])


class TestBadInput:
    def test_an_unknown_memory_backend_flag(self, run_nerve):
        """INIT-1, CONF-7: --memory-backend foo."""
        result = run_nerve("init", "--memory-backend", "foo")
        assert_one_line_error(result, "--memory-backend", "'foo'", "memu", "loom")

    def test_an_unknown_backend_in_config_local(self, run_nerve, tmp_path):
        """CONF-4: memory.backend: foo in config.local.yaml."""
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.local.yaml").write_text("memory:\n  backend: foo\n")
        result = run_nerve("init", "--workspace", "ws", "--config-dir", "cfg")
        assert_one_line_error(result, "config.local.yaml", "memory.backend", "'foo'", "memu, loom")
        assert not (tmp_path / "ws").exists()

    def test_a_bare_unset_variable_in_settings(self, run_nerve, tmp_path):
        """CONF-2: ${UNSET_VAR} in settings.yaml names the variable, file and key."""
        settings = tmp_path / "ws" / "config" / "settings.yaml"
        settings.parent.mkdir(parents=True)
        settings.write_text("mcp_gateway_url: ${UNSET_VAR}\n")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "UNSET_VAR", "settings.yaml", "mcp_gateway_url")

    def test_a_bad_loom_namespace(self, run_nerve, tmp_path):
        """CONF-5: memory.loom.namespace: "Bad Name" under Loom."""
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.local.yaml").write_text(
            'memory:\n  backend: loom\n  loom:\n    namespace: "Bad Name"\n'
        )
        result = run_nerve("init", "--workspace", "ws", "--config-dir", "cfg")
        assert_one_line_error(result, "config.local.yaml", "memory.loom.namespace", "Bad Name")

    def test_a_settings_file_that_is_not_a_mapping(self, run_nerve, tmp_path):
        """CONF-7: a settings.yaml whose top level is a list."""
        settings = tmp_path / "ws" / "config" / "settings.yaml"
        settings.parent.mkdir(parents=True)
        settings.write_text("- one\n- two\n")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "settings.yaml", "mapping")

    def test_an_unknown_data_key(self, run_nerve):
        """INIT-1: --data with a key the template does not ask."""
        result = run_nerve("init", "--workspace", "ws", "--data", "colour=blue")
        assert_one_line_error(result, "--data colour", "expected one of", "agent_name")

    def test_a_data_value_that_does_not_fit(self, run_nerve):
        """INIT-1: --data profile=robot names the value and the choices."""
        result = run_nerve("init", "--workspace", "ws", "--data", "profile=robot")
        assert_one_line_error(result, "profile", "'robot'", "personal, worker")

    def test_data_without_an_equals_sign(self, run_nerve):
        """INIT-1: --data takes KEY=VALUE."""
        result = run_nerve("init", "--workspace", "ws", "--data", "agent_name")
        assert_one_line_error(result, "--data", "KEY=VALUE")

    def test_a_workspace_that_is_a_file(self, run_nerve, tmp_path):
        """Nothing is written over a file standing where the workspace should be."""
        (tmp_path / "ws").write_text("not a folder\n")
        result = run_nerve("init", "--workspace", "ws")
        assert_one_line_error(result, "ws", "not a folder")
        assert (tmp_path / "ws").read_text() == "not a folder\n"

    def test_two_mode_flags(self, run_nerve):
        """INIT-1: the modes exclude each other."""
        result = run_nerve("init", "--slim", "--terminal")
        assert_one_line_error(result, "not allowed with")


class TestRenderAndDiff:
    def test_render_writes_a_preview(self, run_nerve, tmp_path):
        """nerve render writes the render of one backend and profile."""
        result = run_nerve("render", "--backend", "loom", "--profile", "personal", "--out", "out")
        assert result.returncode == 0, result.stderr
        assert tree(tmp_path / "out") == tree(GOLDEN_DIR / "loom" / "personal")

    def test_render_refuses_a_folder_with_files(self, run_nerve, tmp_path):
        """Nothing is overwritten: a non-empty --out is refused."""
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "keep.txt").write_text("x")
        result = run_nerve("render", "--out", "out")
        assert_one_line_error(result, "out", "not an empty folder")

    def test_diff_of_a_fresh_workspace_is_empty(self, run_nerve):
        """nerve diff exits 0 when the workspace is what init would write."""
        init(run_nerve, "--workspace", "ws")
        result = run_nerve("diff", "--workspace", "ws")
        assert (result.returncode, result.stdout) == (0, "")

    def test_diff_of_an_unprovisioned_folder_is_a_clear_error(self, run_nerve, tmp_path):
        """nerve diff needs a workspace provisioned by init."""
        (tmp_path / "ws").mkdir()
        result = run_nerve("diff", "--workspace", "ws")
        assert_one_line_error(result, "provisioned.json", "nerve init")


class TestOutputToAClosedPipe:
    def test_a_reader_that_goes_away_ends_the_command_quietly(self, tmp_path: Path) -> None:
        """`nerve doctor --json | true`: no traceback when nobody reads the output."""
        env = {**os.environ, "HOME": str(tmp_path)}
        # `true` exits at once, long before the command has started to write.
        script = f"{sys.executable} -m provisioner doctor --offline --json | true"
        result = subprocess.run(
            ["bash", "-o", "pipefail", "-c", script],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr
        assert result.returncode == 141
