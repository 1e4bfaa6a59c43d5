"""The workspace render without a Copier run: the template folder walked as Copier walks it,
every template rendered through the one shared Jinja environment (FLEET-5).

A Copier run costs about 150 ms whatever the answers: it reads ``copier.yml`` again, builds a
new Jinja environment and compiles every template and path name anew. A fleet whose instances
each have their own agent and user names needs a render per workspace, so that cost, paid a
thousand times, was most of a fleet run. Here the templates are compiled once per template
folder the fleet holds (``provisioner.templating.jinja_env.shared_environment``, the
environment the runtime texts and ``TemplateRenderer.tracked_settings`` already use, with the
template's own extension and settings), the folder's listing is read once, and a render only
runs the compiled templates with the answers: a few milliseconds.

It follows Copier's rules for this template (``copier.yml``: ``_subdirectory: workspace``,
``_templates_suffix: .jinja``, no ``_exclude``): every path part is a template; a part that
renders empty leaves the file out; a ``.jinja`` file is rendered and loses the suffix, any
other file is copied as it is, unless a ``.jinja`` sibling of the same name exists; the
executable bit is the source file's. Copier stays the reference: the fleet renders the first
answers of each profile and backend through Copier as well and uses this renderer only when
the two agree byte for byte (``RenderCache``, the renderer a fleet hands to every workspace's
init), and the tests hold the two equal for every golden's answers and for answers with their
own names.

A template that cannot be rendered raises ``TemplateBroken`` naming its file and line, as
``render_workspace`` does.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.base.errors import TemplateBroken
from provisioner.templating.folder import TemplateFolder, active_folder, folder_cached
from provisioner.workspace.render import (
    MANIFEST_PATH,
    TEMPLATE_SUFFIX,
    WORKSPACE_SUBDIRECTORY,
    Answers,
    RenderedFile,
    TemplateRenderer,
    manifest_bytes,
    template_broken,
)

if TYPE_CHECKING:
    import jinja2


@dataclass(frozen=True)
class TemplateEntry:
    """One file below the template's subdirectory: its path parts (each a template, compiled
    once; a plain name as it is), whether it is rendered (``.jinja``) or copied, its name for
    the Jinja loader, its exec bit."""

    parts: tuple[str | jinja2.Template, ...]
    rendered: bool
    loader_name: str
    source: Path
    executable: bool


def _template_entries(folder: TemplateFolder) -> tuple[TemplateEntry, ...]:
    """The files Copier would render or copy, read once per template folder.

    A plain file with a ``.jinja`` sibling of the same name is left out, as Copier leaves it.
    Links are followed, as Copier follows them by default (``_preserve_symlinks`` is unset).
    """
    from provisioner.templating.jinja_env import shared_environment  # deferred: Jinja

    environment = shared_environment.of(folder)
    root = folder.template_dir
    copy_root = root / WORKSPACE_SUBDIRECTORY
    entries: list[TemplateEntry] = []
    for directory, _folders, names in os.walk(copy_root, followlinks=True):
        for name in names:
            source = Path(directory) / name
            relative = source.relative_to(copy_root)
            rendered = name.endswith(TEMPLATE_SUFFIX)
            if not rendered and (source.parent / f"{name}{TEMPLATE_SUFFIX}").exists():
                continue
            parts = relative.parts
            if rendered:
                parts = (*parts[:-1], parts[-1][: -len(TEMPLATE_SUFFIX)])
            entries.append(
                TemplateEntry(
                    parts=tuple(environment.from_string(p) if "{" in p else p for p in parts),
                    rendered=rendered,
                    loader_name=source.relative_to(root).as_posix(),
                    source=source,
                    executable=bool(source.stat().st_mode & stat.S_IXUSR),
                )
            )
    return tuple(sorted(entries, key=lambda entry: entry.loader_name))


template_entries = folder_cached(_template_entries)
"""A folder's ``TemplateEntry`` list, read on first use and kept with the folder."""


