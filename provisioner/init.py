"""``nerve init``: resolve the answers, render through Copier, place the files (INIT-1…INIT-6).

Answers come, highest first, from flags (``--profile``), ``--data KEY=VALUE``, ``NERVE_*``
environment variables, the answers an earlier init recorded in the workspace, and the
template's defaults; terminal and slim mode then ask, showing that value as the default. The
memory backend is never asked: ``--memory-backend`` wins, else the backend the existing
configuration names, else memU (INIT-2). Init never sets ``memory.backend`` itself.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from provisioner.backends import DEFAULT_BACKEND, get_backend
from provisioner.config import Config, load_config
from provisioner.errors import UserError
from provisioner.placement import Placement, place
from provisioner.questions import (
    BACKEND_QUESTION,
    SLIM_QUESTIONS,
    AnswerError,
    Question,
    load_questions,
)
from provisioner.render import MANIFEST_PATH, Answers, read_manifest, render_workspace

MODES = ("terminal", "slim", "non-interactive")  # INIT-1
_DEFAULT_ORIGIN = "the template's default"


class InitError(UserError, ValueError):
    """Input init cannot work with; the message is one line naming what and where."""


@dataclass(frozen=True)
class InitRequest:
    """Everything ``nerve init`` was told, before any question is asked."""

    workspace: Path
    config_dir: Path
    mode: str
    backend: str | None = None
    profile: str | None = None
    data: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class InitResult:
    """What init did, for the summary (INIT-6)."""

    workspace: Path
    answers: Answers
    backend_source: str
    placement: Placement
    memory_step: dict[str, Any]
    warnings: tuple[str, ...] = ()


@dataclass
class Prompter:
    """Plain line-based prompts: the question on ``output``, the answer from ``input``.

    Works over ssh and with answers piped in; no terminal UI is needed. End of input while a
    question is open is an ``InitError`` rather than a hang or a traceback.
    """

    input: TextIO
    output: TextIO
    read_secret: Callable[[str], str] | None = None

    def ask(self, question: Question, current: Any, answers: Mapping[str, Any]) -> Any:
        while True:
            raw = self._line(f"{_label(question)} [{_shown(current)}]: ")
            if raw == "":
                value = current
            else:
                try:
                    value = question.parse(raw)
                except AnswerError as error:
                    self.output.write(f"  {error}\n")
                    continue
            try:
                question.check(value, answers)
            except AnswerError as error:
                self.output.write(f"  {error}\n")
                continue
            return value

    def ask_secret(self, label: str) -> str:
        if self.read_secret is not None:
            return self.read_secret(f"{label}: ").strip()
        return self._line(f"{label}: ")

    def _line(self, prompt: str) -> str:
        self.output.write(prompt)
        self.output.flush()
        line = self.input.readline()
        if line == "":
            raise InitError(f"input ended while asking: {prompt.strip()}")
        return line.strip()


def _label(question: Question) -> str:
    if question.choices and not all(choice in question.help for choice in question.choices):
        return f"{question.help} ({', '.join(question.choices)})"
    if question.type == "bool":
        return f"{question.help} (yes, no)"
    return question.help


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def run_init(request: InitRequest, prompter: Prompter | None) -> InitResult:
    """Provision ``request.workspace``; raises ``InitError`` or ``ConfigError`` on bad input.

    Nothing is written before every answer is known and the render has succeeded in a scratch
    folder, so bad input or a failed render leaves the workspace as it was.
    """
    if request.mode not in MODES:
        raise InitError(f"mode {request.mode!r} is unknown; expected one of: {', '.join(MODES)}")
    if request.workspace.exists() and not request.workspace.is_dir():
        raise InitError(f"{request.workspace}: exists and is not a folder; expected a workspace")
    config = load_config(request.config_dir, request.workspace, env=request.env)
    backend, backend_source = choose_backend(request.backend, config)
    manifest = read_manifest(request.workspace)
    recorded = dict(manifest.get("answers", {})) if manifest else {}
    answers = resolve_answers(request, backend, recorded, prompter)
    memory_step = memory_setup_step(answers, config, request, prompter)
    if _is_new(request.workspace):
        placement = _render_new(answers, request.workspace)
    else:
        with tempfile.TemporaryDirectory(prefix="nerve-init-") as scratch:
            rendered = render_workspace(answers, Path(scratch) / "workspace")
            placement = place(rendered, request.workspace, manifest)
    return InitResult(
        request.workspace, answers, backend_source, placement, memory_step, config.warnings
    )


def _is_new(workspace: Path) -> bool:
    """A workspace that does not exist yet, or is an empty folder: nothing to protect."""
    return not workspace.exists() or (workspace.is_dir() and not any(workspace.iterdir()))


def _render_new(answers: Answers, workspace: Path) -> Placement:
    """Render straight into a new workspace; Copier removes what it made if it fails."""
    rendered = render_workspace(answers, workspace)
    return Placement(created=[f.path for f in rendered if f.path != MANIFEST_PATH])


def choose_backend(flag: str | None, config: Config) -> tuple[str, str]:
    """The wording's backend and where it came from (INIT-2)."""
    if flag is not None:
        get_backend(flag)
        return flag, "--memory-backend"
    if "memory.backend" in config.sources:
        return config.memory_backend, str(config.sources["memory.backend"])
    return DEFAULT_BACKEND, "default"


