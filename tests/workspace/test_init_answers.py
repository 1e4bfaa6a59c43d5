"""Answers, lockdown, remembered wording and the command line's manners (defects 5–8, 11)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner import __version__
from provisioner.templating.questions import ECHO_MAX, iana_zone_names
from provisioner.workspace.render import MANIFEST_PATH
from tests.support.processes import assert_one_line_error


def init_json(run_nerve, *args: str, **kwargs) -> dict:
    result = run_nerve("init", "--json", *args, **kwargs)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def manifest(workspace: Path) -> dict:
    return json.loads((workspace / MANIFEST_PATH).read_text())


class TestLockdown:
    def test_nerve_lockdown_0_does_not_turn_a_locked_workspace_off(self, run_nerve, tmp_path):
        """CONF-3: the variable turns lockdown on, never off (the template question too)."""
        init_json(run_nerve, "--workspace", "ws", "--data", "lockdown=true")
        summary = init_json(run_nerve, "--workspace", "ws", env={"NERVE_LOCKDOWN": "0"})
        assert summary["answers"]["lockdown"] is True
        assert "lockdown: true" in (tmp_path / "ws" / "config" / "settings.yaml").read_text()

    def test_nerve_lockdown_1_turns_the_answer_on(self, run_nerve, tmp_path):
        summary = init_json(run_nerve, "--workspace", "ws", env={"NERVE_LOCKDOWN": "1"})
        assert summary["answers"]["lockdown"] is True
        assert summary["locked"] is True

    def test_a_word_init_does_not_know_is_a_warning_not_an_error(self, run_nerve):
        """CONF-3: NERVE_LOCKDOWN=maybe warns, once, and init goes on."""
        result = run_nerve("init", "--workspace", "ws", env={"NERVE_LOCKDOWN": "maybe"})
        assert result.returncode == 0, result.stderr
        warnings = [line for line in result.stderr.splitlines() if "NERVE_LOCKDOWN" in line]
        assert len(warnings) == 1 and warnings[0].startswith("python -m provisioner: warning:")

    def test_under_lockdown_no_key_is_asked_or_written_outside_the_workspace(
        self, run_nerve, tmp_path
    ):
        """CONF-3, INIT-3: a locked instance never reads config.local.yaml: nothing goes there."""
        answers = "\n" * 6 + "sk-should-not-be-asked\n"
        result = run_nerve(
            "init",
            "--terminal",
            "--workspace",
            "ws",
            "--config-dir",
            "cfg",
            input=answers,
            env={"NERVE_LOCKDOWN": "1"},
        )
        assert result.returncode == 0, result.stderr
        assert "OpenAI" not in result.stderr
        assert not (tmp_path / "cfg").exists()
        assert "locked" in result.stdout

    def test_the_closing_note_names_the_variables_not_the_local_file(self, run_nerve):
        """CONF-3: the note points a locked instance at its environment."""
        summary = init_json(run_nerve, "--workspace", "ws", env={"NERVE_LOCKDOWN": "1"})
        assert "NERVE_MEMORY_BACKEND" in summary["note"]
        assert "config.local.yaml" not in summary["note"]


class TestRememberedWording:
    def test_a_plain_rerun_keeps_the_recorded_loom_wording(self, run_nerve, tmp_path):
        """INIT-2: flag, then configuration, then the recorded wording, then memU."""
        init_json(run_nerve, "--workspace", "ws", "--memory-backend", "loom")
        summary = init_json(run_nerve, "--workspace", "ws")
        assert summary["wording"] == "loom"
        assert summary["wording_source"] == "the wording the workspace recorded"
        assert summary["reworded"] == [] and summary["kept"] == []

    def test_a_configured_backend_outranks_the_recorded_wording(self, run_nerve, tmp_path):
        init_json(run_nerve, "--workspace", "ws", "--memory-backend", "loom")
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.local.yaml").write_text("memory:\n  backend: memu\n")
        summary = init_json(run_nerve, "--workspace", "ws", "--config-dir", "cfg")
        assert summary["wording"] == "memu"
        assert summary["wording_source"].endswith("config.local.yaml")

    def test_a_variable_set_in_the_locked_settings_names_the_backend(self, run_nerve):
        """CONF-3: `${NERVE_MEMORY_BACKEND:-memu}` names a backend only when the variable is set."""
        init_json(
            run_nerve, "--workspace", "ws", "--memory-backend", "loom", "--data", "lockdown=1"
        )
        unset = init_json(run_nerve, "--workspace", "ws")
        assert unset["wording"] == "loom"
        summary = init_json(run_nerve, "--workspace", "ws", env={"NERVE_MEMORY_BACKEND": "memu"})
        assert summary["wording"] == "memu"
        assert summary["wording_source"].endswith("settings.yaml")

    def test_a_profile_round_trip_keeps_the_user_name_and_reports_nothing_edited(
        self, run_nerve, tmp_path
    ):
        """INIT-4: the manifest keeps every answer, asked by this profile or not."""
        init_json(run_nerve, "--workspace", "ws", "--data", "user_name=Ada")
        init_json(run_nerve, "--workspace", "ws", "--profile", "worker")
        assert manifest(tmp_path / "ws")["answers"]["user_name"] == "Ada"
        back = init_json(run_nerve, "--workspace", "ws", "--profile", "personal")
        assert back["kept"] == []
        assert {"IDENTITY.md", "USER.md"} <= set(back["unchanged"])
        assert "Ada" in (tmp_path / "ws" / "USER.md").read_text()


class TestOneLineAnswers:
    @pytest.mark.parametrize(
        "character", ["\r", "\u2028", "\u2029", "\u0085", "\x1b", "\x07", "\x7f"]
    )
    def test_a_control_character_is_refused_like_a_newline(self, run_nerve, tmp_path, character):
        """Defect 7: nothing that breaks or hides a line reaches SOUL.md or IDENTITY.md."""
        result = run_nerve("init", "--workspace", "ws", "--data", f"agent_name=A{character}B")
        assert_one_line_error(result, "--data agent_name", f"U+{ord(character):04X}")
        assert not (tmp_path / "ws").exists()

    def test_a_huge_answer_is_echoed_cut_short(self, run_nerve):
        """Defect 7: a 100 kB answer is named in ~60 characters, not echoed whole."""
        result = run_nerve("init", "--workspace", "ws", env={"NERVE_AGENT_NAME": "x" * 100_000})
        assert_one_line_error(result, "NERVE_AGENT_NAME", "100000 characters")
        assert len(result.stderr) < ECHO_MAX + 200

    def test_a_huge_typed_answer_is_echoed_cut_short(self, run_nerve):
        """Defect 7: a 1 MB line typed at a prompt is refused in a short line, then asked again."""
        result = run_nerve("init", "--slim", "--workspace", "ws", input="y" * 1_000_000 + "\n")
        assert result.returncode == 2
        assert max(len(line) for line in result.stderr.splitlines()) < 1000

    def test_yes_no_questions_say_yes_or_no(self, run_nerve):
        """Defect 11: the prompt offers yes/no, and so does the error."""
        result = run_nerve("init", "--workspace", "ws", "--data", "lockdown=perhaps")
        assert_one_line_error(result, "expected yes or no")


class TestTimezones:
    def test_utc_and_a_region_are_accepted(self, run_nerve):
        init_json(run_nerve, "--workspace", "ws", "--data", "timezone=Europe/Berlin")
        init_json(run_nerve, "--workspace", "ws2", "--data", "timezone=UTC")

    @pytest.mark.parametrize(
        "name", ["posixrules", "localtime", "right/UTC", "Factory", "Mars/Olympus"]
    )
    def test_a_name_that_is_not_a_canonical_iana_zone_is_refused(self, run_nerve, name):
        """Defect 8: only the IANA names from tzdata, never host files such as posixrules."""
        result = run_nerve("init", "--workspace", "ws", "--data", f"timezone={name}")
        assert_one_line_error(result, "--data timezone", "not an IANA timezone")

    def test_the_names_come_from_the_tzdata_package(self):
        """Defect 8: the check does not depend on the host's zone files."""
        zones = iana_zone_names()
        assert {"UTC", "Europe/Berlin", "America/New_York"} <= zones
        assert "posixrules" not in zones and "localtime" not in zones


