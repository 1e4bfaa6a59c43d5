"""The questions of the workspace template, read from ``templates/copier.yml``.

The template is data (see docs/templates.md): each question's type, choices, default, help,
``when`` and ``validator`` are declared there once. ``nerve init`` reads them here to resolve
answers from flags, ``--data``, the environment and earlier answers, and to ask them in plain
line-based prompts; Copier reads the same file when it renders. ``when`` and ``validator`` are
Jinja expressions and are evaluated with the shared environment, so both agree.

Every rule an answer must meet beyond its type and choices (not empty, one line, at most so
many characters, an IANA zone) is written once, in the question's ``validator``; the few a
Jinja expression cannot check alone are filters of ``provisioner.templating.jinja_env``. So a
``copier copy --trust`` of the template refuses exactly the answers ``nerve init`` refuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from provisioner.base.errors import UserError
from provisioner.templating.folder import TemplateFolder, active_folder, folder_cached
from provisioner.templating.jinja_env import (
    YES_NO_EXPECTED,
    parse_yes_no,
    shared_environment,
)

__all__ = [
    "BACKEND_QUESTION",
    "ECHO_MAX",
    "SLIM_QUESTIONS",
    "AnswerError",
    "Question",
    "echo",
    "load_questions",
    "parse_questions",
    "question_named",
]

BACKEND_QUESTION = "memory_backend"  # INIT-2: set by --memory-backend or the config, never asked
SLIM_QUESTIONS = ("profile", "agent_name", "user_name", "timezone")  # INIT-1: slim mode asks these
ECHO_MAX = 60  # characters of a refused answer shown back in an error; our choice
TRIMMED = " \t"  # our choice: trimmed around a given answer (Copier trims nothing)
COMPILED_EXPRESSIONS_MAX = 256  # our choice: a template has a few dozen when/validator texts


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
    # The folder it was read from: its ``when`` and ``validator`` render with that folder's
    # environment, beside that folder's defaults (as Copier's questions hold their worker's).
    folder: TemplateFolder | None = field(default=None, compare=False, repr=False)

    @property
    def env_name(self) -> str:
        """The environment variable that answers it in non-interactive mode (INIT-1)."""
        return f"NERVE_{self.name.upper()}"

    def parse(self, raw: str) -> Any:
        """Turn the text a user typed (or passed with ``--data``) into a typed answer.

        Spaces and tabs around text are trimmed; anything else (a trailing newline, say) stays
        for the validator to refuse, as Copier, which trims nothing, would.
        """
        if self.type == "bool":
            value = parse_yes_no(raw)
            if value is None:
                raise AnswerError(f"{echo(raw)} is not a yes/no answer; {YES_NO_EXPECTED}")
            return value
        return raw.strip(TRIMMED)

    def asked_given(self, answers: Mapping[str, Any]) -> bool:
        """Whether the question applies, given the answers so far (its ``when``)."""
        if self.when is None:
            return True
        return self._render(self.when, answers).strip().lower() not in ("", "false", "0", "none")

    def check(self, value: Any, answers: Mapping[str, Any]) -> None:
        """Raise ``AnswerError`` when ``value`` does not fit: its type, choices, validator.

        Copier checks the type and the choices itself and renders the same validator, so the
        answers refused here are the ones ``copier copy`` refuses. A validator that cannot be
        rendered is a broken template (``TemplateBroken`` from the render), not a bad answer.
        """
        if self.type == "bool":
            if not isinstance(value, bool):
                raise AnswerError(f"{echo(value)} is not a yes/no answer; {YES_NO_EXPECTED}")
        elif not isinstance(value, str):
            raise AnswerError(f"{echo(value)} is {type(value).__name__}; expected text")
        elif self.choices and value not in self.choices:
            raise AnswerError(f"{echo(value)} is not one of: {', '.join(self.choices)}")
        if self.validator:
            message = " ".join(self._render(self.validator, {**answers, self.name: value}).split())
            if message:
                raise AnswerError(f"{echo(value)} {message}")

    def _render(self, expression: str, answers: Mapping[str, Any]) -> str:
        """``expression`` rendered over ``answers``, plus the defaults of the questions not
        answered yet, so it never meets an undefined name."""
        folder = self.folder or active_folder()
        values = {question.name: question.default for question in load_questions.of(folder)}
        values.update(answers)
        return _compiled(shared_environment.of(folder), expression).render(**values)


def echo(value: Any) -> str:
    """``value`` quoted for an error, cut to ``ECHO_MAX`` characters: a huge answer stays short."""
    shown = repr(value)
    if len(shown) > ECHO_MAX:
        return f"{shown[:ECHO_MAX]}… ({len(str(value))} characters)"
    return shown


@lru_cache(maxsize=COMPILED_EXPRESSIONS_MAX)
def _compiled(environment: jinja2.Environment, expression: str) -> jinja2.Template:
    """``expression`` compiled once per environment: init evaluates each several times."""
    return environment.from_string(expression)


def parse_questions(path: Path, folder: TemplateFolder | None = None) -> tuple[Question, ...]:
    """Every question of the ``copier.yml`` at ``path``, in the order the file declares them;
    ``folder``, the template folder it lies in (by default the active one when evaluated)."""
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
                folder=folder,
            )
        )
    return tuple(questions)


load_questions = folder_cached(lambda folder: parse_questions(folder.copier_file, folder))
"""Every question of the active template folder's ``copier.yml``."""


def question_named(name: str) -> Question:
    """The question called ``name``; ``KeyError`` when the template has none."""
    for question in load_questions():
        if question.name == name:
            return question
    raise KeyError(name)
