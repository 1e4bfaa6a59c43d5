"""The one Jinja environment every render uses: Copier's and the runtime texts'.

Copier builds its own ``SandboxedEnvironment`` from ``copier.yml``; it loads
``NerveTemplateExtension`` (named under ``_jinja_extensions``), which sets the options below and
makes the bundled skills loadable. ``make_environment()`` builds a plain environment with the
same extension for the runtime texts, so a partial renders to the same bytes whichever path
includes it (TXT-8).

The settings are Copier-compatible and deliberately literal: the trailing newline of a template
is kept and no whitespace is stripped implicitly (no ``trim_blocks``/``lstrip_blocks``), so what
a template author sees in the file is what the agent gets; whitespace control is written out
with ``{%- … -%}`` where it is wanted. Undefined names raise instead of rendering empty.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import SandboxedEnvironment

from provisioner.templating.folder import active_folder, folder_cached

if TYPE_CHECKING:
    from provisioner.templating.folder import TemplateFolder

SKILLS_PREFIX = "bundled-skills"  # templates include a skill as "bundled-skills/<skill>/<file>"


class NerveTemplateExtension(Extension):
    """Sets the shared options and adds the bundled skills to the template loader.

    Copier's own loader refuses paths outside the template folder; the skills live beside it
    (SPEC §1 keeps ``skills/`` at the top level), so a prefix loader serves them under
    ``bundled-skills/`` while every other name still goes through the original loader first.
    """

    def __init__(self, environment: jinja2.Environment) -> None:
        super().__init__(environment)
        environment.keep_trailing_newline = True
        environment.trim_blocks = False
        environment.lstrip_blocks = False
        environment.undefined = jinja2.StrictUndefined
        skills = jinja2.PrefixLoader(
            {SKILLS_PREFIX: jinja2.FileSystemLoader(_skills_dir(environment))}
        )
        loaders = [environment.loader] if environment.loader is not None else []
        environment.loader = jinja2.ChoiceLoader([*loaders, skills])


shared_environment = folder_cached(lambda folder: make_environment(folder))
"""The active template folder's one environment for runtime texts and question expressions.

Built once per folder, so each template is compiled once per process; ``cache_clear()``
forgets the folders (tests that edit a copy of the templates do that).
"""


def make_environment(folder: TemplateFolder | None = None) -> jinja2.Environment:
    """A new sandboxed environment over ``folder``'s templates with the shared extension."""
    folder = folder or active_folder()
    return SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(folder.template_dir),
        extensions=[NerveTemplateExtension],
        autoescape=False,
    )


def _skills_dir(environment: jinja2.Environment) -> str:
    """The skills beside the templates the environment loads (Copier's or ours)."""
    loader = environment.loader
    if isinstance(loader, jinja2.FileSystemLoader) and loader.searchpath:
        candidate = os.path.join(os.path.dirname(loader.searchpath[0]), "skills")
        if os.path.isdir(candidate):
            return candidate
    return str(active_folder().skills_dir)
