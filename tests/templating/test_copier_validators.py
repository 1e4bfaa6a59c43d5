"""One set of answer rules for both ways of rendering the template (INIT-1, INIT-4).

``templates/copier.yml`` states each question's rules once, in its ``validator``. ``nerve init``
renders that validator, and so does Copier when a template author tries the template with
``copier copy --trust templates/ DEST``. Every answer below goes through both real commands:
what one refuses the other refuses, for the same reason, and what one accepts the other
accepts. Copier's command line prints a refused ``--data`` answer as a Python traceback whose
last line is the refusal (its own handling, for every validator); the test holds that this last
line is the validator's message, not an error from inside the template.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.templating.jinja_env import iana_zone_names, line_problem
from provisioner.templating.questions import AnswerError, load_questions
from tests.support.processes import RunNerve, assert_one_line_error, clean_environment
from tests.support.repo import REPO_ROOT

ESC = "\x1b"
TOO_LONG = "x" * 65  # copier.yml: names are at most 64 characters


@dataclass(frozen=True)
class Refused:
    data: tuple[str, ...]  # KEY=VALUE, the refused one last
    question: str
    reason: str  # the part of the validator's message both commands show


REFUSED = {
    "empty agent name": Refused(("agent_name=",), "agent_name", "is empty"),
    "agent name of spaces": Refused(("agent_name=   ",), "agent_name", "is empty"),
    "ESC in the agent name": Refused(
        (f"agent_name=A{ESC}B",), "agent_name", "control character U+001B"
    ),
    "line separator in the agent name": Refused(
        ("agent_name=A\u2028B",), "agent_name", "control character U+2028"
    ),
    "agent name too long": Refused((f"agent_name={TOO_LONG}",), "agent_name", "64"),
    "CR in the user name": Refused(("user_name=Ada\rEve",), "user_name", "U+000D"),
    "user name too long": Refused((f"user_name={TOO_LONG}",), "user_name", "64"),
    "a timezone on Mars": Refused(("timezone=Mars/Base",), "timezone", "not an IANA timezone"),
    "a zone file that names no zone": Refused(
        ("timezone=posixrules",), "timezone", "not an IANA timezone"
    ),
    "newline in the worker's task": Refused(
        ("profile=worker", "worker_task=one\ntwo"), "worker_task", "U+000A"
    ),
    "a yes/no answer that is neither": Refused(
        ("lockdown=perhaps",), "lockdown", "expected yes or no"
    ),
}

ACCEPTED = {
    "personal, every answer at its limit": (
        f"agent_name={'x' * 64}",
        "user_name=Grace\tHopper",
        "timezone=America/Argentina/Buenos_Aires",
        "lockdown=yes",
    ),
    "worker with a task": (
        "profile=worker",
        "agent_name=Émile",
        "worker_task=Triage the bug queue",
        "timezone=UTC",
        "lockdown=off",
    ),
}


def copier_copy(tmp_path: Path, dest: Path, data: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``copier copy --trust`` of the checkout's template, as a template author runs it."""
    home = tmp_path / "copier-home"
    home.mkdir(exist_ok=True)
    env = clean_environment(home, {"PYTHONPATH": str(REPO_ROOT)})
    data_flags = [flag for item in data for flag in ("--data", item)]
    command = [sys.executable, "-m", "copier", "copy", "--trust", "--defaults", "--quiet"]
    return subprocess.run(
        [*command, *data_flags, str(REPO_ROOT / "templates"), str(dest)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


def nerve_init(run_nerve: RunNerve, workspace: Path, data: tuple[str, ...]):
    data_flags = [flag for item in data for flag in ("--data", item)]
    return run_nerve("init", "--non-interactive", "--workspace", str(workspace), *data_flags)


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_both_commands_refuse_the_answer_for_the_same_reason(
    run_nerve: RunNerve, tmp_path: Path, case: Refused
) -> None:
    nerve = nerve_init(run_nerve, tmp_path / "ws", case.data)
    assert_one_line_error(nerve, f"--data {case.question}", case.reason)
    assert not (tmp_path / "ws").exists()

    copier = copier_copy(tmp_path, tmp_path / "dest", case.data)
    assert copier.returncode != 0, copier.stdout
    last = copier.stderr.strip().splitlines()[-1]
    assert "Validation error" in last and f"'{case.question}'" in last, last
    assert case.reason in last
    assert not (tmp_path / "dest").exists() or not any((tmp_path / "dest").iterdir())


def test_both_commands_refuse_a_choice_that_is_not_offered(
    run_nerve: RunNerve, tmp_path: Path
) -> None:
    """Choices are Copier's own check; init states them the same way from copier.yml."""
    nerve = nerve_init(run_nerve, tmp_path / "ws", ("profile=boss",))
    assert_one_line_error(nerve, "--data profile", "'boss' is not one of: personal, worker")
    copier = copier_copy(tmp_path, tmp_path / "dest", ("profile=boss",))
    assert copier.returncode != 0
    assert "Invalid choice for 'profile'" in copier.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("data", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_both_commands_accept_good_answers_and_render_the_same_files(
    run_nerve: RunNerve, tmp_path: Path, data: tuple[str, ...]
) -> None:
    nerve = nerve_init(run_nerve, tmp_path / "ws", data)
    assert nerve.returncode == 0, nerve.stderr
    copier = copier_copy(tmp_path, tmp_path / "dest", data)
    assert copier.returncode == 0, copier.stderr[-2000:]
    rendered = {
        path.relative_to(tmp_path / "dest").as_posix(): path.read_bytes()
        for path in (tmp_path / "dest").rglob("*")
        if path.is_file()
    }
    assert rendered
    for name, content in rendered.items():
        assert (tmp_path / "ws" / name).read_bytes() == content, name


class TestOneStatementOfTheRules:
    def test_every_free_text_question_refuses_a_control_character(self) -> None:
        """A str question without choices must have a validator that keeps answers one line."""
        for question in load_questions():
            if question.type != "str" or question.choices:
                continue
            assert question.validator, question.name
            with pytest.raises(AnswerError):
                question.check(f"Europe/Berlin{ESC}", {"profile": "personal"})

    def test_the_timezone_rule_is_the_tzdata_list(self) -> None:
        timezone = next(q for q in load_questions() if q.name == "timezone")
        for name in ("UTC", "Europe/Berlin", "Pacific/Chatham"):
            assert name in iana_zone_names()
            timezone.check(name, {})
        for name in ("Factory", "localtime", "right/UTC", "Europe/berlin"):
            with pytest.raises(AnswerError, match="not an IANA timezone"):
                timezone.check(name, {})

    def test_a_tab_is_allowed_and_every_other_control_character_is_not(self) -> None:
        assert line_problem("a\tb") == ""
        for char in ("\x00", "\n", "\x7f", "\x85", "\u2029"):
            assert f"U+{ord(char):04X}" in line_problem(f"a{char}b")
        assert line_problem("Émile ✓") == ""


def test_copier_needs_trust_for_the_template(tmp_path: Path) -> None:
    """docs/templates.md: the template's Jinja extension is an unsafe feature to Copier."""
    home = tmp_path / "home"
    home.mkdir()
    command = [sys.executable, "-m", "copier", "copy", "--defaults", "--quiet"]
    result = subprocess.run(
        [*command, str(REPO_ROOT / "templates"), str(tmp_path / "dest")],
        capture_output=True,
        text=True,
        env=clean_environment(home, {"PYTHONPATH": str(REPO_ROOT)}),
        timeout=120,
    )
    assert result.returncode != 0
    assert "jinja_extensions" in result.stderr
    assert not (tmp_path / "dest" / "AGENTS.md").exists()
