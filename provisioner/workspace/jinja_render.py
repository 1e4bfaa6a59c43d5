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
the two agree byte for byte (``provisioner.fleet.run.RenderCache``), and the tests hold the two
equal for every golden's answers and for answers with their own names.

A template that cannot be rendered raises ``TemplateBroken`` naming its file and line, as
``render_workspace`` does.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.templating.folder import TemplateFolder, active_folder, folder_cached
from provisioner.workspace.render import (
    MANIFEST_PATH,
    TEMPLATE_SUFFIX,
    WORKSPACE_SUBDIRECTORY,
    Answers,
    RenderedFile,
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
