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

The extension also gives every environment the few answer rules Jinja cannot express on its
own (a control character in a line, the IANA zone names, the yes/no words), as filters and a
test that ``copier.yml``'s validators call. The validators are the one place the rules are
applied, so ``nerve init`` and ``copier copy --trust`` refuse the same answers; Copier only
loads the extension when trusted, which is one reason the template needs ``--trust``.
"""

from __future__ import annotations

import os
import unicodedata
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import SandboxedEnvironment

from provisioner.templating.folder import active_folder, folder_cached

if TYPE_CHECKING:
    from provisioner.templating.folder import TemplateFolder

SKILLS_PREFIX = "bundled-skills"  # templates include a skill as "bundled-skills/<skill>/<file>"

# An answer is written into a file line: any character that breaks, hides or restyles a line is
# refused like a newline: every control character (CR, NEL, ESC, …; a tab is allowed) and the
# line and paragraph separators U+2028/U+2029. Our choice.
REFUSED_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
ALLOWED_CONTROL = "\t"
NOT_A_ZONE = frozenset({"Factory"})  # in the IANA data, but names no place
TRUE_WORDS = frozenset({"true", "yes", "y", "1", "on"})  # how a yes/no answer may be typed
FALSE_WORDS = frozenset({"false", "no", "n", "0", "off"})
YES_NO_EXPECTED = "expected yes or no"


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
        environment.filters["line_problem"] = line_problem
        environment.filters["yes_no_problem"] = yes_no_problem
        environment.tests["iana_timezone"] = is_iana_timezone


def line_problem(value: object) -> str:
    """Why ``value`` is not one line of printable text, or ``""`` when it is.

    A validator renders the result: empty accepts, anything else is the refusal. A value that
    is not text is left to the question's type.
    """
    if not isinstance(value, str):
        return ""
    for char in value:
        if char != ALLOWED_CONTROL and unicodedata.category(char) in REFUSED_CATEGORIES:
            return (
                f"contains the control character U+{ord(char):04X}; "
                "expected one line of printable text"
            )
    return ""


def yes_no_problem(value: object) -> str:
    """Why the text given for a yes/no question is not a yes or a no, or ``""``.

    Copier turns any text into a boolean before a validator sees the answer (``perhaps`` would
    be yes), so the validator checks the text Copier was given; a boolean is already one.
    """
    if not isinstance(value, str) or parse_yes_no(value) is not None:
        return ""
    return f"is not a yes/no answer; {YES_NO_EXPECTED}"


def parse_yes_no(text: str) -> bool | None:
    """``text`` as a yes (True) or a no (False), or None when it is neither word."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    return None


@cache
def iana_zone_names() -> frozenset[str]:
    """The canonical IANA zone names, from the ``tzdata`` package (not the host's files).

    The host's zone folder also holds files that name no zone (``posixrules``, ``localtime``,
    ``right/…``), and a host without one would accept nothing; the package's list is the same
    everywhere. A missing ``tzdata`` raises: it is a dependency of this package.
    """
    names = resources.files("tzdata").joinpath("zones").read_text(encoding="utf-8").split()
    return frozenset(names) - NOT_A_ZONE


def is_iana_timezone(value: object) -> bool:
    """Whether ``value`` is a canonical IANA zone name (the ``iana_timezone`` test)."""
    return isinstance(value, str) and value in iana_zone_names()


shared_environment = folder_cached(lambda folder: make_environment(folder))
"""A template folder's one environment for its renders, runtime texts and question expressions.

Built once per ``TemplateFolder`` and kept on it, so each template is compiled once for as long
as the folder is held (``shared_environment()`` is the active folder's, ``.of(folder)`` that
folder's).
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
