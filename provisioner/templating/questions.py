"""The questions of the workspace template, read from ``templates/copier.yml``.

The template is data (see docs/templates.md): each question's type, choices, default, help,
``when`` and ``validator`` are declared there once. ``nerve init`` reads them here to resolve
answers from flags, ``--data``, the environment and earlier answers, and to ask them in plain
line-based prompts; Copier reads the same file when it renders. ``when`` and ``validator`` are
Jinja expressions and are evaluated with the shared environment, so both agree.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from provisioner.errors import UserError
from provisioner.templating.folder import folder_cached
from provisioner.templating.jinja_env import shared_environment

BACKEND_QUESTION = "memory_backend"  # INIT-2: set by --memory-backend or the config, never asked
SLIM_QUESTIONS = ("profile", "agent_name", "user_name", "timezone")  # INIT-1: slim mode asks these
TIMEZONE_QUESTION = "timezone"
_TRUE_WORDS = frozenset({"true", "yes", "y", "1", "on"})
_FALSE_WORDS = frozenset({"false", "no", "n", "0", "off"})
YES_NO_EXPECTED = "expected yes or no"
# The answer is written into a file line: any character that breaks or hides a line is
# refused like a newline: every control character (CR, NEL, ESC, …; a tab is allowed) and the
# line and paragraph separators U+2028/U+2029.
REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
ECHO_MAX = 60  # characters of a refused answer shown back in an error
NOT_A_ZONE = frozenset({"Factory"})  # in the IANA data, but names no place


class AnswerError(UserError, ValueError):
    """An answer that does not fit its question; the message says what is expected."""


@dataclass(frozen=True)
class Question:
    """One question of ``copier.yml``."""

    name: str
    type: str
    help: str
    default: Any
    choices: tuple[str, ...] = ()
    when: str | None = None
    validator: str | None = None

    @property
    def env_name(self) -> str:
        """The environment variable that answers it in non-interactive mode (INIT-1)."""
        return f"NERVE_{self.name.upper()}"

    def parse(self, raw: str) -> Any:
        """Turn the text a user typed (or passed with ``--data``) into a typed answer."""
        if self.type == "bool":
            word = raw.strip().lower()
            if word in _TRUE_WORDS:
                return True
            if word in _FALSE_WORDS:
                return False
            raise AnswerError(f"{echo(raw)} is not a yes/no answer; {YES_NO_EXPECTED}")
        return raw.strip()

    def asked_given(self, answers: Mapping[str, Any]) -> bool:
        """Whether the question applies, given the answers so far (its ``when``)."""
        if self.when is None:
            return True
        return _render(self.when, answers).strip().lower() not in ("", "false", "0", "none")

    def check(self, value: Any, answers: Mapping[str, Any]) -> None:
        """Raise ``AnswerError`` when ``value`` does not fit: choices, validator, timezone."""
        if self.type == "bool":
            if not isinstance(value, bool):
                raise AnswerError(f"{echo(value)} is not a yes/no answer; {YES_NO_EXPECTED}")
            return
        if not isinstance(value, str):
            raise AnswerError(f"{echo(value)} is {type(value).__name__}; expected text")
        if self.choices and value not in self.choices:
            raise AnswerError(f"{echo(value)} is not one of: {', '.join(self.choices)}")
        _check_one_line(value)
        if self.name == TIMEZONE_QUESTION:
            _check_timezone(value)
        if self.validator:
            message = _render(self.validator, {**answers, self.name: value}).strip()
            if message:
                raise AnswerError(f"{echo(value)}: {message}")


def echo(value: Any) -> str:
    """``value`` quoted for an error, cut to ``ECHO_MAX`` characters: a huge answer stays short."""
    shown = repr(value)
    if len(shown) > ECHO_MAX:
        return f"{shown[:ECHO_MAX]}… ({len(str(value))} characters)"
    return shown


def _check_one_line(value: str) -> None:
    """Refuse a character that would break, hide or restyle the line the answer is written in."""
    for char in value:
        if char != "\t" and unicodedata.category(char) in REFUSED_CATEGORIES:
            raise AnswerError(
                f"{echo(value)} contains the control character U+{ord(char):04X}; "
                "expected one line of printable text"
            )


@cache
def iana_zone_names() -> frozenset[str]:
    """The canonical IANA zone names, from the ``tzdata`` package (not the host's files)."""
    names = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return frozenset(names) - NOT_A_ZONE


def _check_timezone(value: str) -> None:
    if value not in iana_zone_names():
        raise AnswerError(
            f"{echo(value)} is not an IANA timezone; expected a name such as UTC or Europe/Berlin"
        )


def _render(expression: str, answers: Mapping[str, Any]) -> str:
    environment = shared_environment()
    return environment.from_string(expression).render(**_with_unasked(answers))


def _with_unasked(answers: Mapping[str, Any]) -> dict[str, Any]:
    """Answers plus defaults for the rest, so an expression never meets an undefined name."""
    values = {question.name: question.default for question in load_questions()}
    values.update(answers)
    return values


def parse_questions(path: Path) -> tuple[Question, ...]:
    """Every question of the ``copier.yml`` at ``path``, in the order the file declares them."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: faster
    document = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or {}
    questions = []
    for name, spec in document.items():
        if name.startswith("_"):
            continue
        questions.append(
            Question(
                name=name,
                type=spec.get("type", "str"),
                help=spec.get("help", name),
                default=spec.get("default"),
                choices=tuple(spec.get("choices", ())),
                when=spec.get("when"),
                validator=spec.get("validator"),
            )
        )
    return tuple(questions)


load_questions = folder_cached(lambda folder: parse_questions(folder.copier_file))
"""Every question of the active template folder's ``copier.yml``."""


def question_named(name: str) -> Question:
    """The question called ``name``; ``KeyError`` when the template has none."""
    for question in load_questions():
        if question.name == name:
            return question
    raise KeyError(name)
