"""Render a workspace through Copier (INIT-4) and describe what was rendered.

``render_workspace`` is the one way a workspace is produced: ``nerve init`` renders into a
fresh folder and then places the files, ``nerve render`` writes a preview, and ``nerve golden``
compares the same render with the frozen copy. After Copier has written the files, the render
records the answers and a hash of every file in ``.nerve/provisioned.json``, which is how a
later ``nerve init`` knows whether a file is still exactly what this package shipped (INIT-5).

A template that cannot be rendered (a syntax error, an undefined name) raises
``TemplateBroken`` naming the template file and line; the CLI exits with status 3 for it, so CI
tells a broken template from a wording change (GOLD-2).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.backends import DEFAULT_BACKEND, DEFAULT_PROFILE
from provisioner.base.errors import TemplateBroken
from provisioner.config.loader import SETTINGS_FILE
from provisioner.runtime.face import faults_named
from provisioner.templating.folder import TemplateFolder, active_folder

if TYPE_CHECKING:
    import jinja2

    from provisioner.templating.questions import Question

MANIFEST_PATH = ".nerve/provisioned.json"  # INIT-4: answers and shipped hashes, per workspace
MANIFEST_FORMAT = 1
WORKSPACE_SUBDIRECTORY = "workspace"  # copier.yml's _subdirectory
TEMPLATE_SUFFIX = ".jinja"  # copier.yml's _templates_suffix
_ONE_RENDER = threading.Lock()  # a render changes process-wide settings: one at a time


@dataclass(frozen=True)
class Answers:
    """The answers a workspace is rendered from (the questions of ``templates/copier.yml``)."""

    profile: str = DEFAULT_PROFILE
    memory_backend: str = DEFAULT_BACKEND
    agent_name: str = "Nerve"
    user_name: str = ""
    timezone: str = "UTC"
    worker_task: str = ""
    lockdown: bool = False

    def as_data(self) -> dict[str, Any]:
        """The answers as Copier data, leaving out questions the profile does not ask."""
        data = asdict(self)
        if self.profile != "personal":
            data.pop("user_name")
        if self.profile != "worker":
            data.pop("worker_task")
        return data

    def record(self, earlier: Mapping[str, Any]) -> dict[str, Any]:
        """What the manifest keeps: these answers, plus earlier ones this profile does not ask.

        So a round trip through another profile (personal, worker, personal) keeps
        ``user_name``.
        """
        data = self.as_data()
        fields = self.__dataclass_fields__
        data.update({k: v for k, v in earlier.items() if k in fields and k not in data})
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Answers:
        """Answers from a recorded mapping; unknown keys are ignored, missing ones default."""
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


@dataclass(frozen=True)
class RenderedFile:
    """One file of a render: its path relative to the workspace, bytes and exec bit."""

    path: str
    content: bytes
    executable: bool

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.content).hexdigest()


def render_workspace(
    answers: Answers, destination: Path, folder: TemplateFolder | None = None
) -> list[RenderedFile]:
    """Render the workspace for ``answers`` into the empty or new folder ``destination``, from
    ``folder``'s template (by default the active folder's).

    Copier runs with a clean ``Settings()`` (a user's own Copier defaults never leak in) and
    ``defaults=True`` (the answers are given; nothing is asked), without programs to start
    (``_without_programs``) and without cyclic garbage collection (``_collector_paused``).
    Both are settings of the whole process, so one render at a time changes them. Copier
    errors propagate: the caller renders into a scratch folder, so a failed render never
    touches a workspace.
    """
    import jinja2

    try:
        with _ONE_RENDER, _collector_paused():
            _without_programs(lambda: _run_copier(answers, destination, folder))
    except jinja2.TemplateError as error:
        raise template_broken(error) from None
    files = list(read_tree(destination))
    manifest = manifest_bytes(answers.as_data(), {f.path: f.digest for f in files})
    manifest_file = destination / MANIFEST_PATH
    manifest_file.parent.mkdir(parents=True, exist_ok=True)
    manifest_file.write_bytes(manifest)
    files.append(RenderedFile(MANIFEST_PATH, manifest, executable=False))
    return sorted(files, key=lambda rendered: rendered.path)


class TemplateRenderer:
    """The template an init renders with: its folder and what is derived from it (BACK-1).

    Copier's ``Template`` is the model: the folder is chosen once, when the renderer is made
    (by default the active one), and its questions and Jinja environment are read from it on
    first use and kept with it, so one init reads one folder throughout, and nothing outside
    the object remembers it. A fleet makes one renderer, with its shared renders, and hands it
    to each workspace's init (FLEET-5).
    """

    def __init__(self, folder: TemplateFolder | None = None) -> None:
        self.folder = folder or active_folder()

    @property
    def questions(self) -> tuple[Question, ...]:
        """The questions of this folder's ``copier.yml``, read once."""
        from provisioner.templating.questions import load_questions  # deferred: Jinja, YAML

        return load_questions.of(self.folder)

    @property
    def environment(self) -> jinja2.Environment:
        """This folder's Jinja environment, built once (the one the runtime texts use)."""
        from provisioner.templating.jinja_env import shared_environment  # deferred: Jinja

        return shared_environment.of(self.folder)

    def render(self, answers: Answers) -> list[RenderedFile]:
        """The render for ``answers`` through Copier, made in a scratch folder that is gone
        afterwards. A broken template raises ``TemplateBroken``."""
        with tempfile.TemporaryDirectory(prefix="nerve-init-") as scratch:
            return render_workspace(answers, Path(scratch) / "workspace", self.folder)

    def tracked_settings(self, answers: Answers) -> bytes:
        """``config/settings.yaml`` as ``render`` renders it for ``answers``.

        ``nerve init`` reads the configuration the instance will read once its render is
        placed, and that file is one of its layers (CONF-1, CONF-3); rendering it alone through
        the environment, with the same template and answers, costs no Copier run. A test holds
        the bytes equal to the whole render's. A broken template raises ``TemplateBroken``.
        """
        import jinja2

        template = f"{WORKSPACE_SUBDIRECTORY}/{SETTINGS_FILE.as_posix()}{TEMPLATE_SUFFIX}"
        try:
            text = self.environment.get_template(template).render(**answers.as_data())
        except jinja2.TemplateError as error:
            raise template_broken(error) from None
        return text.encode("utf-8")


def _run_copier(answers: Answers, destination: Path, folder: TemplateFolder | None) -> None:
    first_import = "copier" not in sys.modules
    from copier import Settings, run_copy  # deferred: Copier is slow to import

    if first_import:
        _set_aside_imported()
    run_copy(
        str((folder or active_folder()).template_dir),
        destination,
        data=answers.as_data(),
        settings=Settings(),
        defaults=True,
        overwrite=True,
        quiet=True,
        # our own Jinja extension (provisioner.templating.jinja_env) is an "unsafe" feature
        unsafe=True,
        skip_tasks=True,
        vcs_ref=None,
    )


def _without_programs(render: Callable[[], None]) -> None:
    """Run ``render`` (Copier) with no program for it to start.

    Copier starts ``git`` about fourteen times per render: to ask whether the template folder
    is a repository or a bundle (it never is: ``templates/`` sits inside a checkout or the
    installed package), and once per written file for the destination's ``core.fileMode``
    (a fresh folder, in no repository). When it finds no ``git``, Copier skips all of that, a
    way of running it that it supports, and renders the template folder as it is on disk,
    never a tagged version of it. Copier starts its processes through plumbum, so plumbum's
    own ``PATH`` points at a path that is never a folder while ``render`` runs; the process
    environment is untouched, and the template's tasks are skipped anyway. A Copier that
    fails for want of ``git`` raises ``CommandNotFound``: then ``render`` runs again as usual.
    """
    try:
        from plumbum import CommandNotFound, local
    except ImportError:  # a Copier that no longer starts programs through plumbum
        render()
        return
    try:
        with local.env(PATH=os.devnull):  # never a folder, so no program (not even ./git)
            render()
    except CommandNotFound:
        render()


def _set_aside_imported() -> None:
    """Move everything alive once Copier is first imported out of the collector's sight.

    That is mostly modules, classes, functions and validation schemas, some fifty thousand
    objects the cyclic collector tracks, all kept until the process ends. Python walks them
    in every full collection and again while it shuts down, which took about a fifth of
    ``nerve init``'s time. ``gc.freeze()`` leaves them out of every later collection:
    reference counting still frees what they drop, and what a render creates afterwards is
    collected as before. The cost is that a cycle among the frozen objects, dropped later, is
    never freed; modules and classes are never dropped, and the few other objects alive at
    that moment (the answers, the configuration) are small. Done once per process.
    """
    gc.freeze()


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while Copier is imported and renders, then as before.

    Importing Copier and its dependencies creates tens of thousands of long-lived objects,
    and the collector would walk them again and again on the way, for nothing (about a tenth
    of a short command's time). A render is short and bounded, reference counting still
    frees what it drops, and what it leaves in cycles is collected once the collector runs
    again. A collector that was off stays off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_tree(root: Path) -> Iterator[RenderedFile]:
    """Every regular file below ``root`` as a ``RenderedFile`` (paths with ``/``)."""
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if path.is_file():
                yield read_file(path, path.relative_to(root).as_posix())


def read_file(path: Path, relative: str) -> RenderedFile:
    """The file at ``path`` as a ``RenderedFile`` named ``relative``: bytes and exec bit.

    A fault of the machine (permission, an I/O error) is a ``FileFault`` naming ``path``.
    """
    with faults_named(path):
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        return RenderedFile(relative, path.read_bytes(), executable)


def manifest_bytes(answers: Mapping[str, Any], files: Mapping[str, str]) -> bytes:
    """The manifest: the answers, and the digest of every file init counts as its own."""
    manifest = {"format": MANIFEST_FORMAT, "answers": dict(answers), "files": dict(files)}
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def template_broken(error: Exception) -> TemplateBroken:
    """``error`` from Jinja as one line naming the template file and line it happened in."""
    import jinja2

    filename = getattr(error, "filename", None)
    line = getattr(error, "lineno", None)
    if not isinstance(error, jinja2.TemplateSyntaxError):
        filename, line = _template_frame(error) or (filename, line)
    where = f"{filename}:{line}: " if filename else ""
    message = " ".join(str(getattr(error, "message", None) or error).split())
    return TemplateBroken(
        f"{where}template cannot be rendered ({type(error).__name__}: {message}); "
        "expected a template that renders"
    )


def _template_frame(error: Exception) -> tuple[str, int] | None:
    """The innermost traceback frame that ran a template (Jinja names it by the file)."""
    found = None
    trace = error.__traceback__
    while trace is not None:
        name = trace.tb_frame.f_code.co_filename
        if name.endswith((".jinja", ".md", ".yaml", ".yml")):
            found = (name, trace.tb_lineno)
        trace = trace.tb_next
    return found