def render_through_jinja(
    answers: Answers, folder: TemplateFolder | None = None
) -> list[RenderedFile]:
    """The files ``render_workspace`` would produce for ``answers`` from ``folder`` (by default
    the active one), manifest included, rendered in memory through the folder's environment;
    sorted by path.

    Raises ``TemplateBroken`` for a template (or a path name) that cannot be rendered.
    """
    import jinja2

    from provisioner.templating.jinja_env import shared_environment  # deferred: Jinja

    folder = folder or active_folder()
    environment = shared_environment.of(folder)
    context = answers.as_data()
    files: list[RenderedFile] = []
    try:
        for entry in template_entries.of(folder):
            path = _rendered_path(entry.parts, context)
            if path is None:
                continue
            if _templated_sibling_shadows(folder, path, entry):
                continue
            if entry.rendered:
                text = environment.get_template(entry.loader_name).render(**context)
                content = text.encode("utf-8")
            else:
                content = entry.source.read_bytes()
            files.append(RenderedFile(path, content, entry.executable))
    except jinja2.TemplateError as error:
        raise template_broken(error) from None
    manifest = manifest_bytes(context, {f.path: f.digest for f in files})
    files.append(RenderedFile(MANIFEST_PATH, manifest, executable=False))
    return sorted(files, key=lambda rendered: rendered.path)


def _rendered_path(parts: tuple[str | jinja2.Template, ...], context: dict[str, Any]) -> str | None:
    """The destination path of ``parts``, each rendered; None when a part renders empty."""
    rendered: list[str] = []
    for part in parts:
        name = part if isinstance(part, str) else part.render(**context)
        if not name:
            return None
        rendered.append(name)
    return Path(*rendered).as_posix()


def _templated_sibling_shadows(folder: TemplateFolder, path: str, entry: TemplateEntry) -> bool:
    """Copier's last rule: a copied file whose rendered path has a ``.jinja`` twin at the
    template's top level is left out (``Worker._render_parts``)."""
    if entry.rendered:
        return False
    return (folder.template_dir / f"{path}{TEMPLATE_SUFFIX}").exists()


class RenderCache(TemplateRenderer):
    """The renderer every workspace of a run shares, one render per set of answers (FLEET-5).

    A render depends on the answers alone (the template folder is the one this renderer holds).
    Real instances have their own agent and user names, so a fleet meets many sets of answers;
    a Copier run for each cost about 150 ms, the whole of a workspace's check many times
    over. So the first answers of each profile and backend are rendered both ways, through
    Copier (``TemplateRenderer.render``) and through the folder's Jinja environment
    (``quick_render``, by default ``render_through_jinja``); when the two are
    equal byte for byte, the other answers of that profile and backend are rendered the quick
    way, else through Copier. A quick render that fails is made again through Copier, whose
    error is the one reported. The most recent ``KEPT_RENDERS`` renders are kept, so identical
    answers cost one render and memory stays bounded however many distinct ones there are.

    One lock serialises renders (Copier's change process-wide settings anyway). ``renders``
    counts the answer sets rendered, ``copier_renders`` the Copier runs, for the benchmark
    and the tests.
    """

    KEPT_RENDERS = 256  # our choice: a render is some 60 KB, so this bounds them near 15 MB

    def __init__(
        self,
        folder: TemplateFolder | None = None,
        quick_render: Callable[[Answers], list[RenderedFile]] | None = None,
    ) -> None:
        super().__init__(folder)
        self._quick_render = quick_render or self._through_jinja
        self._renders: OrderedDict[Answers, list[RenderedFile]] = OrderedDict()
        self._quick_agrees: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()
        self.renders = 0
        self.copier_renders = 0

    def render(self, answers: Answers) -> list[RenderedFile]:
        """The render for ``answers``: the kept one, else made once and kept."""
        with self._lock:
            found = self._renders.get(answers)
            if found is not None:
                self._renders.move_to_end(answers)
                return found
            found = self._render(answers)
            self.renders += 1
            self._renders[answers] = found
            if len(self._renders) > self.KEPT_RENDERS:
                self._renders.popitem(last=False)
            return found

    def _render(self, answers: Answers) -> list[RenderedFile]:
        shape = (answers.profile, answers.memory_backend)
        if self._quick_agrees.get(shape) is False:
            return self._through_copier(answers)
        if shape not in self._quick_agrees:
            reference = self._through_copier(answers)
            self._quick_agrees[shape] = self._quick_or_none(answers) == reference
            return reference
        return self._quick_or_none(answers) or self._through_copier(answers)

    def _through_copier(self, answers: Answers) -> list[RenderedFile]:
        self.copier_renders += 1
        return super().render(answers)

    def _through_jinja(self, answers: Answers) -> list[RenderedFile]:
        return render_through_jinja(answers, self.folder)

    def _quick_or_none(self, answers: Answers) -> list[RenderedFile] | None:
        try:
            return self._quick_render(answers)
        except TemplateBroken:
            return None