def resolve_answers(
    request: InitRequest, backend: str, recorded: Mapping[str, Any], prompter: Prompter | None
) -> Answers:
    """Every template answer, from the sources in the module docstring, checked."""
    questions = [q for q in load_questions() if q.name != BACKEND_QUESTION]
    names = {question.name for question in questions}
    for key in request.data:
        if key not in names:
            raise InitError(
                f"--data {key}: not a question of the workspace template; "
                f"expected one of: {', '.join(sorted(names))}"
            )
    answers: dict[str, Any] = {BACKEND_QUESTION: backend}
    for question in questions:
        if not question.asked_given(answers):
            continue
        value, origin = _given_value(question, request, recorded)
        if prompter is not None and _asks(request.mode, question):
            value = prompter.ask(question, value, answers)
        elif origin != _DEFAULT_ORIGIN:  # the template's own defaults are Copier's to check
            try:
                question.check(value, answers)
            except AnswerError as error:
                raise InitError(f"{origin}: {error}") from None
        answers[question.name] = value
    return Answers.from_data(answers)


def _asks(mode: str, question: Question) -> bool:
    return mode == "terminal" or (mode == "slim" and question.name in SLIM_QUESTIONS)


def _given_value(
    question: Question, request: InitRequest, recorded: Mapping[str, Any]
) -> tuple[Any, str]:
    """The highest-ranked value given for ``question``, and a name for where it came from."""
    if question.name == "profile" and request.profile is not None:
        return request.profile, "--profile"
    sources: list[tuple[str | None, str]] = [
        (request.data.get(question.name), f"--data {question.name}"),
        (request.env.get(question.env_name), question.env_name),
    ]
    for raw, origin in sources:
        if raw is not None:
            try:
                return question.parse(raw), origin
            except AnswerError as error:
                raise InitError(f"{origin}: {error}") from None
    if question.name in recorded:
        return recorded[question.name], f"{question.name} recorded in the workspace"
    return question.default, _DEFAULT_ORIGIN


def memory_setup_step(
    answers: Answers, config: Config, request: InitRequest, prompter: Prompter | None
) -> dict[str, Any]:
    """The setup's memory step (INIT-3), as a summary mapping.

    Under Loom nothing is asked (Loom needs no OpenAI key); the step reports whether
    ``mcp_gateway_url`` is set. Under memU, terminal mode offers the optional embeddings key,
    which is stored in the machine-local config file when one is given.
    """
    if answers.memory_backend == "loom":
        return {
            "backend": "loom",
            "asked": False,
            "mcp_gateway_url": config.mcp_gateway_url,
        }
    step: dict[str, Any] = {"backend": answers.memory_backend, "asked": False}
    if prompter is not None and request.mode == "terminal":
        from provisioner.local_config import store_embeddings_key

        step["asked"] = True
        key = prompter.ask_secret("OpenAI API key for memU embeddings (optional, Enter to skip)")
        if key:
            step["embeddings_key_stored_in"] = str(store_embeddings_key(request.config_dir, key))
    return step