class TestCommandLine:
    def test_bare_nerve_prints_the_usage(self, run_nerve):
        """Defect 11."""
        result = run_nerve()
        assert result.returncode == 2
        assert result.stderr.startswith("usage: python -m provisioner ")
        assert "init" in result.stderr

    def test_version(self, run_nerve):
        result = run_nerve("--version")
        assert result.returncode == 0
        assert result.stdout.strip() == f"python -m provisioner {__version__}"

    def test_an_error_has_the_nerve_prefix_once(self, run_nerve):
        """Defect 11: `<command>: error: <command>: …` is gone."""
        result = run_nerve("init", "--profile", "boss")
        assert_one_line_error(result, "init: argument --profile")
        assert result.stderr.count("provisioner") == 1

    @pytest.mark.parametrize(
        "command", [["init"], ["render"], ["diff"], ["golden", "check"], ["golden", "update"]]
    )
    def test_every_flag_has_help(self, command):
        """Defect 11: `--terminal`, `--slim`, `--non-interactive` and every other flag."""
        from provisioner.cli.main import build_parser

        parser = build_parser()
        for name in command:
            parser = next(
                action.choices[name]
                for action in parser._actions
                if isinstance(action.choices, dict) and name in action.choices
            )
        for action in parser._actions:
            assert action.help, (command, action.option_strings)

    def test_data_for_a_question_the_profile_does_not_ask_warns(self, run_nerve):
        """Defect 11: worker_task on a personal workspace is not silently dropped."""
        result = run_nerve("init", "--workspace", "ws", "--data", "worker_task=triage")
        assert result.returncode == 0
        assert "python -m provisioner: warning: --data worker_task: not used" in result.stderr

    def test_render_follows_data_profile(self, run_nerve, tmp_path):
        """Defect 11: `render --data profile=worker` renders the worker."""
        result = run_nerve(
            "render", "--out", "out", "--data", "profile=worker", "--data", "worker_task=triage"
        )
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "out" / "TASK.md").is_file()
        assert not (tmp_path / "out" / "USER.md").exists()

    def test_diff_accepts_a_dot_slash_path(self, run_nerve, tmp_path):
        """Defect 11: `nerve diff ./AGENTS.md` names the same file as `AGENTS.md`."""
        init_json(run_nerve, "--workspace", "ws")
        (tmp_path / "ws" / "AGENTS.md").write_text("mine\n")
        result = run_nerve("diff", "--workspace", "ws", "./AGENTS.md")
        assert result.returncode == 1, result.stderr
        assert "+++ nerve-init/AGENTS.md" in result.stdout

    def test_diff_refuses_a_path_out_of_the_workspace(self, run_nerve):
        init_json(run_nerve, "--workspace", "ws")
        result = run_nerve("diff", "--workspace", "ws", "../etc/passwd")
        assert_one_line_error(result, "inside the workspace")

    def test_an_empty_workspace_flag_is_refused(self, run_nerve, tmp_path):
        """Defect 11: `--workspace ""` does not provision the current folder."""
        result = run_nerve("init", "--workspace", "")
        assert_one_line_error(result, "--workspace", "empty")
        assert not (tmp_path / "AGENTS.md").exists()

    def test_a_bad_recorded_answer_is_one_line_for_init_and_diff(self, run_nerve, tmp_path):
        """Defect 10: a manifest answer of the wrong type is named, not a traceback."""
        init_json(run_nerve, "--workspace", "ws")
        data = manifest(tmp_path / "ws")
        data["answers"]["agent_name"] = 42
        (tmp_path / "ws" / MANIFEST_PATH).write_text(json.dumps(data))
        assert_one_line_error(run_nerve("init", "--workspace", "ws"), "agent_name", "42")
        assert_one_line_error(run_nerve("diff", "--workspace", "ws"), "agent_name", "42")

    def test_python_dash_m_and_the_console_script_agree_on_usage(self, tmp_path):
        result = subprocess.run(
            [sys.executable, "-m", "provisioner", "--help"], capture_output=True, text=True
        )
        assert result.returncode == 0 and "--version" in result.stdout
