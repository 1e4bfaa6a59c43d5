"""``nerve init``: resolve the answers, render through Copier, place the files (INIT-1…INIT-7).

Answers come, highest first, from flags (``--profile``), ``--data KEY=VALUE``, ``NERVE_*``
environment variables, the answers an earlier init recorded in the workspace, and the
template's defaults; terminal and slim mode then ask, showing that value as the default. The
memory backend is never asked: ``--memory-backend`` wins, else the backend the existing
configuration names, else the wording the workspace recorded, else memU (INIT-2). Init never
sets ``memory.backend`` itself. ``NERVE_LOCKDOWN`` can turn the lockdown answer on, never off
(CONF-3). Init reads the configuration as the instance will read it once init is done, the
tracked ``config/settings.yaml`` it is about to place included. So however lockdown is chosen
(``--data lockdown=true``, ``NERVE_LOCKDOWN=1``, a yes at the prompt) or unchosen
(``--data lockdown=false``), the files are worded for the backend that instance will use: the
service's ``NERVE_MEMORY_BACKEND`` when locked, ``config.local.yaml`` when not.

The run holds the workspace's lock (one init at a time), renders into a scratch folder, and
places the files through ``provisioner.workspace.placement`` (journal, atomic renames, no link
followed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from provisioner.backends import DEFAULT_BACKEND, SetupContext, get_backend
from provisioner.base.errors import UserError
from provisioner.config.loader import LOCKDOWN_ENV, LOCKDOWN_ENV_ON, SETTINGS_FILE, load_config
from provisioner.config.local_file import store_embeddings_key, switch_advice
from provisioner.config.model import Config, ConfigError
from provisioner.templating.questions import (
    BACKEND_QUESTION,
    SLIM_QUESTIONS,
    AnswerError,
    Question,
    echo,
)
from provisioner.workspace.fs import (
    WorkspaceRoot,
    prepare_workspace,
    read_only_root,
    write_refusal,
)
from provisioner.workspace.lock import WorkspaceLock
from provisioner.workspace.merge import CONFLICT_LEAVE, read_bases
from provisioner.workspace.placement import Placement, place, plan_placement
from provisioner.workspace.render import Answers, RenderedFile, TemplateRenderer
from provisioner.workspace.state import RecordedState, read_state

MODES = ("terminal", "slim", "non-interactive")  # INIT-1
LOCKDOWN_QUESTION = "lockdown"  # CONF-3: its variable can turn it on, never off
_DEFAULT_ORIGIN = "the template's default"
SOURCE_FLAG = "--memory-backend"  # INIT-2: where the wording came from, as the summary says
SOURCE_RECORDED = "the wording the workspace recorded"
SOURCE_DEFAULT = "default"


class InitError(UserError, ValueError):
    """Input init cannot work with; the message is one line naming what and where."""


@dataclass
class InitResult:
    """What init did, for the summary (INIT-6)."""

    workspace: Path
    answers: Answers
    backend_source: str
    placement: Placement
    memory_step: dict[str, Any]
    warnings: tuple[str, ...] = ()
    locked: bool = False
    # FLEET-1: the backend the instance's configuration has it use, when that is known here
    # (not for a locked instance whose service variables this run cannot see)
    configured_backend: str | None = None


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
            try:
                return self.read_secret(f"{label}: ").strip()
            except EOFError:  # Ctrl-D at a terminal's hidden prompt: as at any other question
                self.output.write("\n")
                raise InitError(f"input ended while asking: {label}:") from None
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


@dataclass
class InitWorker:
    """One run of ``nerve init``: what it was told, how it places, and what it renders with.

    Copier's ``Worker`` is the model: the fields are the run's inputs, each read once;
    ``renderer`` is the template (its folder, questions and Jinja environment) the run renders
    from, a fresh one by default, the fleet's shared one in a fleet (FLEET-5). ``check``
    writes nothing (FLEET-2); ``conflict`` is what a conflicting merge does (FLEET-3). What
    derives from the inputs and the open workspace (the recorded state, whether the settings
    file is kept) is a cached property, so a worker runs once.
    """

    workspace: Path
    config_dir: Path
    mode: str
    backend: str | None = None
    profile: str | None = None
    data: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    prompter: Prompter | None = None
    check: bool = False
    conflict: str = CONFLICT_LEAVE
    renderer: TemplateRenderer = field(default_factory=TemplateRenderer)
    root: WorkspaceRoot | None = field(default=None, init=False, repr=False)

    def run(self) -> InitResult:
        """Provision ``workspace``; raises a ``UserError`` subclass on bad input.

        Nothing is written before every answer is known and the render has succeeded in a
        scratch folder, so bad input or a failed render leaves the workspace as it was. Under
        ``check`` nothing is written at all (FLEET-2).
        """
        if self.mode not in MODES:
            raise InitError(f"mode {self.mode!r} is unknown; expected one of: {', '.join(MODES)}")
        if self.check:
            with read_only_root(self.workspace) as checked:
                return self._provision(checked)
        new = not self.workspace.exists() and not self.workspace.is_symlink()
        workspace = prepare_workspace(self.workspace)
        try:
            with WorkspaceRoot(workspace) as root, WorkspaceLock(root):
                return self._provision(root)
        except OSError as error:
            if isinstance(error, UserError):
                raise
            raise write_refusal(error, workspace) from None
        finally:
            if new:
                _remove_if_empty(workspace)

    def _provision(self, root: WorkspaceRoot) -> InitResult:
        self.root = root
        config, answers, backend_source, warnings = self._answers()
        rendered = self.renderer.render(answers)
        # FLEET-3: a workspace provisioned before bases were kept: its answers rendered again
        bases = read_bases(root, lambda: self.renderer.render(self._recorded_answers))
        step = None if self.check else self.memory_setup_step(answers, config)
        record = answers.record(self.recorded.answers)
        if self.check:
            placement = plan_placement(rendered, root, self.recorded, bases)
        else:
            placement = place(rendered, root, self.recorded, record, bases, self.conflict)
        named = "memory.backend" in config.sources and "memory.backend" not in config.defaulted
        return InitResult(
            self.workspace,
            answers,
            backend_source,
            placement,
            step or {},
            tuple(warnings),
            config.lockdown,
            config.memory_backend if named or not config.lockdown else None,
        )

    def _answers(self) -> tuple[Config, Answers, str, list[str]]:
        """The configuration as the instance will read it, the answers, where the backend came
        from, and the warnings so far (CONF-3, INIT-2)."""
        loaded_for = self._lockdown_answer()
        try:
            config = self.load_config(loaded_for)
        except ConfigError:
            question = self._lockdown_question
            if loaded_for or self.prompter is None or question is None or not self._asks(question):
                raise
            # The answer still to be asked decides whether the layer that failed is read at
            # all; answered "no", the reload below raises this error again.
            config, loaded_for = self.load_config(True), True
        backend, backend_source = choose_backend(self.backend, config, self.recorded)
        answer_warnings: list[str] = []
        answers = self.resolve_answers(backend, self.recorded.answers, answer_warnings)
        self._refuse_unlocking_under_the_variable(answers)
        if answers.lockdown != loaded_for:  # answered otherwise at the prompt: read what it implies
            config = self.load_config(answers.lockdown)
            backend, backend_source = choose_backend(self.backend, config, self.recorded)
            answers = replace(answers, memory_backend=backend)
        warnings = [*config.warnings, *answer_warnings]
        warnings += self._kept_warning(answers.lockdown, config)
        warnings += switch_advice(config, backend, self.config_dir)  # FLEET-4
        return config, answers, backend_source, warnings

    @cached_property
    def recorded(self) -> RecordedState:
        """What the open workspace recorded: its manifest, and the journal of a run that was
        interrupted. A damaged record raises ``RecordDamaged`` (REL-12)."""
        assert self.root is not None, "read once the workspace is open"
        return read_state(self.root)

    @property
    def _recorded_answers(self) -> Answers:
        return Answers.from_data(self.recorded.answers)

    @cached_property
    def _lockdown_question(self) -> Question | None:
        return next((q for q in self.renderer.questions if q.name == LOCKDOWN_QUESTION), None)

    def _lockdown_answer(self) -> bool:
        """The lockdown answer as far as it is known before anything is asked (CONF-3).

        A render that answers lockdown writes tracked settings that lock the instance, which
        then never reads ``config.local.yaml``. Init must read the layers that instance will
        read, or ``--data lockdown=true`` would word the files for a backend the machine-local
        file names while ``NERVE_LOCKDOWN=1`` does not, and the locked instance would find its
        files worded for another backend at once. A value that cannot be parsed raises
        ``InitError``.
        """
        question = self._lockdown_question
        if question is None:
            return False
        value, _origin = self._given_value(question, self.recorded.answers, [])
        return value is True

    def _refuse_unlocking_under_the_variable(self, answers: Answers) -> None:
        """``lockdown`` answered no while ``NERVE_LOCKDOWN`` turns it on: refused (CONF-3).

        The variable locks the instance whatever its settings say, so settings written
        unlocked would name none of the service's variables, and the locked instance could
        only ever use memU. Nothing is written; the line says which two sources disagree.
        """
        if answers.lockdown or _lockdown_from_env(self.env.get(LOCKDOWN_ENV)) is None:
            return
        raise InitError(
            f"lockdown: answered no, but {LOCKDOWN_ENV}={self.env[LOCKDOWN_ENV]} locks the "
            f"instance whatever its settings say; expected lockdown=true, or {LOCKDOWN_ENV} unset"
        )

    # --- the configuration as the instance will read it (CONF-1, CONF-3) ------------------

    def load_config(self, lockdown: bool) -> Config:
        """The configuration as the instance will read it once this init is done.

        The workspace's tracked ``config/settings.yaml`` is one of the layers, and this init
        writes it: locked, it names the service's variables (``NERVE_MEMORY_BACKEND``, …) and
        turns ``config.local.yaml`` off; unlocked, it names nothing. So each load reads the
        settings this init will leave for the lockdown answer given: its own render, unless
        the file on disk is an edit that placement keeps, which is then read as it is.
        """
        settings = None
        if not self._settings_kept:
            rendered = self.renderer.tracked_settings(Answers(lockdown=lockdown))
            settings = rendered.decode("utf-8")
        return load_config(self.config_dir, self.workspace, env=self.env, settings_text=settings)

    @cached_property
    def _settings_kept(self) -> bool:
        """Whether the settings file on disk is an edit that placement will keep (INIT-5).

        Read once: the workspace's lock keeps it as it is for the whole init.
        """
        assert self.root is not None, "read once the workspace is open"
        path = SETTINGS_FILE.as_posix()
        current = self.root.read(path)
        if current is None:
            return False
        return not self.recorded.is_inits(path, RenderedFile(path, current[0], False).digest)

    def _kept_warning(self, lockdown: bool, config: Config) -> list[str]:
        """A line when a kept, edited settings file overrules the lockdown answer."""
        if config.lockdown == lockdown or not self._settings_kept:
            return []
        if lockdown:
            return [
                f"{SETTINGS_FILE}: kept as edited, and it does not set lockdown: true, so this "
                "instance is not locked; add that line to it, or set NERVE_LOCKDOWN=1"
            ]
        return [
            f"{SETTINGS_FILE}: kept as edited, and it sets lockdown: true, so this instance "
            "stays locked; remove that line to unlock it"
        ]

    # --- the answers (INIT-1, INIT-2) ------------------------------------------------------

    def resolve_answers(
        self, backend: str, recorded: Mapping[str, Any], warnings: list[str] | None = None
    ) -> Answers:
        """Every template answer, from the sources in the module docstring, checked.

        A ``--data`` value for a question this profile does not ask is not used; a line in
        ``warnings`` says so.
        """
        warnings = [] if warnings is None else warnings
        questions = [q for q in self.renderer.questions if q.name != BACKEND_QUESTION]
        names = {question.name for question in questions}
        for key in self.data:
            if key not in names:
                raise InitError(
                    f"--data {key}: not a question of the workspace template; "
                    f"expected one of: {', '.join(sorted(names))}"
                )
        answers: dict[str, Any] = {BACKEND_QUESTION: backend}
        for question in questions:
            if not question.asked_given(answers):
                if question.name in self.data:
                    warnings.append(
                        f"--data {question.name}: not used; the {answers.get('profile')} "
                        "profile does not ask it"
                    )
                continue
            value, origin = self._given_value(question, recorded, warnings)
            if self.prompter is not None and self._asks(question):
                value = self.prompter.ask(question, value, answers)
            elif origin != _DEFAULT_ORIGIN:  # the template's own defaults are Copier's to check
                try:
                    question.check(value, answers)
                except AnswerError as error:
                    raise InitError(f"{origin}: {error}") from None
            answers[question.name] = value
        return Answers.from_data(answers)

    def _asks(self, question: Question) -> bool:
        return self.mode == "terminal" or (self.mode == "slim" and question.name in SLIM_QUESTIONS)

    def _given_value(
        self, question: Question, recorded: Mapping[str, Any], warnings: list[str]
    ) -> tuple[Any, str]:
        """The highest-ranked value given for ``question``, and a name for where it came from."""
        if question.name == "profile" and self.profile is not None:
            return self.profile, "--profile"
        env_value = self.env.get(question.env_name)
        if question.name == LOCKDOWN_QUESTION:
            env_value = _lockdown_from_env(env_value)
        sources: list[tuple[str | None, str]] = [
            (self.data.get(question.name), f"--data {question.name}"),
            (env_value, question.env_name),
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

    # --- the memory step (INIT-3) ------------------------------------------------------------

    def memory_setup_step(self, answers: Answers, config: Config) -> dict[str, Any]:
        """The setup's memory step (INIT-3): the registry entry of the wording's backend runs it.

        Only terminal mode may ask; under lockdown nothing is asked or written outside the
        workspace.
        """
        prompter = self.prompter if self.mode == "terminal" else None
        context = SetupContext(
            backend=answers.memory_backend,
            config_dir=self.config_dir,
            mcp_gateway_url=config.mcp_gateway_url,
            locked=config.lockdown,
            ask_secret=prompter.ask_secret if prompter is not None else None,
            store_embeddings_key=store_embeddings_key,
        )
        return get_backend(answers.memory_backend).setup_step(context)


def _remove_if_empty(workspace: Path) -> None:
    """Remove a workspace this run created when it failed before writing a file."""
    for folder in (workspace / ".nerve", workspace):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty (the run succeeded, or wrote something), or already gone


def choose_backend(
    flag: str | None, config: Config, recorded: RecordedState | None = None
) -> tuple[str, str]:
    """The wording's backend and where it came from (INIT-2).

    The flag, else a backend the configuration names (a ``${VAR:-default}`` that fell back to
    its default names none), else the wording the workspace recorded, else memU.
    """
    if flag is not None:
        get_backend(flag)
        return flag, SOURCE_FLAG
    if "memory.backend" in config.sources and "memory.backend" not in config.defaulted:
        return config.memory_backend, str(config.sources["memory.backend"])
    wording = (recorded.answers if recorded else {}).get(BACKEND_QUESTION)
    if isinstance(wording, str) and wording:
        try:
            return get_backend(wording).name, SOURCE_RECORDED
        except UserError:
            raise InitError(
                f"{BACKEND_QUESTION} recorded in the workspace: {echo(wording)} is not a memory "
                "backend; expected one of the registry's, or --memory-backend"
            ) from None
    return DEFAULT_BACKEND, SOURCE_DEFAULT


def _lockdown_from_env(raw: str | None) -> str | None:
    """``NERVE_LOCKDOWN`` as the lockdown answer: it turns lockdown on, never off (CONF-3).

    Any other word leaves the answer to the lower sources; the configuration loader has
    already warned about a word it does not understand.
    """
    if raw is not None and raw.strip().lower() in LOCKDOWN_ENV_ON:
        return "true"
    return None
